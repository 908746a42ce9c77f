"""The dispatcher's reads of the drop copy's inbox (``CopyPacing``): while order entry keeps it
busy, at most every ``drop_copy_every``; after a quiet moment, at once."""

from __future__ import annotations

from fixgw.dispatcher import CopyPacing

ORDERS, COPIES = "{fixgw/fsg}/inbox", "{fixgw/dc}/inbox"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def pacing(every: float = 0.010, streams: tuple[str, ...] = (COPIES, ORDERS)) -> tuple[CopyPacing, Clock]:
    clock = Clock()
    return CopyPacing(list(streams), every, {s for s in streams if s == COPIES}, clock), clock


def test_the_first_read_takes_every_inbox_and_waits_as_long_as_asked() -> None:
    p, _ = pacing()
    assert p.next_read(200) == ([COPIES, ORDERS], 200)


def test_after_copies_were_read_the_next_reads_take_order_entry_only_until_the_copies_are_due() -> None:
    p, clock = pacing()
    p.read([COPIES, ORDERS])
    assert p.next_read(200) == ([ORDERS], 10)  # its wait ends when the copies are due
    clock.now += 0.004
    p.read([ORDERS])
    assert p.next_read(200) == ([ORDERS], 6)
    clock.now += 0.006
    assert p.next_read(200) == ([COPIES, ORDERS], 200)


def test_a_read_that_found_no_copies_leaves_them_due() -> None:
    p, clock = pacing()
    p.read([COPIES])
    clock.now += 0.010
    p.read([ORDERS])  # the copies' inbox was read and had nothing: a quiet drop copy
    assert p.next_read(200) == ([COPIES, ORDERS], 200)


def test_a_read_never_waits_longer_than_the_dispatcher_allows_nor_less_than_a_millisecond() -> None:
    p, clock = pacing(every=0.5)
    p.read([COPIES])
    assert p.next_read(200) == ([ORDERS], 200)  # (a parked session's next pass may bound it)
    clock.now += 0.4999
    assert p.next_read(200) == ([ORDERS], 1)


def test_zero_or_a_gateway_of_drop_copies_only_reads_every_inbox_each_cycle() -> None:
    for p, _ in (pacing(every=0), pacing(streams=(COPIES,))):
        p.read([COPIES])
        assert p.next_read(200) == (p.streams, 200)


def test_the_linger_weighs_the_order_flow_not_the_paced_copies() -> None:
    p, _ = pacing()
    assert p.flow([(ORDERS, [1, 2, 3]), (COPIES, [4, 5, 6, 7])]) == 3
    assert p.flow([(COPIES, [4, 5])]) == 0
    alone, _ = pacing(streams=(COPIES,))  # a gateway of drop copies only: its copies are its flow
    assert alone.flow([(COPIES, [4, 5])]) == 2
