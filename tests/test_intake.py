"""The intake's cycle against real Valkey: when the inbound numbers ride behind the work in one
round trip, and when they wait for a round trip of their own at the end of the cycle."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

import pytest

from datastore.connection import connect
from datastore.settings import RedisEndpoint
from fixgw.intake import Intake
from sessionstore import FixedEpoch, SessionKey, SessionStore, StoreError
from tests.store_helpers import CountedStore

pytestmark = pytest.mark.slow  # starts servers or processes: not in `make unit`


@dataclass
class Claiming:
    """A piece of intake work as the order path makes it: one ClOrdID claim (its command in
    the same script or not is the order path's business; here ``complete`` says which)."""

    store: SessionStore
    session: SessionKey
    clordid: str
    complete: bool = True
    reads_first: bool = False
    replies: list[Any] = field(default_factory=list)

    value: str = '{"orderId":"o"}'

    def prepare(self) -> list[tuple[Any, ...]]:
        return [self.store.claim_call(self.session, self.clordid, self.value, 60_000)]

    def claimed_as(self) -> tuple[SessionKey, str, str]:
        return self.session, self.clordid, self.value

    def settle(self, replies: list[Any] | StoreError) -> None:
        self.replies.append(replies)

    def failed(self, exc: Exception) -> None:
        raise AssertionError(f"unexpected: {exc}")

    @property
    def complete_when_written(self) -> bool:
        return self.complete


@pytest.fixture
def store(endpoint: RedisEndpoint) -> CountedStore:
    return CountedStore(connect(endpoint), FixedEpoch(1))


def session_of(store: SessionStore) -> SessionKey:
    session = SessionKey("test", "fsg", f"S{uuid.uuid4().hex[:10]}")
    store.stamp_owner(session)
    store.writes.clear()  # type: ignore[attr-defined]
    return session


def intake(answers: list[Any] | None = None) -> tuple[Intake, list[tuple[SessionKey, int]]]:
    written: list[tuple[SessionKey, int]] = []
    fatal: list[str] = []

    def deliver(batches: list[tuple[Any, list[Any]]], numbers: Any = None) -> list[Any]:
        for _, deliveries in batches:
            (answers if answers is not None else []).append(deliveries)
        return [deliveries for _, deliveries in batches]

    box = Intake(fatal.append, lambda s, n: written.append((s, n)), deliver)
    box.stop()  # no thread: the test runs the cycle itself (``flush``)
    return box, written


def test_a_cycle_of_complete_work_writes_its_numbers_in_the_same_round_trip(store: CountedStore) -> None:
    session = session_of(store)
    box, written = intake()
    work = [Claiming(store, session, "A"), Claiming(store, session, "B")]
    for w in work:
        box.submit(w)
    box.record(session, store, 7)
    box.flush()
    assert store.writes == [3], "two claims and the number, one round trip"
    assert store.load_state(session).target_seq_num == 7 and written == [(session, 7)]
    assert all(w.replies and not isinstance(w.replies[0], StoreError) for w in work)


@pytest.mark.parametrize("why", ["incomplete", "answers", "reads first"])
def test_the_numbers_wait_for_the_end_of_the_cycle_when_something_may_come_after_the_work(
        store: CountedStore, why: str) -> None:
    session = session_of(store)
    answered: list[Any] = []
    box, written = intake(answered)
    box.submit(Claiming(store, session, "A", complete=why != "incomplete"))
    if why == "reads first":  # the batch is cut: work after the cut is written in a round trip of its own
        box.submit(Claiming(store, session, "B", reads_first=True))
    if why == "answers":
        box.answer(SessionName(str(session)), "an answer")  # type: ignore[arg-type]
    box.record(session, store, 9)
    box.flush()
    assert store.writes[-1] == 1 and len(store.writes) == (3 if why == "reads first" else 2), \
        "the work, then the number alone"
    assert store.load_state(session).target_seq_num == 9 and written == [(session, 9)]


def test_a_number_taken_before_a_reset_does_not_ride_after_it(store: CountedStore) -> None:
    session = session_of(store)
    box, written = intake()

    class ResetMeanwhile(Claiming):
        def prepare(self) -> list[tuple[Any, ...]]:
            with box.resetting(session):  # after the cycle took the number, before it is written
                store.set_next_target_seq_num(session, 1)
            return super().prepare()

    box.submit(ResetMeanwhile(store, session, "A"))
    box.record(session, store, 12)
    box.flush()
    assert store.writes[-1] == 1, "the claim went alone: the number was dropped"
    assert store.load_state(session).target_seq_num == 1 and written == []


@dataclass
class SessionName:
    name: str

    def toString(self) -> str:  # noqa: N802 (QuickFIX's SessionID)
        return self.name


def test_an_answer_brings_its_inbound_number_into_its_own_cycle(store: CountedStore) -> None:
    """The callback queues the answer, then records the number: a cycle between the two would
    commit the answer without it. Queued with the answer, it rides in the answer's commit."""
    session = session_of(store)
    written: list[tuple[SessionKey, int]] = []
    offered: list[int | None] = []

    def deliver(batches: list[tuple[Any, list[Any]]], numbers: Any) -> list[Any]:
        with numbers:  # as GatewayApplication.deliver_many: the commit stores what it is offered
            offered.append(numbers.offered(session))
            numbers.stored(session)
        return [deliveries for _, deliveries in batches]

    box = Intake(lambda why: None, lambda s, n: written.append((s, n)), deliver)
    box.stop()
    box.answer(SessionName(str(session)), "the echo of message 7", (session, store, 8))  # type: ignore[arg-type]
    box.flush()  # the cycle takes the answer before the callback's record() below
    assert offered == [8] and written == [(session, 8)]
    box.record(session, store, 8)
    box.flush()
    assert store.writes == [], "the callback's own record of the same number writes nothing more"
    with box.resetting(session):
        pass
    box.record(session, store, 2)  # a new FIX session counts from the start again
    box.flush()
    assert store.load_state(session).target_seq_num == 2 and written[-1] == (session, 2)


@pytest.mark.parametrize("riding", [True, False])
def test_a_request_the_work_refuses_is_answered_in_the_same_cycle_before_its_number_is_stored(
        store: CountedStore, riding: bool) -> None:
    """A claim found taken (a duplicate ClOrdID; the same holds for one the store refused) is
    answered by the gateway itself, after the write. That answer is committed in the same cycle,
    offered the number; the number is never stored before it: had it been, a crash before the
    answer left the request neither answered nor asked for again after the takeover."""
    session = session_of(store)
    store.write([store.claim_call(session, "A", '{"orderId":"an earlier order"}', 60_000)])
    store.writes.clear()  # type: ignore[attr-defined]
    delivered: list[tuple[list[Any], int | None, int]] = []  # (answers, number offered, target stored then)
    written: list[tuple[SessionKey, int]] = []

    def deliver(batches: list[tuple[Any, list[Any]]], numbers: Any) -> list[Any]:
        with numbers:
            delivered.append(([d for _, ds in batches for d in ds], numbers.offered(session),
                              store.load_state(session).target_seq_num))
            store.set_next_target_seq_num(session, numbers.offered(session))  # as the group commit does
            numbers.stored(session)
        return [deliveries for _, deliveries in batches]

    box = Intake(lambda why: None, lambda s, n: written.append((s, n)), deliver)
    box.stop()

    class Refused(Claiming):
        def settle(self, replies: list[Any] | StoreError) -> None:
            super().settle(replies)
            if not isinstance(replies, StoreError) and int(replies[0]) == 0:  # taken: a duplicate
                box.answer(SessionName(str(session)), "A refused: duplicate", (session, store, 8))  # type: ignore[arg-type]

    box.submit(Refused(store, session, "B"))  # new
    box.submit(Refused(store, session, "A", complete=riding))
    box.record(session, store, 8)
    box.flush()
    assert delivered == [(["A refused: duplicate"], 8, 1)], \
        "the refusal went out in the cycle that wrote the claim, with the number, stored only then"
    assert store.load_state(session).target_seq_num == 8 and written == [(session, 8)]


def test_a_riding_number_is_written_when_every_claim_it_covers_is_its_requests(store: CountedStore) -> None:
    """A claim replayed (its reply lost, the write sent again) holds its own request's value:
    the number rides as for a new one."""
    session = session_of(store)
    store.write([store.claim_call(session, "A", '{"orderId":"o"}', 60_000)])  # the first try landed
    store.writes.clear()  # type: ignore[attr-defined]
    box, written = intake()
    box.submit(Claiming(store, session, "A"))
    box.record(session, store, 5)
    box.flush()
    assert store.writes == [2] and store.load_state(session).target_seq_num == 5 and written == [(session, 5)]
