"""A naive, obviously-correct matcher (exchange-core's habit): lists, sorting, no cleverness.

Drives the same commands as the real cell and must produce the same facts. It shares the
contracts (command shapes) with the real code and nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass

from matching.contracts import (
    CancelOrder,
    CancelRejected,
    Command,
    DealExecuted,
    EventPayload,
    OrderAccepted,
    OrderCanceled,
    OrderRejected,
    OrderReplaced,
    OrderType,
    PlaceOrder,
    ReplaceOrder,
    Side,
    TimeInForce,
)
from matching.instruments import Instrument


@dataclass
class Resting:
    oid: str
    side: Side
    price: int
    qty: int
    remaining: int
    prio: int
    account: str
    owner: str
    post_only: bool


# why an order was canceled, by who asked (CancelOrder.reason); the owner itself: "requested"
CANCEL_REASONS = {"cancel-on-disconnect": "cancel-on-disconnect", "mass-cancel": "mass-cancel",
                  "operator": "operator-cancel"}


class ReferenceMatcher:
    def __init__(self, instruments: dict[int, Instrument], stp: str = "cancel-taker") -> None:
        self.instruments = instruments
        self.stp = stp
        self.books: dict[int, list[Resting]] = {}
        self.prio = 0

    def _sorted(self, pair: int, side: Side) -> list[Resting]:
        orders = [o for o in self.books.get(pair, []) if o.side is side]
        if side is Side.BUY:
            return sorted(orders, key=lambda o: (-o.price, o.prio))
        return sorted(orders, key=lambda o: (o.price, o.prio))

    def _crosses(self, side: Side, limit: int | None, price: int) -> bool:
        return limit is None or (price <= limit if side is Side.BUY else price >= limit)

    def apply(self, cmd: Command) -> list[tuple]:
        if isinstance(cmd, PlaceOrder):
            return self.place(cmd)
        if isinstance(cmd, CancelOrder):
            return self.cancel(cmd)
        return self.replace(cmd)

    def _valid(self, inst: Instrument | None, qty: int, price: int | None, market: bool) -> str | None:
        if inst is None:
            return "unknown-pair"
        if qty <= 0:
            return "invalid-quantity"
        if qty < inst.min_lots or qty > inst.max_lots:
            return "quantity-out-of-range"
        if market:
            return "invalid-price" if price is not None else None
        if price is None or price <= 0:
            return "invalid-price"
        if price < inst.min_ticks or price > inst.max_ticks:
            return "price-out-of-band"
        return None

    def place(self, c: PlaceOrder) -> list[tuple]:
        o = c.order
        book = self.books.setdefault(c.pair_id, [])
        market = o.order_type is OrderType.MARKET
        reason = self._valid(self.instruments.get(c.pair_id), o.quantity, o.price, market)
        if reason is None and (market and o.post_only or o.post_only and o.time_in_force is not TimeInForce.GTC):
            reason = "unsupported-order"
        if reason is None and any(r.oid == o.order_id for r in book):
            reason = "duplicate-order-id"
        opp = self._sorted(c.pair_id, o.side.opposite)
        if reason is None and o.post_only and opp and self._crosses(o.side, o.price, opp[0].price):
            reason = "post-only-would-take"
        if reason:
            return [("order.rejected", o.order_id, reason)]
        self.prio += 1
        events: list[tuple] = [("order.accepted", o.order_id, o.quantity)]
        taker = Resting(o.order_id, o.side, o.price or 0, o.quantity, o.quantity, self.prio, o.account, o.owner,
                        o.post_only)
        if o.time_in_force is TimeInForce.FOK:
            can = 0
            for m in opp:
                if not self._crosses(o.side, o.price, m.price) or can >= o.quantity:
                    break
                if m.account and m.account == o.account:
                    if self.stp == "cancel-maker":
                        continue
                    break
                can += m.remaining
            if can < o.quantity:
                return events + [("order.canceled", o.order_id, "fok-unfillable")]
        return events + self._match(c.pair_id, taker, market, o.time_in_force, None)

    def _match(self, pair: int, taker: Resting, market: bool, tif: TimeInForce, was_resting: Resting | None) -> list[tuple]:
        book = self.books[pair]
        events: list[tuple] = []
        stp_stop = False
        for m in self._sorted(pair, taker.side.opposite):
            if taker.remaining == 0 or not self._crosses(taker.side, None if market else taker.price, m.price):
                break
            if m.account and m.account == taker.account:
                if self.stp in ("cancel-maker", "cancel-both"):
                    book.remove(m)
                    events.append(("order.canceled", m.oid, "self-trade-prevented"))
                if self.stp in ("cancel-taker", "cancel-both"):
                    stp_stop = True
                    break
                continue
            q = min(taker.remaining, m.remaining)
            m.remaining -= q
            taker.remaining -= q
            events.append(("deal.executed.v1", m.oid, taker.oid, m.price, q, m.remaining, taker.remaining))
            if m.remaining == 0:
                book.remove(m)
        if taker.remaining == 0:
            return events
        if stp_stop:
            events.append(("order.canceled", taker.oid, "self-trade-prevented"))
        elif market:
            events.append(("order.rejected", taker.oid, "insufficient-liquidity"))
        elif tif is not TimeInForce.GTC:
            events.append(("order.canceled", taker.oid, "ioc-unfilled"))
        else:
            book.append(taker)
        return events

    def cancel(self, c: CancelOrder) -> list[tuple]:
        book = self.books.setdefault(c.pair_id, [])
        for r in book:
            if r.oid == c.order_id:
                if c.owner and r.owner and c.owner != r.owner:
                    return [("cancel.rejected", c.order_id, "not-owner")]
                book.remove(r)
                return [("order.canceled", r.oid, CANCEL_REASONS.get(c.reason, "requested"))]
        return [("cancel.rejected", c.order_id, "unknown-order")]

    def replace(self, c: ReplaceOrder) -> list[tuple]:
        book = self.books.setdefault(c.pair_id, [])
        found = [r for r in book if r.oid == c.order_id]
        if not found:
            return [("cancel.rejected", c.order_id, "unknown-order")]
        r = found[0]
        if c.owner and r.owner and c.owner != r.owner:
            return [("cancel.rejected", c.order_id, "not-owner")]
        reason = self._valid(self.instruments.get(c.pair_id), c.quantity, c.price, False)
        filled = r.qty - r.remaining
        if reason is None and c.quantity <= filled:
            reason = "quantity-below-filled"
        opp = self._sorted(c.pair_id, r.side.opposite)
        if reason is None and r.post_only and opp and self._crosses(r.side, c.price, opp[0].price):
            reason = "post-only-would-take"
        if reason:
            return [("cancel.rejected", c.order_id, reason)]
        assert c.price is not None
        keeps = c.price == r.price and c.quantity <= r.qty
        events: list[tuple] = [("order.replaced", r.oid, c.quantity, c.quantity - filled)]
        r.price, r.qty, r.remaining = c.price, c.quantity, c.quantity - filled
        if keeps:
            return events
        book.remove(r)
        self.prio += 1
        r.prio = self.prio
        return events + self._match(c.pair_id, r, False, TimeInForce.GTC, r)


def project(p: EventPayload) -> tuple:
    """The real cell's event, reduced to what the reference matcher reports."""
    kind = p.event_type.value
    if isinstance(p, (OrderRejected, CancelRejected, OrderCanceled)):
        return (kind, p.order_id, p.reason)
    if isinstance(p, OrderAccepted):
        return (kind, p.order_id, p.quantity)
    if isinstance(p, OrderReplaced):
        return (kind, p.order_id, p.quantity, p.remaining)
    if isinstance(p, DealExecuted):
        return (kind, p.maker.order_id, p.taker.order_id, p.price, p.quantity, p.maker.remaining, p.taker.remaining)
    raise AssertionError(kind)
