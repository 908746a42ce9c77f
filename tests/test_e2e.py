"""Order flow end to end over TCP with real QuickFIX clients, cells and gateway processes."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from datastore.embedded import standalone
from matching.contracts import CommandRefused, Event
from matching.keys import PartitionKeys
from sessionstore.keys import GatewayKey
from tests.system_helpers import System, reports, summary, system_on_one_server, wait_reports

pytestmark = pytest.mark.slow  # starts servers or processes: not in `make unit`


@pytest.fixture(scope="module")
def system(tmp_path_factory: pytest.TempPathFactory) -> Iterator[System]:
    with system_on_one_server(tmp_path_factory.mktemp("e2e"), aof=True) as s:
        yield s


@pytest.fixture(scope="module")
def clients(system: System):  # type: ignore[no-untyped-def]
    return system.client("CLIENT1"), system.client("CLIENT2"), system.client("DROPCOPY")


def commands_in_cells(system: System) -> int:
    client = system.store.client()
    return sum(client.xlen(PartitionKeys(p).commands) for p in (0, 1))


def test_crossing_orders_fill_both_sides_and_the_drop_copy_sees_every_report(clients) -> None:  # type: ignore[no-untyped-def]
    c1, c2, dc = clients
    c1.order("x-sell", "2", "5", "10.00", symbol="T1")
    wait_reports(c1, "x-sell", 1)
    c2.order("x-buy", "1", "5", "10.00", symbol="T1")
    assert summary(wait_reports(c2, "x-buy", 2)) == [("8", "0", "0"), ("8", "F", "2")]
    sell = wait_reports(c1, "x-sell", 2)
    assert summary(sell) == [("8", "0", "0"), ("8", "F", "2")]
    fill = sell[1]
    assert (fill[32], fill[31], fill[14], fill[151], fill[6]) == ("5", "10", "5", "0", "10")
    copies = wait_reports(dc, "x-sell", 2) + wait_reports(dc, "x-buy", 2)
    assert sorted(r[17] for r in copies) == sorted(r[17] for r in reports(c1, "x-sell") + reports(c2, "x-buy"))


def test_every_report_goes_out_before_its_drop_copy(system: System, clients) -> None:  # type: ignore[no-untyped-def]
    """In a dispatcher's cycle the order-entry sessions' reports are sent first; with order entry
    busy the copies follow in batches (``drop_copy_every``). Either way each copy is on the
    wire after the report it copies: the message log stamps each message as QuickFIX sends it."""
    c1, _, dc = clients
    ids = [f"first-{n}" for n in range(8)]
    for clordid in ids:
        c1.order(clordid, "1", "1", "1.00", symbol="T5")
    for clordid in ids:
        wait_reports(c1, clordid, 1)
        wait_reports(dc, clordid, 1)
    log = system.gateway.dir / "state" / "log"

    def sent(session: str, clordid: str) -> bytes | None:
        path = log / f"FIX.4.4-FIXGW-{session}.messages.current.log"
        lines = path.read_bytes().splitlines() if path.exists() else []
        return next((line.split(b" : ")[0] for line in lines
                     if b"\x0135=8\x01" in line and b"\x0111=%s\x01" % clordid.encode() in line), None)

    def both_logged() -> bool:
        return all(sent(s, c) is not None for s in ("CLIENT1", "DROPCOPY") for c in ids)

    assert c1.wait(both_logged, 10), "every report and copy in the message log"
    late = [c for c in ids if sent("DROPCOPY", c) < sent("CLIENT1", c)]  # type: ignore[operator]
    assert late == [], f"copies sent before their reports: {late}"


def test_partial_fills_report_cumulative_and_leaves(clients) -> None:  # type: ignore[no-untyped-def]
    c1, c2, _ = clients
    c1.order("p-sell", "2", "10", "20.00", symbol="T2")
    wait_reports(c1, "p-sell", 1)
    c2.order("p-buy1", "1", "3", "20.00", symbol="T2")
    c2.order("p-buy2", "1", "4", "20.05", symbol="T2")
    sell = wait_reports(c1, "p-sell", 3)
    assert [(r[150], r[39], r[14], r[151]) for r in sell[1:]] == [("F", "1", "3", "7"), ("F", "1", "7", "3")]
    assert wait_reports(c2, "p-buy2", 2)[1][31] == "20"  # the maker's price


def test_ioc_rest_is_canceled_and_fok_is_all_or_nothing(clients) -> None:  # type: ignore[no-untyped-def]
    c1, c2, _ = clients
    c1.order("i-sell", "2", "4", "30.00", symbol="T3")
    wait_reports(c1, "i-sell", 1)
    c2.order("i-ioc", "1", "10", "30.00", symbol="T3", tif="3")
    ioc = wait_reports(c2, "i-ioc", 3)
    assert summary(ioc) == [("8", "0", "0"), ("8", "F", "1"), ("8", "4", "4")]
    assert ioc[2][14] == "4" and "ioc-unfilled" in ioc[2][58]
    c1.order("f-sell", "2", "4", "31.00", symbol="T3")
    wait_reports(c1, "f-sell", 1)
    c2.order("f-fok", "1", "10", "31.00", symbol="T3", tif="4")
    fok = wait_reports(c2, "f-fok", 2)
    assert summary(fok) == [("8", "0", "0"), ("8", "4", "4")] and "fok-unfillable" in fok[1][58]
    assert len(reports(c1, "f-sell")) == 1, "the FOK touched nothing"


def test_cancel_and_cancel_replace(clients) -> None:  # type: ignore[no-untyped-def]
    c1, _, dc = clients
    c1.order("c-buy", "1", "5", "40.00", symbol="T4")
    wait_reports(c1, "c-buy", 1)
    c1.replace("c-buy2", "c-buy", "1", "6", "40.05", symbol="T4")
    replaced = wait_reports(c1, "c-buy2", 1)[0]
    assert (replaced[150], replaced[41], replaced[38], replaced[44]) == ("5", "c-buy", "6", "40.05")
    c1.cancel("c-cxl", "c-buy2", "1", symbol="T4")
    canceled = wait_reports(c1, "c-cxl", 1)[0]
    assert (canceled[150], canceled[39], canceled[41], canceled[151]) == ("4", "4", "c-buy2", "0")
    c1.cancel("c-cxl2", "c-buy2", "1", symbol="T4")  # already canceled: the cell says unknown order
    rej = wait_reports(c1, "c-cxl2", 1)[0]
    assert (rej[35], rej[434], rej[102]) == ("9", "1", "1")
    c1.cancel("c-cxl3", "never-sent", "1", symbol="T4")  # refused by the gateway itself
    assert wait_reports(c1, "c-cxl3", 1)[0][35] == "9"
    assert len(wait_reports(dc, "c-buy", 1)) >= 1


@pytest.mark.parametrize("clordid, fields, reason, rej", [
    ("r-tick", dict(qty="1", price="10.01"), "off-tick", "99"),
    ("r-lot", dict(qty="1.5", price="10.00"), "off-lot", "13"),
    ("r-range", dict(qty="5000", price="10.00"), "quantity-out-of-range", "13"),
    ("r-zero", dict(qty="0", price="10.00"), "invalid-quantity", "13"),
    ("r-neg", dict(qty="1", price="-5"), "invalid-price", "99"),
    ("r-band", dict(qty="1", price="5000"), "price-out-of-band", "99"),
    ("r-sym", dict(qty="1", price="10.00", symbol="NOPE"), "unknown-symbol", "1"),
    ("r-tif", dict(qty="1", price="10.00", tif="0"), "unsupported-time-in-force", "11"),
])
def test_bad_orders_get_a_reject_and_never_reach_a_cell(system: System, clients, clordid: str, fields: dict,
                                                        reason: str, rej: str) -> None:  # type: ignore[no-untyped-def]
    c1, _, _ = clients
    before = commands_in_cells(system)
    c1.order(clordid, "1", fields["qty"], fields["price"], symbol=fields.get("symbol", "T5"), tif=fields.get("tif", "1"))
    r = wait_reports(c1, clordid, 1)[0]
    assert (r[150], r[39], r[103]) == ("8", "8", rej)
    assert r[58].startswith(reason)
    assert commands_in_cells(system) == before


def test_a_clordid_reused_after_its_window_is_a_new_order_with_its_own_reports(system: System, clients) -> None:  # type: ignore[no-untyped-def]
    c1, _, _ = clients
    c1.order("w-1", "1", "2", "40.00", symbol="T6")
    first = wait_reports(c1, "w-1", 1)[0]
    assert (first[150], first[39]) == ("0", "0")
    client = system.store.client()
    claims = list(client.scan_iter(match="*clordid:w-1"))
    assert len(claims) == 1
    client.delete(*claims)  # what PEXPIRE does when the idempotency window ends
    c1.order("w-1", "1", "3", "40.00", symbol="T6")
    second = wait_reports(c1, "w-1", 2)[1]
    assert (second[150], second[39], second[38]) == ("0", "0", "3"), "the reuse is accepted, not skipped"
    assert second[37] != first[37], "a new order, under a new OrderID"


def test_duplicate_clordid_is_refused_and_a_possresend_gets_the_status(system: System, clients) -> None:  # type: ignore[no-untyped-def]
    c1, _, _ = clients
    c1.order("d-1", "1", "2", "50.00", symbol="T6")
    wait_reports(c1, "d-1", 1)
    before = commands_in_cells(system)
    c1.order("d-1", "1", "2", "50.00", symbol="T6")
    dup = wait_reports(c1, "d-1", 2)[1]
    assert (dup[150], dup[39], dup[103]) == ("8", "8", "6")
    assert commands_in_cells(system) == before, "a duplicate never reaches a cell"
    # The same ClOrdID marked PossResend: no new order; the current status comes back.
    c1.send("D", [(11, "d-1"), (55, "T6"), (54, "1"), (40, "2"), (44, "50.00"), (38, "2"), (59, "1")],
            header=[(97, "Y")])
    resent = wait_reports(c1, "d-1", 3)[2]
    assert (resent[150], resent[39]) == ("I", "0")
    assert len(reports(c1, "d-1")) == 3
    status_count = 3
    c1.send("H", [(11, "d-1"), (55, "T6"), (54, "1")])
    status = wait_reports(c1, "d-1", status_count + 1)[-1]
    assert (status[150], status[39], status[151]) == ("I", "0", "2")


def test_a_bad_replace_gets_a_cancel_reject_and_changes_nothing(system: System, clients) -> None:  # type: ignore[no-untyped-def]
    c1, _, _ = clients
    c1.order("rr-1", "1", "5", "60.00", symbol="T7")
    wait_reports(c1, "rr-1", 1)
    before = commands_in_cells(system)
    c1.replace("rr-2", "rr-1", "1", "5", "60.01", symbol="T7")  # off-tick
    rej = wait_reports(c1, "rr-2", 1)[0]
    assert (rej[35], rej[434], rej[39], rej[41]) == ("9", "2", "0", "rr-1") and rej[58].startswith("off-tick")
    c1.replace("rr-3", "nobody", "1", "5", "60.00", symbol="T7")  # unknown order
    unknown = wait_reports(c1, "rr-3", 1)[0]
    assert (unknown[35], unknown[102], unknown[37]) == ("9", "1", "NONE")
    assert commands_in_cells(system) == before, "refused by the gateway, never sent to a cell"
    c1.send("H", [(11, "rr-1"), (55, "T7"), (54, "1")])  # the order is untouched
    assert c1.wait(lambda: any(r.get(150) == "I" for r in reports(c1, "rr-1")), 20)
    status = [r for r in reports(c1, "rr-1") if r.get(150) == "I"][0]
    assert (status[39], status[44], status[38], status[151]) == ("0", "60", "5", "5")


def test_status_of_an_unknown_order_says_so(clients) -> None:  # type: ignore[no-untyped-def]
    c1, _, _ = clients
    c1.send("H", [(11, "never-sent-h"), (55, "T7"), (54, "1")])
    r = wait_reports(c1, "never-sent-h", 1)[0]
    assert (r[150], r[39], r[37], r[58]) == ("I", "8", "NONE", "unknown-order")


def test_fifty_order_entry_sessions_and_two_drop_copies_on_one_gateway(tmp_path_factory: pytest.TempPathFactory) -> None:
    from collections import Counter

    from tests.gateway_helpers import RawTrader, http_text

    names = [f"S{i:02d}" for i in range(50)]
    sessions = "".join(f'\n[[gateway.session]]\nname = "{n}"\n' for n in names)
    sessions += '\n[[gateway.session]]\nname = "DC1"\nkind = "dc"\n\n[[gateway.session]]\nname = "DC2"\nkind = "dc"\n'
    with standalone() as server:
        s = System(tmp_path_factory.mktemp("many"), server, [server, server], sessions=sessions).start()
        traders = {n: RawTrader(s.fix_port, n) for n in [*names, "DC1", "DC2"]}
        try:
            for t in traders.values():
                t.logon()
            for i, n in enumerate(names):  # each sells to the next session around the ring
                # sellers and buyers on two accounts: self-trade prevention never cancels a side
                traders[n].send(f"35=D\x0111={n}-sell\x011=SELLERS\x0155=T18\x0154=2\x0140=2\x0144=10\x0138=1\x0159=1\x01"
                                f"60=20260101-00:00:00")
                buyer = names[(i + 1) % len(names)]
                traders[buyer].send(f"35=D\x0111={buyer}-buy\x011=BUYERS\x0155=T18\x0154=1\x0140=2\x0144=10\x01"
                                    f"38=1\x0159=1\x0160=20260101-00:00:00")

            def reports(t: RawTrader) -> list[dict[int, bytes]]:
                return [m for m in t.received if m.get(35) == b"8"]

            for n in names:  # New + Fill for its sell and its buy
                traders[n].wait_for(lambda m, t=traders[n]: len(reports(t)) >= 4, f"{n}'s four reports", 60)
            for dc in ("DC1", "DC2"):
                traders[dc].wait_for(lambda m, t=traders[dc]: len(reports(t)) >= 200, f"{dc}'s copies", 60)
            time.sleep(0.5)
            for n, t in traders.items():
                ids = Counter(m[17] for m in reports(t))
                assert max(ids.values()) == 1, f"{n}: an ExecID twice"
                assert len(ids) == (200 if n.startswith("DC") else 4), n
                seqs = [int(m[34]) for m in t.received]
                assert seqs == list(range(1, len(seqs) + 1)), f"{n}: numbers in order, none skipped"
            metrics = http_text(s.gateway.http_port, "/metrics")
            assert "fixgw_group_commit_misses_total{" not in metrics, \
                "every report went out under the number and bytes it was committed with (group commit, no fallback)"
        finally:
            for t in traders.values():
                t.close()
            s.stop()


def test_a_command_the_cell_cannot_apply_is_answered_to_its_session(system: System, clients) -> None:  # type: ignore[no-untyped-def]
    """A command in the wrong partition's stream (a producer of another version, say) is
    dead-lettered and its owner told: a BusinessMessageReject naming the ClOrdID for an order
    the gateway never saw accepted, an OrderCancelReject for a cancel; never silence."""
    c1, _, dc = clients
    client = system.store.client()
    place = ('{"kind":"place","command_id":"wp","pair_id":1,"partition":1,"order":{"order_id":"o-wp","side":"buy",'
             '"order_type":"limit","quantity":1,"price":200,"owner":"e2e/fsg/CLIENT1","client_order_id":"WP-1"}}')
    cancel = ('{"kind":"cancel","command_id":"wc","pair_id":1,"partition":1,"order_id":"o-wp",'
              '"owner":"e2e/fsg/CLIENT1","client_order_id":"WC-1"}')
    dc_before = len(reports(dc))
    for command in (place, cancel):
        client.xadd(PartitionKeys(0).commands, {"command": command})  # pair 1 belongs to partition 1
    assert c1.wait(lambda: any(r.get(379) == "WP-1" for r in reports(c1)), 20)
    bmr = next(r for r in reports(c1) if r.get(379) == "WP-1")
    assert (bmr[35], bmr[372], bmr[380]) == ("j", "D", "0") and bmr[58].startswith("wrong-partition")
    reject = wait_reports(c1, "WC-1", 1)[0]
    assert (reject[35], reject[434], reject[39]) == ("9", "1", "8") and "wrong-partition" in reject[58]
    assert client.xlen(PartitionKeys(0).commands_dead_letter) >= 2
    time.sleep(0.3)
    assert len(reports(dc)) == dc_before, "no order came of it: nothing for the drop copy"


def test_an_event_published_twice_into_one_batch_is_reported_once(system: System, clients) -> None:  # type: ignore[no-untyped-def]
    """At-least-once publishing can put two copies of an event in one dispatcher read; the
    sessions' inboxes only know what was committed before that batch, so the dispatcher itself
    drops the copy: one report, not two."""
    c1, _, _ = clients
    refused = CommandRefused("place", "twice-cmd", "o-twice", "e2e/fsg/CLIENT1", "TWICE-1", "", "wrong-partition")
    event = Event("twice-cmd:0", 0, 1, "twice-cmd", refused).encode()
    tx = system.store.client().pipeline(transaction=True)  # both copies land before the dispatcher reads
    for _ in range(2):
        tx.xadd(GatewayKey("e2e", "fsg").inbox_stream, {"messageId": "twice-cmd:0", "partition": "0", "event": event})
    tx.execute()
    assert c1.wait(lambda: any(r.get(379) == "TWICE-1" for r in reports(c1)), 20)
    time.sleep(0.5)
    assert [r[35] for r in reports(c1) if r.get(379) == "TWICE-1"] == ["j"], "one BusinessMessageReject"
