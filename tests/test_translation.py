"""Events → FIX reports, directly (pure, no processes): one table per FIX version, and the
reports of random flows through the real matching domain keeping FIX's invariants."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import msgspec
import pytest

from fixgw import fixmsg
from fixgw import translation as tr
from fixgw.dispatcher import order_ids
from matching.contracts import DealExecuted, Event, EventPayload, EventType
from matching.domain import Cell
from matching.instruments import InstrumentTable
from tests.flows import TEST_INSTRUMENTS, random_flow

TABLE = InstrumentTable.of(list(TEST_INSTRUMENTS.values()))
VERSIONS = ["FIX.4.2", "FIX.4.4", "FIXT.1.1"]


def state(filled: int = 0, quantity: int = 10, notional: int = 0, **more: Any) -> dict[str, Any]:
    return {"orderId": "o1", "quantity": quantity, "filled": filled, "remaining": quantity - filled,
            "filledNotional": notional, "owner": "s", "clientOrderId": "C1", "side": "buy", "account": "A",
            "price": 200, "orderType": "limit", "timeInForce": "GTC", **more}


def maker(filled: int, notional: int) -> dict[str, Any]:
    return {**state(filled, notional=notional), "orderId": "o2", "clientOrderId": "C2", "side": "sell"}


# (event type, payload, roles) → per version: (MsgType, ExecType, OrdStatus) of the first message.
CASES = [
    ("accepted", EventType.ORDER_ACCEPTED, state(), ("order",),
     {"FIX.4.2": ("8", "0", "0"), "FIX.4.4": ("8", "0", "0"), "FIXT.1.1": ("8", "0", "0")}),
    ("partial fill", EventType.DEAL_EXECUTED, {"price": 200, "quantity": 4, "maker": maker(4, 800),
                                               "taker": state(4, notional=800), "takerSide": "buy"}, ("taker",),
     {"FIX.4.2": ("8", "1", "1"), "FIX.4.4": ("8", "F", "1"), "FIXT.1.1": ("8", "F", "1")}),
    ("full fill", EventType.DEAL_EXECUTED, {"price": 201, "quantity": 10, "maker": maker(10, 2010),
                                            "taker": state(10, notional=2010), "takerSide": "buy"}, ("taker",),
     {"FIX.4.2": ("8", "2", "2"), "FIX.4.4": ("8", "F", "2"), "FIXT.1.1": ("8", "F", "2")}),
    ("canceled", EventType.ORDER_CANCELED, state(3, notional=600, reason="requested", cancelClientOrderId="X1"),
     ("order",), {"FIX.4.2": ("8", "4", "4"), "FIX.4.4": ("8", "4", "4"), "FIXT.1.1": ("8", "4", "4")}),
    ("replaced", EventType.ORDER_REPLACED, state(2, quantity=8, notional=400, clientOrderId="R1",
                                                 origClientOrderId="C1"), ("order",),
     {"FIX.4.2": ("8", "5", "5"), "FIX.4.4": ("8", "5", "1"), "FIXT.1.1": ("8", "5", "1")}),
    ("rejected", EventType.ORDER_REJECTED, {"orderId": "o1", "reason": "price-out-of-band", "owner": "s",
                                            "clientOrderId": "C1", "side": "buy", "quantity": 10, "price": 999,
                                            "account": ""}, ("order",),
     {"FIX.4.2": ("8", "8", "8"), "FIX.4.4": ("8", "8", "8"), "FIXT.1.1": ("8", "8", "8")}),
    ("cancel rejected", EventType.CANCEL_REJECTED, {"orderId": "o1", "reason": "unknown-order",
                                                    "responseTo": "cancel", "owner": "s", "clientOrderId": "X2",
                                                    "origClientOrderId": "C1"}, ("order",),
     {"FIX.4.2": ("9", None, "8"), "FIX.4.4": ("9", None, "8"), "FIXT.1.1": ("9", None, "8")}),
    ("command refused", EventType.COMMAND_REFUSED, {"responseTo": "place", "orderId": "o1", "owner": "s",
                                                    "clientOrderId": "C1", "reason": "invalid-command: x",
                                                    "commandId": "c1", "account": ""},
     ("order",), {"FIX.4.2": ("j", None, None), "FIX.4.4": ("j", None, None), "FIXT.1.1": ("j", None, None)}),
]


@pytest.mark.parametrize("begin_string", VERSIONS)
@pytest.mark.parametrize("name,kind,payload,roles,expected", CASES, ids=[c[0] for c in CASES])
def test_each_event_becomes_the_report_its_fix_version_defines(name: str, kind: EventType, payload: dict,
                                                                roles: tuple, expected: dict, begin_string: str) -> None:
    event = Event("e1", 0, 0, "c1", msgspec.convert({**payload, "type": kind.value}, EventPayload))
    assert event.type is kind
    out = tr.event_messages(event, {}, TABLE, begin_string, roles)
    assert len(out) == 1
    f = dict(out[0].fields)
    msg_type, exec_type, status = expected[begin_string]
    assert (out[0].msg_type, f.get(150), f.get(39)) == (msg_type, exec_type, status)
    assert out[0].inbox_id == f"e1:{roles[0][0].upper()}"
    if msg_type == "8":
        assert f[17] == out[0].inbox_id, "ExecID is the event's, stable across resends"
        assert (20 in f) == (begin_string == "FIX.4.2"), "ExecTransType only in FIX.4.2"
        assert "." not in f[38] or Decimal(f[38]) == Decimal(f[38]).normalize()
    if name == "partial fill":
        assert (f[32], f[31], f[14], f[151], f[6]) == ("4", "100", "4", "6", "100")
    if name == "full fill":
        assert (f[31], f[6], f[151]) == ("100.5", "100.5", "0")
    if name == "canceled":
        assert (f[11], f[41], f[151], f[14]) == ("X1", "C1", "0", "3")
    if name == "replaced":
        assert (f[11], f[41], f[38]) == ("R1", "C1", "8")
    if name == "rejected":
        assert f[58] == "price-out-of-band" and f[151] == "0"
    if name == "command refused":
        assert (f[372], f[379], f[380]) == ("D", "C1", "0") and f[58].startswith("invalid-command")


@pytest.mark.parametrize("reason", ["cancel-on-disconnect", "mass-cancel", "operator"])
def test_a_cancel_the_gateway_made_itself_that_finds_the_order_gone_tells_nobody(reason: str) -> None:
    """The cell refuses a cancel the client never sent (its ClOrdID empty): the order was filled
    or canceled meanwhile. No OrderCancelReject goes out: it would answer no request, without
    the ClOrdID (11) FIX requires in it."""
    payload = {"orderId": "o1", "reason": "unknown-order", "responseTo": "cancel", "owner": "s",
               "clientOrderId": "", "type": EventType.CANCEL_REJECTED.value}
    event = Event("e1", 0, 0, tr.command_id("s", f"{reason}:o1", "1"), msgspec.convert(payload, EventPayload))
    for begin_string in VERSIONS:
        assert tr.event_messages(event, {}, TABLE, begin_string, ("order",)) == []


def owners(event: Event) -> dict[str, tuple[str, ...]]:
    p = event.payload
    parts: dict[str, Any] = {"maker": p.maker, "taker": p.taker} if isinstance(p, DealExecuted) else {"order": p}
    out: dict[str, list[str]] = {}
    for role, s in parts.items():
        if s.owner:
            out.setdefault(s.owner, []).append(role)
    return {o: tuple(r) for o, r in out.items()}


def heard(seed: int, n: int) -> Iterator[tuple[Event, str, tuple[str, ...], list[str]]]:
    """Every event of a random flow of ``n`` commands through the matching domain, once for each
    owner it concerns: (event, owner, the owner's roles in it, the owner's order ids in it)."""
    cell = Cell(TEST_INSTRUMENTS)
    for cmd in random_flow(seed, n):
        for i, payload in enumerate(cell.apply(cmd).events):
            event = Event(f"{cmd.command_id}:{i}", 0, cmd.pair_id, cmd.command_id, payload)
            for owner, roles in owners(event).items():
                yield event, owner, roles, order_ids(event, roles)


@pytest.mark.parametrize("begin_string", VERSIONS)
@pytest.mark.parametrize("seed", range(4))
def test_reports_of_random_flows_keep_cum_leaves_avgpx_and_execid_invariants(seed: int, begin_string: str) -> None:
    views: dict[tuple[str, str], tr.OrderView] = {}
    exec_ids: set[tuple[str, str]] = set()
    fills: dict[tuple[str, str], list[tuple[Decimal, Decimal]]] = {}
    reports = 0
    for event, owner, roles, ids in heard(seed, 600):
        known = {oid: views.get((owner, oid)) for oid in ids}
        for out in tr.event_messages(event, known, TABLE, begin_string, roles):
            key = (owner, out.inbox_id)
            assert key not in exec_ids, f"ExecID {out.inbox_id} twice"
            exec_ids.add(key)
            if out.msg_type != "8" or out.view is None:
                continue
            reports += 1
            f = dict(out.fields)
            order = (owner, out.order_id)
            cum, leaves, qty = Decimal(f[14]), Decimal(f[151]), Decimal(f[38])
            if f[39] in "48C3":
                assert leaves == 0, f
            else:
                assert cum + leaves == qty, f"CumQty + LeavesQty = OrderQty: {f}"
            before = views.get(order)
            assert before is None or cum >= Decimal(before.cum_qty), "CumQty never goes back"
            if 32 in f:
                fills.setdefault(order, []).append((Decimal(f[31]), Decimal(f[32])))
            done = fills.get(order, [])
            assert cum == sum((q for _, q in done), Decimal(0)), "CumQty is the sum of LastQty"
            if done:
                exact = sum((p * q for p, q in done), Decimal(0)) / cum
                tick = TABLE.pair(event.pair_id).tick_size  # type: ignore[union-attr]
                assert Decimal(f[6]) == exact.quantize(tick / Decimal(10) ** 8), "AvgPx exact"
            views[order] = out.view
    assert reports > 300 and fills, "the flow exercised fills"


@pytest.mark.parametrize("begin_string", VERSIONS)
@pytest.mark.parametrize("seed", range(3))
def test_reports_made_as_text_are_byte_for_byte_what_their_fields_make(seed: int, begin_string: str,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The dispatcher asks for ExecutionReports as text (``transact_time`` given): every message of
    random flows, as an owner that knows its orders, as one that knows none (a drop copy), and as
    one whose stored views have empty fields (``body_text`` leaves those out), is the text the
    message's fields make."""
    monkeypatch.setattr(fixmsg, "wall_ns", lambda: 1_796_000_000_123_000_000)
    made = fixmsg.transact_time()
    views: dict[tuple[str, str], tr.OrderView] = {}
    as_text = 0
    for event, owner, roles, ids in heard(seed, 400):
        knowing = {oid: views.get((owner, oid)) for oid in ids}
        hollow = {oid: msgspec.structs.replace(v, account="", symbol="") if v else None
                  for oid, v in knowing.items()}
        for known in (knowing, dict.fromkeys(ids), hollow):
            fields = tr.event_messages(event, known, TABLE, begin_string, roles)
            texts = tr.event_messages(event, known, TABLE, begin_string, roles, made)
            assert [(o.msg_type, o.view, o.inbox_id, o.order_id) for o in texts] == \
                [(o.msg_type, o.view, o.inbox_id, o.order_id) for o in fields]
            for with_text, with_fields in zip(texts, fields):
                assert not with_fields.text
                expected = fixmsg.body_text(with_fields.msg_type, with_fields.fields)
                assert (with_text.text or fixmsg.body_text(with_text.msg_type, with_text.fields)) == expected
                as_text += bool(with_text.text)
        for out in tr.event_messages(event, knowing, TABLE, begin_string, roles):
            if out.view is not None:
                views[(owner, out.order_id)] = out.view
    assert as_text > 600, "most reports were made as text"


def test_clordid_record_is_stored_as_a_json_object_that_earlier_records_still_decode_as() -> None:
    """A ClOrdID's record outlives the process that claimed it (a takeover reads it for a
    cancel or a PossDup resend): the typed record is one JSON object with these keys, in this
    order (the claiming request's MsgSeqNum last), and records written without some of the keys
    (earlier versions had no ``request``) still decode."""
    from fixgw.orders import RECORD_DECODER, RECORD_ENCODER, ClOrdIDRecord

    view = tr.OrderView("o1", "C1", "ACME", "1", "2", "0", "10", "1.5")
    written = msgspec.json.encode({"orderId": "o1", "pairId": 3, "command": '{"type":"place"}', "view": view,
                                   "request": "17"})
    assert RECORD_ENCODER.encode(ClOrdIDRecord("o1", 3, '{"type":"place"}', view, "17")) == written
    earlier = msgspec.json.encode({"orderId": "o1", "pairId": 3, "command": '{"type":"place"}', "view": view})
    assert RECORD_DECODER.decode(earlier) == ClOrdIDRecord("o1", 3, '{"type":"place"}', view)
    assert RECORD_DECODER.decode(b'{"orderId":"o2"}') == ClOrdIDRecord("o2")
