"""Order entry: FIX requests become matching commands; matching events become FIX messages.

Inbound (QuickFIX's threads): NewOrderSingle / OrderCancelRequest / OrderCancelReplaceRequest
are translated (``translation``), checked against the ClOrdID idempotency window (seed
002: SET NX PX under the session's hash tag; a duplicate is refused, a duplicate marked
PossDup/PossResend gets the current status and its command republished — the command id
is derived from (session, ClOrdID), so republishing can never make a second order), and
published to the owning partition's command stream. OrderStatusRequest is answered from
the gateway's own order view. Anything the gateway refuses never reaches a cell.

Outbound (the dispatcher thread): the gateway's inbox streams are read in batches of
dispatchBatchSize; each event goes to its owning session(s) and to every drop-copy
session (filtered by account); each message is stored with the event's inbox entry in one
script, so every event becomes a message exactly once per session across crashes; the
stream entry is acknowledged after. A logged-out session's messages are stored and reach
it, as resends, after its next logon.
"""

from __future__ import annotations

import json
import logging
import threading
from typing import Any

import quickfix as fix
from redis.exceptions import RedisError, ResponseError

from matching.conductor import command_entry, recorded_partition_count, submit
from matching.contracts import Command, ContractError, Event, encode_command, parse_command, parse_event
from matching.instruments import InstrumentTable
from sessionstore import GatewayKey, SessionKey, SessionStore, StoreError, connect
from sessionstore.connection import RedisClient, is_cluster
from sessionstore.settings import ConfigError

from . import translation as tr
from .application import Delivery
from .config import SessionConfig
from .fixmsg import build, message_fields, session_reject
from .inputs import text_problem

log = logging.getLogger("fixgw.orders")

GROUP = "fixgw-dispatcher"
CONSUMER = "dispatcher"  # one active dispatcher per gateway (the lock holder)
POSS_DUP, POSS_RESEND, MSG_SEQ_NUM, MSG_TYPE = 43, 97, 34, 35
INCORRECT_DATA_FORMAT = "6"  # SessionRejectReason


class CommandRouter:
    """Publishes each command to its partition's datastore (the partition map). A partition
    ``colocated`` with the session store (same datastore, not a Cluster) takes its commands
    in the same script as the ClOrdID claim."""

    def __init__(self, clients: dict[int, RedisClient], partition_count: int,
                 colocated: frozenset[int] = frozenset()) -> None:
        self.clients = clients
        self.partition_count = partition_count
        self.colocated = colocated

    def publish(self, raw_command: str) -> None:
        self.publish_command(parse_command(raw_command, self.partition_count))

    def publish_command(self, command: Command) -> None:
        submit(self.clients[command.partition], command, self.partition_count)


class OrderEntryBehaviour:
    def __init__(self) -> None:
        self.gateway: Any = None
        self.dispatcher: Dispatcher | None = None

    # --- lifecycle (called by Gateway) ------------------------------------------------

    def start(self, gateway: Any) -> None:
        self.gateway = gateway
        link = gateway.matching
        self.table = InstrumentTable.load(link.instruments)
        self.namespace = gateway.namespace
        self.window_ms = int(link.idempotency_window * 1000)
        clients: dict[int, RedisClient] = {}
        for p in range(link.partition_count):
            endpoint = link.endpoint(p, gateway.store_settings)
            clients[p] = gateway.client if endpoint is gateway.store_settings else connect(endpoint)
        for p, client in clients.items():
            recorded = recorded_partition_count(client, p)
            if recorded is not None and recorded != link.partition_count:
                # Routing by a different count would send orders to partitions that do not own their pair.
                raise ConfigError(f"[matching] partition_count = {link.partition_count}, but partition {p} "
                                  f"was booted with MATCHING_PARTITION_COUNT={recorded}")
        colocated = frozenset(p for p, c in clients.items() if c is gateway.client and not is_cluster(c))
        self.router = CommandRouter(clients, link.partition_count, colocated)
        self.dispatcher = Dispatcher(self, gateway)
        self.dispatcher.start()

    def problems(self) -> list[str]:
        """For /ready: the dispatcher thread must be running while the gateway is active."""
        if self.dispatcher is not None and not self.dispatcher.is_alive() and not self.dispatcher.stop.is_set():
            return ["event dispatcher stopped"]
        return []

    def stop(self) -> None:
        if self.dispatcher is not None:
            self.dispatcher.stop.set()
            self.dispatcher.join(5)

    def on_logon(self, sid: fix.SessionID, session: SessionConfig) -> None:
        return None

    def on_logout(self, sid: fix.SessionID, session: SessionConfig) -> None:
        return None

    # --- inbound ----------------------------------------------------------------------

    def _store(self, cfg: SessionConfig) -> SessionStore:
        return self.gateway.stores[cfg.kind]

    def on_app_message(self, message: fix.Message, sid: fix.SessionID, cfg: SessionConfig) -> None:
        msg_type = message.getHeader().getField(MSG_TYPE)
        if cfg.kind != "fsg" or msg_type not in ("D", "F", "G", "H"):
            raise fix.UnsupportedMessageType()  # → BusinessMessageReject
        header = message.getHeader()
        possdup = any(header.isSetField(t) and header.getField(t) == "Y" for t in (POSS_DUP, POSS_RESEND))
        seq = header.getField(MSG_SEQ_NUM)
        f = message_fields(message)
        key = cfg.key(self.namespace)
        problem = text_problem(f)
        if problem is not None:  # refused before anything is looked up, claimed or published
            tag, text = problem
            self.gateway.metrics.refused_requests.labels(str(key), "invalid-text").inc()
            fix.Session.sendToTarget(session_reject(seq, msg_type, tag, INCORRECT_DATA_FORMAT, text), sid)
            return
        handler = {"D": self._new_order, "F": self._cancel, "G": self._replace, "H": self._status}[msg_type]
        handler(f, sid, cfg, key, possdup, seq)

    def _reply(self, sid: fix.SessionID, msg_type: str, fields: list[tuple[int, str]]) -> None:
        fix.Session.sendToTarget(build(msg_type, fields), sid)

    def _record(self, store: SessionStore, key: SessionKey, clordid: str) -> dict[str, Any] | None:
        raw = store.clordid_record(key, clordid)
        return json.loads(raw) if raw else None

    def _view(self, store: SessionStore, key: SessionKey, record: dict[str, Any] | None) -> tr.OrderView | None:
        if record is None:
            return None
        raw = store.order_views(key, [record["orderId"]])[0]
        if raw is not None:
            return tr.OrderView.from_dict(json.loads(raw))
        return tr.OrderView.from_dict(record["view"]) if record.get("view") else None

    def _claim_and_publish(self, store: SessionStore, key: SessionKey, clordid: str, record: dict[str, Any],
                           command: Command, possdup: bool) -> str:
        """'new' (published), 'duplicate' (refuse), 'resent' (republished, answer with status),
        or 'unavailable' (fail fast: refuse)."""
        value = json.dumps(record)
        colocated = command.partition in self.router.colocated
        try:
            if colocated:  # one round trip, and the claim and the command land together or not at all
                stream, fields = command_entry(command, self.router.partition_count)
                claimed = store.claim_clordid_and_append(key, clordid, value, self.window_ms, stream, fields)
            else:
                claimed = store.claim_clordid(key, clordid, value, self.window_ms)
            if not claimed:
                if not possdup:
                    return "duplicate"
                first = self._record(store, key, clordid)
                if first is not None and first.get("command"):
                    self.router.publish(first["command"])  # same command id: never a second order
                return "resent"
            if not colocated:
                self.router.publish_command(command)
            return "new"
        except (StoreError, RedisError) as exc:
            if colocated:
                # Atomic: if the claim is there, so is the command, and the cell will answer.
                try:
                    if store.clordid_record(key, clordid) == value:
                        return "new"
                except StoreError:
                    log.error("%s: ClOrdID %s: outcome unknown (store unreachable); refused", key, clordid)
                    return "unavailable"
                log.error("%s: ClOrdID %s refused, store unavailable: %s", key, clordid, exc)
                return "unavailable"
            log.error("%s: ClOrdID %s refused, store or matching unavailable: %s", key, clordid, exc)
            try:
                store.forget_clordid(key, clordid)
            except StoreError:
                pass
            return "unavailable"

    def _new_order(self, f: dict[int, str], sid: fix.SessionID, cfg: SessionConfig, key: SessionKey,
                   possdup: bool, seq: str) -> None:
        store = self._store(cfg)
        session = str(key)
        clordid = f.get(11, "")
        try:
            req = tr.new_order(f, self.table, session, self.router.partition_count)
        except tr.Refusal as refusal:
            view = tr.refused_view(f, session)
            self._reply(sid, "8", tr.refusal_report(view, refusal, f"R-{seq}-{clordid}", cfg.begin_string))
            return
        assert req.view is not None
        record = {"orderId": req.view.order_id, "pairId": req.command.pair_id,
                  "command": encode_command(req.command), "view": req.view.to_dict()}
        outcome = self._claim_and_publish(store, key, clordid, record, req.command, possdup)
        if outcome == "new":
            return
        if outcome == "resent":
            view = self._view(store, key, self._record(store, key, clordid)) or req.view
            self._reply(sid, "8", tr.status_report(view, f"S-{seq}-{clordid}", cfg.begin_string))
            return
        reason = "duplicate-order" if outcome == "duplicate" else "store-unavailable"
        text = "ClOrdID already used on this session" if outcome == "duplicate" else "order store unavailable"
        self._reply(sid, "8", tr.refusal_report(req.view, tr.Refusal(reason, text), f"R-{seq}-{clordid}",
                                                cfg.begin_string))

    def _cancel_like(self, f: dict[int, str], sid: fix.SessionID, cfg: SessionConfig, key: SessionKey,
                     possdup: bool, replace: bool) -> None:
        store = self._store(cfg)
        session = str(key)
        response_to = "2" if replace else "1"
        clordid, orig = f.get(11, ""), f.get(41, "")
        try:
            original = self._record(store, key, orig) if orig else None
            view = self._view(store, key, original)
            pair = original["pairId"] if original else None
            if replace:
                req = tr.replace_order(f, view, pair, self.table, session, self.router.partition_count)
            else:
                req = tr.cancel_order(f, view, pair, session, self.router.partition_count)
        except tr.Refusal as refusal:
            self._reply(sid, "9", tr.cancel_reject(original["orderId"] if original else "NONE", clordid, orig,
                                                   view.status if view else "8", response_to, refusal.reason,
                                                   refusal.text, cfg.begin_string))
            return
        except StoreError as exc:
            self._reply(sid, "9", tr.cancel_reject("NONE", clordid, orig, "8", response_to, "store-unavailable",
                                                   str(exc), cfg.begin_string))
            return
        assert view is not None and original is not None
        record = {"orderId": view.order_id, "pairId": pair, "command": encode_command(req.command),
                  "view": view.to_dict()}
        outcome = self._claim_and_publish(store, key, clordid, record, req.command, possdup)
        if outcome in ("new", "resent"):
            return
        reason = "duplicate-order" if outcome == "duplicate" else "store-unavailable"
        self._reply(sid, "9", tr.cancel_reject(view.order_id, clordid, orig, view.status, response_to, reason,
                                               "ClOrdID already used" if outcome == "duplicate" else "",
                                               cfg.begin_string))

    def _cancel(self, f: dict[int, str], sid: fix.SessionID, cfg: SessionConfig, key: SessionKey,
                possdup: bool, seq: str) -> None:
        self._cancel_like(f, sid, cfg, key, possdup, replace=False)

    def _replace(self, f: dict[int, str], sid: fix.SessionID, cfg: SessionConfig, key: SessionKey,
                 possdup: bool, seq: str) -> None:
        self._cancel_like(f, sid, cfg, key, possdup, replace=True)

    def _status(self, f: dict[int, str], sid: fix.SessionID, cfg: SessionConfig, key: SessionKey,
                possdup: bool, seq: str) -> None:
        store = self._store(cfg)
        clordid = f.get(11, "")
        view = self._view(store, key, self._record(store, key, clordid))
        if view is None:
            unknown = tr.OrderView("NONE", clordid, f.get(55, ""), f.get(54, "1"), "2", "1", "0", None, status="8")
            self._reply(sid, "8", tr.report(unknown, exec_id=f"S-{seq}-{clordid}", kind="status", status="8",
                                            begin_string=cfg.begin_string, text="unknown-order"))
            return
        self._reply(sid, "8", tr.status_report(view, f"S-{seq}-{clordid}", cfg.begin_string))


class Dispatcher(threading.Thread):
    """Turns inbox events into messages for sessions; the only writer of order views."""

    def __init__(self, behaviour: OrderEntryBehaviour, gateway: Any) -> None:
        super().__init__(name="fixgw-dispatcher", daemon=True)
        self.behaviour = behaviour
        self.gateway = gateway
        self.stop = threading.Event()
        self._last_offset: dict[tuple[str, int], tuple[int, int]] = {}  # (inbox kind, partition) → offset
        self.client: RedisClient = gateway.client
        self.batch = gateway.store_settings.dispatchBatchSize
        ns = gateway.namespace
        self.streams = {GatewayKey(ns, kind).inbox_stream: kind for kind in gateway.settings.kinds()}
        self.sessions = {str(cfg.key(ns)): cfg for cfg in gateway.settings.session}
        self.drop_copies = [cfg for cfg in gateway.settings.session if cfg.kind == "dc"]
        self.session_ids = {str(cfg.key(ns)): fix.SessionID(cfg.begin_string, cfg.sender_comp_id,
                                                             cfg.target_comp_id) for cfg in gateway.settings.session}

    def run(self) -> None:
        for stream in self.streams:
            try:
                self.client.xgroup_create(stream, GROUP, id="0", mkstream=True)
            except ResponseError as exc:
                if "BUSYGROUP" not in str(exc):
                    raise
        own_pending = True
        while not self.stop.is_set():
            try:
                if not self.gateway.ready:
                    self.stop.wait(0.1)
                    continue
                read_from = "0" if own_pending else ">"
                reply = self.client.xreadgroup(GROUP, CONSUMER, {s: read_from for s in self.streams},
                                               count=self.batch, block=None if own_pending else 200)
                got = sum(len(entries) for _, entries in reply or [])
                if own_pending and not got:
                    own_pending = False
                    continue
                for stream, entries in reply or []:
                    stream_name = stream.decode() if isinstance(stream, bytes) else stream
                    if entries:
                        self._dispatch_entries(self.streams[stream_name], entries)
                        self.client.xack(stream_name, GROUP, *[e for e, _ in entries])
            except (RedisError, StoreError) as exc:
                log.error("dispatcher: %s; retrying (entries stay pending)", exc)
                own_pending = True
                self.stop.wait(0.5)

    def _dispatch_entries(self, kind: str, entries: list[tuple[bytes, dict[bytes, bytes] | None]]) -> None:
        """Dispatch a batch; if it fails for any reason but the store's, one entry at a time,
        and an entry that fails alone goes to the inbox's dead-letter stream with the error —
        the dispatcher never stops, and never loops, on one bad entry."""
        try:
            self.dispatch(kind, [fields for _, fields in entries])
        except (RedisError, StoreError):
            raise  # the store: the entries stay pending and are retried
        except Exception as exc:  # noqa: BLE001 (a bad entry or a bug; isolate it)
            if len(entries) > 1:
                log.warning("dispatcher: a batch of %d failed (%s); one entry at a time", len(entries), exc)
                for entry in entries:
                    self._dispatch_entries(kind, [entry])
                return
            entry_id, fields = entries[0]
            dead = GatewayKey(self.gateway.namespace, kind).inbox_dead_letter
            log.error("dispatcher: inbox entry %s moved to %s: %s: %s", entry_id, dead, type(exc).__name__, exc)
            self.client.xadd(dead, {**(fields or {}), "x-original-id": entry_id, "x-error": f"{type(exc).__name__}: {exc}"})
            self.gateway.metrics.dispatcher_dead_lettered.inc()

    def dispatch(self, kind: str, batch: list[dict[bytes, bytes] | None]) -> None:
        """Turn a batch of inbox entries into messages, grouped per session, and hand each
        session's messages to the gateway as one group commit (views read once per session)."""
        routed: list[tuple[SessionConfig, Event, tuple[str, ...]]] = []
        for fields in batch:
            raw = (fields or {}).get(b"event")
            if raw is None:
                raise ContractError("inbox entry has no event field")  # → dead letter, alone
            event = parse_event(raw)
            self._check_order(kind, event, (fields or {}).get(b"x-partition-offset"))
            routed += [(cfg, event, roles) for cfg, roles in self.targets(kind, event)]
        views = self._views(routed)
        per_session: dict[str, list[Delivery]] = {}
        table = self.behaviour.table
        for cfg, event, roles in routed:
            key = str(cfg.key(self.gateway.namespace))
            known = {oid: views.get((key, oid)) for oid in order_ids(event, roles)}
            for out in tr.event_messages(event, known, table, cfg.begin_string, roles):
                if out.view is not None:
                    views[(key, out.order_id)] = out.view  # the next event of this order sees it
                view_json = json.dumps(out.view.to_dict()) if out.view is not None else ""
                per_session.setdefault(key, []).append(Delivery(build(out.msg_type, out.fields), out.msg_type,
                                                                out.inbox_id, out.order_id, view_json))
        for key, deliveries in per_session.items():
            self.gateway.application.deliver(self.session_ids[key], deliveries)

    def _views(self, routed: list[tuple[SessionConfig, Event, tuple[str, ...]]]
               ) -> dict[tuple[str, str], tr.OrderView | None]:
        """Each session's last view of every order the batch concerns: one read per session."""
        wanted: dict[str, tuple[SessionConfig, set[str]]] = {}
        for cfg, event, roles in routed:
            wanted.setdefault(str(cfg.key(self.gateway.namespace)), (cfg, set()))[1].update(order_ids(event, roles))
        views: dict[tuple[str, str], tr.OrderView | None] = {}
        for key, (cfg, ids) in wanted.items():
            ordered = sorted(ids)
            raw = self.gateway.stores[cfg.kind].order_views(cfg.key(self.gateway.namespace), ordered)
            for oid, v in zip(ordered, raw):
                views[(key, oid)] = tr.OrderView.from_dict(json.loads(v)) if v else None
        return views

    def _check_order(self, kind: str, event: Event, offset_raw: bytes | None) -> None:
        """Watch that each partition's events arrive in partition order.

        Decided: the dispatcher delivers in arrival order and never holds back or drops an
        event (an execution must reach its session); order is the publisher's guarantee
        (one fenced outbox worker per partition, publishing its pending entries first). A
        republished event (at-least-once) arrives behind newer ones and is recognised by the
        sessions' inboxes; an *undelivered* event arriving behind a newer one would be a broken
        guarantee: it is logged and counted (fixgw_events_out_of_order_total), never silent.
        """
        if not offset_raw:
            return
        ms, _, seq = offset_raw.decode().partition("-")
        offset = (int(ms), int(seq or 0))
        last = self._last_offset.get((kind, event.partition))
        if last is None or offset > last:
            self._last_offset[(kind, event.partition)] = offset
            return
        inbox_ids = [f"{event.event_id}:{role}" for role in "OMT"]  # see translation.event_messages
        ns = self.gateway.namespace
        fresh = [cfg for cfg, _ in self.targets(kind, event)
                 if not any(self.gateway.stores[cfg.kind].delivered(cfg.key(ns), i) for i in inbox_ids)]
        if fresh:
            self.gateway.metrics.events_out_of_order.labels(str(event.partition)).inc()
            log.error("dispatcher: event %s (partition %d offset %s) arrived after offset %s-%s and was not "
                      "delivered before: delivering it late", event.event_id, event.partition,
                      offset_raw.decode(), *last)

    def targets(self, kind: str, event: Event) -> list[tuple[SessionConfig, tuple[str, ...]]]:
        p = event.payload
        parts = {"maker": p["maker"], "taker": p["taker"]} if "maker" in p else {"order": p}
        if kind == "fsg":
            by_owner: dict[str, list[str]] = {}
            for role, state in parts.items():
                by_owner.setdefault(state.get("owner", ""), []).append(role)
            out = []
            for owner, roles in by_owner.items():
                cfg = self.sessions.get(owner)
                if cfg is not None and cfg.kind == "fsg":
                    out.append((cfg, tuple(roles)))
            return out
        out = []
        for cfg in self.drop_copies:
            roles = tuple(r for r, state in parts.items() if not cfg.accounts or state.get("account") in cfg.accounts)
            if roles:
                out.append((cfg, roles))
        return out



def order_ids(event: Event, roles: tuple[str, ...]) -> list[str]:
    """The orders of ``event`` a session hears about in these roles."""
    p = event.payload
    return [p[r]["orderId"] for r in roles] if "maker" in p else [p["orderId"]]
