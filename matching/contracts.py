"""Command and event shapes of the matching cell, and partition routing (seed 000's contracts).

Owns: what crosses the cell's boundary — PlaceOrder / CancelOrder / ReplaceOrder commands,
the event envelope and its types, ``partition = pairId % MATCHING_PARTITION_COUNT``. The
partition settings are read and validated when this module is imported, so a mistyped
value stops the process before it touches a key or a stream. Prices and quantities are
integers (ticks and lots); nothing here is a float. Knows nothing of FIX or Redis.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


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


@dataclass(frozen=True, slots=True)
class OrderPayload:
    """A new order. ``owner`` is an opaque route back to whoever placed it (the gateway
    puts ``namespace/gateway/session`` there); ``client_order_id`` is echoed in events."""

    order_id: str
    side: Side
    order_type: OrderType
    quantity: int  # lots
    price: int | None = None  # ticks; None for market orders
    time_in_force: TimeInForce = TimeInForce.GTC
    post_only: bool = False
    account: str = ""
    owner: str = ""
    client_order_id: str = ""


@dataclass(frozen=True, slots=True)
class PlaceOrder:
    command_id: str
    pair_id: int
    partition: int
    order: OrderPayload
    kind: str = field(default="place", init=False)


@dataclass(frozen=True, slots=True)
class CancelOrder:
    command_id: str
    pair_id: int
    partition: int
    order_id: str
    owner: str = ""
    client_order_id: str = ""  # the cancel request's own id, echoed in events
    reason: str = ""  # why, when not the owner's request: "cancel-on-disconnect" ('' = requested)
    kind: str = field(default="cancel", init=False)


@dataclass(frozen=True, slots=True)
class ReplaceOrder:
    command_id: str
    pair_id: int
    partition: int
    order_id: str
    quantity: int  # new total quantity, lots
    price: int | None = None  # new price, ticks (None keeps a market... never: limit orders only)
    owner: str = ""
    client_order_id: str = ""
    kind: str = field(default="replace", init=False)


Command = PlaceOrder | CancelOrder | ReplaceOrder
CANCEL_REASONS = frozenset({"", "cancel-on-disconnect"})


def encode_command(cmd: Command) -> str:
    data = {name: getattr(cmd, name) for name in cmd.__slots__}  # asdict's deep copy is slow on the hot path
    if isinstance(cmd, PlaceOrder):
        data["order"] = {name: getattr(cmd.order, name) for name in cmd.order.__slots__}
    return json.dumps(data, separators=(",", ":"))


MAX_TEXT = 256  # characters in any text field of a command (ids, owner, account)


def _clean(key: str, value: Any) -> str:
    """Text a command may carry: a string that encodes as UTF-8 (no lone surrogates, which a
    JSON ``\\udcff`` escape can smuggle in) and is bounded; a poisoned command stops here."""
    if not isinstance(value, str):
        raise ContractError(f"{key} must be a string, got {type(value).__name__}")
    if len(value) > MAX_TEXT:
        raise ContractError(f"{key} is longer than {MAX_TEXT} characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ContractError(f"{key} is not valid Unicode text") from None
    return value


def _text(data: dict[str, Any], key: str) -> str:
    """An optional text field ('' when absent)."""
    value = data.get(key, "")
    return "" if value is None else _clean(key, value)


def _req(data: dict[str, Any], key: str, kind: type) -> Any:
    if key not in data:
        raise ContractError(f"missing {key}")
    value = data[key]
    if kind is int and (not isinstance(value, int) or isinstance(value, bool)):
        raise ContractError(f"{key} must be an integer, got {value!r}")
    if kind is str:
        if not isinstance(value, str) or not value:
            raise ContractError(f"{key} must be a non-empty string, got {value!r}")
        _clean(key, value)
    return value


def _opt_int(data: dict[str, Any], key: str) -> int | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise ContractError(f"{key} must be an integer or null, got {value!r}")
    return value


def parse_command(raw: str | bytes, partition_count: int = MATCHING_PARTITION_COUNT) -> Command:
    """Validate a command; the partition is recomputed from the pair and must agree."""
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ContractError(f"not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ContractError("command must be a JSON object")
    kind = data.get("kind")
    command_id = _req(data, "command_id", str)
    pair_id = _req(data, "pair_id", int)
    partition = _req(data, "partition", int)
    if pair_id < 0:
        raise ContractError(f"pair_id must not be negative, got {pair_id}")
    expected = partition_of(pair_id, partition_count)
    if partition != expected:
        raise ContractError(f"partition {partition} does not match pair {pair_id} "
                            f"(expected {expected} of {partition_count})")
    try:
        if kind == "place":
            o = data.get("order")
            if not isinstance(o, dict):
                raise ContractError("place needs an order object")
            order = OrderPayload(
                order_id=_req(o, "order_id", str),
                side=Side(str(o.get("side"))),
                order_type=OrderType(str(o.get("order_type"))),
                quantity=_req(o, "quantity", int),
                price=_opt_int(o, "price"),
                time_in_force=TimeInForce(o.get("time_in_force", "GTC")),
                post_only=bool(o.get("post_only", False)),
                account=_text(o, "account"),
                owner=_text(o, "owner"),
                client_order_id=_text(o, "client_order_id"),
            )
            return PlaceOrder(command_id, pair_id, partition, order)
        if kind == "cancel":
            reason = _text(data, "reason")
            if reason not in CANCEL_REASONS:
                raise ContractError(f"cancel reason must be one of {sorted(CANCEL_REASONS)}, got {reason!r}")
            return CancelOrder(command_id, pair_id, partition, _req(data, "order_id", str),
                               _text(data, "owner"), _text(data, "client_order_id"), reason)
        if kind == "replace":
            return ReplaceOrder(command_id, pair_id, partition, _req(data, "order_id", str),
                                _req(data, "quantity", int), _opt_int(data, "price"),
                                _text(data, "owner"), _text(data, "client_order_id"))
    except ValueError as exc:  # an enum that does not know the value
        if isinstance(exc, ContractError):
            raise
        raise ContractError(str(exc)) from None
    raise ContractError(f"unknown command kind {kind!r}")


def refused_command_route(raw: bytes | str | None) -> dict[str, Any] | None:
    """What can still be read from a command the cell refuses, to answer its owner: the
    ``command.refused`` payload (owner, kind, ids), or None when there is no owner to tell.
    Tolerant by design: the command failed its contract, only text that passes ``_clean`` is kept."""
    try:
        data = json.loads(raw) if raw is not None else None
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(data, dict):
        return None
    order: dict[str, Any] = data["order"] if isinstance(data.get("order"), dict) else {}

    def text(source: dict[str, Any], key: str) -> str:
        try:
            return _text(source, key)
        except ContractError:
            return ""

    owner = text(order, "owner") or text(data, "owner")
    if not owner:
        return None
    kind = data.get("kind")
    return {"responseTo": kind if kind in ("place", "cancel", "replace") else "place",
            "commandId": text(data, "command_id"), "orderId": text(order, "order_id") or text(data, "order_id"),
            "owner": owner, "clientOrderId": text(order, "client_order_id") or text(data, "client_order_id"),
            "account": text(order, "account")}


@dataclass(frozen=True, slots=True)
class Event:
    """One committed fact. ``event_id`` is deterministic: ``<commandId>:<n>``."""

    event_id: str
    type: EventType
    partition: int
    pair_id: int
    command_id: str  # the causation id
    payload: dict[str, Any]

    def encode(self) -> str:
        return json.dumps({"eventId": self.event_id, "type": str(self.type), "partition": self.partition,
                           "pairId": self.pair_id, "commandId": self.command_id, "payload": self.payload},
                          separators=(",", ":"))


def parse_event(raw: str | bytes) -> Event:
    """Decode an event envelope; anything else is a ContractError (dead-letter material)."""
    try:
        data = json.loads(raw)
        return Event(str(data["eventId"]), EventType(data["type"]), int(data["partition"]), int(data["pairId"]),
                     str(data["commandId"]), dict(data["payload"]))
    except (ValueError, KeyError, TypeError) as exc:
        raise ContractError(f"invalid event envelope: {exc}") from None
