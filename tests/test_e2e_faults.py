"""Crashes mid-flow and separate datastores: no ExecutionReport lost or duplicated."""

from __future__ import annotations

import re
import signal
import time
import urllib.request
from collections import Counter
from pathlib import Path

import pytest

from datastore.embedded import ValkeyProcess, standalone
from fixgw.demo import DemoClient
from matching.keys import PartitionKeys
from tests.gateway_helpers import RawTrader, wait_until
from tests.system_helpers import (
    DROP_COPY_SESSIONS,
    ORDER_ENTRY_SESSIONS,
    ReplyDroppingProxy,
    System,
    read_up_to,
    reports,
    summary,
    wait_quiet,
    wait_reports,
)

pytestmark = pytest.mark.slow  # starts servers or processes: not in `make unit`


def raw_read_up_to(trader: RawTrader) -> int:
    """The highest MsgSeqNum of the application messages ``trader`` has read."""
    return max((int(m[34]) for m in trader.received if m.get(35) not in (b"0", b"1", b"2", b"4", b"5", b"A")),
               default=0)


def exec_ids(client: DemoClient) -> Counter[str]:
    """ExecIDs of the reports the cell's events produced (status replies to resent orders aside)."""
    return Counter(r[17] for r in reports(client) if r[35] == "8" and r.get(150) != "I")


def wait_count(client: DemoClient, n: int, timeout: float = 60.0) -> None:
    ok = client.wait(lambda: len(exec_ids(client)) >= n, timeout)
    assert ok, f"{client.name}: {len(exec_ids(client))} of {n} reports"


def cross(c1: DemoClient, c2: DemoClient, n: int, symbol: str, prefix: str, settle: bool = True) -> None:
    for i in range(n):
        c1.order(f"{prefix}s{i}", "2", "1", "10.00", symbol=symbol)
    if settle:
        c1.wait(lambda: len([r for r in reports(c1) if r.get(11, "").startswith(prefix)]) >= n, 30)
    for i in range(n):
        c2.order(f"{prefix}b{i}", "1", "1", "10.00", symbol=symbol)


def assert_exactly_once(system: System, client: DemoClient, expected: int) -> None:
    wait_count(client, expected)
    kind = "dc" if client.name == "DROPCOPY" else "fsg"
    wait_quiet(system, {client.name: (kind, lambda: read_up_to(client))})  # nothing more can come
    ids = exec_ids(client)
    assert len(ids) == expected and max(ids.values()) == 1, f"{client.name}: duplicates {ids.most_common(3)}"


def test_sigkill_of_a_conductor_mid_flow_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    with standalone(aof=True) as server:
        system = System(tmp_path, server, [server, server]).start()
        try:
            c1, c2, dc = system.client("CLIENT1"), system.client("CLIENT2"), system.client("DROPCOPY")
            cross(c1, c2, 40, "T10", "k")  # T10 is pair 19: partition 1
            time.sleep(0.05)
            system.cells[("conductor", 1)].kill()
            time.sleep(0.5)
            system.cells[("conductor", 1)].start()  # waits out the dead one's lease, then redelivers
            for c in (c1, c2):
                assert_exactly_once(system, c, 80)  # New + Fill for each of 40 orders
            assert_exactly_once(system, dc, 160)
        finally:
            system.stop()


def audit(server: ValkeyProcess) -> int:
    """``fixgw-inspect audit`` of every session of the test's gateway (exit status)."""
    from sessionstore import inspect_cli

    return inspect_cli.main(["--url", server.url, "audit", "--namespace", "e2e"])


def test_sigkill_of_the_gateway_mid_flow_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    with standalone(aof=True) as server:
        system = System(tmp_path, server, [server, server]).start()
        try:
            c1, c2, dc = system.client("CLIENT1"), system.client("CLIENT2"), system.client("DROPCOPY")
            cross(c1, c2, 40, "T11", "g")
            time.sleep(0.05)
            last_before_kill = max(int(r[34]) for r in reports(c1))
            system.gateway.kill()
            system.gateway.start().wait_active(60)  # a new process: sessions rebuilt from Redis
            for c in (c1, c2):
                assert_exactly_once(system, c, 80)
            assert_exactly_once(system, dc, 160)
            # The flow may have finished before the kill: an order after the restart shows that the
            # new process numbers on from where the killed one stopped.
            c1.order("gafter", "2", "1", "11.00", symbol="T11")
            after = int(wait_reports(c1, "gafter", 1)[0][34])
            seqs = [int(r[34]) for r in reports(c1)]
            assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs), "sequence numbers only move forward"
            assert after > last_before_kill
            assert audit(server) == 0, "after the takeover every session's store is whole"
        finally:
            system.stop()


def test_session_store_and_two_partitions_on_three_separate_servers(tmp_path: Path) -> None:
    with standalone() as store, standalone() as p0, standalone() as p1:
        system = System(tmp_path, store, [p0, p1]).start()
        try:
            c1, c2, dc = system.client("CLIENT1"), system.client("CLIENT2"), system.client("DROPCOPY")
            cross(c1, c2, 3, "T1", "a")  # pair 10: partition 0
            cross(c1, c2, 3, "T2", "b")  # pair 11: partition 1
            for c in (c1, c2):
                assert_exactly_once(system, c, 12)
            assert_exactly_once(system, dc, 24)
            assert p0.client().exists("matching:{matching-p0}:meta") and not p0.client().exists(
                "matching:{matching-p1}:meta")
            assert p1.client().exists("matching:{matching-p1}:meta")
            assert store.client().exists("{e2e/fsg/CLIENT1}/state") and not p0.client().exists(
                "{e2e/fsg/CLIENT1}/state")
        finally:
            system.stop()


def test_a_logged_out_session_gets_its_reports_after_its_next_logon(tmp_path: Path) -> None:
    with standalone() as server:
        system = System(tmp_path, server, [server, server]).start()
        try:
            c1, c2 = system.client("CLIENT1"), system.client("CLIENT2")
            c1.order("late-s", "2", "2", "10.00", symbol="T12")
            wait_reports(c1, "late-s", 1)
            c1.close()  # logs out
            system.clients.remove(c1)
            c2.order("late-b", "1", "2", "10.00", symbol="T12")
            wait_reports(c2, "late-b", 2)
            again = system.client("CLIENT1")  # same store directory: the session continues
            fill = wait_reports(again, "late-s", 1)[0]
            assert (fill[150], fill[39], fill[43]) == ("F", "2", "Y"), "delivered as a resend of the stored report"
        finally:
            system.stop()


def assert_in_order_per_order(client: DemoClient) -> None:
    """Every order's reports arrive in the order the cell produced them: New first, then
    fills with CumQty never going back."""
    by_order: dict[str, list[dict[int, str]]] = {}
    for r in reports(client):
        if r[35] == "8" and r.get(150) != "I":
            by_order.setdefault(r[37], []).append(r)
    for order_id, rs in by_order.items():
        assert rs[0][39] == "0", f"{client.name}: {order_id} reported {rs[0][39]} before New"
        cums = [int(r[14]) for r in rs]
        assert cums == sorted(cums), f"{client.name}: {order_id} CumQty went back: {cums}"


def test_standby_cells_take_over_a_stalled_conductor_and_a_killed_outbox_in_order(tmp_path: Path) -> None:
    from tests.system_helpers import CellProc

    with standalone(aof=True) as server:
        system = System(tmp_path, server, [server, server]).start()
        standbys = [CellProc(role, 1, server.url, system.instruments, tmp_path / f"standby-{role}.log",
                             target_url=server.url if role == "outbox" else None,
                             also=["{e2e/dc}/inbox"] if role == "outbox" else None) for role in ("conductor", "outbox")]
        try:
            for s in standbys:
                s.start()
            c1, c2, dc = system.client("CLIENT1"), system.client("CLIENT2"), system.client("DROPCOPY")
            cross(c1, c2, 10, "T14", "w")  # T14 is pair 23: partition 1
            conductor = system.cells[("conductor", 1)]
            assert conductor.proc is not None
            conductor.proc.send_signal(signal.SIGSTOP)  # past its 2 s lease, a batch possibly in hand
            cross(c1, c2, 10, "T14", "x", settle=False)
            time.sleep(3)
            system.cells[("outbox", 1)].kill()  # mid-flow, its batch unpublished or unacknowledged
            cross(c1, c2, 10, "T14", "y", settle=False)
            conductor.proc.send_signal(signal.SIGCONT)  # the stalled one wakes up fenced
            time.sleep(0.5)
            cross(c1, c2, 10, "T14", "z", settle=False)
            standbys[0].kill()  # the successor dies in turn: the original, which held the lease before, regains it
            for c in (c1, c2):
                assert_exactly_once(system, c, 80)  # New + Fill for each of 40 orders
                assert_in_order_per_order(c)
            assert_exactly_once(system, dc, 160)
            assert_in_order_per_order(dc)
        finally:
            for s in standbys:
                s.stop()
            system.stop()


def test_a_gateway_killed_between_a_batch_commit_and_its_sends_resends_every_stored_message(tmp_path: Path) -> None:
    from datastore.connection import connect
    from datastore.settings import RedisEndpoint
    from sessionstore import FixedEpoch, SessionKey, SessionStore

    with standalone(aof=True) as server:
        system = System(tmp_path, server, [server, server])
        system.gateway.env = {"FIXGW_TEST_CRASH_AFTER_BATCH_COMMIT": "e2e/fsg/CLIENT1"}
        system.start()
        try:
            c1 = system.client("CLIENT1")
            c1.order("cc-1", "1", "1", "5.00", symbol="T15")
            assert system.gateway.wait(30) == 9, "died after committing the New, before sending it"
            store = SessionStore(connect(RedisEndpoint(url=server.url)), FixedEpoch(0))
            committed = store.load(SessionKey("e2e", "fsg", "CLIENT1")).messages[-1]
            assert b"\x0111=cc-1\x01" in committed.body and b"\x0135=8\x01" in committed.body
            assert not reports(c1, "cc-1"), "nothing was sent"
            system.gateway.env = {}
            system.gateway.start().wait_active(60)
            report = wait_reports(c1, "cc-1", 1)[0]
            assert (report[43], int(report[34])) == ("Y", committed.seq_num), "delivered as the stored message, resent"
            wait_quiet(system, {"CLIENT1": ("fsg", lambda: read_up_to(c1))})  # nothing more can come
            assert len(reports(c1, "cc-1")) == 1, "exactly once: the event is in the inbox, never re-sent as new"
            c1.order("cc-2", "1", "1", "5.00", symbol="T15")
            assert int(wait_reports(c1, "cc-2", 1)[0][34]) > committed.seq_num, "numbers only move forward"
            assert audit(server) == 0, "after the takeover every session's store is whole"
        finally:
            system.stop()


def started_ready_within_a_second(tmp_path: Path, server: ValkeyProcess) -> System:
    """The whole system, started, its gateway's /ready saying after one second (not ten) that
    entries are not delivered."""
    system = System(tmp_path, server, [server, server])
    config = system.gateway.config.read_text()
    system.gateway.config.write_text(config.replace("[gateway]\n", '[gateway]\ncallback_stall_limit = "1s"\n', 1))
    system.start()
    return system


def log_on(*traders: RawTrader) -> None:
    for t in traders:
        t.logon()
        t.wait_for(lambda m: m.get(35) == b"A", "the Logon answer", timeout=20)


def test_a_session_whose_commits_are_refused_gets_every_report_once_accepted_again(tmp_path: Path) -> None:
    """A dispatcher cycle's group commits of every session go in one round trip, and each
    session's outcome is its own: while the drop copy's commits are refused (its owner stamp
    changed under the gateway, as a newer writer's would), nothing reaches it, and its entries
    stay pending (the session is parked; the order-entry session's reports go out). Once its
    commits are taken again, every report reaches each session exactly once, in order."""
    from sessionstore import FixedEpoch, SessionKey, SessionStore
    from tests.gateway_helpers import http_json, http_status, http_text

    with standalone() as server:
        system = started_ready_within_a_second(tmp_path, server)
        trader, copy = RawTrader(system.fix_port, "CLIENT1"), RawTrader(system.fix_port, "DROPCOPY")
        try:
            log_on(trader, copy)
            client = server.client()
            drop_copy = SessionKey("e2e", "dc", "DROPCOPY")
            # Its Logon's inbound number is recorded behind the answer: refused too, it would end
            # the gateway (fenced: a newer writer holds the session), which is not what this tests.
            wait_until(lambda: SessionStore(client, FixedEpoch(0)).load(drop_copy).state.target_seq_num == 2,
                       "the drop copy's Logon recorded", 10)
            owner = drop_copy.owner
            epoch = client.get(owner)
            client.set(owner, b"999999")  # the drop copy's commits are refused from now on

            def news(t: RawTrader, clordid: bytes) -> list[dict[int, bytes]]:
                return [m for m in t.received if m.get(35) == b"8" and m.get(11) == clordid and m.get(150) == b"0"]

            placed = [f"fd-{i}".encode() for i in range(30)]  # a burst: both inboxes' entries share cycles
            for clordid in placed:
                trader.send(f"35=D\x0111={clordid.decode()}\x0155=T16\x0154=1\x0140=2\x0144=1.00\x0138=1\x0159=1\x01"
                            "60=20260101-00:00:00")
            trader.wait_for(lambda m: bool(news(trader, placed[0])), "the order-entry session's first New", timeout=20)
            time.sleep(1.5)  # the drop copy's commits are refused and retried meanwhile
            assert not any(news(copy, c) for c in placed), "nothing reaches the drop copy that its store refused"
            wait_until(lambda: http_status(system.gateway.http_port) == 503, "/ready: entries not delivered", 10)
            status, body = http_json(system.gateway.http_port)
            assert status == 503 and any("entries not delivered" in p and "FENCED" in p for p in body["problems"]), body
            client.set(owner, epoch)
            for t in (trader, copy):
                t.wait_for(lambda m, t=t: all(news(t, c) for c in placed), "every New", timeout=30)
            wait_quiet(system, {"CLIENT1": ("fsg", lambda: raw_read_up_to(trader)),
                                "DROPCOPY": ("dc", lambda: raw_read_up_to(copy))})  # nothing more can come
            assert all(len(news(trader, c)) == 1 and len(news(copy, c)) == 1 for c in placed), "each report once"
            for t in (trader, copy):
                assert [m[11] for m in t.received if m.get(150) == b"0"] == placed, "in order"
                seqs = [int(m[34]) for m in t.received]
                assert seqs == list(range(1, len(seqs) + 1)), "numbers in order, none skipped"
            wait_until(lambda: http_status(system.gateway.http_port) == 200, "/ready once delivered again", 10)
            assert "fixgw_events_out_of_order_total{" not in http_text(system.gateway.http_port, "/metrics"), \
                "a batch retried after a refused commit is not taken for events out of order"
        finally:
            trader.close()
            copy.close()
            system.stop()


def test_a_parked_session_holds_back_only_its_own_reports(tmp_path: Path) -> None:
    """Ordering is per session, not per gateway: two order-entry sessions share one inbox
    stream, and while CLIENT2's commits are refused its entries wait (parked), in order, while
    CLIENT1 gets the fills of the very deals CLIENT2 was the maker in, and the reports of every
    order it places afterwards. Once CLIENT2's commits are taken again it gets each of its
    reports exactly once, in order, with no number skipped; /ready names the parked session
    meanwhile, and the gauge counts it."""
    from sessionstore import SessionKey
    from tests.gateway_helpers import http_json, http_status, http_text

    def order(t: RawTrader, clordid: str, side: str, price: str) -> None:
        t.send(f"35=D\x0111={clordid}\x0155=T17\x0154={side}\x0140=2\x0144={price}\x0138=1\x0159=1\x01"
               "60=20260101-00:00:00")

    def execs(t: RawTrader, clordid: str, exec_type: bytes) -> list[dict[int, bytes]]:
        return [m for m in t.received if m.get(35) == b"8" and m.get(11) == clordid.encode() and m.get(150) == exec_type]

    with standalone() as server:
        system = started_ready_within_a_second(tmp_path, server)
        c1, c2 = RawTrader(system.fix_port, "CLIENT1"), RawTrader(system.fix_port, "CLIENT2")
        try:
            log_on(c1, c2)
            makers = [f"pk-s{i}" for i in range(5)]
            for clordid in makers:
                order(c2, clordid, "2", "10.00")
            c2.wait_for(lambda m: all(execs(c2, c, b"0") for c in makers), "CLIENT2's resting sells", timeout=20)
            client = server.client()
            owner = SessionKey("e2e", "fsg", "CLIENT2").owner
            epoch = client.get(owner)
            client.set(owner, b"999999")  # CLIENT2's commits are refused from now on
            before = len(c2.received)

            takers = [f"pk-b{i}" for i in range(5)]  # each fills one of CLIENT2's sells
            for clordid in takers:
                order(c1, clordid, "1", "10.00")
            c1.wait_for(lambda m: all(execs(c1, c, b"F") for c in takers), "CLIENT1's fills", timeout=20)
            later = [f"pk-l{i}" for i in range(10)]  # placed while CLIENT2 is parked: not held behind it
            for clordid in later:
                order(c1, clordid, "1", "1.00")
            c1.wait_for(lambda m: all(execs(c1, c, b"0") for c in later), "CLIENT1's later News", timeout=20)
            wait_until(lambda: http_status(system.gateway.http_port) == 503, "/ready: a parked session", 10)
            status, body = http_json(system.gateway.http_port)
            assert any("CLIENT2" in p and "entries not delivered" in p and "FENCED" in p for p in body["problems"]), body
            assert "fixgw_dispatcher_parked_sessions 1.0" in http_text(system.gateway.http_port, "/metrics")
            assert len(c2.received) == before, "nothing reaches CLIENT2 that its store refused"

            client.set(owner, epoch)
            c2.wait_for(lambda m: all(execs(c2, c, b"F") for c in makers), "CLIENT2's fills", timeout=30)
            wait_quiet(system, {"CLIENT1": ("fsg", lambda: raw_read_up_to(c1)),
                                "CLIENT2": ("fsg", lambda: raw_read_up_to(c2))})  # nothing more can come
            assert [m[11] for m in c2.received if m.get(150) == b"F"] == [c.encode() for c in makers], "in order, once"
            assert all(len(execs(c1, c, b"F")) == 1 for c in takers) and all(len(execs(c1, c, b"0")) == 1 for c in later)
            for t in (c1, c2):
                seqs = [int(m[34]) for m in t.received]
                assert seqs == list(range(1, len(seqs) + 1)), "numbers in order, none skipped"
            wait_until(lambda: http_status(system.gateway.http_port) == 200, "/ready once delivered again", 10)
            assert "fixgw_dispatcher_parked_sessions 0.0" in http_text(system.gateway.http_port, "/metrics")
            assert "fixgw_events_out_of_order_total{" not in http_text(system.gateway.http_port, "/metrics")
        finally:
            c1.close()
            c2.close()
            system.stop()


def test_entries_held_for_a_parked_session_survive_a_gateway_killed_meanwhile(tmp_path: Path) -> None:
    """What a parked session has not got stays pending in the inbox's consumer group, so a
    gateway SIGKILLed while CLIENT2 is parked loses none of it: CLIENT1 has its fills before the
    kill; the operator puts CLIENT2's owner stamp back; the new process reads its pending entries
    first and CLIENT2 gets each of its fills exactly once, in order, numbers only forward."""
    from sessionstore import SessionKey

    with standalone(aof=True) as server:
        system = System(tmp_path, server, [server, server]).start()
        try:
            c1, c2 = system.client("CLIENT1"), system.client("CLIENT2")
            makers = [f"kp-s{i}" for i in range(5)]
            for clordid in makers:
                c2.order(clordid, "2", "1", "10.00", symbol="T18")
            for clordid in makers:
                wait_reports(c2, clordid, 1)
            client = server.client()
            owner = SessionKey("e2e", "fsg", "CLIENT2").owner
            epoch = client.get(owner)
            client.set(owner, b"999999")  # CLIENT2's commits are refused: it is parked
            for i in range(5):
                c1.order(f"kp-b{i}", "1", "1", "10.00", symbol="T18")
            for i in range(5):
                wait_reports(c1, f"kp-b{i}", 2)  # New and Fill: delivered while CLIENT2 is parked
            time.sleep(0.5)
            assert not [r for r in reports(c2) if r.get(150) == "F"], "nothing reaches CLIENT2 meanwhile"
            system.gateway.kill()
            client.set(owner, epoch)  # the operator mends the stamp; the new process stamps its own
            system.gateway.start().wait_active(60)
            assert c2.wait(lambda: len([r for r in reports(c2) if r.get(150) == "F"]) >= 5, 30), reports(c2)[-3:]
            wait_quiet(system, {"CLIENT1": ("fsg", lambda: read_up_to(c1)),
                                "CLIENT2": ("fsg", lambda: read_up_to(c2))})  # nothing more can come
            fills = [r for r in reports(c2) if r.get(150) == "F"]
            assert [r[11] for r in fills] == makers, "each fill once, in order"
            assert len({r[17] for r in fills}) == 5
            assert Counter(r[17] for r in reports(c1) if r.get(150) == "F").most_common(1)[0][1] == 1
            for c in (c1, c2):
                seqs = [int(r[34]) for r in reports(c)]
                assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs), "sequence numbers only move forward"
        finally:
            system.stop()


def test_drop_copies_on_a_gateway_process_of_their_own(tmp_path: Path) -> None:
    """Each kind of session has its own lock and inbox, so the drop copies can be served by a
    gateway process of their own in the same namespace (its own GIL and core: docs/architecture.md, the
    order path's figures): every report of the order-entry sessions reaches the drop copy,
    once, and a takeover of either gateway leaves the other serving."""
    from tests.gateway_helpers import GatewayProc

    with standalone() as server:
        s = System(tmp_path, server, [server, server], sessions=ORDER_ENTRY_SESSIONS,
                   drop_copy_sessions=DROP_COPY_SESSIONS).start()
        try:
            assert s.drop_copy_gateway is not None
            c1, c2, dc = s.client("CLIENT1"), s.client("CLIENT2"), s.client("DROPCOPY")
            c1.order("sp-sell", "2", "3", "10.00", symbol="T19")
            wait_reports(c1, "sp-sell", 1)
            c2.order("sp-buy", "1", "3", "10.00", symbol="T19")
            assert summary(wait_reports(c2, "sp-buy", 2)) == [("8", "0", "0"), ("8", "F", "2")]
            mine = wait_reports(c1, "sp-sell", 2) + reports(c2, "sp-buy")
            copies = wait_reports(dc, "sp-sell", 2) + wait_reports(dc, "sp-buy", 2)
            time.sleep(0.5)
            assert sorted(r[17] for r in reports(dc)) == sorted(r[17] for r in mine), "every report, once"
            # the drop-copy gateway dies: order entry goes on; its standby delivers what it missed
            s.drop_copy_gateway.kill()
            c1.order("sp-2", "2", "1", "11.00", symbol="T19")
            wait_reports(c1, "sp-2", 1)
            standby = GatewayProc(s.tmp, server.url, name="gateway-dc-2", fix_port=s.drop_copy_gateway.fix_port,
                                  mode="gateway", namespace="e2e", sessions=DROP_COPY_SESSIONS, lock_ttl="2s",
                                  renewal="500ms", extra=s.gateway_extra)
            s.drop_copy_gateway = standby.start().wait_active(60)
            assert dc.wait(lambda: any(r.get(11) == "sp-2" for r in reports(dc)), 30), "the missed report, after logon"
            assert len(copies) == 4
        finally:
            s.stop()


@pytest.mark.parametrize("order_path", ["native", "python"])
def test_heartbeats_interleaving_with_large_batches_never_give_a_number_two_contents(tmp_path: Path,
                                                                                       order_path: str) -> None:
    """Admin messages take numbers while a batch committed ahead is being sent: QuickFIX's own
    Heartbeats (TestRequests among the orders ask for them) and, deterministically, one the
    gateway's fault hook sends after the first message of every batch. Each number is sent once, with the
    bytes stored under it — whether the batch is sent and checked in C++ (a miss then goes to
    Python's ``toApp``) or through the bindings (``[gateway] order_path``)."""
    import re

    from tests.gateway_helpers import http_text

    with standalone() as server:
        system = System(tmp_path, server, [server, server], gateway_lines=f'order_path = "{order_path}"')
        system.gateway.env = {"FIXGW_TEST_ADMIN_IN_BATCH": "e2e/fsg/CLIENT1"}
        system.start()
        trader = RawTrader(system.fix_port, "CLIENT1")
        try:
            trader.logon()
            placed = [f"hb-{i}" for i in range(150)]
            for i, clordid in enumerate(placed):
                trader.send(f"35=D\x0111={clordid}\x0155=T16\x0154=1\x0140=2\x0144=1.00\x0138=1\x0159=1\x01"
                            f"60=20260101-00:00:00")
                if i % 3 == 0:  # a TestRequest: a Heartbeat of QuickFIX's own, among the reports
                    trader.send(f"35=1\x01112=r-{i}")
            trader.wait_for(lambda m: m.get(11) == placed[-1].encode() and m.get(35) == b"8", "the last New", timeout=60)
            metrics = http_text(system.gateway.http_port, "/metrics")
            found = re.search(r'fixgw_group_commit_misses_total\{session="e2e/fsg/CLIENT1"\} (\S+)', metrics)
            assert found and float(found.group(1)) > 0, "admin messages took numbers in the middle of a batch"
            wait_quiet(system, {"CLIENT1": ("fsg", lambda: raw_read_up_to(trader))})  # nothing more can come
            news = Counter(m[11].decode() for m in trader.received if m.get(35) == b"8" and m.get(150) == b"0")
            assert sorted(news) == sorted(placed) and set(news.values()) == {1}, "every order's New, once"
            seqs = [int(m[34]) for m in trader.received]
            assert seqs == list(range(1, len(seqs) + 1)), "every number once, in order, none skipped"
            chunks: dict[bytes, bytes] = {}
            for i in range(len(seqs) // 1024 + 1):
                chunks.update(server.client().hgetall(f"{{e2e/fsg/CLIENT1}}/store/{i}"))
            for seq, raw in zip(seqs, trader.raw):
                stored = chunks[seq.to_bytes(4, "little")]
                assert stored[24 + int.from_bytes(stored[16:20], "little"):] == raw, f"seq {seq}: sent ≠ stored"
        finally:
            trader.close()
            system.stop()


def test_an_append_whose_outcome_is_unknown_is_held_and_sent_again_never_rejected_nor_doubled(tmp_path: Path) -> None:
    """Partition 1 on its own server, reached through a proxy that loses its replies: the
    commands land but the gateway cannot know. Nothing is answered Rejected, /ready is 503
    while commands are held, and once the replies flow again the held commands are appended
    again, in order; the cell skips the copies that had landed, so each order is accepted once
    and the cancel finds its order."""
    with standalone() as store, standalone() as p1:
        proxy = ReplyDroppingProxy(p1.port)
        route = f'url = "{proxy.url}"\nsocketTimeout = "300ms"\nmaxAttempts = 1'
        system = System(tmp_path, store, [store, p1], gateway_routes={1: route}).start()
        try:
            c1 = system.client("CLIENT1")
            proxy.drop_replies.set()
            c1.order("amb-1", "1", "2", "10.00", symbol="T2")  # T2 is pair 11: partition 1
            c1.order("amb-2", "1", "3", "10.00", symbol="T2")
            c1.cancel("amb-2c", "amb-2", "1", symbol="T2")
            wait_until(lambda: system.gateway.ready() == 503, "/ready 503 while commands are held", 10)
            with urllib.request.urlopen(f"http://127.0.0.1:{system.gateway.http_port}/metrics", timeout=5) as r:
                assert re.search(r'fixgw_commands_held_total\{partition="1"\} [1-9]', r.read().decode()), \
                    "held commands are counted"
            wait_until(lambda: p1.client().xlen(PartitionKeys(1).commands) >= 1, "a command to land unanswered", 10)
            time.sleep(1)
            assert not [r for r in reports(c1) if r[39] == "8" or r[35] == "9"], "nothing refused"
            proxy.drop_replies.clear()
            assert [(r[150], r[39]) for r in wait_reports(c1, "amb-1", 1)] == [("0", "0")]
            canceled = wait_reports(c1, "amb-2c", 1)
            assert [(r[150], r[39]) for r in canceled] == [("4", "4")], "the cancel came after its order"
            wait_until(lambda: system.gateway.ready() == 200, "ready once nothing is held", 10)
            time.sleep(1)
            ids = [r[17] for r in reports(c1)]
            assert len(ids) == len(set(ids)) and len(reports(c1, "amb-1")) == 1, "each order accepted once"
            assert len([r for r in reports(c1, "amb-2") if r[39] == "0"]) == 1
        finally:
            system.stop()
            proxy.close()
