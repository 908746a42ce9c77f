"""Price-time matching: the pure heart of the cell (seed 000's calculateDeal, grown up).

Rules of this file:
- everything that decides who trades with whom, at what price and how much lives here;
- it does no I/O and knows neither Redis nor FIX: commands in, ``Outcome`` out;
- prices are integer ticks, quantities integer lots; nothing is ever a float.

Theory of operation: a ``Cell`` holds one ``Book`` per pair and the partition's priority
counter. ``Cell.apply(command)`` mutates the books and returns an ``Outcome``: the
events to publish (in order) and the order ``Change``s (before → after) the conductor
must commit. Time priority is a per-partition counter, so a rebuilt book orders exactly
as the original did.
"""

from __future__ import annotations

import bisect
import heapq
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import StrEnum

import msgspec

from .contracts import (
    CancelOrder,
    CancelRejected,
    Command,
    CommandResult,
    DealExecuted,
    EventPayload,
    OrderAccepted,
    OrderCanceled,
    OrderPayload,
    OrderRejected,
    OrderReplaced,
    OrderState,
    OrderType,
    PlaceOrder,
    ReplaceOrder,
    Side,
    TimeInForce,
)
from .instruments import Instrument
from .tables import ShardedDict


class StpMode(StrEnum):
    """What happens when a taker would trade with a resting order of the same account."""

    CANCEL_TAKER = "cancel-taker"  # the incoming order's rest is canceled (the default)
    CANCEL_MAKER = "cancel-maker"  # the resting order is canceled, matching goes on
    CANCEL_BOTH = "cancel-both"


class Reason(StrEnum):
    UNKNOWN_PAIR = "unknown-pair"
    INVALID_QUANTITY = "invalid-quantity"
    QUANTITY_OUT_OF_RANGE = "quantity-out-of-range"
    INVALID_PRICE = "invalid-price"
    PRICE_OUT_OF_BAND = "price-out-of-band"
    POST_ONLY_WOULD_TAKE = "post-only-would-take"
    INSUFFICIENT_LIQUIDITY = "insufficient-liquidity"
    DUPLICATE_ORDER_ID = "duplicate-order-id"
    UNSUPPORTED = "unsupported-order"
    UNKNOWN_ORDER = "unknown-order"
    NOT_OWNER = "not-owner"
    QUANTITY_BELOW_FILLED = "quantity-below-filled"
    CELL_ERROR = "cell-error"  # the cell failed applying the command; refused, never retried
    # order.canceled reasons
    REQUESTED = "requested"
    IOC_UNFILLED = "ioc-unfilled"
    FOK_UNFILLABLE = "fok-unfillable"
    SELF_TRADE = "self-trade-prevented"
    CANCEL_ON_DISCONNECT = "cancel-on-disconnect"  # the gateway canceled it: its session went away
    MASS_CANCEL = "mass-cancel"  # the owner's OrderMassCancelRequest
    OPERATOR = "operator-cancel"  # an operator canceled it (fixgw-admin)


CANCEL_REASONS = {"cancel-on-disconnect": Reason.CANCEL_ON_DISCONNECT, "mass-cancel": Reason.MASS_CANCEL,
                  "operator": Reason.OPERATOR}  # CancelOrder.reason → the order.canceled reason


class Order(msgspec.Struct, frozen=True, gc=False):
    """An order as the book holds it (and as the conductor stores it).

    Out of the garbage collector's sight (``gc=False``): its fields are strings, numbers and
    enum members, so it can never be part of a reference cycle, and a book of resting orders
    is most of a cell's heap — a full collection walked every one of them (170,000 resting
    orders: 59 ms with the interpreter held, 15 ms untracked; tests/test_domain.py).
    """

    order_id: str
    pair_id: int
    side: Side
    order_type: OrderType
    time_in_force: TimeInForce
    price: int | None
    quantity: int  # total lots ordered (after any replace)
    remaining: int
    priority: int
    post_only: bool = False
    account: str = ""
    owner: str = ""
    client_order_id: str = ""
    filled_notional: int = 0  # Σ price × qty of fills, in tick·lot units (exact average price)

    @property
    def filled(self) -> int:
        return self.quantity - self.remaining

    def crosses(self, price: int) -> bool:
        """Would this order, as a taker, trade at ``price``?"""
        if self.price is None:
            return True
        return price <= self.price if self.side is Side.BUY else price >= self.price

    def cum(self) -> tuple[str, int, int, int, int, str, str, Side, str, int | None, OrderType, TimeInForce]:
        """The order's state as events carry it (``OrderState``'s fields, in order): enough for
        a receiver that never saw the order before."""
        return (self.order_id, self.quantity, self.quantity - self.remaining, self.remaining, self.filled_notional,
                self.owner, self.client_order_id, self.side, self.account, self.price, self.order_type,
                self.time_in_force)

    def filled_by(self, qty: int, price: int) -> Order:
        """This order after a fill of ``qty`` at ``price`` (the matching loop's hot path:
        a direct construction, not ``msgspec.structs.replace``)."""
        return Order(self.order_id, self.pair_id, self.side, self.order_type, self.time_in_force, self.price,
                     self.quantity, self.remaining - qty, self.priority, self.post_only, self.account, self.owner,
                     self.client_order_id, self.filled_notional + price * qty)

    def state(self) -> OrderState:
        return OrderState(*self.cum())


@dataclass(frozen=True, slots=True)
class Change:
    """One order's state before and after a command (None = absent)."""

    before: Order | None
    after: Order | None


@dataclass(slots=True)
class Outcome:
    events: list[EventPayload] = field(default_factory=list)
    changes: dict[str, Change] = field(default_factory=dict)  # by order id, coalesced
    status: str = "applied"

    def emit(self, payload: EventPayload) -> None:
        self.events.append(payload)

    def record(self, before: Order | None, after: Order | None) -> None:
        oid = (after or before).order_id  # type: ignore[union-attr]
        prior = self.changes.get(oid)
        self.changes[oid] = Change(prior.before if prior else before, after)

    def result(self, event_ids: list[str]) -> CommandResult:
        return CommandResult(self.status, [p.event_type.value for p in self.events], event_ids)


def _place_rejected(o: OrderPayload, reason: Reason) -> Outcome:
    out = Outcome(status="rejected")
    out.emit(OrderRejected(o.order_id, reason.value, o.owner, o.client_order_id, o.side, o.quantity, o.price,
                           o.account))
    return out


LEVEL_CHUNK = 1024  # order ids a level holds in one table (see ``Level``)


class Level:
    """One price's resting orders, oldest first: tables of at most ``LEVEL_CHUNK`` order ids,
    each covering a run of priorities, oldest table first.

    Why tables of a bounded size: one table for a deep level (a round price holding 100,000
    orders) grows, like every ``dict``, by moving all its entries at once — 30 ms and more with
    the cell held (matching/tables.py). Each table is an ``OrderedDict``, not a dict: matching
    takes its oldest order and removes it, and a plain dict's first entry is found by walking
    past every one deleted before it. An order is found in its table by its priority: orders
    join a level in priority order (a new or re-prioritised order takes the next priority; a
    rebuild restores them in priority order), so the tables' first priorities are sorted.
    """

    __slots__ = ("_tables", "_firsts", "_last")

    def __init__(self) -> None:
        self._tables: list[OrderedDict[str, None]] = []
        self._firsts: list[int] = []  # the priority each table starts at
        self._last = 0  # the newest priority in the level

    def __bool__(self) -> bool:
        return bool(self._tables)  # (an emptied table is dropped)

    def __len__(self) -> int:
        return sum(map(len, self._tables))

    def __iter__(self) -> Iterator[str]:
        for table in self._tables:
            yield from table

    def first(self) -> str:
        return next(iter(self._tables[0]))

    def append(self, order_id: str, priority: int) -> None:
        if priority <= self._last:  # (a rebuild from a store holding two orders of one priority)
            raise ValueError(f"order {order_id} (priority {priority}) joins its level behind priority {self._last}")
        self._last = priority
        if not self._tables or len(self._tables[-1]) >= LEVEL_CHUNK:
            self._tables.append(OrderedDict())
            self._firsts.append(priority)
        self._tables[-1][order_id] = None

    def remove(self, order_id: str, priority: int) -> None:
        at = bisect.bisect_right(self._firsts, priority) - 1
        table = self._tables[at]
        del table[order_id]
        if not table:
            del self._tables[at], self._firsts[at]


class Book:
    """One pair's resting orders: price levels in time order, best price by heap."""

    def __init__(self, pair_id: int) -> None:
        self.pair_id = pair_id
        # by id: a table split by hash, so that it grows without holding the cell (tables.py)
        self.orders: ShardedDict[str, Order] = ShardedDict()
        self._levels: dict[Side, dict[int, Level]] = {Side.BUY: {}, Side.SELL: {}}
        self._heaps: dict[Side, list[int]] = {Side.BUY: [], Side.SELL: []}  # bids negated

    def add(self, order: Order) -> None:
        assert order.price is not None and order.remaining > 0
        levels = self._levels[order.side]
        level = levels.get(order.price)
        if level is None:
            level = levels[order.price] = Level()
            heapq.heappush(self._heaps[order.side], -order.price if order.side is Side.BUY else order.price)
        level.append(order.order_id, order.priority)
        self.orders[order.order_id] = order

    def update_in_place(self, order: Order) -> None:
        """New remaining/quantity with the same price and priority: keeps its place."""
        self.orders[order.order_id] = order

    def remove(self, order_id: str) -> Order:
        order = self.orders.pop(order_id)
        assert order.price is not None
        levels = self._levels[order.side]
        level = levels[order.price]
        level.remove(order_id, order.priority)
        if not level:
            del levels[order.price]  # its heap entry is dropped lazily
        return order

    def best_price(self, side: Side) -> int | None:
        heap, levels = self._heaps[side], self._levels[side]
        while heap:
            price = -heap[0] if side is Side.BUY else heap[0]
            if price in levels:
                return price
            heapq.heappop(heap)
        return None

    def best(self, side: Side) -> Iterator[Order]:
        """Resting orders of ``side`` in priority order, stable while the caller removes
        the order it was just given."""
        while True:
            price = self.best_price(side)
            if price is None:
                return
            yield self.orders[self._levels[side][price].first()]

    def in_priority_order(self, side: Side) -> list[Order]:
        """Every resting order of a side, best first (for snapshots)."""
        return list(self.crossing(side, None))

    def crossing(self, side: Side, limit: int | None) -> Iterator[Order]:
        """Resting orders of ``side`` at prices a taker limited to ``limit`` would reach (all,
        for None), best first, made as they are consumed: a dry run that stops early sorts
        only the reachable levels and builds no list of the book."""
        levels = self._levels[side]
        buy = side is Side.BUY
        prices = levels if limit is None else [p for p in levels if (p >= limit if buy else p <= limit)]
        for price in sorted(prices, reverse=buy):
            for oid in levels[price]:
                yield self.orders[oid]


class Cell:
    """The matching state of one partition: books by pair plus the priority counter."""

    def __init__(self, instruments: dict[int, Instrument], stp_mode: StpMode = StpMode.CANCEL_TAKER,
                 next_priority: int = 1) -> None:
        self.instruments = instruments
        self.stp_mode = stp_mode
        self.next_priority = next_priority
        self.books: dict[int, Book] = {}

    def book(self, pair_id: int) -> Book:
        book = self.books.get(pair_id)
        if book is None:
            book = self.books[pair_id] = Book(pair_id)
        return book

    def restore(self, order: Order) -> None:
        """Put back a stored resting order (rebuilding from Redis); call in priority order."""
        self.book(order.pair_id).add(order)
        self.next_priority = max(self.next_priority, order.priority + 1)

    def find(self, pair_id: int, order_id: str) -> Order | None:
        book = self.books.get(pair_id)
        return book.orders.get(order_id) if book else None

    def _take_priority(self) -> int:
        p = self.next_priority
        self.next_priority += 1
        return p

    # --- commands ---------------------------------------------------------------------

    @staticmethod
    def refuse(command: Command, reason: Reason) -> Outcome:
        """The outcome of a command refused without looking at the book: the owner hears
        Rejected (a place) or a cancel reject (cancel, replace); nothing changes."""
        if isinstance(command, PlaceOrder):
            return _place_rejected(command.order, reason)
        out = Outcome(status="rejected")
        out.emit(CancelRejected(command.order_id, reason.value, command.kind,  # type: ignore[arg-type]
                                command.owner, command.client_order_id))
        return out

    def apply(self, command: Command) -> Outcome:
        if isinstance(command, PlaceOrder):
            return self.place(command.pair_id, command.order)
        if isinstance(command, CancelOrder):
            return self.cancel(command)
        return self.replace_order(command)

    def _validate(self, instrument: Instrument | None, o: OrderPayload) -> Reason | None:
        if instrument is None:
            return Reason.UNKNOWN_PAIR
        if o.quantity <= 0:
            return Reason.INVALID_QUANTITY
        if not instrument.min_lots <= o.quantity <= instrument.max_lots:
            return Reason.QUANTITY_OUT_OF_RANGE
        if o.order_type is OrderType.LIMIT:
            if o.price is None or o.price <= 0:
                return Reason.INVALID_PRICE
            if not instrument.min_ticks <= o.price <= instrument.max_ticks:
                return Reason.PRICE_OUT_OF_BAND
        else:
            if o.price is not None:
                return Reason.INVALID_PRICE
            if o.post_only:
                return Reason.UNSUPPORTED  # a market order always takes
        if o.post_only and o.time_in_force is not TimeInForce.GTC:
            return Reason.UNSUPPORTED
        return None

    def place(self, pair_id: int, o: OrderPayload) -> Outcome:
        out = Outcome()
        instrument = self.instruments.get(pair_id)
        reason = self._validate(instrument, o)
        if reason is None and self.find(pair_id, o.order_id) is not None:
            reason = Reason.DUPLICATE_ORDER_ID
        book = self.book(pair_id)
        if reason is None and o.post_only:
            best = book.best_price(o.side.opposite)
            if best is not None and (best <= o.price if o.side is Side.BUY else best >= o.price):  # type: ignore[operator]
                reason = Reason.POST_ONLY_WOULD_TAKE
        if reason is not None:
            return _place_rejected(o, reason)
        taker = Order(o.order_id, pair_id, o.side, o.order_type, o.time_in_force, o.price, o.quantity, o.quantity,
                      self._take_priority(), o.post_only, o.account, o.owner, o.client_order_id)
        out.emit(OrderAccepted(*taker.cum(), post_only=o.post_only))
        if o.time_in_force is TimeInForce.FOK and self._fillable(book, taker) < taker.quantity:
            out.emit(OrderCanceled(*taker.cum(), reason=Reason.FOK_UNFILLABLE.value))
            return out
        self._match(book, taker, out, resting_before=None)
        return out

    def _fillable(self, book: Book, taker: Order) -> int:
        """How much of ``taker`` would fill now, self-trade prevention included (dry run)."""
        total = 0
        for maker in book.crossing(taker.side.opposite, taker.price):
            if total >= taker.quantity:
                break
            if maker.account and maker.account == taker.account:
                if self.stp_mode is StpMode.CANCEL_MAKER:
                    continue
                break
            total += maker.remaining
        return min(total, taker.quantity)

    def _match(self, book: Book, taker: Order, out: Outcome, resting_before: Order | None) -> None:
        """Trade ``taker`` against the book, then rest, cancel or reject what is left.

        ``resting_before`` is the taker's stored state when it was already on the book
        (an aggressive replace), so its Change starts from there.
        """
        stopped_by_stp = False
        for maker in book.best(taker.side.opposite):
            if taker.remaining == 0 or not taker.crosses(maker.price):  # type: ignore[arg-type]
                break
            if maker.account and maker.account == taker.account:
                if self.stp_mode in (StpMode.CANCEL_MAKER, StpMode.CANCEL_BOTH):
                    book.remove(maker.order_id)
                    out.record(maker, None)
                    out.emit(OrderCanceled(*maker.cum(), reason=Reason.SELF_TRADE.value))
                if self.stp_mode in (StpMode.CANCEL_TAKER, StpMode.CANCEL_BOTH):
                    stopped_by_stp = True
                    break
                continue
            qty = min(taker.remaining, maker.remaining)
            price = maker.price
            assert price is not None
            new_maker = maker.filled_by(qty, price)
            taker = taker.filled_by(qty, price)
            if new_maker.remaining:
                book.update_in_place(new_maker)
                out.record(maker, new_maker)
            else:
                book.remove(maker.order_id)
                out.record(maker, None)
            out.emit(DealExecuted(price, qty, new_maker.state(), taker.state(), taker.side))
        if taker.remaining == 0:
            if resting_before is not None:
                out.record(resting_before, None)
            return
        if stopped_by_stp:
            out.emit(OrderCanceled(*taker.cum(), reason=Reason.SELF_TRADE.value))
        elif taker.order_type is OrderType.MARKET:
            out.emit(OrderRejected.after_acceptance(taker.state(), Reason.INSUFFICIENT_LIQUIDITY.value))
        elif taker.time_in_force is not TimeInForce.GTC:
            out.emit(OrderCanceled(*taker.cum(), reason=Reason.IOC_UNFILLED.value))
        else:
            book.add(taker)
            out.record(resting_before, taker)
            return
        if resting_before is not None:
            out.record(resting_before, None)

    def cancel(self, c: CancelOrder) -> Outcome:
        out = Outcome()
        order = self.find(c.pair_id, c.order_id)
        reason = Reason.UNKNOWN_ORDER if order is None else (
            Reason.NOT_OWNER if c.owner and order.owner and c.owner != order.owner else None)
        if reason is not None or order is None:
            out.status = "rejected"
            out.emit(CancelRejected(c.order_id, str(reason), "cancel", c.owner, c.client_order_id,
                                    order.client_order_id if order else ""))
            return out
        self.book(c.pair_id).remove(order.order_id)
        out.record(order, None)
        why = CANCEL_REASONS.get(c.reason, Reason.REQUESTED)
        out.emit(OrderCanceled(*order.cum(), reason=why.value, cancel_client_order_id=c.client_order_id))
        return out

    def replace_order(self, r: ReplaceOrder) -> Outcome:
        out = Outcome()
        order = self.find(r.pair_id, r.order_id)
        instrument = self.instruments.get(r.pair_id)
        reason: Reason | None = None
        if order is None or instrument is None:
            reason = Reason.UNKNOWN_ORDER
        elif r.owner and order.owner and r.owner != order.owner:
            reason = Reason.NOT_OWNER
        elif r.quantity <= 0:
            reason = Reason.INVALID_QUANTITY
        elif not instrument.min_lots <= r.quantity <= instrument.max_lots:
            reason = Reason.QUANTITY_OUT_OF_RANGE
        elif r.price is None or r.price <= 0:
            reason = Reason.INVALID_PRICE
        elif not instrument.min_ticks <= r.price <= instrument.max_ticks:
            reason = Reason.PRICE_OUT_OF_BAND
        elif r.quantity <= order.filled:
            reason = Reason.QUANTITY_BELOW_FILLED
        elif order.post_only:
            best = self.book(r.pair_id).best_price(order.side.opposite)
            if best is not None and (best <= r.price if order.side is Side.BUY else best >= r.price):
                reason = Reason.POST_ONLY_WOULD_TAKE
        if reason is not None or order is None:
            out.status = "rejected"
            out.emit(CancelRejected(r.order_id, str(reason), "replace", r.owner, r.client_order_id,
                                    order.client_order_id if order else ""))
            return out
        assert r.price is not None
        keeps_priority = r.price == order.price and r.quantity <= order.quantity
        book = self.book(r.pair_id)
        updated = msgspec.structs.replace(order, price=r.price, quantity=r.quantity, remaining=r.quantity - order.filled,
                          client_order_id=r.client_order_id or order.client_order_id,
                          priority=order.priority if keeps_priority else self._take_priority())
        out.emit(OrderReplaced(*updated.cum(), priority_kept=keeps_priority, orig_client_order_id=order.client_order_id))
        if keeps_priority:
            book.update_in_place(updated)
            out.record(order, updated)
            return out
        book.remove(order.order_id)
        self._match(book, updated, out, resting_before=order)
        return out
