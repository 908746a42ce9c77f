"""Session administration, carried out by the active gateway: never by editing Redis beside it
(docs/operations.md#session-administration).

Over HTTP on the gateway's ``http_port`` (loopback), under ``/admin``, for operators named in
``[[gateway.operator]]`` with a bearer token (``fixgw-admin`` is the command line for it):

- ``GET /admin/sessions``: every session's state — logged on, peer address, the engine's next
  sender and target numbers and the stored ones, the owner epoch, the last message in and out,
  parked or not, open orders;
- ``POST /admin/sessions/<name>/<action>``: ``next-sender`` / ``next-target`` (``{"seq": N}``),
  ``reset`` (a new FIX session: both numbers 1, the stored messages and numbers cleared, seed
  004's reset), ``logout`` (``{"text": …}``), ``disconnect``, ``cancel-orders`` (every open order
  of the session, through the cells);
- ``POST /admin/accounts/<account>/cancel-orders``: every open order of an account, whichever
  order-entry session placed it;
- ``POST /admin/sessions/<name>/release`` (``{"to": group, "timeout": seconds}``) on the gateway
  serving an order-entry session, then ``POST /admin/sessions/<name>/adopt`` on the active
  gateway of group ``to``: the session moved to another group (``fixgw-admin move-session``).
  Release drains it (logged out, its Logons refused, its open orders canceled, every command
  of it matched and every event delivered), fences it and hands its keys over
  (``sessionstore/move.py``); adopt stamps it with the new group's epoch, rebuilds QuickFIX's
  copy from the keys, and takes its Logons.

An action that would break an invariant is refused with the reason (a next sender number at or
below one already sent: 409) and changes nothing. Every request with a valid token, refused
or done, is written to the audit stream ``{namespace}/admin-audit`` (``fixgw-inspect admin-log``):
who, when, what, the state before and after, the outcome. A standby answers 503, naming the
active gateway.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

import quickfix as fix
from redis.exceptions import RedisError

from matching.keys import PartitionKeys
from matching.outbox import GROUP as OUTBOX_GROUP
from matching.pipeline import GROUP as CONDUCTOR_GROUP
from sessionstore import SequenceReuse, SessionStore, StoreError
from sessionstore.keys import GatewayKey, admin_audit, session_groups
from sessionstore.move import MOVING, copy_keys, fence_source, moved_marker, serving_group, set_serving_group

from .config import GatewaySettings, OperatorConfig, SessionConfig
from .credentials import verify_password
from .dispatcher import GROUP as DISPATCHER_GROUP
from .inputs import MAX_SEQ_NUM

log = logging.getLogger("fixgw.admin")

AUDIT_LENGTH = 100_000  # entries the audit stream keeps (approximately: MAXLEN ~)


class AdminRefused(Exception):
    """An admin request not carried out: the HTTP status and the reason."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


SLOW_REQUEST_S = 5.0  # an admin request still running this long is logged with where it waits


@contextmanager
def reported_if_slow(what: str, after_s: float) -> Iterator[None]:
    """Log ``what`` with the calling thread's stack if the block still runs ``after_s`` later.
    An admin request waits on QuickFIX's session locks and on the session store; one that hangs
    says where (the innermost frame: a call into the bindings, a read held for the store) while
    it hangs, not only once it ends or its client gives up."""
    thread, started = threading.get_ident(), time.monotonic()

    def report() -> None:
        frame = sys._current_frames().get(thread)
        stack = "".join(traceback.format_stack(frame)) if frame is not None else "(thread gone)\n"
        log.warning("%s: still running after %.1fs, waiting in:\n%s", what, time.monotonic() - started, stack.rstrip())

    watch = threading.Timer(after_s, report)
    watch.daemon = True
    watch.start()
    try:
        yield
    finally:
        watch.cancel()


class Operators:
    """The operators of ``[[gateway.operator]]`` and their tokens' hashes. A token is checked
    with scrypt once, then known by its SHA-256 for the life of the process."""

    def __init__(self, operators: list[OperatorConfig]) -> None:
        self.operators = operators
        self._known: dict[str, str] = {}  # sha256 of a token checked → operator name
        self._lock = threading.Lock()

    def who(self, authorization: str | None) -> str:
        if not self.operators:
            raise AdminRefused(403, "no operator is configured: add [[gateway.operator]] with a token_hash "
                                    "(`fixgw passwd` makes one)")
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise AdminRefused(401, "an operator's token is required: Authorization: Bearer <token>")
        token = token.strip()
        digest = hashlib.sha256(token.encode()).hexdigest()
        with self._lock:
            known = self._known.get(digest)
        if known is not None:
            return known
        for op in self.operators:
            if verify_password(token, op.token_hash):
                with self._lock:
                    self._known[digest] = op.name
                return op.name
        raise AdminRefused(401, "unknown token")


class AdminHost(Protocol):
    """What the administration needs of the gateway (``fixgw.gateway.Gateway``)."""

    namespace: str
    settings: GatewaySettings
    stores: dict[str, SessionStore]
    client: Any
    application: Any  # GatewayApplication, once active
    behaviour: Any
    front: Any
    active: threading.Event
    away: set[str]  # sessions listed but served by another group (key texts)

    def serves(self, cfg: SessionConfig) -> bool: ...


@dataclass
class Request:
    operator: str
    action: str
    session: str  # the session's key, or the account for an account's cancel
    params: dict[str, Any]


class SessionAdmin:
    """The ``/admin`` endpoints (``handle``), carried out on the gateway ``host``."""

    def __init__(self, host: AdminHost, operators: Operators, holder: Callable[[], str]) -> None:
        self.host = host
        self.operators = operators
        self.holder = holder  # this process's lock token
        self._by_name = {cfg.name: cfg for cfg in host.settings.session}

    # --- HTTP ------------------------------------------------------------------------------

    def handle(self, method: str, path: str, authorization: str | None, body: bytes) -> tuple[int, dict[str, Any]]:
        with reported_if_slow(f"admin request {method} {path}", SLOW_REQUEST_S):
            return self._handle(method, path, authorization, body)

    def _handle(self, method: str, path: str, authorization: str | None, body: bytes) -> tuple[int, dict[str, Any]]:
        try:
            operator = self.operators.who(authorization)
        except AdminRefused as refused:
            return refused.status, {"error": refused.reason}
        parts = [p for p in path.split("/") if p][1:]  # after "admin"
        try:
            if not self.host.active.is_set():
                raise AdminRefused(503, f"not active: this gateway is standing by; the active one is "
                                        f"{self._active_holder()}")
            if method == "GET" and parts == ["sessions"]:
                return 200, {"sessions": [self.session_state(cfg) for cfg in self.host.settings.session]}
            if method == "POST" and len(parts) == 3 and parts[0] in ("sessions", "accounts"):
                params = _json_object(body)
                return 200, self._act(operator, parts[0], parts[1], parts[2], params)
            raise AdminRefused(404, f"no such admin request: {method} {path}")
        except AdminRefused as refused:
            return refused.status, {"error": refused.reason}

    def _active_holder(self) -> str:
        holders = []
        for kind in self.host.settings.groups():
            try:
                value = self.host.client.get(GatewayKey(self.host.namespace, kind).lock)
            except RedisError as exc:
                return f"unknown (the session store did not answer: {exc})"
            holders.append(f"{kind}: {value.decode() if isinstance(value, bytes) else value or 'none'}")
        return ", ".join(holders)

    # --- reading ---------------------------------------------------------------------------

    def _engine_session(self, cfg: SessionConfig) -> Any:
        return fix.Session.lookupSession(fix.SessionID(cfg.begin_string, cfg.sender_comp_id, cfg.target_comp_id))

    def session_state(self, cfg: SessionConfig) -> dict[str, Any]:
        host, key = self.host, cfg.key(self.host.namespace)
        session = self._engine_session(cfg)
        app = host.application
        text = cfg.session_id_text
        stored = host.stores[cfg.gateway].load_state(key)
        owner = host.client.get(key.owner)
        dispatcher = getattr(host.behaviour, "dispatcher", None)
        parked = dispatcher is not None and str(key) in getattr(dispatcher, "parked", {})
        out: dict[str, Any] = {
            "name": cfg.name, "session": str(key), "kind": cfg.kind,
            "logged_on": bool(session is not None and session.isLoggedOn()),
            "peer": host.front.peers.get(cfg.name) if host.front is not None else None,
            "next_sender": session.getExpectedSenderNum() if session is not None else None,
            "next_target": session.getExpectedTargetNum() if session is not None else None,
            "stored": {"next_sender": stored.sender_seq_num, "next_target": stored.target_seq_num,
                       "last_sent": stored.last_sent_seq_num},
            "owner_epoch": int(owner) if owner else None,
            "last_in": _iso(app.last_in.get(text)) if app is not None else None,
            "last_out": _iso(app.last_out.get(text)) if app is not None else None,
            "parked": parked,
        }
        if cfg.kind == "fsg" and hasattr(host.behaviour, "open_orders"):
            out["open_orders"] = len(host.behaviour.open_orders(cfg))
        return out

    # --- actions ---------------------------------------------------------------------------

    def _act(self, operator: str, scope: str, name: str, action: str, params: dict[str, Any]) -> dict[str, Any]:
        if scope == "accounts":
            if action != "cancel-orders":
                raise AdminRefused(404, f"no such action for an account: {action}")
            request = Request(operator, "cancel-orders", f"account {name}", params)
            return self._audited(request, lambda: self._cancel_account(name))
        cfg = self._by_name.get(name)
        if cfg is None:
            raise AdminRefused(404, f"no session {name!r} on this gateway")
        actions: dict[str, Callable[[SessionConfig, dict[str, Any]], dict[str, Any]]] = {
            "next-sender": self._next_sender, "next-target": self._next_target, "reset": self._reset,
            "logout": self._logout, "disconnect": self._disconnect, "cancel-orders": self._cancel_session,
            "release": self._release, "adopt": self._adopt,
        }
        act = actions.get(action)
        if act is None:
            raise AdminRefused(404, f"no such action: {action} (one of {', '.join(actions)})")
        request = Request(operator, action, str(cfg.key(self.host.namespace)), params)
        return self._audited(request, lambda: act(cfg, params))

    def _audited(self, request: Request, act: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """Carry ``act`` out and write it to the audit stream, done or refused."""
        try:
            result = act()
        except AdminRefused as refused:
            self._audit(request, {}, {}, f"refused: {refused.reason}")
            raise
        except (StoreError, RedisError) as exc:
            self._audit(request, {}, {}, f"failed: {exc}")
            raise AdminRefused(503, f"the session store failed: {exc}") from None
        self._audit(request, result.get("before", {}), result.get("after", {}), "done")
        log.warning("admin: %s %s %s %s: %s", request.operator, request.action, request.session,
                    json.dumps(request.params), json.dumps(result))
        return result

    def _audit(self, request: Request, before: dict[str, Any], after: dict[str, Any], outcome: str) -> None:
        entry = {"at": str(int(time.time() * 1000)), "operator": request.operator, "action": request.action,
                 "session": request.session, "params": json.dumps(request.params), "before": json.dumps(before),
                 "after": json.dumps(after), "outcome": outcome, "gateway": self.holder()}
        try:
            self.host.client.xadd(admin_audit(self.host.namespace), entry, maxlen=AUDIT_LENGTH, approximate=True)
        except RedisError as exc:
            log.error("admin: audit entry not written (%s): %s", exc, entry)

    def _numbers(self, cfg: SessionConfig) -> dict[str, Any]:
        session = self._engine_session(cfg)
        stored = self.host.stores[cfg.gateway].load_state(cfg.key(self.host.namespace))
        return {"next_sender": session.getExpectedSenderNum() if session is not None else None,
                "next_target": session.getExpectedTargetNum() if session is not None else None,
                "last_sent": stored.last_sent_seq_num}

    def _app(self) -> Any:
        if self.host.application is None:
            raise AdminRefused(503, "the gateway is not serving yet")
        return self.host.application

    def _next_sender(self, cfg: SessionConfig, params: dict[str, Any]) -> dict[str, Any]:
        """The next number the gateway sends: above every number already sent (a number is never
        sent twice); the counterparty sees a gap and asks for it (a gap fill answers)."""
        seq = _seq(params)
        app, key = self._app(), cfg.key(self.host.namespace)
        session = self._engine_session(cfg)
        with app._send_locks[cfg.session_id_text], app._persist_locks[key]:
            before = self._numbers(cfg)
            try:
                self.host.stores[cfg.gateway].set_next_sender_seq_num(key, seq)
            except SequenceReuse as exc:
                raise AdminRefused(409, f"{exc} (a number is never sent twice)") from None
            if session is not None:
                session.setNextSenderMsgSeqNum(seq)
            return {"before": before, "after": self._numbers(cfg)}

    def _next_target(self, cfg: SessionConfig, params: dict[str, Any]) -> dict[str, Any]:
        """The next number expected from the counterparty (lower: messages already handled may be
        handled again — ClOrdIDs keep them from being orders twice)."""
        seq = _seq(params)
        app, key = self._app(), cfg.key(self.host.namespace)
        session = self._engine_session(cfg)
        with app.intake.resetting(key):  # no number queued before this lands after it
            before = self._numbers(cfg)
            self.host.stores[cfg.gateway].set_next_target_seq_num(key, seq)
            if session is not None:
                session.setNextTargetMsgSeqNum(seq)
            return {"before": before, "after": self._numbers(cfg)}

    def _reset(self, cfg: SessionConfig, params: dict[str, Any]) -> dict[str, Any]:
        """A new FIX session: logged out if it is on, both numbers 1 in the engine and in Redis,
        the stored messages and numbers cleared (seed 004's reset). The counterparty logs on with
        1 (ResetSeqNumFlag or its own reset). Orders stay as they are."""
        app, key = self._app(), cfg.key(self.host.namespace)
        session = self._engine_session(cfg)
        if session is None:
            raise AdminRefused(409, "the engine has no such session")
        with app._send_locks[cfg.session_id_text]:
            before = self._numbers(cfg)
            app.drops.note(fix.SessionID(cfg.begin_string, cfg.sender_comp_id, cfg.target_comp_id))
            session.reset()  # Logout (stored as usual) and disconnect if on; the engine's copy back to 1
            app._reset(key, self.host.stores[cfg.gateway], next_target=1)
            return {"before": before, "after": self._numbers(cfg)}

    def _logout(self, cfg: SessionConfig, params: dict[str, Any]) -> dict[str, Any]:
        text = params.get("text", "logged out by the venue")
        if not isinstance(text, str) or len(text) > 256 or not text.isprintable():
            raise AdminRefused(400, "text must be printable, at most 256 characters")
        session = self._engine_session(cfg)
        if session is None or not session.isLoggedOn():
            raise AdminRefused(409, f"{cfg.name} is not logged on")
        self._app().kick(fix.SessionID(cfg.begin_string, cfg.sender_comp_id, cfg.target_comp_id), text)
        return {"before": {"logged_on": True}, "after": {"logout_text": text}}

    def _disconnect(self, cfg: SessionConfig, params: dict[str, Any]) -> dict[str, Any]:
        session = self._engine_session(cfg)
        if session is None or not (session.isLoggedOn() or fix.Session.isSessionRegistered(
                fix.SessionID(cfg.begin_string, cfg.sender_comp_id, cfg.target_comp_id))):
            raise AdminRefused(409, f"{cfg.name} is not connected")
        self._app()._disconnect(fix.SessionID(cfg.begin_string, cfg.sender_comp_id, cfg.target_comp_id))
        return {"before": {"logged_on": bool(session.isLoggedOn())}, "after": {"connected": False}}

    def _orders(self) -> Any:
        behaviour = self.host.behaviour
        if not hasattr(behaviour, "cancel_orders"):
            raise AdminRefused(409, "this gateway does not enter orders (mode is not 'gateway')")
        return behaviour

    def _cancel_session(self, cfg: SessionConfig, params: dict[str, Any]) -> dict[str, Any]:
        if cfg.kind != "fsg":
            raise AdminRefused(409, f"{cfg.name} is a drop copy: it has no orders")
        orders = self._orders()
        canceled = orders.cancel_orders(cfg, "operator", f"admin:{time.time_ns():x}")
        return {"before": {"open_orders": len(canceled)}, "after": {"canceled": canceled}}

    def _cancel_account(self, account: str) -> dict[str, Any]:
        orders = self._orders()
        stamp = f"admin:{time.time_ns():x}"
        canceled: dict[str, list[str]] = {}
        for cfg in self.host.settings.session:
            if cfg.kind == "fsg":
                done = orders.cancel_orders(cfg, "operator", stamp, account=account)
                if done:
                    canceled[cfg.name] = done
        return {"before": {"open_orders": sum(map(len, canceled.values()))}, "after": {"canceled": canceled}}


    # --- moving a session to another group ---------------------------------------------------

    def _release(self, cfg: SessionConfig, params: dict[str, Any]) -> dict[str, Any]:
        """Drain, fence and hand over ``cfg`` to group ``to`` (``sessionstore/move.py``'s steps).
        Not drained within ``timeout``: refused, the session served here again as before."""
        to, timeout = params.get("to"), params.get("timeout", 30)
        if not isinstance(to, str) or not to or not all(c.isalnum() or c in "_.@-" for c in to) or len(to) > 64:
            raise AdminRefused(400, "to must name a session group (letters, digits, _ . @ -)")
        if not isinstance(timeout, int | float) or isinstance(timeout, bool) or not 1 <= timeout <= 600:
            raise AdminRefused(400, "timeout must be from 1 to 600 seconds")
        if cfg.kind != "fsg":
            raise AdminRefused(409, f"{cfg.name} is a drop copy: its group is the one the cells copy to")
        if to == cfg.gateway:
            raise AdminRefused(409, f"{cfg.name} is in group {to} already")
        host, key = self.host, cfg.key(self.host.namespace)
        current, owner = serving_group(host.client, host.namespace, cfg.name), host.client.get(key.owner)
        if current == to and owner == moved_marker(to).encode():  # released before (a move run again)
            return {"before": {"group": cfg.gateway}, "after": {"group": to, "session": str(key.moved_to(to)),
                                                                "released": "before"}}
        resuming = current == MOVING and owner is not None and owner.isdigit()  # a release cut off, here
        if not resuming and (str(key) in host.away or not host.serves(cfg)):
            raise AdminRefused(409, f"{cfg.name} is not served by this gateway (group {cfg.gateway}): "
                                    f"the directory says {current}")
        orders, app = self._orders(), self._app()
        before = {"group": cfg.gateway, "open_orders": len(orders.open_orders(cfg)), **self._numbers(cfg)}
        set_serving_group(host.client, host.namespace, cfg.name, MOVING)  # no Logon anywhere meanwhile
        host.away.add(str(key))
        try:
            sid = fix.SessionID(cfg.begin_string, cfg.sender_comp_id, cfg.target_comp_id)
            session = self._engine_session(cfg)
            if session is not None and session.isLoggedOn():
                app.kick(sid, "the session is moving to another gateway of this venue: log on again in a moment")
            canceled = self._drain(cfg, float(timeout))
        except BaseException:
            host.away.discard(str(key))
            host.client.hdel(session_groups(host.namespace), cfg.name)  # served here, as before
            raise
        fence_source(host.client, key, to)
        moved = copy_keys(host.client, key, to)
        set_serving_group(host.client, host.namespace, cfg.name, to)
        return {"before": before, "after": {"group": to, "session": str(key.moved_to(to)), "keys_moved": moved,
                                            "canceled": canceled}}

    def _drain(self, cfg: SessionConfig, timeout: float) -> list[str]:
        """Until the session has no open order, every command appended to a partition has been
        matched and every event the session's group received has been delivered, twice in a row;
        its open orders canceled on the way. Returns the orders canceled."""
        orders, stamp = self._orders(), f"move:{time.time_ns():x}"
        canceled: list[str] = []
        deadline, quiet_before = time.monotonic() + timeout, False
        while True:
            open_now = [v.order_id for v in orders.open_orders(cfg) if v.order_id not in canceled]
            if open_now:
                canceled += orders.cancel_orders(cfg, "operator", stamp)
            quiet = not orders.open_orders(cfg) and self._streams_quiet(cfg)
            if quiet and quiet_before:
                return canceled
            quiet_before = quiet
            if time.monotonic() > deadline:
                raise AdminRefused(409, f"{cfg.name} not drained within {timeout:g}s "
                                        f"({len(orders.open_orders(cfg))} orders open): not moved")
            time.sleep(0.25)

    def _streams_quiet(self, cfg: SessionConfig) -> bool:
        """Every partition's commands matched (and, by outbox, its events published), and the
        session's group inbox read and acknowledged to its last entry."""
        checks: list[tuple[Any, str, str]] = [(self.host.client, GatewayKey(self.host.namespace, cfg.gateway)
                                               .inbox_stream, DISPATCHER_GROUP)]
        router = getattr(self._orders(), "router", None)
        for partition, client in (getattr(router, "clients", None) or {}).items():
            keys = PartitionKeys(partition)
            checks += [(client, keys.commands, CONDUCTOR_GROUP), (client, keys.events, OUTBOX_GROUP)]
        return all(stream_caught_up(client, stream, group) for client, stream, group in checks)

    def _adopt(self, cfg: SessionConfig, params: dict[str, Any]) -> dict[str, Any]:
        """Serve ``cfg``, moved to this gateway's group by ``release``: stamped with this
        gateway's epoch, QuickFIX's copy rebuilt from the keys, its Logons taken."""
        host, key = self.host, cfg.key(self.host.namespace)
        group = serving_group(host.client, host.namespace, cfg.name)
        if group != cfg.gateway:
            raise AdminRefused(409, f"{cfg.name} is not moved to group {cfg.gateway} (the directory says "
                                    f"{group or 'nothing: it is served where its configuration says'}): "
                                    "release it on the gateway serving it first")
        if str(key) not in host.away:  # adopted before (a move run again)
            return {"before": {"served": True}, "after": {"served": True, "session": str(key), **self._numbers(cfg)}}
        app, store = self._app(), host.stores[cfg.gateway]
        store.stamp_owner(key)
        state = store.load_state(key)
        app.adopt(cfg, state.last_sent_seq_num)
        host.away.discard(str(key))
        return {"before": {"served": False}, "after": {"served": True, "session": str(key), **self._numbers(cfg)}}


def stream_caught_up(client: Any, stream: str, group: str) -> bool:
    """Has consumer group ``group`` read ``stream`` to its last entry and acknowledged all of it?
    (No such stream or group: nothing to wait for.)"""
    try:
        groups = {(g["name"].decode() if isinstance(g["name"], bytes) else g["name"]): g
                  for g in client.xinfo_groups(stream)}
        info = groups.get(group)
        if info is None:
            return True
        delivered = info["last-delivered-id"]
        delivered = delivered.decode() if isinstance(delivered, bytes) else delivered
        # (no entry after the group's position: its last id may have moved past its entries, XSETID)
        unread = client.xrange(stream, f"({delivered}", "+", count=1)
    except RedisError as exc:
        if "no such key" in str(exc).lower():
            return True
        raise
    return int(info["pending"]) == 0 and not unread


def _seq(params: dict[str, Any]) -> int:
    seq = params.get("seq")
    if not isinstance(seq, int) or isinstance(seq, bool) or not 1 <= seq <= MAX_SEQ_NUM:
        raise AdminRefused(400, f"seq must be a whole number from 1 to {MAX_SEQ_NUM}")
    return seq


def _json_object(body: bytes) -> dict[str, Any]:
    if not body.strip():
        return {}
    try:
        value = json.loads(body)
    except ValueError as exc:
        raise AdminRefused(400, f"the body must be a JSON object: {exc}") from None
    if not isinstance(value, dict):
        raise AdminRefused(400, "the body must be a JSON object")
    return value


def _iso(at: float | None) -> str | None:
    if at is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(at)) + f".{int(at * 1000) % 1000:03d}Z"


__all__ = ["AdminRefused", "Operators", "SessionAdmin"]
