"""The dispatcher's cache of open orders' views (``fixgw.dispatcher.OpenViews``): pure, no servers."""

from __future__ import annotations

import gc

from fixgw.dispatcher import OpenViews
from fixgw.fixmsg import SessionMessage
from fixgw.translation import OrderView

S = "ns/fsg/C1"


def view(order_id: str, status: str = "0", cum: str = "0") -> OrderView:
    return OrderView(order_id, f"cl-{order_id}", "ACME", "1", "2", "1", "10", "1.00", status=status, cum_qty=cum)


def delivery(order_id: str, n: int = 0) -> SessionMessage:
    """A delivery the group commit stored under number ``n + 1``."""
    return SessionMessage(f"35=8|{order_id}|{n}", "8", f"e{n}:{order_id}:O", order_id, seq=n + 1)


def test_a_committed_open_view_is_served_and_a_newer_commit_replaces_it() -> None:
    cache = OpenViews(10)
    first, second = delivery("o1", 1), delivery("o1", 2)
    cache.committed(S, [(first, view("o1", "0"))], [first])
    assert cache.get(S, "o1") == view("o1", "0")
    cache.committed(S, [(second, view("o1", "1", cum="4"))], [second])
    assert cache.get(S, "o1") == view("o1", "1", cum="4")
    assert cache.get("ns/fsg/C2", "o1") is None  # per session


def test_a_closed_order_is_not_kept_and_its_older_view_goes() -> None:
    cache = OpenViews(10)
    opened, filled = delivery("o1", 1), delivery("o1", 2)
    cache.committed(S, [(opened, view("o1", "0"))], [opened])
    cache.committed(S, [(filled, view("o1", "2", cum="10"))], [filled])
    assert cache.get(S, "o1") is None  # read from Redis (retention may remove it there)


def test_a_delivery_found_delivered_before_makes_its_order_read_again() -> None:
    """Its view in Redis is what an earlier attempt committed, not necessarily ours."""
    cache = OpenViews(10)
    opened, again = delivery("o1", 1), delivery("o1", 2)
    cache.committed(S, [(opened, view("o1", "0"))], [opened])
    cache.committed(S, [(again, view("o1", "1", cum="4"))], [])
    assert cache.get(S, "o1") is None


def test_a_delivery_sent_one_at_a_time_makes_its_order_read_again() -> None:
    """The fallback (QuickFIX gave a number to a message of its own) stores each delivery from
    QuickFIX's callback, not in the group commit: its view is read back, not assumed."""
    cache = OpenViews(10)
    opened, fallback = delivery("o1", 1), delivery("o1", 2)
    cache.committed(S, [(opened, view("o1", "0"))], [opened])
    fallback.seq = 0  # as deliver_many leaves it on that path
    cache.committed(S, [(fallback, view("o1", "1", cum="4"))], [fallback])
    assert cache.get(S, "o1") is None


def test_a_failed_commit_makes_its_orders_read_again() -> None:
    cache = OpenViews(10)
    opened, failed = delivery("o1", 1), delivery("o1", 2)
    cache.committed(S, [(opened, view("o1", "0"))], [opened])
    cache.forget(S, [failed])
    assert cache.get(S, "o1") is None


def test_the_least_recently_committed_view_is_dropped_first() -> None:
    cache = OpenViews(2)
    ds = [delivery(f"o{i}", i) for i in range(3)]
    for d in ds[:2]:
        cache.committed(S, [(d, view(d.order_id))], [d])
    again = delivery("o0", 9)  # o0 committed again: o1 is now the oldest
    cache.committed(S, [(again, view("o0", "1"))], [again])
    cache.committed(S, [(ds[2], view("o2"))], [ds[2]])
    assert len(cache) == 2
    assert cache.get(S, "o1") is None
    assert cache.get(S, "o0") == view("o0", "1") and cache.get(S, "o2") == view("o2")


def test_cached_views_are_out_of_the_collectors_sight() -> None:
    """A full cache is 100,000 views: a full collection of the gateway must not walk them."""
    cache = OpenViews(5000)
    warm = delivery("warm", 0)
    cache.committed(S, [(warm, view("warm"))], [warm])
    gc.collect()
    before = len(gc.get_objects())
    ds = [delivery(f"o{i}", i + 1) for i in range(2000)]
    for d in ds:
        cache.committed(S, [(d, view(d.order_id))], [d])
    del ds, d
    gc.collect()
    assert len(cache) == 2001
    assert len(gc.get_objects()) - before < 20, "the collector walks nothing per cached view"


def test_cached_views_are_out_of_the_collectors_sight_before_any_collection() -> None:
    """Once the cache is full its allocations and frees balance, and collections come seldom:
    what it holds must be untracked from the start, not once a collection has looked at it."""
    cache = OpenViews(5000)
    ds = [delivery(f"o{i}", i + 1) for i in range(2000)]
    gc.collect()
    gc.disable()
    try:
        before = len(gc.get_objects())
        for d in ds:
            cache.committed(S, [(d, view(d.order_id))], [d])
        assert len(cache) == 2000
        assert len(gc.get_objects()) - before < 20, "no key or view of the cache is tracked"
    finally:
        gc.enable()
