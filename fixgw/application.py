"""The QuickFIX application: every outbound message reaches Redis before the wire.

Owns the persistence callbacks (DESIGN §4): ``toApp``/``toAdmin`` commit each outbound
message (and its sequence numbers) to the session store before QuickFIX sends it —
resends carrying PossDupFlag=Y are already stored and skipped; ``fromApp``/``fromAdmin``
record the next expected target sequence number; a reset in QuickFIX (ResetSeqNumFlag,
ResetOnLogon/Logout/Disconnect, a new session period) resets Redis too. What the
messages *mean* is a ``Behaviour``'s business (AT echo, order entry); this file must not
know it.

Failure policy (fail fast): an application message that cannot be stored is vetoed with
DoNotSend and its session disconnected; an admin message or an inbound sequence number
that cannot be stored ends the process (the bindings cannot recover in-process; a standby
takes over). Nothing leaves unpersisted.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol

import quickfix as fix

from sessionstore import NotReplicated, OutboundRecord, SessionKey, SessionStore, StoreError

from .config import SessionConfig
from .metrics import GatewayMetrics

log = logging.getLogger("fixgw.session")

POSS_DUP, MSG_SEQ_NUM, MSG_TYPE, RESET_SEQ_NUM_FLAG, NEW_SEQ_NO = 43, 34, 35, 141, 36


class Behaviour(Protocol):
    """What the gateway does with application messages (AT echo, order entry, ...)."""

    def on_app_message(self, message: fix.Message, session_id: fix.SessionID, session: SessionConfig) -> None: ...

    def on_logon(self, session_id: fix.SessionID, session: SessionConfig) -> None: ...

    def on_logout(self, session_id: fix.SessionID, session: SessionConfig) -> None: ...


def _field(fields: Any, tag: int) -> str | None:
    return fields.getField(tag) if fields.isSetField(tag) else None


_delivery = threading.local()


class AlreadyDelivered(Exception):
    """The session's inbox already holds this event: the message was sent before."""


@contextmanager
def delivering(inbox_id: str, order_id: str = "", order_view: str = "") -> Iterator[None]:
    """Mark the application message sent inside this block as the delivery of one event:
    ``toApp`` then stores it together with the inbox entry and the order's new view, or
    vetoes it when the inbox already has it (exactly once per session, across crashes)."""
    _delivery.current = (inbox_id, order_id, order_view)
    try:
        yield
    finally:
        _delivery.current = None


def die(reason: str, code: int = 4) -> None:
    """The fail-fast exit: log why, then leave without running QuickFIX's teardown (which
    hangs after a callback raised). Sockets close with the process; a standby takes over."""
    log.critical("exiting: %s", reason)
    logging.shutdown()
    os._exit(code)


class GatewayApplication(fix.Application):  # type: ignore[misc]  # SWIG director base
    def __init__(self, sessions: dict[str, SessionConfig], stores: dict[str, SessionStore], namespace: str,
                 behaviour: Behaviour, metrics: GatewayMetrics,
                 last_sent: dict[SessionKey, int], fatal: Callable[[str], None] = die) -> None:
        super().__init__()
        self.sessions = sessions  # by QuickFIX SessionID text
        self.stores = stores  # by kind (fsg / dc): each is fenced by its own gateway lock
        self.namespace = namespace
        self.behaviour = behaviour
        self.metrics = metrics
        self.fatal = fatal
        self._last_sent = dict(last_sent)  # our view of lastSentSeqNum per session, to spot resets
        self._logon_target: dict[SessionKey, int] = {}
        self._lock = threading.Lock()

    # --- lookups ----------------------------------------------------------------------

    def _session(self, sid: fix.SessionID) -> tuple[SessionConfig, SessionKey, SessionStore]:
        cfg = self.sessions[sid.toString()]
        return cfg, cfg.key(self.namespace), self.stores[cfg.kind]

    # --- QuickFIX callbacks -----------------------------------------------------------

    def onCreate(self, sid: fix.SessionID) -> None:  # noqa: N802 (QuickFIX's names)
        return None

    def onLogon(self, sid: fix.SessionID) -> None:  # noqa: N802
        cfg, key, store = self._session(sid)
        try:
            store.record_connection_start(key)
        except StoreError as exc:
            self.fatal(f"{key}: cannot record connectionStartTime: {exc}")
        log.info("%s logged on", key)
        self.behaviour.on_logon(sid, cfg)

    def onLogout(self, sid: fix.SessionID) -> None:  # noqa: N802
        cfg, key, store = self._session(sid)
        log.info("%s logged out", key)
        if cfg.reset_on_logout or cfg.reset_on_disconnect:
            self._reset(key, store, next_target=1)  # QuickFIX has reset its own store
        self.behaviour.on_logout(sid, cfg)

    def toAdmin(self, message: fix.Message, sid: fix.SessionID) -> None:  # noqa: N802
        try:
            self._persist(message, sid)
        except StoreError as exc:
            # An admin message cannot be vetoed cleanly through the bindings: stop here.
            self.fatal(f"{self.sessions[sid.toString()].key(self.namespace)}: admin message not stored, "
                       f"not sent: {exc}")

    def toApp(self, message: fix.Message, sid: fix.SessionID) -> None:  # noqa: N802
        try:
            self._persist(message, sid, getattr(_delivery, "current", None))
        except AlreadyDelivered:
            raise fix.DoNotSend() from None
        except NotReplicated as exc:
            # Stored, so its number is used: sending nothing and going on would reuse it. Stop;
            # the successor resends it from Redis when the counterparty asks.
            self.fatal(f"{self.sessions[sid.toString()].key(self.namespace)}: {exc}")
        except StoreError as exc:
            cfg, key, _ = self._session(sid)
            log.error("%s: message not stored, so not sent; disconnecting: %s", key, exc)
            self.metrics.store_failures.labels(str(key)).inc()
            threading.Thread(target=self._disconnect, args=(sid,), daemon=True).start()
            raise fix.DoNotSend() from None

    def fromAdmin(self, message: fix.Message, sid: fix.SessionID) -> None:  # noqa: N802
        self._record_inbound(message, sid)

    def fromApp(self, message: fix.Message, sid: fix.SessionID) -> None:  # noqa: N802
        cfg, _, _ = self._session(sid)
        try:
            self.behaviour.on_app_message(message, sid, cfg)
        finally:
            # Recorded only once the message is handled: a crash in between leaves the number
            # unrecorded, so after takeover the counterparty is asked to resend it (PossDup)
            # and handling it again is idempotent (ClOrdID window, deterministic command id).
            # Recorded first, a crash in between would lose the message.
            self._record_inbound(message, sid)

    # --- persistence ------------------------------------------------------------------

    def _persist(self, message: fix.Message, sid: fix.SessionID,
                 delivery: tuple[str, str, str] | None = None) -> None:
        header = message.getHeader()
        cfg, key, store = self._session(sid)
        msg_type = header.getField(MSG_TYPE)
        self.metrics.messages_out.labels(str(key), msg_type).inc()
        if _field(header, POSS_DUP) == "Y":
            return  # a resend: the original is stored already
        seq = int(header.getField(MSG_SEQ_NUM))
        raw = message.toString().encode("latin-1")
        with self._lock:
            last = self._last_sent.get(key, 0)
            if seq <= last:
                if msg_type == "A" and seq == 1:
                    # QuickFIX started a new FIX session (ResetSeqNumFlag, ResetOnLogon, a new
                    # session period): Redis starts one too, before the Logon is stored.
                    self._reset(key, store, next_target=self._logon_target.pop(key, 1))
                # otherwise the store refuses it (SequenceReuse): never two contents for one number
            record = OutboundRecord(seq, time.time_ns(), msg_type.encode(), raw)
            if delivery is None:
                store.commit_outbound(key, record)
            elif not store.commit_delivery(key, record, *delivery):
                raise AlreadyDelivered(delivery[0])
            self._last_sent[key] = max(seq, self._last_sent.get(key, 0))
        self.metrics.sender_seq.labels(str(key)).set(seq + 1)

    def _reset(self, key: SessionKey, store: SessionStore, next_target: int) -> None:
        try:
            store.reset(key, next_target=next_target)
        except StoreError as exc:
            self.fatal(f"{key}: cannot reset the stored session: {exc}")
        self._last_sent[key] = 0
        log.info("%s: new FIX session: stored sequence numbers reset", key)

    def _record_inbound(self, message: fix.Message, sid: fix.SessionID) -> None:
        header = message.getHeader()
        cfg, key, store = self._session(sid)
        msg_type = header.getField(MSG_TYPE)
        self.metrics.messages_in.labels(str(key), msg_type).inc()
        seq = int(header.getField(MSG_SEQ_NUM))
        expected = fix.Session.lookupSession(sid).getExpectedTargetNum()
        target: int | None = None
        if msg_type == "4":  # SequenceReset (gap fill or reset): NewSeqNo moves the target forward
            new_seq = int(message.getField(NEW_SEQ_NO))
            target = new_seq if new_seq > expected else None
        elif seq == expected:  # QuickFIX increments after this callback
            target = seq + 1
        if target is None:
            return
        if msg_type == "A":
            self._logon_target[key] = target
        try:
            store.set_next_target_seq_num(key, target)
        except StoreError as exc:
            self.fatal(f"{key}: inbound MsgSeqNum {seq} not recorded: {exc}")
        self.metrics.target_seq.labels(str(key)).set(target)

    def _disconnect(self, sid: fix.SessionID) -> None:
        session = fix.Session.lookupSession(sid)
        if session is not None:
            session.disconnect()
