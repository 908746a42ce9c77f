"""The cell's contracts: every command and event type round-trips through its wire encoding
(MessagePack), JSON written before that encoding is still read, and a command that breaks its
contract is refused with the field named. Pure: no processes."""

from __future__ import annotations

import json

import msgspec
import pytest

from matching.contracts import (
    MAX_TEXT,
    CancelOrder,
    CancelRejected,
    Command,
    CommandRefused,
    CommandResult,
    ContractError,
    DealExecuted,
    Event,
    EventPayload,
    EventType,
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
    command_json,
    encode_command,
    parse_command,
    parse_event,
    refused_command_route,
)

STATE = (("o1", 10, 4, 6, 800, "fix/fsg/C1", "C1", Side.BUY, "ACC", 200, OrderType.LIMIT, TimeInForce.GTC))
MAKER = OrderState("o2", 5, 5, 0, 1000, "fix/fsg/C2", "C2", Side.SELL, "", 200, OrderType.LIMIT, TimeInForce.IOC)

COMMANDS: list[Command] = [
    PlaceOrder("c1", 4, 0, OrderPayload("o1", Side.BUY, OrderType.LIMIT, 10, 200, TimeInForce.FOK, True, "ACC",
                                        "fix/fsg/C1", "C1")),
    PlaceOrder("c2", 5, 1, OrderPayload("o2", Side.SELL, OrderType.MARKET, 3)),
    CancelOrder("c3", 4, 0, "o1", "fix/fsg/C1", "X1"),
    CancelOrder("c4", 4, 0, "o1", "fix/fsg/C1", "", "cancel-on-disconnect"),
    ReplaceOrder("c5", 4, 0, "o1", 12, 201, "fix/fsg/C1", "R1"),
]

PAYLOADS: list[EventPayload] = [
    OrderAccepted(*STATE, post_only=True),
    OrderRejected("o1", "price-out-of-band", "fix/fsg/C1", "C1", Side.BUY, 10, 999, "ACC"),
    OrderRejected.after_acceptance(OrderState(*STATE), "insufficient-liquidity"),
    DealExecuted(200, 5, MAKER, OrderState(*STATE), Side.BUY),
    OrderCanceled(*STATE, reason="requested", cancel_client_order_id="X1"),
    OrderReplaced(*STATE, priority_kept=False, orig_client_order_id="C0"),
    CancelRejected("o1", "unknown-order", "replace", "fix/fsg/C1", "R1", "C1"),
    CommandRefused("cancel", "c9", "o1", "fix/fsg/C1", "X9", "ACC", "invalid-command: x"),
]


@pytest.mark.parametrize("cmd", COMMANDS, ids=[f"{c.kind}-{c.command_id}" for c in COMMANDS])
def test_every_command_round_trips_in_both_encodings(cmd: Command) -> None:
    wire = encode_command(cmd)
    assert wire[:1] != b"{", "MessagePack on the stream"
    assert parse_command(wire, 4) == cmd
    assert parse_command(command_json(cmd), 4) == cmd
    assert json.loads(command_json(cmd))["kind"] == cmd.kind


def test_every_event_type_has_a_payload_type_and_round_trips() -> None:
    assert {p.event_type for p in PAYLOADS} == set(EventType)
    for n, payload in enumerate(PAYLOADS):
        event = Event(f"c{n}:0", 1, 5, f"c{n}", payload)
        assert event.type is payload.event_type
        decoded = parse_event(event.encode())
        assert decoded == event and type(decoded.payload) is type(payload)


def test_an_accepted_orders_rejection_keeps_its_state_and_a_refused_one_has_none() -> None:
    assert OrderRejected("o1", "r", "", "", Side.BUY, 1, None, "").accepted is None
    late = OrderRejected.after_acceptance(OrderState(*STATE), "insufficient-liquidity")
    assert late.accepted == OrderState(*STATE)
    on_wire = msgspec.msgpack.decode(Event("e", 0, 0, "c", OrderRejected("o1", "r", "", "", Side.BUY, 1, None, ""))
                                     .encode())["payload"]
    assert "filled" not in on_wire, "a refusal before acceptance carries no state"


def test_json_events_written_before_the_binary_encoding_are_read() -> None:
    """Exactly what the JSON encoder wrote: ``type`` beside the payload and an order's type in it."""
    deal = {"eventId": "c1:2", "type": "deal.executed.v1", "partition": 0, "pairId": 4, "commandId": "c1",
            "payload": {"price": 200, "quantity": 5, "takerSide": "buy",
                        "maker": {"orderId": "o2", "quantity": 5, "filled": 5, "remaining": 0, "filledNotional": 1000,
                                  "owner": "fix/fsg/C2", "clientOrderId": "C2", "side": "sell", "account": "",
                                  "price": 200, "type": "limit", "timeInForce": "IOC"},
                        "taker": {"orderId": "o1", "quantity": 10, "filled": 4, "remaining": 6, "filledNotional": 800,
                                  "owner": "fix/fsg/C1", "clientOrderId": "C1", "side": "buy", "account": "ACC",
                                  "price": 200, "type": "limit", "timeInForce": "GTC"}}}
    assert parse_event(json.dumps(deal)) == Event("c1:2", 0, 4, "c1", PAYLOADS[3])
    rejected = {"eventId": "c2:0", "type": "order.rejected", "partition": 0, "pairId": 4, "commandId": "c2",
                "payload": {"orderId": "o1", "reason": "price-out-of-band", "owner": "fix/fsg/C1",
                            "clientOrderId": "C1", "side": "buy", "quantity": 10, "price": 999, "account": "ACC"}}
    assert parse_event(json.dumps(rejected).encode()).payload == PAYLOADS[1]


def test_json_commands_written_before_the_binary_encoding_are_applied() -> None:
    legacy = '{"kind":"place","command_id":"c1","pair_id":4,"partition":0,"order":{"order_id":"o1","side":"buy",' \
             '"order_type":"limit","quantity":10,"price":200,"time_in_force":"FOK","post_only":true,' \
             '"account":"ACC","owner":"fix/fsg/C1","client_order_id":"C1"}}'
    assert parse_command(legacy, 4) == COMMANDS[0]


@pytest.mark.parametrize("change,expected", [
    (lambda d: d["order"].update(quantity="10"), "Expected `int`, got `str` - at `$.order.quantity`"),
    (lambda d: d["order"].update(quantity=True), "Expected `int`, got `bool` - at `$.order.quantity`"),
    (lambda d: d["order"].update(price=2.5), "Expected `int | null`, got `float` - at `$.order.price`"),
    (lambda d: d["order"].update(side="up"), "Invalid enum value 'up' - at `$.order.side`"),
    (lambda d: d.update(kind="amend"), "Invalid value 'amend' - at `$.kind`"),
    (lambda d: d.pop("command_id"), "Object missing required field `command_id`"),
    (lambda d: d.update(command_id=""), "Expected `str` of length >= 1 - at `$.command_id`"),
    (lambda d: d["order"].update(owner="x" * (MAX_TEXT + 1)), f"Expected `str` of length <= {MAX_TEXT} - at `$.order.owner`"),
    (lambda d: d.update(pair_id=-4), "Expected `int` >= 0 - at `$.pair_id`"),
    (lambda d: d.update(partition=1), "partition 1 does not match pair 4 (expected 0 of 4)"),
])
def test_a_command_that_breaks_its_contract_is_refused_naming_the_field(change, expected: str) -> None:  # type: ignore[no-untyped-def]
    data = msgspec.msgpack.decode(encode_command(COMMANDS[0]))
    change(data)
    with pytest.raises(ContractError) as refused:
        parse_command(msgspec.msgpack.encode(data), 4)
    assert str(refused.value) == expected


@pytest.mark.parametrize("raw", [b"not json", b"", b"\xc1", b"[1,2]", b'{"kind":"place","command_id":"\\udcff"}',
                                 b"\x81\xa4kind\xa2\xff\xfe"])
def test_unreadable_commands_are_refused_not_half_read(raw: bytes) -> None:
    with pytest.raises(ContractError):
        parse_command(raw, 4)


def test_a_refused_commands_owner_is_found_in_either_encoding() -> None:
    bad = msgspec.msgpack.decode(encode_command(COMMANDS[2]))
    bad["order_id"] = 7  # breaks the contract; the owner is still readable
    for raw in (msgspec.msgpack.encode(bad), json.dumps(bad).encode()):
        route = refused_command_route(raw, "invalid-command: order_id")
        assert route == CommandRefused("cancel", "c3", "", "fix/fsg/C1", "X1", "", "invalid-command: order_id")
    assert refused_command_route(b"\xc1", "x") is None and refused_command_route(b'{"kind":"cancel"}', "x") is None


def test_the_processed_command_record_is_readable_json() -> None:
    assert json.loads(CommandResult("duplicate-order").encode()) == {"status": "duplicate-order"}
    assert json.loads(CommandResult("applied", ["order.accepted"], ["c1:0"]).encode()) == {
        "status": "applied", "events": ["order.accepted"], "eventIds": ["c1:0"]}
