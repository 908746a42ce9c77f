"""Command and event shapes of the matching cell, and partition routing (seed 000's contracts).

Owns: what crosses the cell's boundary — PlaceOrder / CancelOrder / ReplaceOrder commands,
the event envelope and its types, ``partition = pairId % MATCHING_PARTITION_COUNT``. The
partition settings are read and validated when this module is imported, so a mistyped
value stops the process before it touches a key or a stream. Prices and quantities are
integers (ticks and lots); nothing here is a float. Knows nothing of FIX or Redis.
"""

from __future__ import annotations

import os
import sys
from enum import StrEnum
from typing import Annotated, Any, ClassVar, Literal

import msgspec


class ContractError(ValueError):
    """A command or event that does not match its contract; the message says why."""


def _env_int(name: str, default: int | None) -> int | None:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ContractError(f"{name}={raw!r} is not a whole number") from None


def _partition_settings() -> tuple[int, int | None]:
    count = _env_int("MATCHING_PARTITION_COUNT", 2)
    assert count is not None
    if count < 1:
        raise ContractError(f"MATCHING_PARTITION_COUNT={count} must be at least 1")
    partition = _env_int("MATCHING_PARTITION", None)
    if partition is not None and not 0 <= partition < count:
        raise ContractError(f"MATCHING_PARTITION={partition} is outside 0..{count - 1} (MATCHING_PARTITION_COUNT={count})")
    return count, partition


try:
    MATCHING_PARTITION_COUNT, MATCHING_PARTITION = _partition_settings()
except ContractError as _exc:  # at import: stop before any key or stream is touched
    print(f"matching: configuration error: {_exc}", file=sys.stderr)
    raise SystemExit(2) from None


def partition_of(pair_id: int, partition_count: int = MATCHING_PARTITION_COUNT) -> int:
    """The one deterministic route of a pair."""
    return pair_id % partition_count


class Side(StrEnum):
    BUY = "buy"
    SELL = "sell"

    @property
    def opposite(self) -> Side:
        return Side.SELL if self is Side.BUY else Side.BUY


class OrderType(StrEnum):
    LIMIT = "limit"
    MARKET = "market"


class TimeInForce(StrEnum):
    GTC = "GTC"
    IOC = "IOC"
    FOK = "FOK"


class EventType(StrEnum):
    ORDER_ACCEPTED = "order.accepted"
    ORDER_REJECTED = "order.rejected"
    DEAL_EXECUTED = "deal.executed.v1"
    ORDER_CANCELED = "order.canceled"
    ORDER_REPLACED = "order.replaced"
    CANCEL_REJECTED = "cancel.rejected"
    # A command the conductor could not apply at all (unreadable, wrong partition, a poison
    # entry): dead-lettered, and this event tells its owner, so no request goes unanswered.
    COMMAND_REFUSED = "command.refused"


# --- commands -----------------------------------------------------------------------------
#
# One frozen, slotted msgspec type per command, tagged by ``kind``. On the stream a command
# is MessagePack (``encode_command``); the gateway's own records keep it as JSON
# (``command_json``), and ``parse_command`` reads both, so JSON entries written before the
# binary encoding are still applied. Field names on the wire are the attribute names.

MAX_TEXT = 256  # characters in any text field of a command (ids, owner, account)

# Text a command may carry: bounded. Decoding already refuses what is not UTF-8 (MessagePack)
# and lone surrogates (a JSON ``\udcff`` escape), so a poisoned string cannot get further.
Text = Annotated[str, msgspec.Meta(max_length=MAX_TEXT)]
Id = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_TEXT)]
PairId = Annotated[int, msgspec.Meta(ge=0)]


class OrderPayload(msgspec.Struct, frozen=True):
    """A new order. ``owner`` is an opaque route back to whoever placed it (the gateway
    puts ``namespace/gateway/session`` there); ``client_order_id`` is echoed in events."""

    order_id: Id
    side: Side
    order_type: OrderType
    quantity: int  # lots
    price: int | None = None  # ticks; None for market orders
    time_in_force: TimeInForce = TimeInForce.GTC
    post_only: bool = False
    account: Text = ""
    owner: Text = ""
    client_order_id: Text = ""


class PlaceOrder(msgspec.Struct, frozen=True, tag_field="kind", tag="place"):
    kind: ClassVar[str] = "place"
    command_id: Id
    pair_id: PairId
    partition: int
    order: OrderPayload


class CancelOrder(msgspec.Struct, frozen=True, tag_field="kind", tag="cancel"):
    kind: ClassVar[str] = "cancel"
    command_id: Id
    pair_id: PairId
    partition: int
    order_id: Id
    owner: Text = ""
    client_order_id: Text = ""  # the cancel request's own id, echoed in events
    # why, when not the owner's own request ('' = requested): the gateway canceled it when its
    # session went away, for the owner's OrderMassCancelRequest, or for an operator
    reason: Literal["", "cancel-on-disconnect", "mass-cancel", "operator"] = ""


class ReplaceOrder(msgspec.Struct, frozen=True, tag_field="kind", tag="replace"):
    kind: ClassVar[str] = "replace"
    command_id: Id
    pair_id: PairId
    partition: int
    order_id: Id
    quantity: int  # new total quantity, lots
    price: int | None = None  # new price, ticks (limit orders only: the cell refuses None)
    owner: Text = ""
    client_order_id: Text = ""


Command = PlaceOrder | CancelOrder | ReplaceOrder

_ENCODER = msgspec.msgpack.Encoder()
_COMMAND_MSGPACK = msgspec.msgpack.Decoder(Command)
_COMMAND_JSON = msgspec.json.Decoder(Command)


def encode_command(cmd: Command) -> bytes:
    """The command as a stream entry carries it: MessagePack."""
    return _ENCODER.encode(cmd)


def command_json(cmd: Command) -> str:
    """The command as JSON text, for records people read (the gateway's ClOrdID record)."""
    return msgspec.json.encode(cmd).decode()


def _is_json(raw: bytes) -> bool:
    """A JSON object starts with ``{`` (maybe after blanks); a MessagePack map never does
    (0x80–0x8f, 0xde, 0xdf), so the two encodings cannot be taken for each other. (The
    first byte decides a MessagePack map without copying the entry, as ``lstrip`` would.)"""
    if raw and (0x80 <= raw[0] <= 0x8F or raw[0] in (0xDE, 0xDF)):
        return False
    return raw.lstrip(b" \t\r\n")[:1] == b"{"


def parse_command(raw: str | bytes, partition_count: int = MATCHING_PARTITION_COUNT) -> Command:
    """Validate a command (MessagePack, or JSON from before the binary encoding); the
    partition is recomputed from the pair and must agree."""
    data = raw.encode("utf-8", "surrogateescape") if isinstance(raw, str) else bytes(raw)
    try:
        cmd = _COMMAND_JSON.decode(data) if _is_json(data) else _COMMAND_MSGPACK.decode(data)
    except msgspec.DecodeError as exc:  # ValidationError included: it names the field
        raise ContractError(str(exc)) from None
    expected = partition_of(cmd.pair_id, partition_count)
    if cmd.partition != expected:
        raise ContractError(f"partition {cmd.partition} does not match pair {cmd.pair_id} "
                            f"(expected {expected} of {partition_count})")
    return cmd


def _loose(raw: bytes | str | None) -> Any:
    """Whatever structure ``raw`` holds, unvalidated (None when it is not even that)."""
    if raw is None:
        return None
    data = raw.encode("utf-8", "surrogateescape") if isinstance(raw, str) else bytes(raw)
    try:
        return msgspec.json.decode(data) if _is_json(data) else msgspec.msgpack.decode(data)
    except msgspec.DecodeError:
        return None


def refused_command_route(raw: bytes | str | None, reason: str) -> CommandRefused | None:
    """What can still be read from a command the cell refuses, to answer its owner: the
    ``command.refused`` payload (owner, kind, ids), or None when there is no owner to tell.
    Tolerant by design: the command failed its contract, only bounded text is kept."""
    data = _loose(raw)
    if not isinstance(data, dict):
        return None
    order: dict[Any, Any] = data["order"] if isinstance(data.get("order"), dict) else {}

    def text(source: dict[Any, Any], key: str) -> str:
        value = source.get(key)
        return value if isinstance(value, str) and len(value) <= MAX_TEXT else ""

    owner = text(order, "owner") or text(data, "owner")
    if not owner:
        return None
    kind = data.get("kind")
    return CommandRefused(response_to=kind if kind in ("place", "cancel", "replace") else "place",
                          command_id=text(data, "command_id"),
                          order_id=text(order, "order_id") or text(data, "order_id"), owner=owner,
                          client_order_id=text(order, "client_order_id") or text(data, "client_order_id"),
                          account=text(order, "account"), reason=reason)


# --- events -------------------------------------------------------------------------------
#
# One frozen type per event type, tagged by ``type`` inside the payload; the envelope names
# its payload's type (``Event.type``). Wire names are camelCase (``orderId``), as the JSON
# events before the binary encoding had them, which ``parse_event`` still reads.


class _Wire(msgspec.Struct, frozen=True, rename="camel"):
    pass


class OrderState(_Wire, frozen=True):
    """An order as events carry it: enough for a receiver that never saw it before."""

    order_id: str
    quantity: int  # lots, total after any replace
    filled: int
    remaining: int
    filled_notional: int  # Σ price × qty of fills, tick·lot units (exact average price)
    owner: str
    client_order_id: str
    side: Side
    account: str
    price: int | None
    order_type: OrderType
    time_in_force: TimeInForce


class OrderAccepted(OrderState, frozen=True, tag_field="type", tag="order.accepted"):
    event_type: ClassVar[EventType] = EventType.ORDER_ACCEPTED
    post_only: bool = False


class OrderCanceled(OrderState, frozen=True, tag_field="type", tag="order.canceled"):
    event_type: ClassVar[EventType] = EventType.ORDER_CANCELED
    reason: str = ""
    cancel_client_order_id: str = ""  # the cancel request's ClOrdID ('' when not requested)


class OrderReplaced(OrderState, frozen=True, tag_field="type", tag="order.replaced"):
    event_type: ClassVar[EventType] = EventType.ORDER_REPLACED
    priority_kept: bool = False
    orig_client_order_id: str = ""


class OrderRejected(_Wire, frozen=True, omit_defaults=True, tag_field="type", tag="order.rejected"):
    """Refused before acceptance (only the request's fields), or the rest of an accepted
    order refused (a market order without liquidity: ``accepted`` carries its state)."""

    event_type: ClassVar[EventType] = EventType.ORDER_REJECTED
    order_id: str
    reason: str
    owner: str
    client_order_id: str
    side: Side
    quantity: int
    price: int | None
    account: str
    filled: int | None = None
    remaining: int | None = None
    filled_notional: int | None = None
    order_type: OrderType | None = None
    time_in_force: TimeInForce | None = None

    @classmethod
    def after_acceptance(cls, state: OrderState, reason: str) -> OrderRejected:
        return cls(state.order_id, reason, state.owner, state.client_order_id, state.side, state.quantity,
                   state.price, state.account, state.filled, state.remaining, state.filled_notional,
                   state.order_type, state.time_in_force)

    @property
    def accepted(self) -> OrderState | None:
        if self.filled is None or self.remaining is None or self.filled_notional is None:
            return None
        return OrderState(self.order_id, self.quantity, self.filled, self.remaining, self.filled_notional,
                          self.owner, self.client_order_id, self.side, self.account, self.price,
                          self.order_type or OrderType.LIMIT, self.time_in_force or TimeInForce.GTC)


class DealExecuted(_Wire, frozen=True, tag_field="type", tag="deal.executed.v1"):
    event_type: ClassVar[EventType] = EventType.DEAL_EXECUTED
    price: int
    quantity: int
    maker: OrderState
    taker: OrderState
    taker_side: Side


class CancelRejected(_Wire, frozen=True, tag_field="type", tag="cancel.rejected"):
    event_type: ClassVar[EventType] = EventType.CANCEL_REJECTED
    order_id: str
    reason: str
    response_to: Literal["cancel", "replace"]
    owner: str
    client_order_id: str
    orig_client_order_id: str = ""


class CommandRefused(_Wire, frozen=True, tag_field="type", tag="command.refused"):
    """A command the conductor could not apply at all (dead-lettered): its owner is told."""

    event_type: ClassVar[EventType] = EventType.COMMAND_REFUSED
    response_to: Literal["place", "cancel", "replace"]
    command_id: str
    order_id: str
    owner: str
    client_order_id: str
    account: str
    reason: str


EventPayload = OrderAccepted | OrderRejected | DealExecuted | OrderCanceled | OrderReplaced | CancelRejected | CommandRefused


class Event(_Wire, frozen=True):
    """One committed fact. ``event_id`` is deterministic: ``<commandId>:<n>``."""

    event_id: str
    partition: int
    pair_id: int
    command_id: str  # the causation id
    payload: EventPayload

    @property
    def type(self) -> EventType:
        return self.payload.event_type

    def encode(self) -> bytes:
        return _ENCODER.encode(self)

    def owners(self) -> list[str]:
        """Every order owner the event concerns, each once, in order (maker before taker)."""
        p = self.payload
        if isinstance(p, DealExecuted):
            maker, taker = p.maker.owner, p.taker.owner
            if maker and taker and maker != taker:
                return [maker, taker]
            return [maker or taker] if maker or taker else []
        return [p.owner] if p.owner else []


_EVENT_MSGPACK = msgspec.msgpack.Decoder(Event)


def parse_event(raw: str | bytes) -> Event:
    """Decode an event envelope (MessagePack, or JSON from before the binary encoding);
    anything else is a ContractError (dead-letter material)."""
    try:
        if type(raw) is bytes and raw and raw[0] >= 0x80:
            # MessagePack (its maps start at 0x80; JSON text never does): the hot path of the
            # outbox and the dispatcher, without the copy and the JSON check (~0.5 µs an event)
            return _EVENT_MSGPACK.decode(raw)
        data = raw.encode("utf-8", "surrogateescape") if isinstance(raw, str) else bytes(raw)
        if _is_json(data):
            return _legacy_event(data)
        return _EVENT_MSGPACK.decode(data)
    except (msgspec.DecodeError, ValueError, KeyError, TypeError) as exc:
        raise ContractError(f"invalid event envelope: {exc}") from None


def _legacy_event(data: bytes) -> Event:
    """A JSON envelope: ``type`` beside the payload, an order's type under ``type`` in it."""
    envelope = msgspec.json.decode(data)
    payload = dict(envelope["payload"])
    for state in [payload] + [payload[r] for r in ("maker", "taker") if isinstance(payload.get(r), dict)]:
        if "type" in state:
            state["orderType"] = state.pop("type")
    payload["type"] = envelope["type"]
    return msgspec.convert({**envelope, "payload": payload}, Event)


class CommandResult(_Wire, frozen=True, omit_defaults=True):
    """The processed-command record: what became of a command (kept as JSON, for people)."""

    status: str
    events: list[str] = []
    event_ids: list[str] = []

    def encode(self) -> bytes:
        return msgspec.json.encode(self)
