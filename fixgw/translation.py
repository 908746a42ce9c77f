"""FIX ⇄ matching translation: pure functions over plain data (no QuickFIX, no Redis).

Rules of this file:
- inbound: a FIX request (its fields as text, exactly as on the wire) becomes a matching
  command or a ``Refusal`` with a FIX reason; prices and quantities go through the
  instrument table as exact decimals into integer ticks and lots — never a float;
- outbound: a matching event plus the order's last known state becomes the fields of an
  ExecutionReport (35=8) or an OrderCancelReject (35=9) for one receiving session, and the
  order's next state. ExecIDs derive from the event id, so they are stable across resends
  and takeovers.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

import msgspec
from msgspec.structs import replace

from matching.contracts import (
    CancelOrder,
    CancelRejected,
    CommandRefused,
    DealExecuted,
    Event,
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
    partition_of,
)
from matching.instruments import Instrument, InstrumentError, InstrumentTable, to_decimal

from .inputs import printable

SIDES = {"1": Side.BUY, "2": Side.SELL}
FIX_SIDE = {Side.BUY: "1", Side.SELL: "2"}
ORD_TYPES = {"1": OrderType.MARKET, "2": OrderType.LIMIT}
FIX_ORD_TYPE = {OrderType.MARKET: "1", OrderType.LIMIT: "2"}
TIFS = {"1": TimeInForce.GTC, "3": TimeInForce.IOC, "4": TimeInForce.FOK}
FIX_TIF = {v: k for k, v in TIFS.items()}
POST_ONLY_EXEC_INST = "6"  # ExecInst 6 = Participate don't initiate


class Refusal(Exception):
    """A request the gateway answers itself; the cell never sees it."""

    def __init__(self, reason: str, text: str) -> None:
        super().__init__(text)
        self.reason = reason  # stable code: unknown-symbol, off-tick, duplicate-order, ...
        self.text = text


def command_id(session: str, clordid: str, incarnation: str = "") -> str:
    """Deterministic from (session, ClOrdID, incarnation). The command is stored with the
    ClOrdID's claim and republished from there, so a republished command is the same command;
    ``incarnation`` (allocated when the ClOrdID is claimed) tells apart a ClOrdID reused after
    its idempotency window, which is a new request the cell must not take for the old one."""
    digest = hashlib.sha256(f"{session}\x00{clordid}\x00{incarnation}".encode()).hexdigest()[:20]
    return f"fix-{digest}"


def order_id(session: str, clordid: str, incarnation: str = "") -> str:
    """Unique for the life of the venue when ``incarnation`` is (see ``command_id``)."""
    return f"{session}/{clordid}/{incarnation}" if incarnation else f"{session}/{clordid}"


def _need(f: dict[int, str], tag: int, name: str) -> str:
    value = f.get(tag)
    if value is None or value == "":
        raise Refusal("missing-field", f"{name} ({tag}) is required")
    return value


class OrderView(msgspec.Struct, frozen=True):
    """The gateway's own view of one order, as its owner last saw it. Stored as JSON in the
    session's order views and ClOrdID records (``to_json``; the field names are the keys)."""

    order_id: str
    cl_ord_id: str
    symbol: str
    side: str  # FIX Side
    ord_type: str  # FIX OrdType
    time_in_force: str
    quantity: str  # decimal text
    price: str | None
    account: str = ""
    status: str = "A"  # OrdStatus; A = pending new
    cum_qty: str = "0"
    leaves_qty: str = "0"
    avg_px: str = "0"
    orig_cl_ord_id: str = ""

    def to_json(self) -> str:
        return _JSON.encode(self).decode()

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> OrderView:
        return msgspec.convert(d, cls)

    @classmethod
    def from_json(cls, raw: str | bytes) -> OrderView:
        return _VIEW_DECODER.decode(raw)


_JSON = msgspec.json.Encoder()
_VIEW_DECODER = msgspec.json.Decoder(OrderView)


@dataclass(frozen=True, slots=True)
class Request:
    """A translated inbound request plus what the gateway remembers about its ClOrdID."""

    command: PlaceOrder | CancelOrder | ReplaceOrder
    view: OrderView | None = None  # for a new order: its pending view


def new_order(f: dict[int, str], table: InstrumentTable, session: str, partition_count: int,
              incarnation: str = "") -> Request:
    """NewOrderSingle (35=D) → PlaceOrder, or Refusal."""
    clordid = _need(f, 11, "ClOrdID")
    try:
        inst = table.symbol(_need(f, 55, "Symbol"))
    except InstrumentError as exc:
        raise Refusal(exc.reason, str(exc)) from None
    side = SIDES.get(_need(f, 54, "Side"))
    if side is None:
        raise Refusal("unsupported-side", f"Side {f[54]} is not supported (1 buy, 2 sell)")
    kind = ORD_TYPES.get(_need(f, 40, "OrdType"))
    if kind is None:
        raise Refusal("unsupported-ord-type", f"OrdType {f[40]} is not supported (1 market, 2 limit)")
    tif = TIFS.get(f.get(59, "1") or "1") if 59 in f else TimeInForce.GTC
    if tif is None:
        raise Refusal("unsupported-time-in-force", f"TimeInForce {f[59]} is not supported (1 GTC, 3 IOC, 4 FOK)")
    post_only = POST_ONLY_EXEC_INST in f.get(18, "").split()
    try:
        lots = inst.quantity_to_lots(_need(f, 38, "OrderQty"))
        if kind is OrderType.LIMIT:
            ticks: int | None = inst.price_to_ticks(_need(f, 44, "Price"))
        else:
            if f.get(44):
                raise Refusal("invalid-price", "a market order carries no Price")
            ticks = None
    except InstrumentError as exc:
        raise Refusal(exc.reason, str(exc)) from None
    if post_only and kind is OrderType.MARKET:
        raise Refusal("unsupported-order", "post-only (ExecInst 6) needs a limit order")
    if post_only and tif is not TimeInForce.GTC:
        raise Refusal("unsupported-order", "post-only (ExecInst 6) needs TimeInForce GTC")
    oid = order_id(session, clordid, incarnation)
    payload = OrderPayload(oid, side, kind, lots, ticks, tif, post_only, f.get(1, ""), session, clordid)
    cmd = PlaceOrder(command_id(session, clordid, incarnation), inst.pair_id, partition_of(inst.pair_id, partition_count), payload)
    quantity = _dec(inst.lots_to_quantity(lots))
    view = OrderView(oid, clordid, inst.symbol, f[54], f[40], FIX_TIF[tif], quantity,
                     _dec(inst.ticks_to_price(ticks)) if ticks is not None else None, f.get(1, ""),
                     leaves_qty=quantity)
    return Request(cmd, view)


def refused_view(f: dict[int, str], session: str) -> OrderView:
    """What a refusal report echoes of a request: only values that can go back as they came
    (printable text, well-formed numbers); anything else is left out of the report."""
    clordid = printable(f.get(11))

    def number(tag: int) -> str | None:
        text = f.get(tag)
        if text is None:
            return None
        try:
            to_decimal(text)
        except InstrumentError:
            return None
        return text

    return OrderView(order_id(session, clordid) if clordid else "NONE", clordid, printable(f.get(55)),
                     printable(f.get(54), "1"), printable(f.get(40), "2"), printable(f.get(59), "1"),
                     number(38) or "0", number(44), printable(f.get(1)))


def _same_order(f: dict[int, str], original: OrderView) -> None:
    """A cancel or replace names the order as it stands now: its current ClOrdID, its side
    and its symbol. Anything else is refused, never silently applied to the order."""
    if f[41] != original.cl_ord_id:
        raise Refusal("stale-clordid", f"OrigClOrdID {f[41]} is not the order's current ClOrdID "
                                       f"{original.cl_ord_id}")
    side = f.get(54)
    if side is not None and side != original.side:
        raise Refusal("side-mismatch", f"Side {side} differs from the order's Side {original.side}")
    symbol = f.get(55)
    if symbol is not None and symbol != original.symbol:
        raise Refusal("symbol-mismatch", f"Symbol {symbol} differs from the order's Symbol {original.symbol}")


def cancel_order(f: dict[int, str], original: OrderView | None, pair_id: int | None, session: str,
                 partition_count: int, incarnation: str = "") -> Request:
    """OrderCancelRequest (35=F) → CancelOrder, or Refusal (unknown or mismatched order)."""
    clordid = _need(f, 11, "ClOrdID")
    _need(f, 41, "OrigClOrdID")
    if original is None or pair_id is None:
        raise Refusal("unknown-order", f"no order with ClOrdID {f[41]} on this session")
    _same_order(f, original)
    return Request(CancelOrder(command_id(session, clordid, incarnation), pair_id, partition_of(pair_id, partition_count),
                               original.order_id, session, clordid))


def replace_order(f: dict[int, str], original: OrderView | None, pair_id: int | None, table: InstrumentTable,
                  session: str, partition_count: int, incarnation: str = "") -> Request:
    """OrderCancelReplaceRequest (35=G) → ReplaceOrder (limit orders only), or Refusal."""
    clordid = _need(f, 11, "ClOrdID")
    _need(f, 41, "OrigClOrdID")
    if original is None or pair_id is None:
        raise Refusal("unknown-order", f"no order with ClOrdID {f[41]} on this session")
    _same_order(f, original)
    inst = table.pair(pair_id)
    assert inst is not None
    if f.get(40, "2") != "2":
        raise Refusal("unsupported-ord-type", "only limit orders can be replaced")
    try:
        lots = inst.quantity_to_lots(_need(f, 38, "OrderQty"))
        ticks = inst.price_to_ticks(_need(f, 44, "Price"))
    except InstrumentError as exc:
        raise Refusal(exc.reason, str(exc)) from None
    return Request(ReplaceOrder(command_id(session, clordid, incarnation), pair_id, partition_of(pair_id, partition_count),
                                original.order_id, lots, ticks, session, clordid))


# --- outbound -------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Outbound:
    """One message for one session: its type, body fields in order, and the order's new view."""

    msg_type: str  # "8" or "9"
    fields: list[tuple[int, str]]  # (empty when ``text`` holds the message)
    view: OrderView | None
    inbox_id: str  # what the session's inbox records: each event reaches a session once
    order_id: str = ""
    text: str = ""  # MsgType and body as ``fixmsg.body_text`` makes them from ``fields`` ('' = not made here)


REJECT_REASON_44 = {"unknown-symbol": "1", "duplicate-order": "6", "quantity-out-of-range": "13",
                    "off-lot": "13", "invalid-quantity": "13", "unsupported-order": "11",
                    "unsupported-time-in-force": "11", "unsupported-ord-type": "11", "unsupported-side": "11",
                    "unknown-pair": "1", "price-out-of-band": "99", "off-tick": "99", "invalid-price": "99",
                    "post-only-would-take": "99", "insufficient-liquidity": "99", "store-unavailable": "99",
                    "missing-field": "99", "invalid-number": "99",
                    "partition-relocating": "2"}  # 2 = exchange closed: for now, not for good (Text says so)
REJECT_REASON_42 = {"unknown-symbol": "1", "unknown-pair": "1", "duplicate-order": "6",
                    "quantity-out-of-range": "3", "partition-relocating": "2"}


def ord_rej_reason(reason: str, begin_string: str) -> str:
    if begin_string == "FIX.4.2":
        return REJECT_REASON_42.get(reason, "0")
    return REJECT_REASON_44.get(reason, "99")


def exec_type(kind: str, begin_string: str, status: str) -> str:
    """ExecType by version: FIX 4.4+ has Trade (F) and Order Status (I); 4.2 does not."""
    if begin_string == "FIX.4.2":
        return {"trade": status, "status": status}.get(kind, kind)
    return {"trade": "F", "status": "I"}.get(kind, kind)


def _dec(d: Decimal) -> str:
    text = format(d.normalize(), "f")
    return text


def avg_px(notional_ticks_lots: int, filled_lots: int, tick: Decimal) -> Decimal:
    """Average price = Σ(price·qty)/Σqty in price units; exact when it terminates, else to
    eight decimal places below the tick (an average is not a tradeable price)."""
    if not filled_lots:
        return Decimal(0)
    avg_ticks = Decimal(notional_ticks_lots) / Decimal(filled_lots)
    return (avg_ticks * tick).quantize(tick / Decimal(10) ** 8, rounding=ROUND_HALF_EVEN)


def report(view: OrderView, *, exec_id: str, kind: str, status: str, begin_string: str,
           last: tuple[str, str] | None = None, text: str = "", rej_reason: str = "",
           cl_ord_id: str | None = None, orig_cl_ord_id: str = "") -> list[tuple[int, str]]:
    """The body fields of an ExecutionReport about ``view``."""
    f: list[tuple[int, str]] = [(37, view.order_id), (11, cl_ord_id or view.cl_ord_id)]
    if orig_cl_ord_id:
        f.append((41, orig_cl_ord_id))
    f.append((17, exec_id))
    if begin_string == "FIX.4.2":
        f.append((20, "0"))  # ExecTransType New
    f += [(150, exec_type(kind, begin_string, status)), (39, status)]
    if view.account:
        f.append((1, view.account))
    f += [(55, view.symbol), (54, view.side), (38, view.quantity), (40, view.ord_type)]
    if view.price is not None:
        f.append((44, view.price))
    f.append((59, view.time_in_force))
    if last is not None:
        f += [(32, last[1]), (31, last[0])]
    f += [(151, view.leaves_qty), (14, view.cum_qty), (6, view.avg_px)]
    if rej_reason:
        f.append((103, rej_reason))
    if text:
        f.append((58, text))
    return f


# ``report_text``'s pieces: the fields an ExecutionReport may leave out, as they go on the wire.
_SOH = "\x01"
_EXEC_TRANS_NEW = "20=0\x01"  # FIX 4.2's ExecTransType New


def report_text(view: OrderView, *, exec_id: str, kind: str, status: str, begin_string: str, transact_time: str,
                last: tuple[str, str] | None = None, text: str = "", rej_reason: str = "",
                cl_ord_id: str | None = None, orig_cl_ord_id: str = "") -> str:
    """``fixmsg.body_text("8", report(...))`` with TransactTime ``transact_time``, made in one
    step: the fields in ascending tag order, the optional ones as ``report`` adds them. Every
    report of an event goes through here (the dispatcher's profile: a list of fields, a dict and
    a sort cost twice this). ``''`` when a field ``report`` always adds is empty, which
    ``body_text`` would leave out: then the caller takes the general way."""
    v = view
    clordid = cl_ord_id or v.cl_ord_id
    if "" in (v.avg_px, clordid, v.cum_qty, exec_id, v.order_id, v.quantity, status, v.ord_type, v.side,
              v.symbol, v.time_in_force, transact_time, v.leaves_qty):
        return ""
    s = _SOH
    return (f"35=8{s}{f'1={v.account}{s}' if v.account else ''}6={v.avg_px}{s}11={clordid}{s}14={v.cum_qty}{s}"
            f"17={exec_id}{s}{_EXEC_TRANS_NEW if begin_string == 'FIX.4.2' else ''}"
            f"{_last(last)}"
            f"37={v.order_id}{s}38={v.quantity}{s}39={status}{s}40={v.ord_type}{s}"
            f"{f'41={orig_cl_ord_id}{s}' if orig_cl_ord_id else ''}{f'44={v.price}{s}' if v.price else ''}"
            f"54={v.side}{s}55={v.symbol}{s}{f'58={text}{s}' if text else ''}59={v.time_in_force}{s}"
            f"60={transact_time}{s}{f'103={rej_reason}{s}' if rej_reason else ''}"
            f"150={exec_type(kind, begin_string, status)}{s}151={v.leaves_qty}{s}")


def _last(last: tuple[str, str] | None) -> str:
    """LastPx and LastQty, each left out when empty (as ``body_text`` leaves an empty field out)."""
    if last is None:
        return ""
    return (f"31={last[0]}{_SOH}" if last[0] else "") + (f"32={last[1]}{_SOH}" if last[1] else "")


def refusal_report(view: OrderView, refusal: Refusal, exec_id: str, begin_string: str) -> list[tuple[int, str]]:
    """ExecutionReport Rejected for a new order the gateway refused itself."""
    rejected = replace(view, status="8", leaves_qty="0")
    return report(rejected, exec_id=exec_id, kind="8", status="8", begin_string=begin_string,
                  rej_reason=ord_rej_reason(refusal.reason, begin_string), text=f"{refusal.reason}: {refusal.text}")


def cancel_reject(order_id: str, cl_ord_id: str, orig_cl_ord_id: str, status: str, response_to: str,
                  reason: str, text: str, begin_string: str) -> list[tuple[int, str]]:
    """OrderCancelReject (35=9). ``response_to``: 1 cancel, 2 cancel/replace."""
    cxl_reason = "1" if reason == "unknown-order" else ("2" if begin_string == "FIX.4.2" else "99")
    return [(37, order_id or "NONE"), (11, cl_ord_id), (41, orig_cl_ord_id), (39, status),
            (434, response_to), (102, cxl_reason), (58, f"{reason}: {text}" if text else reason)]


# Decimal text of n lots or ticks of a step size: every report converts the same few numbers
# again (the dispatcher's profile: a tenth of a report's cost). The text depends on the step and
# n alone (``lots_to_quantity`` and ``ticks_to_price`` are both n × step, normalized), so lots
# and ticks share one table. Bounded: cleared when it grows large.
_TEXTS: dict[tuple[Decimal, int], str] = {}
_TEXTS_MAX = 100_000


def _steps_text(step: Decimal, n: int) -> str:
    key = (step, n)
    text = _TEXTS.get(key)
    if text is None:
        text = _dec((step * n).normalize()) if n else "0"
        if len(_TEXTS) >= _TEXTS_MAX:
            _TEXTS.clear()
        _TEXTS[key] = text
    return text


def _instrument(table: InstrumentTable, pair_id: int) -> Instrument:
    inst = table.pair(pair_id)
    assert inst is not None
    return inst


def _qty(table: InstrumentTable, pair_id: int, lots: int) -> str:
    return _steps_text(_instrument(table, pair_id).lot_size, lots)


def _px(table: InstrumentTable, pair_id: int, ticks: int | None) -> str | None:
    return None if ticks is None else _steps_text(_instrument(table, pair_id).tick_size, ticks)


def _avg_px_text(inst: Instrument, state: OrderState) -> str:
    if not state.filled:
        return "0"
    return _dec(avg_px(state.filled_notional, state.filled, inst.tick_size))


def view_from_event(state: OrderState, table: InstrumentTable, pair_id: int) -> OrderView:
    """A view built from an event alone (drop copy, or an owner whose view was lost)."""
    return _fresh_view(state, _instrument(table, pair_id))


def _fresh_view(state: OrderState, inst: Instrument, **changes: Any) -> OrderView:
    lots = inst.lot_size
    quantity = _steps_text(lots, state.quantity)
    view = OrderView(state.order_id, state.client_order_id, inst.symbol, FIX_SIDE[state.side],
                     FIX_ORD_TYPE[state.order_type], FIX_TIF[state.time_in_force], quantity,
                     None if state.price is None else _steps_text(inst.tick_size, state.price), state.account,
                     cum_qty=_steps_text(lots, state.filled), leaves_qty=_steps_text(lots, state.remaining),
                     avg_px=_avg_px_text(inst, state))
    return replace(view, **changes) if changes else view


@dataclass(frozen=True, slots=True)
class _Heard:
    """One event as one session hears it: what every event type's messages are built from."""

    event: Event
    views: dict[str, OrderView | None]  # the session's last view of each order it knows
    table: InstrumentTable
    begin_string: str
    roles: tuple[str, ...]
    transact_time: str = ""  # given: ExecutionReports come as text (``report_text``)

    @property
    def exec_id(self) -> str:
        return f"{self.event.event_id}:O"

    @property
    def instrument(self) -> Instrument:
        return _instrument(self.table, self.event.pair_id)

    def view_for(self, state: OrderState, **changes: Any) -> OrderView:
        """The order's view after ``state`` (and ``changes``): what the session knew of it,
        brought up to date."""
        known = self.views.get(state.order_id)
        inst = self.instrument
        if known is None:
            return _fresh_view(state, inst, **changes)
        lots = inst.lot_size
        fresh = {"cum_qty": _steps_text(lots, state.filled), "leaves_qty": _steps_text(lots, state.remaining),
                 "avg_px": _avg_px_text(inst, state), "quantity": _steps_text(lots, state.quantity)}
        return replace(known, **(fresh | changes if changes else fresh))

    def report(self, v: OrderView, exec_id: str, kind: str, status: str, **extra: Any) -> Outbound:
        """An ExecutionReport about ``v``: as text when the transact time is given."""
        if self.transact_time:
            text = report_text(v, exec_id=exec_id, kind=kind, status=status, begin_string=self.begin_string,
                               transact_time=self.transact_time, **extra)
            if text:
                return Outbound("8", [], v, exec_id, v.order_id, text)
        return Outbound("8", report(v, exec_id=exec_id, kind=kind, status=status, begin_string=self.begin_string,
                                    **extra), v, exec_id, v.order_id)

    def execution_report(self, v: OrderView, kind: str, status: str, **extra: Any) -> list[Outbound]:
        return [self.report(v, self.exec_id, kind, status, **extra)]


def _deal_executed(p: DealExecuted, h: _Heard) -> list[Outbound]:
    """A fill for each side the session owns (a drop copy: both), ExecIDs told apart by role."""
    out: list[Outbound] = []
    inst = h.instrument
    last = (_steps_text(inst.tick_size, p.price), _steps_text(inst.lot_size, p.quantity))
    for role in h.roles:
        state = p.maker if role == "maker" else p.taker
        status = "2" if state.remaining == 0 else "1"
        v = h.view_for(state, status=status)
        out.append(h.report(v, f"{h.event.event_id}:{role[0].upper()}", "trade", status, last=last))
    return out


def _cancel_rejected(p: CancelRejected, h: _Heard) -> list[Outbound]:
    if not p.client_order_id:
        # The gateway's own cancel (cancel on disconnect, a mass cancel's, an operator's, a
        # session's move) found the order gone: nobody sent a request to answer, and an
        # OrderCancelReject without its ClOrdID (11, required) is no message a client can take.
        return []
    known = h.views.get(p.order_id)
    status = known.status if known else "8"
    orig = p.orig_client_order_id or (known.cl_ord_id if known else "") or "NONE"
    fields = cancel_reject(p.order_id if known else "NONE", p.client_order_id, orig, status,
                           "1" if p.response_to == "cancel" else "2", p.reason, "", h.begin_string)
    return [Outbound("9", fields, known, h.exec_id, p.order_id)]


def _command_refused(p: CommandRefused, h: _Heard) -> list[Outbound]:
    return _refused_command(h.event, p, h.views.get(p.order_id), h.begin_string)


def _order_rejected(p: OrderRejected, h: _Heard) -> list[Outbound]:
    if p.accepted is not None:  # rejected after acceptance (a market order's rest without liquidity): canceled
        return h.execution_report(h.view_for(p.accepted, status="4", leaves_qty="0"), "4", "4",
                                  text=p.reason)
    # refused by the cell before acceptance
    table, pair = h.table, h.event.pair_id
    inst = table.pair(pair)
    assert inst is not None
    base = h.views.get(p.order_id) or OrderView(p.order_id, p.client_order_id, inst.symbol, FIX_SIDE[p.side],
                                                "2" if p.price is not None else "1", "1",
                                                _qty(table, pair, p.quantity), _px(table, pair, p.price), p.account)
    return h.execution_report(replace(base, status="8", leaves_qty="0"), "8", "8",
                              rej_reason=ord_rej_reason(p.reason, h.begin_string), text=p.reason)


def _order_accepted(p: OrderAccepted, h: _Heard) -> list[Outbound]:
    return h.execution_report(h.view_for(p, status="0"), "0", "0")


def _order_canceled(p: OrderCanceled, h: _Heard) -> list[Outbound]:
    v = h.view_for(p, status="4", leaves_qty="0")
    cancel_clordid = p.cancel_client_order_id or None
    return h.execution_report(v, "4", "4", text=p.reason, cl_ord_id=cancel_clordid,
                              orig_cl_ord_id=v.cl_ord_id if cancel_clordid else "")


def _order_replaced(p: OrderReplaced, h: _Heard) -> list[Outbound]:
    v = h.view_for(p)
    orig = p.orig_client_order_id
    status = "1" if p.filled else "0"
    v = replace(v, status=status, cl_ord_id=p.client_order_id or v.cl_ord_id, orig_cl_ord_id=orig,
                price=_px(h.table, h.event.pair_id, p.price))
    return h.execution_report(v, "5", "5" if h.begin_string == "FIX.4.2" else status, orig_cl_ord_id=orig)


# Event type → the messages a session receives for it (one builder per contract type).
_MESSAGES: dict[type, Callable[[Any, _Heard], list[Outbound]]] = {
    OrderAccepted: _order_accepted,
    DealExecuted: _deal_executed,
    OrderCanceled: _order_canceled,
    OrderReplaced: _order_replaced,
    OrderRejected: _order_rejected,
    CancelRejected: _cancel_rejected,
    CommandRefused: _command_refused,
}


def event_messages(event: Event, views: dict[str, OrderView | None], table: InstrumentTable,
                   begin_string: str, roles: tuple[str, ...], transact_time: str = "") -> list[Outbound]:
    """The messages one session receives for ``event``.

    ``roles`` says which of the event's orders this session hears about: ``("order",)`` for
    single-order events, ``("maker", "taker")`` subsets for deals. ``views`` holds the
    session's last view of each order id it already knows. With ``transact_time`` (UTC, as
    QuickFIX writes it) the ExecutionReports come with their ``text`` made, that TransactTime in
    it (``report_text``); other messages, and every message without it, come as fields.
    """
    build = _MESSAGES.get(type(event.payload))
    if build is None:
        raise ValueError(f"no FIX message for event type {event.type}")
    return build(event.payload, _Heard(event, views, table, begin_string, roles, transact_time))


REFUSED_REF_MSG_TYPE = {"place": "D", "cancel": "F", "replace": "G"}


def _refused_command(event: Event, p: CommandRefused, known: OrderView | None, begin_string: str) -> list[Outbound]:
    """A command the cell could not apply at all: a cancel or replace gets an OrderCancelReject,
    an order the session already knows an ExecutionReport Rejected, and an order it does not
    (the cell never accepted it, so the gateway holds no view) a BusinessMessageReject naming
    the ClOrdID, since an ExecutionReport needs the order's side and instrument."""
    inbox_id, order_id, clordid, text = f"{event.event_id}:O", p.order_id, p.client_order_id, p.reason
    if p.response_to in ("cancel", "replace"):
        fields = cancel_reject(order_id if known else "NONE", clordid, known.cl_ord_id if known else "NONE",
                               known.status if known else "8", "1" if p.response_to == "cancel" else "2",
                               "command-refused", text, begin_string)
        return [Outbound("9", fields, known, inbox_id, order_id)]
    if known is not None:
        v = replace(known, status="8", leaves_qty="0")
        return [Outbound("8", report(v, exec_id=inbox_id, kind="8", status="8", begin_string=begin_string,
                                     rej_reason=ord_rej_reason("command-refused", begin_string), text=text),
                         v, inbox_id, order_id)]
    fields = [(372, REFUSED_REF_MSG_TYPE[p.response_to]), (379, clordid or "NONE"), (380, "0"), (58, text)]
    return [Outbound("j", fields, None, inbox_id, order_id)]


def status_report(view: OrderView, exec_id: str, begin_string: str) -> list[tuple[int, str]]:
    """ExecutionReport ExecType=I (Order Status) from the gateway's view."""
    return report(view, exec_id=exec_id, kind="status", status=view.status, begin_string=begin_string)


# --- mass requests (OrderMassCancelRequest 35=q, OrderMassStatusRequest 35=AF) ------------------

MASS_SCOPES = {"1": "by symbol", "7": "all orders"}  # MassCancelRequestType (530), MassStatusReqType (585)
MASS_SIDES = {"1", "2"}


def _mass_scope_problem(tag: int, kind: str, symbol: str | None, side: str | None,
                        table: InstrumentTable) -> tuple[str, str] | None:
    """(reason code for 532, text) of a mass request this gateway does not carry out, or None."""
    if kind not in MASS_SCOPES:
        return "0", f"{tag}={kind or '(missing)'} not supported: 1 (by symbol) and 7 (all orders) are"
    if kind == "1" and (symbol is None or symbol not in table.by_symbol):
        return "1", f"unknown-symbol: {symbol!r} is not an instrument of this venue"
    if side is not None and side not in MASS_SIDES:
        return "99", f"Side (54) {side!r} not supported: 1 (buy) and 2 (sell) are"
    return None


def mass_cancel_problem(kind: str, symbol: str | None, side: str | None,
                        table: InstrumentTable) -> tuple[str, str] | None:
    return _mass_scope_problem(530, kind, symbol, side, table)


def mass_status_problem(kind: str, symbol: str | None, side: str | None, table: InstrumentTable) -> str | None:
    problem = _mass_scope_problem(585, kind, symbol, side, table)
    return problem[1] if problem is not None else None


def mass_cancel_report(cl_ord_id: str, order_id: str, kind: str, affected: int, symbol: str | None,
                       side: str | None, refused: tuple[str, str] | None = None) -> list[tuple[int, str]]:
    """OrderMassCancelReport (35=r): accepted (531 = the request's scope, 533 orders to cancel)
    or refused (531=0, 532 the reason, 58 the text)."""
    f: list[tuple[int, str]] = [(11, cl_ord_id), (37, order_id), (530, kind or "7")]
    f.append((531, "0" if refused is not None else kind))
    if refused is not None:
        f.append((532, refused[0]))
    f.append((533, str(affected)))
    if symbol is not None:
        f.append((55, symbol))
    if side is not None:
        f.append((54, side))
    if refused is not None:
        f.append((58, refused[1]))
    return f


def mass_status_reports(views: list[OrderView], request_id: str, exec_prefix: str, symbol: str | None,
                        side: str | None, begin_string: str) -> list[list[tuple[int, str]]]:
    """The status ExecutionReports answering an OrderMassStatusRequest: one per view, or one
    saying there is none (OrderID NONE, TotNumReports 0)."""
    tail = [(584, request_id), (911, str(len(views)))]
    if not views:
        none = OrderView("NONE", "NONE", symbol or "[N/A]", side or "1", "2", "0", "0", None, status="8")
        return [report(none, exec_id=f"{exec_prefix}-0", kind="status", status="8", begin_string=begin_string,
                       text="no open orders") + tail + [(912, "Y")]]
    return [status_report(v, f"{exec_prefix}-{i}", begin_string) + tail + [(912, "Y" if i == len(views) - 1 else "N")]
            for i, v in enumerate(views)]
