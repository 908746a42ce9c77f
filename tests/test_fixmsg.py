"""The wire bytes the gateway commits ahead of a send are the bytes QuickFIX sends."""

from __future__ import annotations

import random
import re
from datetime import UTC, datetime

import pytest
import quickfix as fix

from fixgw.fixmsg import (
    body_text,
    build,
    filled,
    filled_body,
    from_text,
    inbound,
    inbound_reader,
    sending_time,
    transact_time,
    wire_bytes,
)


def quickfix_fill(message: fix.Message, seq: int, stamp: str) -> bytes:
    """What ``Session::fill`` does to the header, done through the bindings."""
    header = message.getHeader()
    header.setField(fix.BeginString("FIX.4.4"))
    header.setField(fix.SenderCompID("GW"))
    header.setField(fix.TargetCompID("CLIENT1"))
    header.setField(fix.MsgSeqNum(seq))
    header.setField(fix.StringField(52, stamp))
    return wire_bytes(message)


def built() -> fix.Message:
    m = fix.Message()
    m.getHeader().setField(fix.MsgType("8"))
    for tag, value in [(37, "O-1"), (11, "C1"), (17, "E-1"), (150, "0"), (39, "0"), (55, "ACME"), (54, "1"),
                       (151, "5"), (14, "0"), (6, "0"), (58, "caf\u00e9")]:  # non-ASCII: BodyLength counts bytes
        m.setField(fix.StringField(tag, value))
    return m


def echoed() -> fix.Message:
    """The AT echo: a copy of an inbound message, its header (old numbers, PossDup, OrigSendingTime) included."""
    raw = ("8=FIX.4.4\x019=0\x0135=D\x0134=7\x0143=Y\x0149=CLIENT1\x0152=20261201-00:00:00.000\x0156=GW\x01"
           "97=Y\x01122=20261130-23:59:59.000\x0111=O1\x0121=1\x0138=100\x0140=2\x0144=10.5\x0154=1\x0155=ACME\x01"
           "60=20261201-00:00:00.000\x0110=000\x01")
    m = fix.Message()
    m.setString(raw, False)
    return fix.Message(m)


def grouped() -> fix.Message:
    m = fix.Message()
    m.getHeader().setField(fix.MsgType("j"))
    m.getHeader().setField(fix.StringField(115, "ONBEHALF"))
    m.setField(fix.StringField(58, "text"))
    m.getTrailer().setField(fix.StringField(93, "2"))
    m.getTrailer().setField(fix.StringField(89, "ab"))
    return m


@pytest.mark.parametrize("make", [built, echoed, grouped], ids=["execution-report", "at-echo", "trailer-and-onbehalf"])
@pytest.mark.parametrize("seq", [1, 12345])
def test_filled_bytes_equal_what_quickfix_fills(make, seq: int) -> None:  # type: ignore[no-untyped-def]
    stamp = "20261201-06:30:00.123"
    message = make()
    ours = filled(message.toString(), "FIX.4.4", "GW", "CLIENT1", seq, stamp)
    assert ours == quickfix_fill(message, seq, stamp)


@pytest.mark.parametrize("msg_type,fields", [
    ("8", [(37, "O-1"), (11, "C1"), (17, "E-1"), (150, "F"), (39, "1"), (1, "ACC"), (55, "ACME"), (54, "1"),
           (38, "10"), (40, "2"), (44, "10.5"), (59, "1"), (32, "4"), (31, "10.5"), (151, "6"), (14, "4"),
           (6, "10.5"), (58, "")]),
    ("9", [(37, "NONE"), (11, "X"), (41, "C1"), (39, "8"), (434, "1"), (102, "1"), (58, "unknown-order")]),
    ("j", [(372, "D"), (379, "C1"), (380, "0"), (58, "caf\u00e9")]),
])
def test_reports_made_from_text_equal_reports_built_field_by_field(msg_type: str, fields: list) -> None:
    text = body_text(msg_type, fields + ([(60, "20261201-06:30:00")] if msg_type == "8" else []))
    built = build(msg_type, fields)
    if msg_type == "8":
        built.setField(fix.StringField(60, "20261201-06:30:00"))
    assert from_text(text).toString() == built.toString()
    assert filled(text, "FIX.4.4", "GW", "CLIENT1", 7, "20261201-06:30:00.000") == quickfix_fill(from_text(text), 7,
                                                                                          "20261201-06:30:00.000")
    # the dispatcher's shortcut for texts body_text made: the same bytes, the text not taken apart
    for seq in (1, 7, 123456):
        assert (filled_body(text, "FIX.4.4", "GW", "CLIENT1", seq, "20261201-06:30:00.000")
                == quickfix_fill(from_text(text), seq, "20261201-06:30:00.000"))


def test_a_header_field_among_body_fields_is_refused() -> None:
    """``filled_body`` puts the header in front of the body as it is: a header field in the
    body would go out elsewhere than committed, so ``body_text`` refuses it."""
    with pytest.raises(ValueError, match="header fields"):
        body_text("8", [(37, "O-1"), (115, "ONBEHALF")])


def test_timestamps_are_written_as_quickfix_writes_them() -> None:
    """SendingTime with milliseconds, TransactTime in whole seconds, both UTC (cached per
    second: consecutive calls agree with the clock)."""
    before = datetime.now(UTC).replace(microsecond=0)
    stamp, whole = sending_time(), transact_time()
    after = datetime.now(UTC)
    assert re.fullmatch(r"\d{8}-\d{2}:\d{2}:\d{2}\.\d{3}", stamp) and re.fullmatch(r"\d{8}-\d{2}:\d{2}:\d{2}", whole)
    for text in (stamp, whole):
        parsed = datetime.strptime(text[:17], "%Y%m%d-%H:%M:%S").replace(tzinfo=UTC)
        assert before <= parsed <= after


@pytest.mark.parametrize("poss_dup,poss_resend", [("Y", "Y"), ("N", "Y"), ("Y", ""), ("", "")])
def test_an_inbound_message_read_once_agrees_with_quickfix_getters(poss_dup: str, poss_resend: str) -> None:
    raw = ("8=FIX.4.4\x019=0\x0135=D\x0134=7\x01" + (f"43={poss_dup}\x01" if poss_dup else "")
           + "49=CLIENT1\x0152=20261201-00:00:00.000\x0156=GW\x01" + (f"97={poss_resend}\x01" if poss_resend else "")
           + "11=O1\x0138=100\x0140=2\x0144=10.50\x0154=1\x0155=ACME\x0160=20261201-00:00:00.000\x0110=000\x01")
    m = fix.Message()
    m.setString(raw, False)
    got = inbound(m)
    header = m.getHeader()
    assert got.msg_type == header.getField(35) == "D"
    assert got.seq == header.getField(34) == "7"
    assert got.poss_dup == (header.isSetField(43) and header.getField(43) == "Y")
    assert got.poss_resend == (header.isSetField(97) and header.getField(97) == "Y")
    assert got.possdup == (poss_dup == "Y" or poss_resend == "Y")
    # the body as the wire had it: the price's text, never a float; no header or trailer field
    assert got.fields == {11: "O1", 38: "100", 40: "2", 44: "10.50", 54: "1", 55: "ACME", 60: "20261201-00:00:00.000"}


def _random_message(rng: random.Random) -> str:
    """A message as a counterparty might send one: header fields in and out of place, repeated
    tags, a repeating group, an empty value, '=' inside a value, text that is not ASCII, parts
    that are not tag=value at all."""
    header = ["8=FIX.4.4", "9=0", f"35={rng.choice(['D', 'F', 'G', '8', ''])}", f"34={rng.randint(1, 10**9)}",
              "49=CLIENT1", "56=GW", "52=20261201-00:00:00.000"]
    for tag in (43, 97, 122, 627):
        if rng.random() < 0.4:
            header.append(f"{tag}={rng.choice(['Y', 'N', '', 'y', '2'])}")
    values = ["O1", "10.50", "", "a=b", "é€ü", "  x ", "0" * 12, "ACME", "1"]
    body = []
    for _ in range(rng.randint(0, 14)):
        tag = rng.choice([11, 38, 40, 44, 54, 55, 58, 453, 448, 447, 452, 34, 43, 97, 10, 5000, 1234567890])
        body.append(f"{tag}={rng.choice(values)}")
    junk = rng.choice(["x=1", "=5", "12345678901=big", "55", "0055=lead"])
    if rng.random() < 0.2:
        body.insert(rng.randint(0, len(body)), junk)
    return "\x01".join([*header, *body, "10=000"]) + "\x01"


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_native_reader_of_an_inbound_message_gives_what_inbound_gives(seed: int) -> None:
    """``inbound_reader`` with the C++ extension (``inbound_parts``) against ``inbound``, over
    random messages as QuickFIX holds them once parsed without a dictionary: the same text,
    header values, flags and body fields."""
    from fixgw import sendpath

    assert sendpath.native is not None, sendpath.why_not
    native = inbound_reader(sendpath.native)
    rng = random.Random(seed)
    compared = 0
    for _ in range(400):
        m = fix.Message()
        try:
            m.setString(_random_message(rng), False)
        except fix.InvalidMessage:
            continue  # (QuickFIX refuses it before any application sees it)
        assert native(m) == inbound(m)
        compared += 1
    assert compared > 250


@pytest.mark.parametrize("seed", [1, 2])
def test_the_native_filled_body_makes_the_bytes_filled_body_makes(seed: int) -> None:
    """The extension's ``filled_body`` (the dispatcher's send path) against ``fixmsg.filled_body``
    over random report texts: non-ASCII values, bytes held as surrogates, long bodies (a checksum
    over many bytes), numbers up to the largest MsgSeqNum; and the same error for a text with no
    field separator."""
    from fixgw import sendpath

    assert sendpath.native is not None, sendpath.why_not
    rng = random.Random(seed)
    alphabet = "AZaz09=.-/ :\u00e9\u20ac\udcff\udc80"  # (the last two: bytes that were not UTF-8)
    for _ in range(500):
        fields = [(rng.randint(1, 9999), "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))))
                  for _ in range(rng.randint(0, 30))]
        text = "8\x01" + "".join(f"{tag}={value}\x01" for tag, value in fields)
        args = (text, rng.choice(["FIX.4.2", "FIX.4.4", "FIXT.1.1"]), rng.choice(["FIXGW", "GW\u00e9"]),
                rng.choice(["CLIENT1", "DC"]), rng.randint(1, 2**31 - 1), "20261208-01:23:25.036")
        assert sendpath.native.filled_body(*args) == filled_body(*args)
    for fill in (sendpath.native.filled_body, filled_body):
        with pytest.raises(ValueError, match="substring not found"):
            fill("8", "FIX.4.4", "GW", "C", 1, "20261208-01:23:25.036")
