"""Bad input never stops a session, a partition or the gateway (issue 16).

Each trigger a hostile or buggy client found is sent over a real socket to a real gateway
process (real Valkey, real cells); each must get a reject or a Logout carrying the reason,
change nothing in Redis beyond the record of that answer, and leave every other session and
the partition working.
"""

from __future__ import annotations

import random
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from datastore.embedded import ValkeyProcess, free_port, standalone
from fixgw.context import CallbackWatch
from matching.keys import PartitionKeys
from sessionstore.keys import SessionKey
from tests.gateway_helpers import GatewayProc, RawFixClient, RawTrader, http_text, parse, wait_until
from tests.system_helpers import System, summary, wait_reports

pytestmark = pytest.mark.slow  # starts servers or processes: not in `make unit`

CLIENT1 = SessionKey("t", "fsg", "CLIENT1")


# --- the Logon gate (AT-mode gateway: no cells needed) -------------------------------------

def logon_until_answered(port: int, seq: int, sender: str = "CLIENT1", tries: int = 20) -> dict[int, bytes]:
    """Log on like a real client: reconnect while the gateway turns the connection away."""
    for _ in range(tries):
        c = RawFixClient(port, sender=sender, seq=seq)
        c.send("35=A\x0198=0\x01108=30")
        raw = c.read(timeout=10)
        c.close()
        if raw is not None:
            return parse(raw)
        time.sleep(0.1)
    raise AssertionError("never logged on")


def u32(raw: bytes) -> int:
    return int(struct.unpack("<I", raw)[0])


@pytest.mark.parametrize("logon, answer_stored", [
    ("35=A\x0198=0\x01108=30\x01141=Y", False),  # QuickFIX resets its copy before it looks at 34
    ("35=A\x0198=0\x01108=30", True),
])
def test_a_logon_with_msgseqnum_0_gets_a_logout_and_the_session_is_not_reset(
        tmp_path: Path, valkey: ValkeyProcess, logon: str, answer_stored: bool) -> None:
    port = free_port()
    gw = GatewayProc(tmp_path, valkey.url, fix_port=port).start().wait_active()
    try:
        assert logon_until_answered(port, 1)[35] == b"A"
        # The Logon's number is written behind (intake): wait for it, so "before" is settled.
        wait_until(lambda: u32(valkey.client().hgetall(CLIENT1.state).get(b"targetSeqNum", b"\0\0\0\0")) == 2,
                   "the first Logon's number to be recorded", 10)
        before = valkey.client().hgetall(CLIENT1.state)
        stored_before = valkey.client().hgetall(CLIENT1.chunk_of(1))

        hostile = RawFixClient(port, seq=0)
        hostile.send(logon)
        answer = parse(hostile.read())
        assert answer[35] == b"5" and b"MsgSeqNum too low" in answer[58], answer
        assert hostile.read(timeout=10) is None, "the connection is dropped after the Logout"
        hostile.close()
        assert gw.alive and gw.ready() == 200

        after = valkey.client().hgetall(CLIENT1.state)
        assert after[b"sessionStartTime"] == before[b"sessionStartTime"], "no reset"
        assert after[b"targetSeqNum"] == before[b"targetSeqNum"], "the refused Logon's number is not consumed"
        stored_after = valkey.client().hgetall(CLIENT1.chunk_of(1))
        assert {k: v for k, v in stored_after.items() if k in stored_before} == stored_before, "history intact"
        assert len(stored_after) == len(stored_before) + answer_stored
        assert u32(after[b"senderSeqNum"]) == u32(before[b"senderSeqNum"]) + answer_stored

        # the real client carries on where it left off: QuickFIX's copy agrees with Redis
        reply = logon_until_answered(port, 2)
        assert reply[35] == b"A" and int(reply[34]) == u32(after[b"senderSeqNum"]), reply
    finally:
        gw.stop()


@pytest.mark.parametrize("heartbeat", ["-5", "99999", "abc", "\u06f3"])
def test_a_logon_with_an_invalid_heartbtint_gets_a_logout_with_the_reason(
        tmp_path: Path, valkey: ValkeyProcess, heartbeat: str) -> None:
    port = free_port()
    # the gateway's own dictionaries (AT mode runs QuickFIX's, whose check answers nothing)
    gw = GatewayProc(tmp_path, valkey.url, fix_port=port, mode="gateway").start().wait_active()
    try:
        c = RawFixClient(port)
        c.send(f"35=A\x0198=0\x01108={heartbeat}")
        answer = parse(c.read())
        assert answer[35] == b"5" and b"HeartBtInt (108)" in answer[58], answer
        c.close()
        reply = logon_until_answered(port, 1)  # the refused Logon consumed no number
        assert reply[35] == b"A", reply
        assert logon_until_answered(port, 1, sender="CLIENT2")[35] == b"A", "another session is not affected"
        assert gw.alive
    finally:
        gw.stop()


def test_a_connection_that_never_logs_on_cannot_hold_a_session(tmp_path: Path, valkey: ValkeyProcess) -> None:
    port = free_port()
    gw = GatewayProc(tmp_path, valkey.url, fix_port=port, extra='logon_timeout = "2s"').start().wait_active()
    try:
        squatter = RawFixClient(port)
        squatter.send("35=A\x0198=x\x01108=30")  # malformed: QuickFIX answers nothing before logon
        assert squatter.read(timeout=10) is None, "dropped once the logon timeout passed"
        squatter.close()
        assert logon_until_answered(port, 1)[35] == b"A", "the real client logs on"
    finally:
        gw.stop()


def test_callback_watch_reports_a_stuck_callback() -> None:
    watch = CallbackWatch()
    with watch.running("fromApp", "t/fsg/CLIENT1"):
        time.sleep(0.05)
        assert watch.stalled(0.01) and "fromApp t/fsg/CLIENT1" in watch.stalled(0.01)[0]
    assert watch.stalled(0.0) == []


# --- order entry: the whole system ----------------------------------------------------------

@pytest.fixture(scope="module")
def system(tmp_path_factory: pytest.TempPathFactory) -> Iterator[System]:
    with standalone() as server:
        s = System(tmp_path_factory.mktemp("bad"), server, [server, server]).start()
        try:
            yield s
        finally:
            s.stop()


@pytest.fixture(scope="module")
def trader(system: System) -> Iterator[RawTrader]:
    t = RawTrader(system.fix_port, "CLIENT1")
    t.logon()
    yield t
    t.close()


@pytest.fixture(scope="module")
def other(system: System):  # type: ignore[no-untyped-def]
    return system.client("CLIENT2", reset_on_logon=True)


def redis_footprint(system: System) -> tuple[int, int, int]:
    """What refused input must not change: the cells' command streams, the session's ClOrdID
    claims and its order views."""
    client = system.store.client()
    commands = sum(client.xlen(PartitionKeys(p).commands) for p in (0, 1))
    claims = len(list(client.scan_iter(match="{e2e/fsg/CLIENT1}/clordid:*", count=1000)))
    return commands, claims, client.hlen("{e2e/fsg/CLIENT1}/orders")


def order(clordid: bytes, *, symbol: bytes = b"T1", side: bytes = b"1", qty: bytes = b"1", price: bytes = b"10",
          account: bytes = b"ACC", header: bytes = b"") -> bytes:
    return (b"35=D\x01" + header + b"11=" + clordid + b"\x011=" + account + b"\x0155=" + symbol + b"\x0154=" + side
            + b"\x0140=2\x0144=" + price + b"\x0138=" + qty + b"\x0159=1\x0160=20260101-00:00:00\x01")


def still_serving(system: System, other, tag: str) -> None:  # type: ignore[no-untyped-def]
    """The gateway, another session and the partitions all still work."""
    assert system.gateway.alive and system.gateway.ready() == 200
    for symbol in ("T1", "T2"):  # pair 10 → partition 0, pair 11 → partition 1
        other.order(f"alive-{tag}-{symbol}", "1", "1", "1.00", symbol=symbol)
        assert summary(wait_reports(other, f"alive-{tag}-{symbol}", 1)) == [("8", "0", "0")]


@pytest.mark.parametrize("name, body, expect", [
    ("price-29-digits", order(b"px29", price=b"12345678901234567890123456789.5"), (b"8", b"invalid-number")),
    ("qty-29-digits", order(b"qty29", qty=b"99999999999999999999999999999"), (b"8", b"invalid-number")),
    ("qty-exponent", order(b"qtyexp", qty=b"1e3"), (b"3", b"Incorrect data format")),  # QuickFIX
    ("clordid-outside-latin1", order("€uro".encode()), (b"3", b"ClOrdID (11) must be printable ASCII")),
    ("clordid-not-utf8", order(b"\xff\xfe-id"), (b"3", b"ClOrdID (11) must be printable ASCII")),
    ("clordid-too-long", order(b"x" * 65), (b"3", b"ClOrdID (11) is longer than 64")),
    ("symbol-not-utf8", order(b"sym-bad", symbol=b"\xff\xfe"), (b"3", b"Symbol (55) must be printable ASCII")),
    ("account-not-utf8", order(b"acc-bad", account=b"\xff\xfeACC"), (b"3", b"Account (1) must be printable ASCII")),
])
def test_each_trigger_gets_a_reject_with_the_reason_and_changes_nothing(
        system: System, trader: RawTrader, other, name: str, body: bytes,  # type: ignore[no-untyped-def]
        expect: tuple[bytes, bytes]) -> None:
    before = redis_footprint(system)
    since = len(trader.received)
    seq = trader.send(body)
    answer = trader.wait_answer(seq, parse(body)[11], since=since)
    msg_type, text = expect
    assert answer[35] == msg_type and text in answer[58], answer
    if msg_type == b"8":
        assert answer[39] == b"8", "Rejected"
    else:
        assert answer[45] == str(seq).encode() and answer[371] in (b"11", b"55", b"1", b"38")
    assert redis_footprint(system) == before
    still_serving(system, other, name)


def test_header_bytes_outside_latin1_are_echoed_byte_for_byte(system: System, trader: RawTrader) -> None:
    # DeliverToCompID (128) comes back as OnBehalfOfCompID (115) in QuickFIX's own reject;
    # storing that reject (here: Side missing) used to fail on the encoding and hang the session thread.
    seq = trader.send(b"35=D\x01128=\xe2\x82\xac\xff\x0111=route-1\x0155=T1\x0140=2\x0144=1\x0138=1\x01"
                      b"60=20260101-00:00:00\x01")
    answer = trader.wait_answer(seq)
    assert answer[35] == b"3" and answer[115] == b"\xe2\x82\xac\xff"
    stored = system.store.client().hgetall("{e2e/fsg/CLIENT1}/store/0")
    assert any(b"115=\xe2\x82\xac\xff\x01" in record for record in stored.values()), "stored exactly as sent"


def test_replace_or_cancel_that_does_not_match_the_order_gets_an_order_cancel_reject(
        system: System, other) -> None:  # type: ignore[no-untyped-def]
    other.order("m-1", "1", "5", "3.00", symbol="T3")
    wait_reports(other, "m-1", 1)
    client = system.store.client()

    def commands() -> int:
        return sum(client.xlen(PartitionKeys(p).commands) for p in (0, 1))

    before = commands()
    other.replace("m-side", "m-1", "2", "5", "3.05", symbol="T3")
    other.replace("m-sym", "m-1", "1", "5", "3.05", symbol="T4")
    other.cancel("m-cxl-side", "m-1", "2", symbol="T3")
    for clordid, reason in (("m-side", b"side-mismatch"), ("m-sym", b"symbol-mismatch"),
                            ("m-cxl-side", b"side-mismatch")):
        r = wait_reports(other, clordid, 1)[0]
        assert r[35] == "9" and r[58].startswith(reason.decode()), r
    assert commands() == before, "nothing reached a cell"
    assert not client.exists("{e2e/fsg/CLIENT2}/clordid:m-side"), "no ClOrdID was claimed"

    other.replace("m-2", "m-1", "1", "6", "3.05", symbol="T3")
    assert summary(wait_reports(other, "m-2", 1)) == [("8", "5", "0")]
    before = commands()
    other.cancel("m-stale", "m-1", "1", symbol="T3")  # m-1 was replaced by m-2
    stale = wait_reports(other, "m-stale", 1)[0]
    assert stale[35] == "9" and stale[58].startswith("stale-clordid"), stale
    assert commands() == before
    other.cancel("m-cxl", "m-2", "1", symbol="T3")
    assert wait_reports(other, "m-cxl", 1)[0][39] == "4", "the order was untouched and cancels normally"


MUTATIONS: list[bytes] = [b"", b"\xff", b"\xff\xfe\x80", "€".encode(), b"9" * 40, b"-1", b"0", b"1e5", b"NaN",
                          b" 1", b"1.2.3", b"x" * 300, b"\x7f", b"A", b"99999999999", b"0.000000001"]


def mutate(rng: random.Random, base: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    fields = list(base)
    for _ in range(rng.randint(1, 2)):
        i = rng.randrange(len(fields))
        action = rng.random()
        if action < 0.7:
            fields[i] = (fields[i][0], rng.choice(MUTATIONS))
        elif action < 0.8:
            fields.pop(i)
        elif action < 0.9:
            fields.insert(i, fields[i])  # a repeated tag
        else:
            fields.insert(i, (str(rng.choice([5000, 9999, 21, 18, 126])).encode(), rng.choice(MUTATIONS)))
    return fields


def test_random_mutations_of_valid_orders_each_get_an_answer_and_break_nothing(
        system: System, trader: RawTrader, other) -> None:  # type: ignore[no-untyped-def]
    rng = random.Random(16)
    accepted = 0
    kinds: set[tuple[bytes, bytes | None]] = set()
    before = redis_footprint(system)
    for n in range(120):
        clordid = f"mut-{n}".encode()
        base = [(b"11", clordid), (b"1", b"ACC"), (b"55", b"T5"), (b"54", b"1"), (b"40", b"2"), (b"44", b"1"),
                (b"38", b"1"), (b"59", b"1"), (b"60", b"20260101-00:00:00")]
        fields = mutate(rng, base)
        body = b"35=D\x01" + b"".join(t + b"=" + v + b"\x01" for t, v in fields)
        since = len(trader.received)
        seq = trader.send(body)
        answer = trader.wait_answer(seq, dict(fields).get(b"11"), timeout=10, since=since)
        assert answer[35] in (b"3", b"8", b"9", b"j"), answer
        kinds.add((answer[35], answer.get(39)))
        if answer[35] in (b"3", b"j", b"9"):
            assert answer.get(58), f"a reject with a reason: {answer}"
        if answer[35] == b"8" and answer.get(39) == b"8":
            assert answer.get(58), f"Rejected with a reason: {answer}"
        if answer[35] == b"8" and not answer[17].startswith(b"R-"):
            accepted += 1  # answered by a cell: the one case that may change Redis
        assert not trader.closed, f"the session survived message {n}: {body!r}"
    assert {(b"3", None), (b"8", b"8")} <= kinds and accepted, f"the mutations reached every path: {kinds}"
    commands, _, _ = redis_footprint(system)
    assert commands - before[0] == accepted, "every command in the cells is an order the client saw accepted"
    still_serving(system, other, "mutations")


def test_a_bad_inbox_entry_is_dead_lettered_and_the_dispatcher_carries_on(system: System, other) -> None:  # type: ignore[no-untyped-def]
    client = system.store.client()
    poison = client.xadd("{e2e/fsg}/inbox", {"event": "{not an event"}).decode()
    client.xadd("{e2e/fsg}/inbox", {"messageId": "no-event-field"})
    still_serving(system, other, "dead-letter")
    dead = client.xrange("{e2e/fsg}/inbox:dead-letter")
    assert [f[b"x-original-id"].decode() for _, f in dead][:1] == [poison]
    assert len(dead) == 2 and b"invalid event envelope" in dead[0][1][b"x-error"]
    assert b"no event field" in dead[1][1][b"x-error"]
    assert 'fixgw_dispatcher_dead_lettered_total 2.0' in http_text(system.gateway.http_port, "/metrics")
