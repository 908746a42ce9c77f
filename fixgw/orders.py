"""Order entry, inbound: FIX requests become matching commands (DESIGN §7).

On QuickFIX's threads a request is only validated and translated (``translation``, pure); a
request refused there is answered at once and nothing else happens. The rest is work for the
gateway's intake stage (``intake``), written in batches off QuickFIX's threads:

- NewOrderSingle: the ClOrdID claim (seed 002: SET NX PX under the session's hash tag) and the
  command's append, in one script when the partition lives on the session store's datastore
  (the embedded default), otherwise the claim first and the append after it;
- OrderCancelRequest / OrderCancelReplaceRequest: look up the original order (after every
  earlier request of the batch is written), then the same claim and append;
- OrderStatusRequest: answered from the gateway's own order view.

A duplicate ClOrdID is refused; one marked PossDup/PossResend gets the current status and its
command republished — the command id is derived from (session, ClOrdID), so republishing can
never make a second order. Events come back through ``dispatcher``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import msgspec
import quickfix as fix
from redis.exceptions import RedisError

from datastore.connection import round_trip
from datastore.settings import ConfigError
from matching.amqp import AmqpCommandPublisher, AmqpInboxBridge, AmqpLink, AmqpUnavailable, inbox_queue
from matching.contracts import CancelOrder, Command, command_json, parse_command, partition_of
from matching.instruments import InstrumentTable
from matching.producer import command_entry, recorded_partition_count, relocation_guard
from sessionstore import PartitionRelocating, SessionKey, SessionStore, StoreError
from sessionstore.keys import GatewayKey
from sessionstore.store import claimed

from . import translation as tr
from .config import SessionConfig
from .context import GatewayContext
from .dispatcher import CLOSED_STATUSES, Dispatcher
from .fixmsg import Inbound, SessionMessage, body_text, business_reject, session_reject
from .inputs import text_problem
from .intake import OutcomeUnknown
from .placement import PartitionClients
from .routing import AmqpCommandRouter, AppendFailed, CommandRouter, HeldCommands
from .throttle import TokenBucket

log = logging.getLogger("fixgw.orders")

CancelReason = Literal["cancel-on-disconnect", "mass-cancel", "operator"]  # CancelOrder.reason

INCORRECT_DATA_FORMAT = "6"  # SessionRejectReason


class ClOrdIDRecord(msgspec.Struct, frozen=True, rename={"order_id": "orderId", "pair_id": "pairId"}):
    """What a ClOrdID's claim stores beside it (JSON, these keys, in this order): the order the
    ClOrdID names, its instrument, the command it published (a PossDup resend of the request
    publishes it again: same command id, never a second order) and the order's view when it
    was claimed (read when the session's order views no longer hold one), and the inbound
    MsgSeqNum of the request that claimed it: a claim replayed after its reply was lost (a
    failover) finds its own record, not a duplicate's."""

    order_id: str
    pair_id: int | None = None
    command: str = ""  # matching.contracts.command_json
    view: tr.OrderView | None = None
    request: str = ""


RECORD_ENCODER = msgspec.json.Encoder()
RECORD_DECODER = msgspec.json.Decoder(ClOrdIDRecord)


def refusal_for(outcome: str, partition: int) -> tr.Refusal:
    """The answer to a request whose claim was not taken (``Claim._outcome``)."""
    if outcome == "duplicate":
        return tr.Refusal("duplicate-order", "ClOrdID already used on this session")
    if outcome == "relocating":
        return tr.Refusal("partition-relocating", f"partition {partition} is being moved to another datastore: "
                          "nothing was done; send the request again shortly")
    return tr.Refusal("store-unavailable", "order store unavailable")


def incarnation() -> str:
    """Allocated when a ClOrdID is claimed: a ClOrdID reused after its idempotency window (FIX
    allows it across days) becomes a new order id and command id, never the old order's. Only
    uniqueness per (session, ClOrdID) matters, and one writer claims for a session at a time."""
    return f"{time.time_ns():x}"


class OrderEntryBehaviour:
    context: GatewayContext  # (``start``: nothing calls in before it)

    def __init__(self) -> None:
        self.dispatcher: Dispatcher | None = None
        self._buckets: dict[str, TokenBucket] = {}  # per session; only its QuickFIX thread takes from it

    # --- lifecycle (called by Gateway) ------------------------------------------------

    def start(self, context: GatewayContext) -> None:
        self.context = context
        link = context.matching
        self.table = InstrumentTable.load(link.instruments)
        self.namespace = context.namespace
        self.window_ms = int(link.idempotency_window * 1000)
        self.routes: PartitionClients | None = None
        self.bridges: list[AmqpInboxBridge] = []
        self.router: CommandRouter | AmqpCommandRouter
        if link.transport == "rabbitmq":
            self.router = self._broker_router(context)
        else:
            self.routes = PartitionClients(context, link)
            for p, client in self.routes.clients.items():
                recorded = recorded_partition_count(client, p)
                if recorded is not None and recorded != link.partition_count:
                    # Routing by a different count would send orders to partitions that do not own their pair.
                    raise ConfigError(f"[matching] partition_count = {link.partition_count}, but partition {p} "
                                      f"was booted with MATCHING_PARTITION_COUNT={recorded}")
            self.router = CommandRouter(self.routes, link.partition_count)
        self.held = HeldCommands(self.router, on_held=lambda partition, n: context.metrics.commands_held.labels(
            str(partition)).inc(n))
        context.intake.after_work = self.held.publish_deferred
        if self.routes is not None:
            self.routes.watch(on_change=self.held.wake)
        for cfg in context.settings.session:
            if cfg.cancel_on_disconnect:  # a client whose connection died with the previous gateway
                timer = threading.Timer(cfg.cancel_on_disconnect_grace, self._cancel_if_still_away, args=(cfg,))
                timer.daemon = True
                timer.start()
        self.dispatcher = Dispatcher(self, context)
        self.dispatcher.start()

    def _broker_router(self, context: GatewayContext) -> AmqpCommandRouter:
        """Commands to the broker; events from it into each kind's inbox stream (``AmqpInboxBridge``).
        An unreachable broker stops the start with the reason."""
        link = context.matching
        self.amqp = AmqpLink(link.broker_url(), f"fixgw-{self.namespace}")
        try:
            self.amqp.connect()
        except AmqpUnavailable as exc:
            raise ConfigError(f"{exc} ([matching] amqp_url)") from None
        for kind in context.settings.groups():
            stream = GatewayKey(self.namespace, kind).inbox_stream

            def write(entries: list[dict[str, bytes | str]], stream: str = stream) -> None:
                round_trip(context.client, [("XADD", stream, "*", *[x for kv in e.items() for x in kv]) for e in entries])

            bridge = AmqpInboxBridge(self.amqp, link.amqp_exchange, inbox_queue(self.namespace, kind), write)
            bridge.start()
            self.bridges.append(bridge)
        publisher = AmqpCommandPublisher(self.amqp, link.partition_count)
        publisher.declare()  # the queues exist before the first order, whether or not a cell runs yet
        return AmqpCommandRouter(publisher, link.partition_count)

    def problems(self) -> list[str]:
        """For /ready: the dispatcher thread must be running while the gateway is active."""
        if self.dispatcher is not None and not self.dispatcher.is_alive() and not self.dispatcher.stop.is_set():
            return ["event dispatcher stopped"]
        stuck = self.dispatcher.problems(self.context.settings.callback_stall_limit) if self.dispatcher else []
        bridges = [b.problem for b in getattr(self, "bridges", []) if b.problem]
        return stuck + bridges + self.held.problems() if self.dispatcher is not None else []

    def stop(self) -> None:
        for bridge in getattr(self, "bridges", []):
            bridge.stop()
        if getattr(self, "routes", None) is not None:
            self.routes.stop()  # type: ignore[union-attr]
        if self.dispatcher is not None:
            self.held.stop()
            self.dispatcher.stop.set()
            self.dispatcher.join(5)

    def on_logon(self, sid: fix.SessionID, session: SessionConfig) -> None:
        return None

    def on_logout(self, sid: fix.SessionID, session: SessionConfig) -> None:
        if session.cancel_on_disconnect:
            # Off QuickFIX's thread: reading the session's orders is a round trip.
            threading.Thread(target=self.cancel_open_orders, args=(session,), name=f"cancel-on-disconnect {session.name}",
                             daemon=True).start()

    def _cancel_if_still_away(self, cfg: SessionConfig) -> None:
        session = fix.Session.lookupSession(fix.SessionID(cfg.begin_string, cfg.sender_comp_id, cfg.target_comp_id))
        if session is None or not session.isLoggedOn():
            log.info("%s: not logged on %.0fs after this gateway started: cancel-on-disconnect",
                     cfg.key(self.namespace), cfg.cancel_on_disconnect_grace)
            self.cancel_open_orders(cfg)

    def cancel_open_orders(self, cfg: SessionConfig) -> int:
        """Cancel-on-disconnect: ``cancel_orders`` for every order of the session."""
        sent = len(self.cancel_orders(cfg, "cancel-on-disconnect", incarnation()))
        self.context.metrics.canceled_on_disconnect.labels(str(cfg.key(self.namespace))).inc(sent)
        return sent

    def open_orders(self, cfg: SessionConfig, *, account: str | None = None, symbol: str | None = None,
                    side: str | None = None) -> list[tr.OrderView]:
        """The session's orders its last report left open (the gateway's views), those of
        ``account``, ``symbol``, ``side`` only when given. Orders not yet acknowledged by their
        cell (no view yet) are not seen here."""
        out = []
        for raw in self.context.stores[cfg.gateway].all_order_views(cfg.key(self.namespace)).values():
            view = tr.OrderView.from_json(raw)
            if view.status in CLOSED_STATUSES or view.symbol not in self.table.by_symbol:
                continue
            if (account is not None and view.account != account) or (symbol is not None and view.symbol != symbol) \
                    or (side is not None and view.side != side):
                continue
            out.append(view)
        return out

    def cancel_commands(self, cfg: SessionConfig, views: list[tr.OrderView], reason: CancelReason, stamp: str
                        ) -> list[CancelOrder]:
        """A CancelOrder through the cell for each of ``views``; the command ids derive from
        (session, ``reason``, order id, ``stamp``): the same stamp again makes the same commands."""
        key = str(cfg.key(self.namespace))
        out = []
        for view in views:
            pair = self.table.by_symbol[view.symbol].pair_id
            out.append(CancelOrder(tr.command_id(key, f"{reason}:{view.order_id}", stamp), pair,
                                   partition_of(pair, self.router.partition_count), view.order_id, key,
                                   reason=reason))
        return out

    def cancel_orders(self, cfg: SessionConfig, reason: CancelReason, stamp: str, *, account: str | None = None,
                      symbol: str | None = None, side: str | None = None) -> list[str]:
        """Cancel every open order of the session (``open_orders``' filters) through the cells;
        the cancels' reports reach the session as usual (stored, sent at its next logon) and the
        drop copies. Returns the order ids whose cancel was published (or held)."""
        key = cfg.key(self.namespace)
        done: list[str] = []
        try:
            for cancel in self.cancel_commands(cfg, self.open_orders(cfg, account=account, symbol=symbol, side=side),
                                               reason, stamp):
                self.held.publish(cancel)
                done.append(cancel.order_id)
        except (StoreError, RedisError, AppendFailed) as exc:
            log.error("%s: %s failed after %d cancels: %s", key, reason, len(done), exc)
        log.info("%s: %s: %d open orders canceled", key, reason, len(done))
        return done

    # --- inbound: on QuickFIX's thread ------------------------------------------------------

    def on_app_message(self, message: Inbound, sid: fix.SessionID, cfg: SessionConfig) -> None:
        msg_type = message.msg_type
        if cfg.kind != "fsg" or msg_type not in ("D", "F", "G", "H", "q", "AF"):
            raise fix.UnsupportedMessageType()  # → BusinessMessageReject
        possdup, seq, f = message.possdup, message.seq, message.fields
        key = cfg.key(self.namespace)
        problem = text_problem(f)
        if problem is not None:  # refused before anything is looked up, claimed or published
            tag, text = problem
            self.context.metrics.refused_requests.labels(str(key), "invalid-text").inc()
            fix.Session.sendToTarget(session_reject(seq, msg_type, tag, INCORRECT_DATA_FORMAT, text), sid)
            return
        if not self._within_throttle(cfg, key):
            self.context.metrics.refused_requests.labels(str(key), "throttled").inc()
            fix.Session.sendToTarget(business_reject(seq, msg_type, f"throttled: over {cfg.max_messages_per_second:g} "
                                                     "application messages per second", f.get(11, "")), sid)
            return
        request = OrderRequest(self, self.context.stores[cfg.gateway], sid, cfg, key, f, msg_type, seq, possdup)
        if msg_type == "D":
            self._new_order(request)  # translated here (pure): a refusal is answered without waiting
            if request.claim is None:
                return
        else:  # the original order is looked up on the intake thread, after every earlier request
            request.lookup = {"F": self._cancel_like, "G": self._cancel_like, "H": self._status,
                              "q": self._mass_cancel, "AF": self._mass_status}[msg_type]
        self.context.intake.submit(request)

    def _within_throttle(self, cfg: SessionConfig, key: SessionKey) -> bool:
        if cfg.max_messages_per_second is None:
            return True
        bucket = self._buckets.get(cfg.name)
        if bucket is None:
            bucket = self._buckets[cfg.name] = TokenBucket(cfg.max_messages_per_second)
        return bucket.take(time.monotonic())

    # --- inbound: on the intake thread (``OrderRequest.prepare``) -----------------------

    def _reply(self, r: OrderRequest, msg_type: str, fields: list[tuple[int, str]],
               then: Callable[[], None] | None = None) -> None:
        """The gateway's own answer to ``r`` (a refusal, a status), committed with the inbound
        number it covers (``GatewayContext.answer``): after a takeover the successor does not ask
        the client to send ``r`` again, and answer it twice. ``then``: once it is sent."""
        self.context.answer(r.sid, SessionMessage(body_text(msg_type, fields), msg_type, inbox_id="", plain=True),
                            int(r.seq) if r.seq else None, then)

    def _record_and_view(self, store: SessionStore, key: SessionKey,
                         clordid: str) -> tuple[ClOrdIDRecord | None, tr.OrderView | None]:
        """The ClOrdID's record and its order's view: the one the dispatcher stored last, or the
        one the claim recorded when the session's views no longer hold it (one round trip)."""
        raw_record, raw_view = store.order_of_clordid(key, clordid)
        if raw_record is None:
            return None, None
        record = RECORD_DECODER.decode(raw_record)
        return record, tr.OrderView.from_json(raw_view) if raw_view is not None else record.view

    def _new_order(self, r: OrderRequest) -> None:
        session, clordid, cfg = str(r.key), r.fields.get(11, ""), r.cfg
        try:
            account = r.fields.get(1, "")
            memory = self.context.memory_problem()
            if memory is not None:  # room is kept for what is in flight: reports, cancels, resends
                self.context.metrics.refused_requests.labels(session, "datastore-full").inc()
                raise tr.Refusal("datastore-full", memory)
            if cfg.allowed_accounts and account not in cfg.allowed_accounts:
                raise tr.Refusal("account-not-allowed", f"Account (1) {account!r} is not one this session may trade for")
            req = tr.new_order(r.fields, self.table, session, self.router.partition_count, incarnation())
        except tr.Refusal as refusal:
            view = tr.refused_view(r.fields, session)
            self._reply(r, "8", tr.refusal_report(view, refusal, f"R-{r.seq}-{clordid}", cfg.begin_string))
            return
        assert req.view is not None
        order_view = req.view
        record = ClOrdIDRecord(order_view.order_id, req.command.pair_id, command_json(req.command), order_view,
                               r.seq)

        def answer(outcome: str) -> None:
            if outcome == "resent":
                view = self._record_and_view(r.store, r.key, clordid)[1] or order_view
                self._reply(r, "8", tr.status_report(view, f"S-{r.seq}-{clordid}", cfg.begin_string))
                return
            self._reply(r, "8", tr.refusal_report(order_view, refusal_for(outcome, req.command.partition),
                                                      f"R-{r.seq}-{clordid}", cfg.begin_string))

        r.claim = Claim(r, clordid, record, req.command, answer)

    def _cancel_like(self, r: OrderRequest) -> None:
        replace = r.msg_type == "G"
        session, cfg = str(r.key), r.cfg
        response_to = "2" if replace else "1"
        clordid, orig = r.fields.get(11, ""), r.fields.get(41, "")
        original: ClOrdIDRecord | None = None
        view: tr.OrderView | None = None
        try:
            original, view = self._record_and_view(r.store, r.key, orig) if orig else (None, None)
            pair = original.pair_id if original else None
            if replace:
                req = tr.replace_order(r.fields, view, pair, self.table, session, self.router.partition_count,
                                       incarnation())
            else:
                req = tr.cancel_order(r.fields, view, pair, session, self.router.partition_count, incarnation())
        except tr.Refusal as refusal:
            self._reply(r, "9", tr.cancel_reject(original.order_id if original else "NONE", clordid, orig,
                                                     view.status if view else "8", response_to, refusal.reason,
                                                     refusal.text, cfg.begin_string))
            return
        except StoreError as exc:
            self._reply(r, "9", tr.cancel_reject("NONE", clordid, orig, "8", response_to, "store-unavailable",
                                                     str(exc), cfg.begin_string))
            return
        assert view is not None and original is not None
        record = ClOrdIDRecord(view.order_id, pair, command_json(req.command), view, r.seq)
        current = view

        def answer(outcome: str) -> None:
            if outcome == "resent":
                return  # the republished command's events answer it

            refused = refusal_for(outcome, req.command.partition)
            self._reply(r, "9", tr.cancel_reject(current.order_id, clordid, orig, current.status, response_to,
                                                     refused.reason, refused.text, cfg.begin_string))

        r.claim = Claim(r, clordid, record, req.command, answer)

    def _status(self, r: OrderRequest) -> None:
        clordid, cfg = r.fields.get(11, ""), r.cfg
        view = self._record_and_view(r.store, r.key, clordid)[1]
        if view is None:
            f = r.fields
            unknown = tr.OrderView("NONE", clordid, f.get(55, ""), f.get(54, "1"), "2", "1", "0", None, status="8")
            self._reply(r, "8", tr.report(unknown, exec_id=f"S-{r.seq}-{clordid}", kind="status", status="8",
                                              begin_string=cfg.begin_string, text="unknown-order"))
            return
        self._reply(r, "8", tr.status_report(view, f"S-{r.seq}-{clordid}", cfg.begin_string))


    def _mass_cancel(self, r: OrderRequest) -> None:
        """OrderMassCancelRequest (35=q): every open order of the session, of a symbol (530=1)
        or all (530=7), of one side if Side (54) is given. Answered by an OrderMassCancelReport
        (35=r) naming how many orders it covers, then — once that is sent — a cancel through the
        cell for each, whose reports follow as for any cancel (drop copies included). Sent again
        (PossDup), the same cancels are the same commands: nothing is canceled twice."""
        f, cfg = r.fields, r.cfg
        clordid, kind, symbol, side = f.get(11, ""), f.get(530, ""), f.get(55), f.get(54)
        problem = tr.mass_cancel_problem(kind, symbol, side, self.table)
        if problem is not None:
            self._reply(r, "r", tr.mass_cancel_report(clordid, f"M-{r.seq}-{clordid}", kind, 0, symbol, side,
                                                       problem))
            return
        try:
            views = self.open_orders(cfg, symbol=symbol if kind == "1" else None, side=side)
        except StoreError as exc:
            self._reply(r, "r", tr.mass_cancel_report(clordid, f"M-{r.seq}-{clordid}", kind, 0, symbol, side,
                                                       ("99", f"store-unavailable: {exc}")))
            return
        cancels = self.cancel_commands(cfg, views, "mass-cancel", clordid)

        def publish() -> None:
            for cancel in cancels:
                self.held.publish(cancel)
            log.info("%s: mass cancel %s: %d orders", r.key, clordid, len(cancels))

        self._reply(r, "r", tr.mass_cancel_report(clordid, f"M-{r.seq}-{clordid}", kind, len(cancels), symbol,
                                                   side), then=publish)

    def _mass_status(self, r: OrderRequest) -> None:
        """OrderMassStatusRequest (35=AF): a status ExecutionReport per open order of the session
        (585=7), of a symbol (585=1), of one side if Side (54) is given, each carrying
        MassStatusReqID (584), TotNumReports (911) and LastRptRequested (912=Y on the last); with
        no open order, one report with TotNumReports 0."""
        f, cfg = r.fields, r.cfg
        request_id, kind, symbol, side = f.get(584, ""), f.get(585, ""), f.get(55), f.get(54)
        problem = tr.mass_status_problem(kind, symbol, side, self.table)
        if problem is not None:
            self._reply(r, "j", [(372, "AF"), (379, request_id), (380, "0"), (58, problem)])
            return
        try:
            views = self.open_orders(cfg, symbol=symbol if kind == "1" else None, side=side)
        except StoreError as exc:
            self._reply(r, "j", [(372, "AF"), (379, request_id), (380, "0"), (58, f"store-unavailable: {exc}")])
            return
        for fields in tr.mass_status_reports(views, request_id, f"S-{r.seq}", symbol, side, cfg.begin_string):
            self._reply(r, "8", fields)


@dataclass
class OrderRequest:
    """One request as intake work (``intake.Work``)."""

    behaviour: OrderEntryBehaviour
    store: SessionStore
    sid: fix.SessionID
    cfg: SessionConfig
    key: SessionKey
    fields: dict[int, str]
    msg_type: str
    seq: str
    possdup: bool
    lookup: Callable[[OrderRequest], None] | None = None  # OrderEntryBehaviour._cancel_like / _status: reads the store first
    claim: Claim | None = None  # set when the request claims a ClOrdID

    @property
    def reads_first(self) -> bool:
        return self.lookup is not None

    def prepare(self) -> list[tuple[Any, ...]]:
        if self.lookup is not None:
            self.lookup(self)
        return self.claim.calls() if self.claim is not None else []

    def settle(self, replies: list[Any] | StoreError) -> None:
        # The claim refers back to this request (and its answer closes over it): let go of it,
        # so the request is freed when the intake drops it, not by the cyclic collector — whose
        # young collections otherwise found ~17 objects an order, held the GIL for 3-8 ms every
        # few hundred orders, and let survivors grow the old generations (a full collection of
        # 100k objects: 54 ms).
        claim, self.claim = self.claim, None
        if claim is not None:
            claim.settle(replies[0] if isinstance(replies, list) else replies)

    @property
    def complete_when_written(self) -> bool:
        """A new order, cancel or replace whose command goes in its claim's script: a resend
        (PossDupFlag) may republish a command at the end of the cycle, and a command for a
        partition on another datastore is appended there, after the write."""
        return self.claim is not None and self.claim.colocated and not self.possdup

    def claimed_as(self) -> tuple[SessionKey, str, str] | None:
        return (self.key, self.claim.clordid, self.claim.value) if self.claim is not None else None

    def failed(self, exc: Exception) -> None:
        text = f"request not processed: {type(exc).__name__}"
        try:
            fix.Session.sendToTarget(business_reject(self.seq, self.msg_type, text), self.sid)
        except Exception:  # noqa: BLE001
            log.exception("%s: could not refuse a failed request", self.key)


@dataclass
class Claim:
    """A request's ClOrdID claim and command, and how it is answered when it is not new."""

    request: OrderRequest
    clordid: str
    record: ClOrdIDRecord
    command: Command
    answer: Callable[[str], None]  # outcome ('duplicate' | 'resent' | 'unavailable' | 'relocating'): the answer
    value: str = field(init=False)
    colocated: bool = field(init=False, default=False)  # decided once, when the calls are made

    def __post_init__(self) -> None:
        self.value = RECORD_ENCODER.encode(self.record).decode()

    def calls(self) -> list[tuple[Any, ...]]:
        r, b = self.request, self.request.behaviour
        # The partition map can move a partition between two cycles (``fixgw-cell relocate``):
        # how this claim was written decides how its reply is read.
        self.colocated = self.command.partition in b.router.colocated
        if self.colocated:  # one script: the claim and the command land together or not at all
            stream, entry = command_entry(self.command, b.router.partition_count)
            guard = relocation_guard(self.command.partition)
            return [r.store.claim_and_append_call(r.key, self.clordid, self.value, b.window_ms, stream, entry,
                                                  guard)]
        return [r.store.claim_call(r.key, self.clordid, self.value, b.window_ms)]

    def settle(self, reply: Any) -> None:
        outcome = self._outcome(reply)
        if outcome != "new":
            self.answer(outcome)

    def _record_now(self, failure: Exception | None = None) -> str | None:
        """The ClOrdID's record as the store holds it now (read only when the claim was refused
        or its write failed, so only those pay for it). Raises ``OutcomeUnknown`` when it cannot
        be read: any answer then would be a guess."""
        r = self.request
        try:
            return r.store.clordid_record(r.key, self.clordid)
        except StoreError as exc:
            why = f"{failure}; read back: {exc}" if failure is not None else str(exc)
            raise OutcomeUnknown(f"{r.key}: ClOrdID {self.clordid}: what its claim did is unknown ({why}); "
                                 "its successor asks for it again") from exc

    def _outcome(self, reply: Any) -> str:
        """'new' (appended, or deferred to the end of the intake's cycle and held there until its
        datastore takes it: the cell's report answers), 'duplicate' (refuse), 'resent'
        (republished, answer with status), 'unavailable' (the session store failed and the claim
        is not there: refuse), or 'relocating' (the partition is being moved: nothing claimed,
        refuse; the client may send the same ClOrdID again). Raises ``OutcomeUnknown`` when it
        cannot be told."""
        r, b = self.request, self.request.behaviour
        if isinstance(reply, StoreError):
            if self.colocated and isinstance(reply, PartitionRelocating):
                return "relocating"
            # The write failed, but it may have landed (a reply lost, replicas that did not
            # confirm in time): the record decides, never the error alone.
            record = self._record_now(reply)
            if record is None:
                log.error("%s: ClOrdID %s refused, store unavailable: %s", r.key, self.clordid, reply)
                return "unavailable"
            if record == self.value and r.store.replica_acks:
                # On the primary only: a failover may drop it, or a replica may have it after all.
                raise OutcomeUnknown(f"{r.key}: ClOrdID {self.clordid}: claimed on the primary, not confirmed "
                                     f"by its replicas ({reply}); its successor asks for it again")
        elif claimed(reply):
            record = self.value
        else:
            record = self._record_now()
        if record != self.value:  # taken before, by an earlier request with this ClOrdID (a PossDup's first sending)
            if not r.possdup:
                return "duplicate"
            first = RECORD_DECODER.decode(record) if record else None
            if first is not None and first.command:
                # Same command id: never a second order. Held if its datastore does not take it now.
                b.held.defer(parse_command(first.command, b.router.partition_count))
            return "resent"
        # This request's claim: written now, or found holding it (its reply was lost, the write
        # was sent again by redis-py's retry or a failover's hold).
        if not self.colocated:
            # Appended at the end of the intake's cycle with the cycle's other commands, or held
            # (the claim stays) until its datastore takes it: either way the cell's report answers.
            b.held.defer(self.command)
        return "new"
