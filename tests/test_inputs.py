"""The gateway's pure input checks: each refusal names the field and the reason."""

from __future__ import annotations

import pytest

from fixgw import translation as tr
from fixgw.inputs import logon_problem, printable, split_fields, text_problem
from matching.instruments import InstrumentError, to_decimal


@pytest.mark.parametrize("raw, problem", [
    ("8=FIX.4.4\x0135=A\x0134=1\x01108=30\x01", None),
    ("8=FIX.4.4\x0135=A\x0134=1\x01108=0\x01141=Y\x01", None),
    ("8=FIX.4.4\x0135=A\x0134=0\x01108=30\x01", "MsgSeqNum (34)"),
    ("8=FIX.4.4\x0135=A\x0134=99999999999\x01108=30\x01", "MsgSeqNum (34)"),
    ("8=FIX.4.4\x0135=A\x0134=2\x01108=30\x01141=Y\x01", "ResetSeqNumFlag=Y (141) needs MsgSeqNum (34) 1"),
    ("8=FIX.4.4\x0135=A\x0134=1\x01108=-5\x01", "HeartBtInt (108)"),
    ("8=FIX.4.4\x0135=A\x0134=1\x01108=3601\x01", "HeartBtInt (108)"),
    ("8=FIX.4.4\x0135=A\x0134=1\x01108=\u06f3\x01", "HeartBtInt (108)"),
    ("8=FIX.4.4\x0135=A\x0134=1\x01", "HeartBtInt (108)"),
])
def test_logon_problems_are_named(raw: str, problem: str | None) -> None:
    found = logon_problem(raw)
    assert (found is None) if problem is None else (found is not None and problem in found)


def test_text_fields_must_be_printable_ascii_and_bounded() -> None:
    assert text_problem({11: "ok-1", 55: "T1", 1: "ACC"}) is None
    assert text_problem({11: "\udcff\udcfe"}) == (11, "ClOrdID (11) must be printable ASCII")
    assert text_problem({11: "ok", 1: "é"}) == (1, "Account (1) must be printable ASCII")
    assert text_problem({55: "S" * 33}) == (55, "Symbol (55) is longer than 32 characters")
    assert printable("\x01x") == "" and printable(None, "1") == "1" and printable("A b") == "A b"


def test_split_fields_skips_what_is_not_a_field() -> None:
    assert split_fields("35=D\x01junk\x01\u0663=1\x0111=a=b\x01") == [(35, "D"), (11, "a=b")]


@pytest.mark.parametrize("text", ["1" * 25, "1e3", "NaN", "Infinity", " 1", "1.2.3", "", "+", "\u0661"])
def test_decimals_are_plain_and_bounded_before_any_arithmetic(text: str) -> None:
    with pytest.raises(InstrumentError) as refused:
        to_decimal(text)
    assert refused.value.reason == "invalid-number"


def test_a_refusal_echoes_only_what_can_go_back_as_it_came() -> None:
    view = tr.refused_view({11: "c-1", 55: "\udcff", 54: "1", 38: "9" * 40, 44: "10.5", 1: "ACC"}, "ns/fsg/S")
    assert (view.cl_ord_id, view.symbol, view.quantity, view.price, view.account) == ("c-1", "", "0", "10.5", "ACC")


@pytest.mark.parametrize("fields, reason", [
    ({11: "x", 41: "old", 54: "1", 55: "T1"}, "stale-clordid"),
    ({11: "x", 41: "cur", 54: "2", 55: "T1"}, "side-mismatch"),
    ({11: "x", 41: "cur", 54: "1", 55: "T2"}, "symbol-mismatch"),
])
def test_a_cancel_must_name_the_order_as_it_stands(fields: dict[int, str], reason: str) -> None:
    order = tr.OrderView("ns/fsg/S/old", "cur", "T1", "1", "2", "1", "5", "10", status="0")
    with pytest.raises(tr.Refusal) as refused:
        tr.cancel_order(fields, order, 10, "ns/fsg/S", 2)
    assert refused.value.reason == reason
