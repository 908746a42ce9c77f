"""Group commit: a batch of messages for many sessions committed to the session store in one
round trip per datastore, then sent, each session's outcome its own (docs/architecture.md, the
write path). Mixed into ``GatewayApplication``, whose ``toApp`` recognises each message sent here
as the one committed (``_in_flight``)."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack, nullcontext
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import quickfix as fix

from sessionstore import OutboundRecord, SequenceReuse, SessionKey, SessionStore, StoreError
from sessionstore.store import batch_outcome, write_together

from .config import SessionConfig
from .context import die
from .fixmsg import SessionMessage, filled, filled_body, from_text, sending_time
from .inputs import MAX_SEQ_NUM
from .intake import InboundNumbers, Intake

log = logging.getLogger("fixgw.session")

# Fault tests only (tests/test_e2e_faults.py): the process ends between a batch's commit and
# its sends for this session (``namespace/gateway/name``), as a SIGKILL there would.
CRASH_AFTER_BATCH_COMMIT = os.environ.get("FIXGW_TEST_CRASH_AFTER_BATCH_COMMIT", "")

# Fault tests only (tests/test_e2e_faults.py): after the first message of every batch of more than
# one for this session, a Heartbeat is sent, taking the next number as QuickFIX's own would.
ADMIN_IN_BATCH = os.environ.get("FIXGW_TEST_ADMIN_IN_BATCH", "")

# Fault tests only (tests/test_hostile_peers.py): a fault injected in toApp
# (FIXGW_TEST_FAIL_IN_CALLBACK) must reach it, so the native send path hands every message to
# the Python toApp, as a miss, and a veto there holds back the rest of its batch.
TO_APP_FAULTS = "toApp" in os.environ.get("FIXGW_TEST_FAIL_IN_CALLBACK", "").split(",")



@dataclass(slots=True)
class _Outgoing:
    """One session's part of a group commit (``GatewayApplication.deliver_many``)."""

    sid: fix.SessionID
    text: str  # QuickFIX's SessionID text
    cfg: SessionConfig
    key: SessionKey
    store: SessionStore
    session: Any  # fix.Session, or None if QuickFIX has none by that id
    pending: list[SessionMessage]  # committed (or to commit), to send
    again: bool = False  # some were found delivered before: the rest go again, alone
    error: StoreError | None = None  # not stored: not sent, its entries are retried


class GroupCommit:
    """``deliver_many`` and ``answer``: what the dispatcher and the intake call to commit, then
    send; and what QuickFIX's acceptor is given for it (its application and its message store).
    The state is ``GatewayApplication``'s (declared here for the type checker)."""

    stores: dict[str, SessionStore]
    intake: Intake
    _keys: dict[str, tuple[SessionConfig, SessionKey]]
    _persist_locks: dict[SessionKey, threading.Lock]
    _send_locks: dict[str, threading.Lock]
    _last_sent: dict[SessionKey, int]
    _sent_marks: dict[SessionKey, list[int]]
    _in_flight: dict[int, tuple[str, SessionMessage]]
    _scratch: threading.local
    _delivery_failed: set[str]
    _vetoed: dict[str, set[str]]
    _sent_up_to: dict[SessionKey, int]
    _names: dict[str, str]
    last_out: dict[str, float]
    native: ModuleType | None  # the send path in C++ (fixgw.sendpath), or None: QuickFIX's bindings
    metrics: Any  # GatewayMetrics

    def _session_of(self, sid: fix.SessionID) -> tuple[str, SessionConfig, SessionKey, SessionStore]:
        raise NotImplementedError

    def engine_application(self) -> Any:
        """What QuickFIX's acceptor is given: this application, or with the native send path a
        C++ one in front of it, which checks the committed sends itself and passes everything
        else here."""
        return self.native.front(self) if self.native is not None else self

    def engine_store(self, files: fix.FileStoreFactory) -> Any:
        """What QuickFIX's acceptor is given as its message store: the session's files
        (``filestore.py``, written from Redis at takeover), or with the native send path a store
        that writes nothing (Redis holds every message it is given: the group commit, toApp,
        toAdmin) and answers a ResendRequest from Redis (``stored_messages``)."""
        return self.native.committed_store(files, self.stored_messages) if self.native is not None else files

    def stored_messages(self, text: str, first: int, last: int) -> list[bytes]:
        """The session's stored messages numbered ``first``..``last``, whole, in order (the native
        store's ResendRequests, on the session's thread). Raises when Redis cannot say: QuickFIX
        then disconnects rather than gap-fill what it could not read."""
        cfg, key = self._keys[text]
        found = [record.body for record in self.stores[cfg.gateway].iter_messages(key, first, last)]
        log.info("%s: a ResendRequest for %d..%d answered from the session store (%d stored messages)",
                 key, first, last, len(found))
        return found

    def answer(self, sid: fix.SessionID, delivery: SessionMessage, inbound_seq: int | None = None,
               then: Callable[[], None] | None = None) -> None:
        """A behaviour's answer to an inbound message (the AT echo): group-committed and sent by
        the intake, with the inbound number it covers (``Intake.answer``); ``then`` runs once
        it is sent."""
        number = None
        if inbound_seq is not None and inbound_seq < MAX_SEQ_NUM:
            cfg, key = self._keys[sid.toString()]
            number = (key, self.stores[cfg.gateway], inbound_seq + 1)
        self.intake.answer(sid, delivery, number, then)

    def deliver_many(self, batches: list[tuple[fix.SessionID, list[SessionMessage]]], numbers: InboundNumbers | None = None
                     ) -> list[list[SessionMessage] | StoreError]:
        """Group commit, then send (DESIGN §7): every message of each session's batch, its inbox
        entry and its order view are committed in one script under the numbers QuickFIX will give
        them — every session's script in one round trip per datastore (a dispatcher cycle's
        order-entry sessions and drop copies together) — then each session's messages are sent;
        ``toApp`` only checks each one is what was committed. A delivery already in the
        session's inbox (sent before a crash) is dropped; a session whose batch did not commit
        as a whole is committed again on its own (``_commit_alone``).

        ``numbers`` (the intake's answers): each session's inbound number goes in its commit's
        script; ``numbers.written`` says which were stored (a batch committed again on its own
        leaves its number to the intake).

        Per session, in ``batches``' order: the deliveries it stored and sent (not those found
        delivered already), or the StoreError that kept its messages from being stored (its
        entries are then retried; the other sessions' were sent). A failed round trip raises."""
        outgoing = [_Outgoing(sid, *self._session_of(sid), fix.Session.lookupSession(sid), list(deliveries))
                    for sid, deliveries in batches]
        in_order = sorted(outgoing, key=lambda o: o.text)  # every session's locks taken in one order
        with ExitStack() as sending:
            for o in in_order:
                sending.enter_context(self._send_locks[o.text])
            with ExitStack() as numbering:
                for o in in_order:
                    numbering.enter_context(self._persist_locks[o.key])
                committing = [o for o in outgoing if o.pending]
                # (after the persist locks: a reset takes the numbers' lock holding its session's)
                with numbers if numbers is not None else nullcontext():
                    targets = [numbers.offered(o.key) if numbers is not None else None for o in committing]
                    replies = write_together([(o.store, [self._commit_call(o, target)])
                                              for o, target in zip(committing, targets)])
                    for o, [reply], target in zip(committing, replies, targets):
                        if self._committed(o, reply) and target is not None and numbers is not None:
                            numbers.stored(o.key)
            for o in outgoing:
                if o.again:
                    try:
                        self._commit_alone(o)
                    except StoreError as exc:
                        o.error = exc
            for o in outgoing:
                if o.error is None and o.pending:
                    self._send(o)
        return [o.error if o.error is not None else o.pending for o in outgoing]

    def _commit_call(self, o: _Outgoing, target: int | None = None) -> tuple[Any, ...]:
        """``o``'s group commit (``COMMIT_BATCH``), its deliveries numbered from QuickFIX's next
        sender number (under its persist lock) with the bytes QuickFIX will send; ``target``:
        the inbound number stored with it."""
        first = o.session.getExpectedSenderNum() if o.session is not None else 0
        stamp = sending_time()
        for i, d in enumerate(o.pending):
            self._prepare(o.cfg, d, first + i, stamp)
        records = [(OutboundRecord(d.seq, time.time_ns(), d.msg_type.encode(), d.raw), d.inbox_id,
                    d.order_id, d.order_view, d.index) for d in o.pending]
        return o.store.commit_batch_call(o.key, records, self._sent_marks.get(o.key, []), target)

    def _committed(self, o: _Outgoing, reply: Any) -> bool:
        """What ``o``'s group commit answered (under its persist lock): all stored (send them;
        returns True), some found delivered before (nothing was written: the rest again,
        alone), numbers that do not follow (one by one), or an error (not stored: its entries
        are retried)."""
        try:
            done = batch_outcome(reply)
        except SequenceReuse as exc:
            self._one_by_one(o, exc)
            return False
        except StoreError as exc:
            o.error = exc
            return False
        if done:
            o.pending = [d for d in o.pending if d.inbox_id not in done]
            o.again = bool(o.pending)
            return False
        self._sent_marks.pop(o.key, None)
        if vetoed := self._vetoed.get(o.text):
            vetoed.difference_update(d.inbox_id for d in o.pending)
        self._last_sent[o.key] = max(self._last_sent.get(o.key, 0), o.pending[-1].seq)
        self.metrics.batch_messages.observe(len(o.pending))
        return True

    def _commit_alone(self, o: _Outgoing) -> None:
        """``o``'s group commit on its own, until it goes through as a whole."""
        while o.again:
            o.again = False
            with self._persist_locks[o.key]:
                self._committed(o, o.store.write([self._commit_call(o)], raise_on_error=False)[0])

    def _one_by_one(self, o: _Outgoing, exc: SequenceReuse) -> None:
        """QuickFIX and Redis disagree on the next number (numbers committed ahead were never
        used): ``o``'s deliveries are sent one by one, each stored by ``toApp`` displacing what
        is unsent (``_persist``)."""
        log.warning("%s: group commit not possible (%s); one commit per message", o.key, exc)
        # In the inbox and not vetoed: sent. A delivery whose toApp vetoed it (not stored, so
        # not sent) kept the inbox entry of its commit, and the number it was committed under
        # is unsent: sent now, it takes whatever number QuickFIX gives it, displacing that one.
        sent = o.store.delivered_many(o.key, [d.inbox_id for d in o.pending]) - self._vetoed.pop(o.text, set())
        o.pending = [d for d in o.pending if d.inbox_id not in sent]
        for d in o.pending:
            d.seq = 0

    def _send(self, o: _Outgoing) -> None:
        """``o``'s committed deliveries onto the wire, in order (its send lock held)."""
        if CRASH_AFTER_BATCH_COMMIT == str(o.key):  # fault tests: dead between commit and send
            die(f"FIXGW_TEST_CRASH_AFTER_BATCH_COMMIT={o.key}", 9)
        self._delivery_failed.discard(o.text)
        message = self._message()
        try:
            i = 0
            while i < len(o.pending):
                d = o.pending[i]
                if o.text in self._delivery_failed:
                    # One was vetoed (not stored, not sent): the rest wait with it, so the
                    # session's reports keep their order when they are given again.
                    self._vetoed.setdefault(o.text, set()).add(d.inbox_id)
                    i += 1
                    continue
                admin_after = i == 0 and len(o.pending) > 1 and ADMIN_IN_BATCH == str(o.key)
                if self.native is not None:
                    i += self._send_natively(o, i, i + 1 if admin_after else len(o.pending))
                else:
                    # One at a time, so a message QuickFIX does not pass through toApp (a logged-out
                    # session about to reset) can never pair toApp with the wrong delivery.
                    self._in_flight[threading.get_ident()] = (o.text, d)
                    fix.Session.sendToTarget(from_text(d.text, into=message), o.sid)
                    i += 1
                if admin_after:
                    # Fault tests: an admin message takes a number inside the batch, as QuickFIX's
                    # own heartbeat may; the committed numbers after it must not go out as they are.
                    self._in_flight.pop(threading.get_ident(), None)
                    fix.Session.sendToTarget(from_text("35=0\x01"), o.sid)
        finally:
            self._in_flight.pop(threading.get_ident(), None)
        vetoed = self._vetoed.get(o.text, set())  # (their numbers stay marked unsent: displaceable)
        self._sent_marks[o.key] = [d.seq for d in o.pending if d.seq and d.inbox_id not in vetoed]
        if o.text in self._delivery_failed:
            o.error = StoreError(f"{o.key}: a delivery was not stored; its entry is retried")

    def _send_natively(self, o: _Outgoing, start: int, end: int) -> int:
        """``o.pending[start:end]`` sent in C++ (``fixgw/_sendpath.cpp``), each checked against
        its committed bytes there, until one is a miss: that one goes through ``toApp`` here, its
        delivery in flight as in the one-at-a-time path, and the rest are left to the caller.
        Returns how many were sent or tried."""
        assert self.native is not None
        chunk = o.pending[start:end]
        ident = threading.get_ident()

        def miss(k: int) -> None:  # (from C++, just before this delivery reaches toApp)
            self._in_flight[ident] = (o.text, chunk[k])

        outcomes = self.native.send_committed(o.sid, [d.text for d in chunk],
                                              [d.raw if d.seq and not TO_APP_FAULTS else b"" for d in chunk],
                                              [d.sending_time for d in chunk], miss)
        self._sent_committed(o.text, [d for d, outcome in zip(chunk, outcomes) if outcome == "m"])
        return len(outcomes)

    def _sent_committed(self, text: str, deliveries: list[SessionMessage]) -> None:
        """``deliveries`` (of the session ``text``, in order) went out exactly as committed."""
        if not deliveries:
            return
        self.last_out[text] = time.time()
        _, key = self._keys[text]
        with self._persist_locks[key]:
            self._sent_up_to[key] = deliveries[-1].seq
        name = self._names[text]
        for d in deliveries:
            self.metrics.sent(name, d.msg_type, d.seq)

    def _message(self) -> fix.Message:
        """This sending thread's message, refilled for each delivery (``from_text``). QuickFIX
        keeps nothing of it after ``sendToTarget`` (it stores and sends the string), and
        ``setString`` clears what the previous send filled in. The profile: constructing a
        ``fix.Message`` per report was the costliest call into the bindings on the send path."""
        message: fix.Message | None = getattr(self._scratch, "message", None)
        if message is None:
            message = self._scratch.message = fix.Message()
        return message

    def _prepare(self, cfg: SessionConfig, d: SessionMessage, seq: int, stamp: str) -> None:
        """``d``'s bytes as QuickFIX will send them under ``seq`` (its header filled then)."""
        d.seq, d.sending_time = seq, stamp
        sender, target = cfg.sender_comp_id, cfg.target_comp_id
        assert sender is not None and target is not None, "GatewaySettings fills them in"
        if not d.plain:
            d.raw = filled(d.text, cfg.begin_string, sender, target, seq, stamp)
        else:  # (the extension's makes the same bytes, a quarter of the time: tests/test_fixmsg.py)
            fill = self.native.filled_body if self.native is not None else filled_body
            d.raw = fill(d.text, cfg.begin_string, sender, target, seq, stamp)

    def _in_flight_delivery(self) -> tuple[str, SessionMessage] | None:
        """The session and delivery this thread is sending right now, if any (taken once)."""
        return self._in_flight.pop(threading.get_ident(), None)

    # --- QuickFIX callbacks -----------------------------------------------------------

