"""The pure matching domain: scenarios, then thousands of random flows against the reference."""

from __future__ import annotations

import gc

import pytest

from matching import domain
from matching.contracts import CancelOrder, DealExecuted, OrderPayload, OrderType, PlaceOrder, ReplaceOrder, Side, TimeInForce
from matching.domain import Cell, StpMode
from tests.flows import TEST_INSTRUMENTS, random_flow
from tests.reference_matcher import ReferenceMatcher, project

B, S = Side.BUY, Side.SELL
_n = 0


def place(cell: Cell, side: Side, qty: int, price: int | None = 200, tif: TimeInForce = TimeInForce.GTC,
          account: str = "", post_only: bool = False, oid: str | None = None) -> list[tuple]:
    global _n
    _n += 1
    oid = oid or f"o{_n}"
    kind = OrderType.MARKET if price is None else OrderType.LIMIT
    out = cell.apply(PlaceOrder(f"c{_n}", 0, 0, OrderPayload(oid, side, kind, qty, price, tif, post_only, account,
                                                             owner=account)))
    return [project(p) for p in out.events]


@pytest.fixture
def cell() -> Cell:
    return Cell(TEST_INSTRUMENTS)


def test_price_then_time_priority(cell: Cell) -> None:
    place(cell, S, 5, 201, oid="late-better")
    place(cell, S, 5, 200, oid="first")
    place(cell, S, 5, 200, oid="second")
    ev = place(cell, B, 12, 201, oid="taker")
    deals = [e for e in ev if e[0] == "deal.executed.v1"]
    assert [(d[1], d[3], d[4]) for d in deals] == [("first", 200, 5), ("second", 200, 5), ("late-better", 201, 2)]
    assert cell.find(0, "late-better").remaining == 3  # type: ignore[union-attr]


def test_partial_fill_rests_the_rest_and_reports_both_remainings(cell: Cell) -> None:
    place(cell, S, 3, 200, oid="m")
    ev = place(cell, B, 10, 200, oid="t")
    assert ev == [("order.accepted", "t", 10), ("deal.executed.v1", "m", "t", 200, 3, 0, 7)]
    assert cell.find(0, "t").remaining == 7 and cell.find(0, "m") is None  # type: ignore[union-attr]


def test_ioc_rest_is_canceled_and_fok_all_or_nothing(cell: Cell) -> None:
    place(cell, S, 3, 200, oid="m")
    assert place(cell, B, 5, 200, TimeInForce.IOC, oid="ioc")[-1] == ("order.canceled", "ioc", "ioc-unfilled")
    place(cell, S, 3, 200, oid="m2")
    assert place(cell, B, 5, 200, TimeInForce.FOK, oid="fok")[-1] == ("order.canceled", "fok", "fok-unfillable")
    assert cell.find(0, "m2").remaining == 3  # type: ignore[union-attr]  # untouched
    assert place(cell, B, 3, 200, TimeInForce.FOK, oid="fok2")[-1] == ("deal.executed.v1", "m2", "fok2", 200, 3, 0, 0)


def test_market_rest_is_rejected_insufficient_liquidity_and_fills_stand(cell: Cell) -> None:
    place(cell, S, 2, 199, oid="m")
    ev = place(cell, B, 5, None, oid="mkt")
    assert ev[1] == ("deal.executed.v1", "m", "mkt", 199, 2, 0, 3)
    assert ev[-1] == ("order.rejected", "mkt", "insufficient-liquidity")


def test_post_only_that_would_take_is_rejected(cell: Cell) -> None:
    place(cell, S, 2, 200)
    assert place(cell, B, 1, 200, post_only=True, oid="po") == [("order.rejected", "po", "post-only-would-take")]
    assert place(cell, B, 1, 199, post_only=True, oid="po2") == [("order.accepted", "po2", 1)]


@pytest.mark.parametrize("mode, maker_left, taker_events", [
    (StpMode.CANCEL_TAKER, True, ("order.canceled", "t", "self-trade-prevented")),
    (StpMode.CANCEL_MAKER, False, ("deal.executed.v1", "other", "t", 201, 1, 0, 0)),
    (StpMode.CANCEL_BOTH, False, ("order.canceled", "t", "self-trade-prevented")),
])
def test_self_trade_prevention_modes(mode: StpMode, maker_left: bool, taker_events: tuple) -> None:
    cell = Cell(TEST_INSTRUMENTS, mode)
    place(cell, S, 1, 200, account="A", oid="mine")
    place(cell, S, 1, 201, account="B", oid="other")
    ev = place(cell, B, 1, 201, account="A", oid="t")
    assert ev[-1] == taker_events
    assert (cell.find(0, "mine") is not None) is maker_left


def test_cancel_and_its_rejects(cell: Cell) -> None:
    place(cell, S, 2, 200, account="A", oid="m")
    out = cell.apply(CancelOrder("x1", 0, 0, "m", owner="B"))
    assert [project(p) for p in out.events] == [("cancel.rejected", "m", "not-owner")]
    out = cell.apply(CancelOrder("x2", 0, 0, "m", owner="A"))
    assert [project(p) for p in out.events] == [("order.canceled", "m", "requested")]
    out = cell.apply(CancelOrder("x3", 0, 0, "m"))
    assert [project(p) for p in out.events] == [("cancel.rejected", "m", "unknown-order")]


def test_replace_keeps_priority_only_for_same_price_and_less_quantity(cell: Cell) -> None:
    place(cell, S, 5, 200, oid="a")
    place(cell, S, 5, 200, oid="b")
    cell.apply(ReplaceOrder("r1", 0, 0, "a", 4, 200))  # smaller: keeps its place
    assert [o.order_id for o in cell.book(0).in_priority_order(S)] == ["a", "b"]
    cell.apply(ReplaceOrder("r2", 0, 0, "a", 6, 200))  # larger: goes to the back
    assert [o.order_id for o in cell.book(0).in_priority_order(S)] == ["b", "a"]


def test_aggressive_replace_trades_and_rejects_below_filled(cell: Cell) -> None:
    place(cell, S, 5, 202, oid="ask")
    place(cell, B, 5, 200, oid="bid")
    out = cell.apply(ReplaceOrder("r", 0, 0, "bid", 5, 202))
    ev = [project(p) for p in out.events]
    assert ev == [("order.replaced", "bid", 5, 5), ("deal.executed.v1", "ask", "bid", 202, 5, 0, 0)]
    assert cell.find(0, "bid") is None and out.changes["bid"].after is None


def test_rejects_change_nothing(cell: Cell) -> None:
    place(cell, S, 5, 200, oid="m")
    before = cell.book(0).in_priority_order(S)
    assert place(cell, B, 0, 200)[0][2] == "invalid-quantity"
    assert place(cell, B, 51, 200)[0][2] == "quantity-out-of-range"
    assert place(cell, B, 1, 300)[0][2] == "price-out-of-band"
    assert place(cell, B, 1, None, TimeInForce.GTC, post_only=True)[0][2] == "unsupported-order"
    assert place(cell, B, 1, 200, oid="m")[0][2] == "duplicate-order-id"
    assert cell.book(0).in_priority_order(S) == before and cell.book(0).in_priority_order(B) == []


def test_prices_and_quantities_stay_integers(cell: Cell) -> None:
    place(cell, S, 3, 200, oid="m")
    out = cell.apply(PlaceOrder("c", 0, 0, OrderPayload("t", B, OrderType.LIMIT, 2, 201)))
    deal = out.events[-1]
    assert isinstance(deal, DealExecuted)
    assert all(type(v) is int for v in (deal.price, deal.quantity, deal.taker.filled_notional))


@pytest.mark.parametrize("mode", list(StpMode))
@pytest.mark.parametrize("seed", range(8))
def test_random_flows_match_the_reference_event_by_event(seed: int, mode: StpMode) -> None:
    cell, ref = Cell(TEST_INSTRUMENTS, mode), ReferenceMatcher(TEST_INSTRUMENTS, str(mode))
    for cmd in random_flow(seed, 600):
        got = [project(p) for p in cell.apply(cmd).events]
        assert got == ref.apply(cmd), cmd


@pytest.mark.parametrize("seed", range(4))
def test_random_flows_match_the_reference_with_levels_of_small_tables(seed: int, monkeypatch: pytest.MonkeyPatch
                                                                      ) -> None:
    """A level's tables (``domain.Level``) made tiny, so that every flow crosses their edges:
    orders taken, canceled and replaced from the first, middle and last tables alike."""
    monkeypatch.setattr(domain, "LEVEL_CHUNK", 2)
    cell, ref = Cell(TEST_INSTRUMENTS), ReferenceMatcher(TEST_INSTRUMENTS, str(StpMode.CANCEL_TAKER))
    for cmd in random_flow(seed, 600):
        got = [project(p) for p in cell.apply(cmd).events]
        assert got == ref.apply(cmd), cmd


def test_resting_orders_are_out_of_the_collectors_sight(cell: Cell) -> None:
    """A book of resting orders is most of a cell's heap: a full collection must not walk it
    (the pause would grow with the book). Placed, partly filled and replaced orders alike."""
    place(cell, S, 10, 205, oid="partly-filled")
    place(cell, B, 4, 205)
    cell.apply(ReplaceOrder("c-replace", 0, 0, "partly-filled", 8, 206))
    place(cell, B, 1, 195, oid="warm-up")  # a level of each side exists before the count
    gc.collect()
    before = len(gc.get_objects())
    for i in range(2000):
        place(cell, B, 1, 195, oid=f"rest-{i}")
    gc.collect()
    assert len(cell.books[0].orders) == 2002
    assert not any(gc.is_tracked(o) for o in cell.books[0].orders.values())
    assert len(gc.get_objects()) - before < 20, "the collector walks nothing per resting order"
