"""The gateway's intake stage: what inbound messages make the gateway write, in batches, off
QuickFIX's threads (DESIGN §7).

QuickFIX's session threads only validate and translate; they hand the rest here and return:

- **work** (an order's ClOrdID claim and command append, a cancel's lookup): written in
  arrival order, one packed round trip per datastore for every piece of work since the last
  cycle. Work that must *read* first (a cancel looks up its original order) cuts the batch, so
  it sees everything before it written;
- **answers** a behaviour sends (the AT echo): one group commit per session, then sent;
- **inbound sequence numbers**: the newest number of each session, written *last* in a cycle:
  behind the work in its own round trip when that is all the cycle writes (one datastore, no
  answers, every command in its claim's script: the embedded default's order path); in the
  session's group commit when the cycle answers it (``InboundNumbers``); else in a round trip
  of their own at the end.

Why the number goes last: the stored targetSeqNum says from where a successor asks the
counterparty to resend. Written late (or lost in a crash), the successor asks for messages
that were already handled, and handling them again is idempotent (the ClOrdID window,
deterministic command ids, AT's PossResend check). Written *before* the work it covers, a
crash would lose a message. Every piece of work is queued before its message's number (the
callback queues work, then the number), a cycle takes both at once, and writes the number
after the work and its answers.

Answers the work gives itself (a refusal: a duplicate ClOrdID, a claim the store did not take)
are committed in the same cycle, offered the number; a number riding behind the work is written
only if each claim of its session there holds its own request (``TARGET_IF_CLAIMED``), else it
goes with the answer. Stored first, a crash before the answer left the request neither answered
nor asked for again.

In the answers' group commit the number is stored in the same script as the answers to the
messages it covers: a crash leaves both or neither, so the counterparty never sends an answered
message again (written after the answers were sent, a crash between the two had the successor
ask for those messages again, and the AT echo answered them twice).

Resets: a session's reset must not be overtaken by an older number still on its way, so
``resetting`` holds the cycle off while the reset is written.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

import quickfix as fix

from datastore.connection import RedisClient, own_connections
from matching.linger import Linger
from sessionstore import SessionKey, SessionStore, StoreError

from .fixmsg import SessionMessage

log = logging.getLogger("fixgw.intake")


class OutcomeUnknown(Exception):
    """Raised by ``Work.settle``: whether the work's write landed cannot be told (the datastore
    took it on its primary but no replica confirmed it, or it cannot be read back). Any answer
    would be a guess — a refusal the write contradicts once a replica has it — so the request is
    neither answered nor numbered and the gateway stops: its successor asks the counterparty
    for the request again and finds what landed (a PossDup resend republishes the claim's own
    command; with no claim, the request is new)."""


class Work(Protocol):
    """A piece of inbound work: the calls it writes, and what it does with their replies."""

    store: SessionStore

    @property
    def reads_first(self) -> bool:
        """``prepare`` reads the store: everything queued before must be written first."""
        ...

    def prepare(self) -> list[tuple[Any, ...]]:
        """The calls to write for this work (may be none: answered already)."""
        ...

    def settle(self, replies: list[Any] | StoreError) -> None:
        """After the write: the replies in order (an error reply as a StoreError in its
        place), or the error that stopped the round trip. Raises ``OutcomeUnknown`` when that
        error leaves unknown whether the work landed."""
        ...

    @property
    def complete_when_written(self) -> bool:
        """After ``prepare``: once its calls are written, nothing the message needs is written
        later in the cycle (no command deferred to another datastore), so its inbound number
        may ride in the same round trip, behind them."""
        ...

    def failed(self, exc: Exception) -> None:
        """A bug in ``prepare``/``settle``: answer the request with the reason, best effort."""
        ...

    def claimed_as(self) -> tuple[SessionKey, str, str] | None:
        """After ``prepare``: the (session, ClOrdID, value) its calls claim, if they claim one. A
        number riding behind the work is written only if the claim is found holding it."""
        ...


class InboundNumbers:
    """A cycle's inbound numbers, offered to its answers' group commits (``deliver``): entered,
    it holds the numbers' lock (no reset meanwhile) and offers each session's number unless a
    reset came after it was taken; the commit that stores one says so (``stored``). Numbers not
    stored that way are written on their own at the end of the cycle."""

    def __init__(self, lock: threading.Lock, numbers: Callable[[], dict[SessionKey, int]]) -> None:
        self._lock, self._numbers = lock, numbers  # (``numbers`` is called holding ``lock``)
        self._offered: dict[SessionKey, int] = {}
        self.written: dict[SessionKey, int] = {}

    def __enter__(self) -> InboundNumbers:
        self._lock.acquire()
        self._offered = self._numbers()
        return self

    def __exit__(self, *exc: object) -> None:
        self._lock.release()

    def offered(self, session: SessionKey) -> int | None:
        return self._offered.get(session)

    def stored(self, session: SessionKey) -> None:
        """``session``'s commit stored its offered number (call it before leaving)."""
        self.written[session] = self._offered[session]


Deliver = Callable[[list[tuple[fix.SessionID, list[SessionMessage]]], InboundNumbers], list[Any]]


class Intake:
    def __init__(self, fatal: Callable[[str], None], on_written: Callable[[SessionKey, int], None],
                 deliver: Deliver,
                 clients: Sequence[RedisClient] = (), linger: Linger | None = None) -> None:
        self._fatal = fatal
        self._linger = linger or Linger(0.0, 1)  # the pause after a small cycle (matching/linger.py)
        self._clients = clients  # the datastores it writes: a connection of its own to each
        self._on_written = on_written
        self._deliver = deliver  # GatewayApplication.deliver_many: group commits, then sends
        self._work: list[Work] = []
        self._answers: dict[str, tuple[fix.SessionID, list[SessionMessage]]] = {}
        # Answers the cycle's own work gave (a refusal, a status): committed in the same cycle,
        # with the numbers, which must not be stored ahead of them.
        self._cycle_thread: int | None = None
        self._produced: dict[str, tuple[fix.SessionID, list[SessionMessage]]] = {}
        self._produced_numbers: dict[SessionKey, tuple[SessionStore, int]] = {}
        self._produced_thens: list[Callable[[], None]] = []
        self._thens: list[Callable[[], None]] = []  # run once the answers queued with them are sent
        self._targets: dict[SessionKey, tuple[SessionStore, int]] = {}
        self._queued: dict[SessionKey, int] = {}  # the highest number queued per session since its last reset
        self._cond = threading.Condition()
        self._io = threading.Lock()  # held by the numbers' write and by a reset
        self._resets: dict[SessionKey, int] = {}  # resets per session, to spot a number taken before one
        self._stopped = False
        # Run after each cycle's work, before its inbound numbers are written (the order
        # path publishes the cycle's commands to partitions not colocated with the store).
        self.after_work: Callable[[], None] | None = None
        self._thread = threading.Thread(target=self._run, name="intake", daemon=True)
        self._thread.start()

    # --- called from QuickFIX's threads ------------------------------------------------

    def submit(self, work: Work) -> None:
        with self._cond:
            self._work.append(work)
            self._cond.notify()

    def answer(self, sid: fix.SessionID, delivery: SessionMessage,
               number: tuple[SessionKey, SessionStore, int] | None = None,
               then: Callable[[], None] | None = None) -> None:
        """Send ``delivery`` (an ``application.SessionMessage``) after a group commit. ``number``: the
        inbound number answering it covers (the answered message's, plus one), queued with the
        answer so that the cycle taking the answer takes the number too and stores both in one
        commit — queued by the callback's ``record`` after it, a cycle could take the answer
        alone, and a crash before the next cycle had the message sent and answered again.
        ``then``: what to do once the answer is sent (a mass cancel's cancels, which must not
        overtake its report)."""
        with self._cond:
            if threading.get_ident() == self._cycle_thread:  # the cycle's own work answered (``flush``)
                self._produced.setdefault(sid.toString(), (sid, []))[1].append(delivery)
                if then is not None:
                    self._produced_thens.append(then)
                if number is not None:
                    session, store, target = number
                    if target > self._produced_numbers.get(session, (store, 0))[1]:
                        self._produced_numbers[session] = (store, target)
                return
            self._answers.setdefault(sid.toString(), (sid, []))[1].append(delivery)
            if then is not None:
                self._thens.append(then)
            if number is not None:
                self._queue_number(*number)
            self._cond.notify()

    def record(self, session: SessionKey, store: SessionStore, target: int) -> None:
        """``target`` is the next number expected from ``session``'s counterparty; call it
        after the message's work and answers were queued."""
        with self._cond:
            self._queue_number(session, store, target)
            self._cond.notify()

    def _queue_number(self, session: SessionKey, store: SessionStore, target: int) -> None:
        """(Under ``_cond``.) A number no higher than one queued before (an answer's) adds
        nothing: numbers only grow within a FIX session, and a reset forgets them."""
        if target <= self._queued.get(session, 0):
            return
        self._queued[session] = target
        self._targets[session] = (store, target)

    @contextmanager
    def resetting(self, session: SessionKey) -> Iterator[None]:
        """Around a session reset: its unwritten number is dropped, and a number taken by a
        cycle before the reset is never written after it. Only the numbers' write holds
        ``_io``: a cycle calls into QuickFIX (answers, refusals), and a reset runs on a
        QuickFIX thread that may hold the session's lock — waiting on each other would deadlock."""
        with self._io:
            with self._cond:
                self._targets.pop(session, None)
                self._queued.pop(session, None)
                self._resets[session] = self._resets.get(session, 0) + 1
            yield

    def alive(self) -> bool:
        return self._thread.is_alive()

    # --- the cycle ---------------------------------------------------------------------

    def flush(self) -> None:
        """Write everything queued now (also called on a clean stop)."""
        with self._cond:
            work, self._work = self._work, []
            answers, self._answers = self._answers, {}
            thens, self._thens = self._thens, []
            targets, self._targets = self._targets, {}
            resets = dict(self._resets)
        # The numbers may ride behind the work, in its round trip, when nothing else must be
        # written before them: no answers to commit, one datastore, every message complete once
        # its calls are written (the embedded default's order path). Else they go last, alone.
        riding = targets if not answers else None
        self._cycle_thread = threading.get_ident()
        try:
            written = self._write_work(work, riding, resets)
        finally:
            self._cycle_thread = None
        targets = {session: pair for session, pair in targets.items() if session not in written}
        if self.after_work is not None:
            self.after_work()
        # What the work answered itself (a duplicate ClOrdID, a claim the store did not take) is
        # committed now, with the numbers that cover it: were the numbers stored first and the
        # process lost before the answer, the request would be neither answered nor asked for again.
        with self._cond:
            produced, self._produced = self._produced, {}
            produced_numbers, self._produced_numbers = self._produced_numbers, {}
            thens += self._produced_thens
            self._produced_thens = []
        for text, (sid, deliveries) in produced.items():
            answers.setdefault(text, (sid, []))[1].extend(deliveries)
        for session, (store, target) in produced_numbers.items():
            if session not in written and target > targets.get(session, (store, 0))[1]:
                targets[session] = (store, target)
        if answers:
            batches = list(answers.values())
            offer = InboundNumbers(self._io, lambda: {session: target for _, numbers in
                                                      self._numbers(targets, resets).values()
                                                      for session, target in numbers.items()})
            try:  # every session's group commit in one round trip, each with its inbound number
                results = self._deliver(batches, offer)
            except StoreError as exc:
                self._fatal(f"answers of {sorted(text for text in answers)} not stored: {exc}")
                return
            self._written(offer.written)
            targets = {session: pair for session, pair in targets.items() if session not in offer.written}
            failed = [(sid, r) for (sid, _), r in zip(batches, results) if isinstance(r, StoreError)]
            if failed:
                self._fatal("; ".join(f"{sid.toString()}: answers not stored: {r}" for sid, r in failed))
                return
        for then in thens:
            try:
                then()
            except Exception:  # noqa: BLE001 (one request's follow-up must not stop the cycle)
                log.exception("intake: follow-up of an answer failed")
        with self._io:
            for store, numbers in self._numbers(targets, resets).values():
                try:
                    store.set_next_target_seq_nums(numbers)
                except StoreError as exc:
                    self._fatal(f"inbound MsgSeqNums of {sorted(map(str, numbers))} not recorded: {exc}")
                    return
                self._written(numbers)

    def _numbers(self, targets: dict[SessionKey, tuple[SessionStore, int]], resets: dict[SessionKey, int]
                 ) -> dict[int, tuple[SessionStore, dict[SessionKey, int]]]:
        """The numbers to write, per store, without those taken before a reset (under ``_io``)."""
        by_store: dict[int, tuple[SessionStore, dict[SessionKey, int]]] = {}
        for session, (store, target) in targets.items():
            if self._resets.get(session, 0) == resets.get(session, 0):  # else: taken before a reset
                by_store.setdefault(id(store), (store, {}))[1][session] = target
        return by_store

    def _written(self, numbers: dict[SessionKey, int]) -> None:
        for session, target in numbers.items():
            self._on_written(session, target)

    def _write_work(self, work: list[Work], targets: dict[SessionKey, tuple[SessionStore, int]] | None = None,
                    resets: dict[SessionKey, int] | None = None) -> set[SessionKey]:
        """In order; a batch is cut before work that reads first, one write per datastore.
        ``targets``: numbers that may ride behind the cycle's only batch (``flush``); returns
        the sessions whose number was handled there."""
        batch: list[tuple[Work, list[tuple[Any, ...]]]] = []
        cut = False
        for item in work:
            if item.reads_first and batch:
                self._write_batch(batch)
                batch, cut = [], True
            try:
                batch.append((item, item.prepare()))
            except Exception as exc:  # noqa: BLE001 (one request's bug answers that request)
                log.exception("intake: request failed while prepared")
                item.failed(exc)
        if not batch:
            return set()
        stores = {id(item.store) for item, _ in batch}
        if (targets and resets is not None and not cut and len(stores) == 1
                and {id(store) for store, _ in targets.values()} <= stores
                and all(item.complete_when_written for item, _ in batch)):
            return self._write_batch(batch, (targets, resets))
        self._write_batch(batch)
        return set()

    def _write_batch(self, batch: list[tuple[Work, list[tuple[Any, ...]]]],
                     riding: tuple[dict[SessionKey, tuple[SessionStore, int]], dict[SessionKey, int]] | None = None
                     ) -> set[SessionKey]:
        """One round trip per datastore, then each piece of work settles. ``riding``: the
        inbound numbers, written behind the work in the same round trip (one datastore), each
        only if its session's claims there all landed as new (``TARGET_IF_CLAIMED``); returns
        the sessions whose number was handled (written, or refused: fatal already)."""
        by_store: dict[int, list[tuple[Work, list[tuple[Any, ...]]]]] = {}
        for item, calls in batch:
            by_store.setdefault(id(item.store), []).append((item, calls))
        handled: set[SessionKey] = set()
        for items in by_store.values():
            calls = [c for _, item_calls in items for c in item_calls]
            store = items[0][0].store
            numbers: dict[SessionKey, int] = {}
            outcome: list[Any] | StoreError
            try:  # an error reply stands in its call's place; only a failed round trip raises
                if riding is None:
                    outcome = store.write(calls, raise_on_error=False) if calls else []
                else:
                    claims: dict[SessionKey, list[tuple[str, str]]] = {}
                    for item, _ in items:
                        claim = item.claimed_as()
                        if claim is not None:
                            claims.setdefault(claim[0], []).append(claim[1:])
                    # under _io, as every write of numbers (``resetting``); Redis runs the numbers
                    # after the work, so one never lands without the commands it covers
                    with self._io:
                        numbers = self._numbers(*riding).get(id(store), (store, {}))[1]
                        riders = [store.target_if_claimed_call(session, target, claims.get(session, []))
                                  for session, target in numbers.items()]
                        replies = store.write(calls + riders, raise_on_error=False)
                    outcome, numbered = replies[:len(calls)], replies[len(calls):]
                    refused = next((r for r in numbered if isinstance(r, StoreError)), None)
                    if refused is not None:  # (as their own write would: not again at the end)
                        self._fatal(f"inbound MsgSeqNums of {sorted(map(str, numbers))} not recorded: {refused}")
                        handled = set(numbers)
                        numbers = {}
                    else:  # a number not written (a claim not new) goes with the answers, at the end
                        numbers = {session: target for (session, target), reply in zip(numbers.items(), numbered)
                                   if int(reply) == 1}
                        handled |= set(numbers)
            except StoreError as exc:
                # each piece of work learns its own outcome (settle checks the store); the
                # numbers are written again, alone, at the end of the cycle
                outcome, numbers = exc, {}
            at = 0
            for item, item_calls in items:
                mine = outcome if isinstance(outcome, StoreError) else outcome[at:at + len(item_calls)]
                at += len(item_calls)
                claim = item.claimed_as()
                try:
                    item.settle(mine)
                except OutcomeUnknown as exc:
                    self._fatal(str(exc))
                    if claim is not None:  # its number is not written: the request is asked for again
                        handled.add(claim[0])
                        numbers.pop(claim[0], None)
                except Exception as exc:  # noqa: BLE001
                    log.exception("intake: request failed while settled")
                    item.failed(exc)
            self._written(numbers)
        return handled

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()
        self._thread.join(5)
        self.flush()

    def _run(self) -> None:
        with own_connections(self._clients):
            self._cycles()

    def _cycles(self) -> None:
        while True:
            with self._cond:
                while not (self._work or self._answers or self._targets) and not self._stopped:
                    self._cond.wait()
                if self._stopped:
                    return
                handled = len(self._work)
            try:
                self.flush()
                self._linger.after(handled)
            except Exception:  # noqa: BLE001 (a bug here must not stop the intake for good)
                log.exception("intake: cycle failed")
