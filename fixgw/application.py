"""The QuickFIX application: every outbound message reaches Redis before the wire.

Owns the persistence callbacks (DESIGN §4): ``toApp``/``toAdmin`` commit each outbound
message (and its sequence numbers) to the session store before QuickFIX sends it —
resends carrying PossDupFlag=Y are already stored and skipped; ``fromApp``/``fromAdmin``
record the next expected target sequence number (written behind, coalesced, after the
message's work: ``intake``); a reset in QuickFIX (ResetSeqNumFlag, ResetOnLogon/Logout/
Disconnect, a new session period) resets Redis too. What the
messages *mean* is a ``Behaviour``'s business (AT echo, order entry); this file must not
know it.

Failure policy (fail fast): an application message that cannot be stored is vetoed with
DoNotSend and its session disconnected; an admin message or an inbound sequence number
that cannot be stored ends the process (the bindings cannot recover in-process; a standby
takes over). Nothing leaves unpersisted.

Input policy: no callback ever raises into the bindings except QuickFIX's own exceptions
(an unexpected Python exception there hangs the session thread for good). A request the
behaviour fails on gets a BusinessMessageReject with the reason; a Logon with an invalid
HeartBtInt (or anything ``inputs.logon_problem`` names) gets a Logout with the reason, and a
refused Logon leaves the stored session as it was (``_refused_logon_cleanup``).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

import quickfix as fix

from matching.linger import Linger
from sessionstore import NotReplicated, OutboundRecord, SessionKey, SessionStore, StoreError

from . import engine_threads
from .config import SessionConfig
from .context import Behaviour, CallbackWatch, die
from .credentials import LogonLockout, credentials_problem, hash_password, new_password_problem
from .engine_drops import EngineDrops
from .fixmsg import Inbound, SessionMessage, business_reject, inbound_reader, sending_time, wire_bytes
from .group_commit import GroupCommit
from .inputs import MAX_SEQ_NUM, logon_problem, split_fields
from .intake import Intake
from .metrics import GatewayMetrics

log = logging.getLogger("fixgw.session")

POSS_DUP, MSG_SEQ_NUM, MSG_TYPE, SENDING_TIME, NEW_SEQ_NO = 43, 34, 35, 52, 36
BEGIN_SEQ_NO = 7
PASSWORD, NEW_PASSWORD, SESSION_STATUS = 554, 925, 1409
ADMIN_TYPES = frozenset({"0", "1", "2", "3", "4", "5", "A"})  # FIX's session-level messages


# Fault tests only (tests/test_hostile_peers.py): each named QuickFIX callback (comma-separated)
# raises once, inside its guard, the first time it runs after a logon (onCreate: at once).
FAIL_IN_CALLBACK = frozenset(filter(None, os.environ.get("FIXGW_TEST_FAIL_IN_CALLBACK", "").split(",")))
# Fault tests only (tests/test_gateway.py): onLogout starts this late, as when other threads hold the GIL.
LOGOUT_DELAY_S = float(os.environ.get("FIXGW_TEST_LOGOUT_DELAY_S") or 0)


# What QuickFIX understands when a callback raises it (DoNotSend, RejectLogon, the
# session-level rejects); anything else raised into the bindings hangs the session.
QUICKFIX_SIGNAL = fix.FIXException


def stamp(message: fix.Message) -> None:
    """An application message's SendingTime from the gateway's clock (``fixmsg.sending_time``:
    the one it and its datastore agreed on), not QuickFIX's: QuickFIX stamps with the host's
    clock, and a message stamped in the moments after a step of it, before the clock watch closes
    the sessions, would be refused by the client's engine (SendingTime accuracy problem) and lost
    to it, its number consumed — a report resent later among them. (A group-committed report
    carries the stamp it was committed with: ``_sent_as_committed``.) Admin messages keep
    QuickFIX's: a Logout the client's engine took during a step, rather than refused, left
    QuickFIX's initiator sending Logons on a closed connection and never reconnecting."""
    message.getHeader().setField(SENDING_TIME, sending_time())


def _field(fields: Any, tag: int) -> str | None:
    return fields.getField(tag) if fields.isSetField(tag) else None


class GatewayApplication(GroupCommit, fix.Application):  # a SWIG director base
    def __init__(self, sessions: dict[str, SessionConfig], stores: dict[str, SessionStore], namespace: str,
                 behaviour: Behaviour, metrics: GatewayMetrics,
                 last_sent: dict[SessionKey, int], fatal: Callable[[str], None] = die,
                 restore_local_copy: Callable[[SessionConfig], None] = lambda cfg: None,
                 linger: Linger | None = None, lockout: LogonLockout | None = None,
                 clock_problem: Callable[[], str | None] = lambda: None,
                 held_back: dict[str, int] | None = None,
                 complete_local_copy: Callable[[SessionConfig], int] = lambda cfg: 0,
                 schedule_problem: Callable[[str], str | None] = lambda text: None,
                 away: set[str] | None = None, native: ModuleType | None = None) -> None:
        """``clock_problem``: why Logons are refused now (this host's clock disagrees with the
        datastore's: ``datastore/clock.py``), or None. ``held_back``: per session (SessionID
        text), the first number whose entry QuickFIX was given at takeover (``takeover_preload``);
        ``complete_local_copy`` puts the older entries back (``filestore.complete_header``).
        ``native``: the send path in C++ (``fixgw.sendpath``); QuickFIX's acceptor must then
        be given ``engine_application()`` and ``engine_store(...)``. Its store answers a
        ResendRequest from Redis, so nothing held back at takeover needs putting back."""
        super().__init__()
        self.native = native
        self._inbound = inbound_reader(native)  # an inbound message's fields, read once
        self._held_back = dict(held_back or {}) if native is None else {}
        self.schedule_problem = schedule_problem  # why a session may not log on now (its group, its schedule)
        # Sessions listed but served by another group (key texts): nothing of theirs is stored here
        # (their keys are not this gateway's to write); only a refused Logon's Logout is ever sent.
        self.away = away if away is not None else set()
        self._password_changed: set[str] = set()  # sessions whose Logon answer says the password changed
        # When each session last received and sent a message (time.time(); the admin API shows them)
        self.last_in: dict[str, float] = {}
        self.last_out: dict[str, float] = {}
        self.complete_local_copy = complete_local_copy
        self.clock_problem = clock_problem
        self.sessions = sessions  # by QuickFIX SessionID text
        # Looked up on every callback: built once (the profile showed them on the hot path).
        self._keys = {text: (cfg, cfg.key(namespace)) for text, cfg in sessions.items()}
        self._names = {text: str(key) for text, (_, key) in self._keys.items()}
        self.stores = stores  # by kind (fsg / dc): each is fenced by its own gateway lock
        self.namespace = namespace
        self.behaviour = behaviour
        self.metrics = metrics
        self.fatal = fatal
        self.restore_local_copy = restore_local_copy  # rewrite a session's FileStore from Redis
        self.watch = CallbackWatch()
        self._last_sent = dict(last_sent)  # our view of lastSentSeqNum per session, to spot resets
        self._logon_target: dict[SessionKey, int] = {}
        # Per session, not process-wide: a session's outbound numbers are checked and stored in
        # order, and no session waits for another's round trip.
        self._persist_locks = {cfg.key(namespace): threading.Lock() for cfg in sessions.values()}
        self.intake = Intake(fatal, metrics.target, self.deliver_many,
                             clients=[s.client for s in stores.values()], linger=linger)
        # Held by any thread but a session's own while it calls into that session, so the
        # restore after a refused Logon never runs beside a dispatcher send.
        self._send_locks = {text: threading.Lock() for text in sessions}
        # Group commit (DESIGN §7): the delivery a thread is sending to a session right now,
        # for toApp to recognise; the highest number each session has put on the wire; and the
        # numbers of the last batch sent, whose unsent marks the next batch removes.
        # Keyed by thread: QuickFIX calls toApp on the thread that called sendToTarget, for that
        # message, so the thread alone pairs them (and toApp need not ask the SessionID its name).
        self._in_flight: dict[int, tuple[str, SessionMessage]] = {}
        self._scratch = threading.local()  # each sending thread's reusable message (``_message``)
        self._kept_ids: dict[int, tuple[fix.SessionID, str]] = {}  # ``session_id``: by id(), with their text
        self._sent_up_to = dict(last_sent)
        self._sent_marks: dict[SessionKey, list[int]] = {}
        self._delivery_failed: set[str] = set()
        self._vetoed: dict[str, set[str]] = {}  # inbox ids committed but not sent, by session (``_one_by_one``)
        self._silent_since: dict[str, float] = {}  # sessions held by a connection not logged on
        self.drops = EngineDrops()  # connections told to close from another thread than their own
        self.lockout = lockout or LogonLockout(5, 60.0)  # refused credentials per session
        self._logged_on_once = False
        self.stopping = threading.Event()
        self._restores: list[threading.Thread] = []  # restores of a local copy after a refused Logon
        self._faults_injected: set[str] = set()
        for _, key in self._keys.values():  # (0 from the start: an alert can tell "down" from "never seen")
            metrics.logged_on.labels(str(key)).set(0)
            metrics.in_schedule.labels(str(key)).set(1)  # (a schedule's watch says otherwise)

    # --- lookups ----------------------------------------------------------------------

    def _session(self, sid: fix.SessionID) -> tuple[SessionConfig, SessionKey, SessionStore]:
        return self._session_of(sid)[1:]

    def _session_of(self, sid: fix.SessionID) -> tuple[str, SessionConfig, SessionKey, SessionStore]:
        """QuickFIX's text of ``sid``, and the session's settings, key and store."""
        kept = self._kept_ids.get(id(sid))
        text = kept[1] if kept is not None and kept[0] is sid else sid.toString()
        cfg, key = self._keys[text]
        return text, cfg, key, self.stores[cfg.gateway]

    def session_id(self, cfg: SessionConfig) -> fix.SessionID:
        """A SessionID of ``cfg``'s that this gateway keeps (so its ``id()`` is never another's):
        a group commit for it takes the session's text from here. Every call into the bindings
        lets go of the GIL, and under load getting it back took ~20 µs a call in the dispatcher
        (``SessionID.toString``, 0.5 µs alone): the fewer calls per message, the fewer waits."""
        sid = fix.SessionID(cfg.begin_string, cfg.sender_comp_id, cfg.target_comp_id)
        self._kept_ids[id(sid)] = (sid, sid.toString())
        return sid

    def _name(self, sid: fix.SessionID) -> str:
        text = sid.toString()
        return self._names.get(text, text)

    def _unexpected(self, where: str, sid: fix.SessionID, exc: BaseException) -> None:
        log.error("%s: %s failed: %s: %s", self._name(sid), where, type(exc).__name__, exc, exc_info=exc)
        self.metrics.callback_errors.labels(self._name(sid), where).inc()

    def onCreate(self, sid: fix.SessionID) -> None:  # noqa: N802 (QuickFIX's names)
        try:
            self._injected_fault("onCreate", always=True)
        except Exception as exc:  # noqa: BLE001 (never into the bindings)
            self._unexpected("onCreate", sid, exc)

    def _injected_fault(self, where: str, always: bool = False) -> None:
        """``FIXGW_TEST_FAIL_IN_CALLBACK``: raise here, once (fault tests only)."""
        if where in FAIL_IN_CALLBACK and (always or self._logged_on_once) and where not in self._faults_injected:
            self._faults_injected.add(where)
            raise RuntimeError(f"injected fault in {where} (FIXGW_TEST_FAIL_IN_CALLBACK)")

    def onLogon(self, sid: fix.SessionID) -> None:  # noqa: N802
        with self.watch.running("onLogon", self._name(sid)):
            try:
                self._logged_on_once = True
                self._injected_fault("onLogon")
                cfg, key, store = self._session(sid)
                self.metrics.logged_on.labels(str(key)).set(1)
                try:
                    store.record_connection_start(key)
                except StoreError as exc:
                    self.fatal(f"{key}: cannot record connectionStartTime: {exc}")
                log.info("%s logged on", key)
                self.behaviour.on_logon(sid, cfg)
            except Exception as exc:  # noqa: BLE001 (never into the bindings)
                self._unexpected("onLogon", sid, exc)

    def onLogout(self, sid: fix.SessionID) -> None:  # noqa: N802
        if LOGOUT_DELAY_S:
            time.sleep(LOGOUT_DELAY_S)
        engine_threads.let_go()
        with self.watch.running("onLogout", self._name(sid)):
            try:
                self._injected_fault("onLogout")
                cfg, key, store = self._session(sid)
                self.metrics.logged_on.labels(str(key)).set(0)
                log.info("%s logged out", key)
                if cfg.reset_on_logout or cfg.reset_on_disconnect:
                    self._reset(key, store, next_target=1)  # QuickFIX has reset its own store
                self.behaviour.on_logout(sid, cfg)
            except Exception as exc:  # noqa: BLE001
                self._unexpected("onLogout", sid, exc)

    def toAdmin(self, message: fix.Message, sid: fix.SessionID) -> None:  # noqa: N802
        self.last_out[sid.toString()] = time.time()
        with self.watch.running("toAdmin", self._name(sid)):
            try:
                self._injected_fault("toAdmin")
                if self._password_changed and sid.toString() in self._password_changed \
                        and message.getHeader().getField(MSG_TYPE) == "A":
                    self._password_changed.discard(sid.toString())
                    if sid.getBeginString().getValue() == "FIXT.1.1":
                        message.setField(SESSION_STATUS, "1")  # session password changed
                if self._names.get(sid.toString()) in self.away:
                    return  # the Logout refusing its Logon: sent, not stored (the session is not ours to write)
                self._persist(message, sid)
            except Exception as exc:  # noqa: BLE001
                # An admin message cannot be vetoed cleanly through the bindings: stop here.
                self.fatal(f"{self._name(sid)}: admin message not stored, not sent: {type(exc).__name__}: {exc}")

    def toApp(self, message: fix.Message, sid: fix.SessionID) -> None:  # noqa: N802
        in_flight = self._in_flight_delivery()
        text, delivery = in_flight if in_flight is not None else (sid.toString(), None)
        self.last_out[text] = time.time()
        with self.watch.running("toApp", self._names.get(text, text)):
            try:
                if FAIL_IN_CALLBACK:
                    self._injected_fault("toApp")
                if delivery is None or not delivery.seq:
                    stamp(message)
                if delivery is None or not self._sent_as_committed(message, text, delivery):
                    self._persist(message, sid, delivery)
            except NotReplicated as exc:
                # Stored, so its number is used: sending nothing and going on would reuse it. Stop;
                # the successor resends it from Redis when the counterparty asks.
                self.fatal(f"{self._name(sid)}: {exc}")
            except Exception as exc:  # noqa: BLE001 (StoreError or a bug: either way, not stored)
                key = self._name(sid)
                log.error("%s: message not stored, so not sent; disconnecting: %s: %s", key,
                          type(exc).__name__, exc)
                self.metrics.store_failures.labels(key).inc()
                if delivery is not None:
                    self._delivery_failed.add(text)
                    self._vetoed.setdefault(text, set()).add(delivery.inbox_id)  # (its inbox entry stays)
                threading.Thread(target=self._disconnect, args=(sid,), daemon=True).start()
                raise fix.DoNotSend() from None

    def _sent_as_committed(self, message: fix.Message, text: str, delivery: SessionMessage) -> bool:
        """The hot path of a group commit: QuickFIX is sending ``delivery`` under the number and
        with the bytes it was committed with (only SendingTime is QuickFIX's own: put back).
        A handful of calls into the bindings, no store I/O. False: it is a miss (``_persist``)."""
        if not delivery.seq:
            return False
        message.getHeader().setField(SENDING_TIME, delivery.sending_time)  # one call: no StringField made
        if wire_bytes(message) != delivery.raw:
            return False
        self._sent_committed(text, [delivery])
        return True

    def fromAdmin(self, message: fix.Message, sid: fix.SessionID) -> None:  # noqa: N802
        self.last_in[sid.toString()] = time.time()
        with self.watch.running("fromAdmin", self._name(sid)):
            try:
                self._injected_fault("fromAdmin")
                msg_type = message.getHeader().getField(MSG_TYPE)
                if msg_type == "A":
                    raw = message.toString()
                    problem = (logon_problem(raw) or self.clock_problem() or self.schedule_problem(sid.toString())
                               or self._credentials_problem(sid, raw))
                    if problem is not None:
                        self._refuse_logon(sid, problem)
                elif msg_type == "2" and self._held_back:
                    self._load_held_back(message, sid)
            except QUICKFIX_SIGNAL:
                raise  # RejectLogon: QuickFIX answers it with a Logout carrying the text
            except Exception as exc:  # noqa: BLE001 (never into the bindings)
                self._unexpected("fromAdmin", sid, exc)
                if message.getHeader().getField(MSG_TYPE) == "A":  # a Logon that could not be checked is refused
                    self._refuse_logon(sid, "could not be checked (internal error: see the gateway's log)")
            self._record_inbound_safely(message, sid, sid.toString(), None)

    def _load_held_back(self, request: fix.Message, sid: fix.SessionID) -> None:
        """A ResendRequest reaching below the entries QuickFIX was given at takeover: the older
        ones are put back and QuickFIX re-reads the session's files before it answers (on this,
        the session's own thread; no other thread sends meanwhile: its send lock). Were they not,
        QuickFIX would answer those numbers with a gap fill, and the reports would be lost to
        the client: if they cannot be put back, the process ends and a standby takes over."""
        text = sid.toString()
        below = self._held_back.get(text)
        if below is None or not request.isSetField(BEGIN_SEQ_NO) or int(request.getField(BEGIN_SEQ_NO)) >= below:
            return
        cfg, key = self._keys[text]
        started = time.perf_counter()
        try:
            with self._send_locks[text]:
                restored = self.complete_local_copy(cfg)
                session = fix.Session.lookupSession(sid)
                if session is None:
                    raise RuntimeError("QuickFIX has no session by that id")
                session.refresh()
        except Exception as exc:  # noqa: BLE001
            self.fatal(f"{key}: the stored messages below {below} could not be given to QuickFIX for a "
                       f"ResendRequest ({type(exc).__name__}: {exc}); a standby answers it")
            return
        del self._held_back[text]
        log.info("%s: a ResendRequest from %s reached below %d: the older messages were loaded (%d bytes of "
                 "entries) in %.3f s", key, request.getField(BEGIN_SEQ_NO), below, restored,
                 time.perf_counter() - started)

    def _refuse_logon(self, sid: fix.SessionID, problem: str) -> None:
        log.warning("%s: Logon refused: %s", self._name(sid), problem)
        self.metrics.refused_logons.labels(self._name(sid)).inc()
        self._refused_logon_cleanup(sid)
        raise fix.RejectLogon(f"Logon refused: {problem}")  # → Logout with this text

    def _credentials_problem(self, sid: fix.SessionID, raw: str) -> str | None:
        """Logon authentication (``SessionConfig.password_hash``), with ``credentials.LogonLockout``:
        refusals answered later and later, and a lockout after a run of them. The password is
        never logged."""
        cfg, key = self._keys[sid.toString()]
        fields = dict(split_fields(raw))
        if cfg.password_hash is None:
            if NEW_PASSWORD in fields:
                return "NewPassword (925): this session has no password to change"
            return None
        locked = self.lockout.locked_for(cfg.name)
        if locked:
            return f"too many refused Logons: locked for {locked:.0f}s more"
        current = self.stores[cfg.gateway].password_hash(key) or cfg.password_hash  # changed at a Logon, or configured
        problem = credentials_problem(fields, cfg.username, current)
        if problem is None:
            self.lockout.accepted(cfg.name)
            if NEW_PASSWORD in fields:
                return self._change_password(sid, cfg, key, fields[NEW_PASSWORD], fields.get(PASSWORD, ""))
            return None
        delay, locks = self.lockout.refused(cfg.name)
        if locks:
            log.warning("%s: locked for %.0fs after %d refused Logons in a row", self._name(sid), self.lockout.lock_s,
                        self.lockout.after)
            self.metrics.logon_lockouts.labels(self._name(sid)).inc()
        time.sleep(delay)
        return problem

    def _change_password(self, sid: fix.SessionID, cfg: SessionConfig, key: SessionKey, new: str,
                         old: str) -> str | None:
        """Logon with NewPassword (925), its current password right: the new one's hash is stored
        with the session (it replaces the configured one, for this gateway and any successor)
        and the Logon goes on; FIXT's Logon answer says so (SessionStatus 1409=1). A new password
        refused by the policy refuses the Logon, the reason in its Logout."""
        problem = new_password_problem(new, old)
        if problem is not None:
            return f"NewPassword (925) refused: {problem}"
        self.stores[cfg.gateway].set_password_hash(key, hash_password(new))
        self._password_changed.add(sid.toString())
        log.info("%s: password changed at Logon", key)
        return None

    def fromApp(self, message: fix.Message, sid: fix.SessionID) -> None:  # noqa: N802
        engine_threads.keep()
        text = sid.toString()
        self.last_in[text] = time.time()
        with self.watch.running("fromApp", self._names.get(text, text)):
            parsed: Inbound | None = None
            try:
                if FAIL_IN_CALLBACK:
                    self._injected_fault("fromApp")
                cfg, _ = self._keys[text]
                parsed = self._inbound(message)
                self.behaviour.on_app_message(parsed, sid, cfg)
            except QUICKFIX_SIGNAL:
                raise  # a session-level reject QuickFIX builds itself (and records the number)
            except Exception as exc:  # noqa: BLE001
                self._unexpected("fromApp", sid, exc)
                self._refuse(message, sid, f"request not processed: {type(exc).__name__}")
            # Recorded only once the message is handled: a crash in between leaves the number
            # unrecorded, so after takeover the counterparty is asked to resend it (PossDup)
            # and handling it again is idempotent (ClOrdID window, deterministic command id).
            # Recorded first, a crash in between would lose the message.
            self._record_inbound_safely(message, sid, text, parsed)

    def _refuse(self, message: fix.Message, sid: fix.SessionID, text: str) -> None:
        """BusinessMessageReject for a request the behaviour failed on; best effort."""
        try:
            header = message.getHeader()
            reject = business_reject(header.getField(MSG_SEQ_NUM), header.getField(MSG_TYPE), text)
            fix.Session.sendToTarget(reject, sid)
        except Exception as exc:  # noqa: BLE001
            self._unexpected("reject", sid, exc)

    # --- refused Logons ------------------------------------------------------------------

    def _refused_logon_cleanup(self, sid: fix.SessionID) -> None:
        """Put QuickFIX's local copy of the session back as Redis has it, once the refused
        connection is gone.

        A refused Logon must leave no trace but the Logout that answered it, and QuickFIX
        leaves two: it resets its store for ResetSeqNumFlag=Y *before* it checks the Logon
        (so ``34=0|141=Y`` from a stranger wiped the live session's copy), and it counts a
        Logon it rejected as received. Redis recorded neither, so the copy is rebuilt from
        Redis while this thread holds the session's registration (a connection arriving
        meanwhile is turned away and its client reconnects).
        """
        cfg, key, _ = self._session(sid)

        def restore() -> None:
            session = self._register(sid)
            if session is None:
                log.error("%s: could not restore the local copy after a refused Logon", key)
                return
            try:
                with self._send_locks[sid.toString()]:
                    self.restore_local_copy(cfg)
                    self._held_back.pop(sid.toString(), None)  # (the copy is whole again)
                    session.refresh()
                log.info("%s: local copy restored from Redis after a refused Logon", key)
            except Exception as exc:  # noqa: BLE001
                self._unexpected("restore after refused Logon", sid, exc)
            finally:
                fix.Session.unregisterSession(sid)

        thread = threading.Thread(target=restore, name=f"restore-{key}", daemon=True)
        self._restores = [t for t in self._restores if t.is_alive()] + [thread]
        thread.start()

    def adopt(self, cfg: SessionConfig, last_sent: int) -> None:
        """A session moved here while this gateway serves (``fixgw-admin move-session``): QuickFIX's
        copy of it rebuilt from Redis, as a takeover would (the session cannot be logged on: its
        Logons were refused until now)."""
        sid = fix.SessionID(cfg.begin_string, cfg.sender_comp_id, cfg.target_comp_id)
        key = cfg.key(self.namespace)
        session = self._register(sid)
        if session is None:
            raise RuntimeError(f"{key}: QuickFIX's session is held by a connection")
        try:
            with self._send_locks[sid.toString()], self._persist_locks[key]:
                self.restore_local_copy(cfg)
                self._held_back.pop(sid.toString(), None)
                self._last_sent[key] = last_sent
                self._sent_marks.pop(key, None)
                session.refresh()
        finally:
            fix.Session.unregisterSession(sid)

    def _register(self, sid: fix.SessionID, within_s: float = 10.0) -> Any:
        """QuickFIX's session ``sid`` registered to this thread, so no connection takes it while
        its local copy is rebuilt (``unregisterSession`` after); None if a connection held it
        for ``within_s`` or the gateway is stopping."""
        deadline = time.monotonic() + within_s
        session = fix.Session.registerSession(sid)  # None while a connection holds it
        while session is None and time.monotonic() < deadline and not self.stopping.is_set():
            time.sleep(0.01)
            session = fix.Session.registerSession(sid)
        return session

    def quiesce(self) -> None:
        """Before the acceptor stops: no restore of a session's local copy may run beside its
        teardown (the bindings crashed when one did)."""
        self.stopping.set()
        for thread in list(self._restores):
            thread.join(5)

    # --- persistence ------------------------------------------------------------------

    def _persist(self, message: fix.Message, sid: fix.SessionID, delivery: SessionMessage | None = None) -> None:
        header = message.getHeader()
        cfg, key, store = self._session(sid)
        msg_type = header.getField(MSG_TYPE)
        seq = int(header.getField(MSG_SEQ_NUM))
        if delivery is None and _field(header, POSS_DUP) == "Y":
            self.metrics.sent(str(key), msg_type, 0)
            return  # a resend: the original is stored already
        with self._persist_locks[key]:
            if delivery is not None and delivery.seq:
                self.metrics.group_commit_misses.labels(str(key)).inc()
            raw = wire_bytes(message)
            last = self._last_sent.get(key, 0)
            if seq == 1 and last >= 1:
                # QuickFIX only numbers a message 1 after it has reset its own store (ResetSeqNumFlag,
                # ResetOnLogon, a new session period).
                if msg_type != "A":
                    # ...and then refused the Logon (its answer is not a Logon): the live session
                    # stays as Redis has it. This Logout belongs to no session, so it is the one
                    # message sent unstored; QuickFIX's copy is restored from Redis after it.
                    log.warning("%s: Logon refused after QuickFIX reset its copy; answer not stored", key)
                    self._refused_logon_cleanup(sid)
                    return
                # ...for a Logon it accepted: Redis starts a new FIX session too, first.
                self._reset(key, store, next_target=self._logon_target.pop(key, 1))
                last = 0
            record = OutboundRecord(seq, time.time_ns(), msg_type.encode(), raw)
            if seq > last and delivery is None:
                store.commit_outbound(key, record)
            else:
                # A number a batch committed ahead but nobody sent (or a delivery that lost its
                # number to such a message): the store checks it is unsent and frees the
                # displaced delivery's inbox entry. Anything else is refused (SequenceReuse).
                store.commit_displacing(key, record, self._sent_up_to.get(key, 0),
                                        *((delivery.inbox_id, delivery.order_id, delivery.order_view, delivery.index)
                                          if delivery is not None else ()))
            self._last_sent[key] = max(seq, last)
            self._sent_up_to[key] = seq
        self.metrics.sent(str(key), msg_type, seq)

    def _reset(self, key: SessionKey, store: SessionStore, next_target: int) -> None:
        try:
            with self.intake.resetting(key):
                store.reset(key, next_target=next_target)
        except StoreError as exc:
            self.fatal(f"{key}: cannot reset the stored session: {exc}")
        self._last_sent[key] = self._sent_up_to[key] = 0
        self._sent_marks.pop(key, None)
        log.info("%s: new FIX session: stored sequence numbers reset", key)

    def _record_inbound_safely(self, message: fix.Message, sid: fix.SessionID, text: str,
                               parsed: Inbound | None) -> None:
        # No store I/O here (the recorder writes behind and fails fast itself): only a bug can raise.
        try:
            self._record_inbound(message, sid, text, parsed)
        except Exception as exc:  # noqa: BLE001
            self._unexpected("record inbound", sid, exc)

    def _record_inbound(self, message: fix.Message, sid: fix.SessionID, text: str, parsed: Inbound | None) -> None:
        cfg, key = self._keys[text]
        if self._names[text] in self.away:
            return  # a Logon refused: the session is served by another group, its numbers are not ours
        if parsed is not None and parsed.seq:
            msg_type, seq = parsed.msg_type, int(parsed.seq)
        else:
            header = message.getHeader()
            msg_type, seq = header.getField(MSG_TYPE), int(header.getField(MSG_SEQ_NUM))
        self.metrics.received(self._names[text], msg_type)
        target: int | None = None
        if msg_type not in ADMIN_TYPES:
            # QuickFIX hands an application message over only in sequence (Session::verify
            # queues one too high and drops one too low first): it is the expected number.
            target = seq + 1
        elif msg_type == "4":  # SequenceReset (gap fill or reset): NewSeqNo moves the target forward
            new_seq = int(message.getField(NEW_SEQ_NO))
            expected = fix.Session.lookupSession(sid).getExpectedTargetNum()
            target = new_seq if new_seq > expected else None
        elif seq == fix.Session.lookupSession(sid).getExpectedTargetNum():  # QuickFIX increments after this callback
            target = seq + 1
        if target is None:
            return
        if target > MAX_SEQ_NUM:
            # The store keeps u32 numbers (seed 004): a counterparty that jumps past them is
            # logged out with the reason instead of corrupting the state.
            self.kick(sid, f"MsgSeqNum beyond {MAX_SEQ_NUM} cannot be stored")
            return
        if msg_type == "A":
            self._logon_target[key] = target
        self.intake.record(key, self.stores[cfg.gateway], target)  # written behind, after the message's work (intake.py)

    def disconnect_all(self, reason: str) -> None:
        """Close every session's connection, saying why in the log (not in a Logout)."""
        for text, cfg in self.sessions.items():
            sid = fix.SessionID(cfg.begin_string, cfg.sender_comp_id, cfg.target_comp_id)
            session = fix.Session.lookupSession(sid)
            if session is not None and session.isLoggedOn():
                log.warning("%s: disconnected: %s", self._names[text], reason)
                self._disconnect(sid)

    def start_new_period(self, sid: fix.SessionID, period_start_ns: int, keep_ms: int) -> bool:
        """A scheduled session's new period (``fixgw/schedule.py``): the engine logs the session
        out if it is on and starts its copy again at 1 (its Logout stored in the old period), then
        Redis starts the period once (``SessionStore.start_period``). False: Redis had it already."""
        text = sid.toString()
        cfg, key = self._keys[text]
        store = self.stores[cfg.gateway]
        with self._send_locks[text]:
            session = fix.Session.lookupSession(sid)
            if session is not None:
                self.drops.note(sid)
                session.reset()  # Logout if on, disconnect, the engine's numbers back to 1
            with self.intake.resetting(key):
                started = store.start_period(key, period_start_ns, keep_ms)
            self._last_sent[key] = self._sent_up_to[key] = 0
            self._sent_marks.pop(key, None)
        return started

    def kick(self, sid: fix.SessionID, reason: str) -> None:
        """Log the session out with ``reason`` (QuickFIX sends the Logout on its next tick)."""
        log.warning("%s: logging out: %s", self._name(sid), reason)
        session = fix.Session.lookupSession(sid)
        if session is not None:
            session.logout(reason)
            threading.Timer(2.0, session.logon).start()  # enabled again for the next Logon

    def drop_silent_connections(self, limit_s: float) -> None:
        """Disconnect a connection that has held a session for ``limit_s`` without logging on.

        QuickFIX cannot reject a malformed Logon before logon: it answers nothing and keeps
        the connection, and with it the session, so the real client could never log on.
        Called periodically by the gateway.
        """
        now = time.monotonic()
        for text, cfg in self.sessions.items():
            sid = fix.SessionID(cfg.begin_string, cfg.sender_comp_id, cfg.target_comp_id)
            session = fix.Session.lookupSession(sid)
            if session is None or not fix.Session.isSessionRegistered(sid) or session.isLoggedOn():
                self._silent_since.pop(text, None)
                continue
            since = self._silent_since.setdefault(text, now)
            if now - since > limit_s:
                log.warning("%s: connection did not log on within %.0fs; disconnected", self._name(sid), limit_s)
                self._silent_since.pop(text, None)
                self._disconnect(sid)

    def _disconnect(self, sid: fix.SessionID) -> None:
        session = fix.Session.lookupSession(sid)
        if session is not None:
            with self._send_locks[sid.toString()]:
                self.drops.note(sid)
                session.disconnect()
