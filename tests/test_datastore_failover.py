"""A venue's topology under datastore failovers: the session store and each partition on a
Sentinel group of its own (one quorum of Sentinels watching all three), the outboxes relaying
events to the gateway's inboxes. Primaries are SIGKILLed under a steady flow of new orders,
cancels and replaces from two order-entry sessions, with a drop copy watching.

What must hold through every failover: each request is answered exactly once (accepted,
possibly late, or refused with a reason); no sequence number reaches a client twice; the drop
copy has every fill; ``/ready`` is false while a datastore has no primary and true after.
"""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

import pytest

from datastore.embedded import SentinelGroup, Sentinels
from fixgw.demo import DemoClient
from tests.gateway_helpers import http_json
from tests.system_helpers import System
from tests.venue import Flow, answers, fills, sequence_numbers, watch_ready

pytestmark = pytest.mark.slow

REPLICA_BACK_AFTER_S = 4.0  # the killed server is back, as a replica, this long after the kill


def failover(group: SentinelGroup, ready: list[tuple[float, bool, str]], flow: Flow,
             clients: list[DemoClient]) -> tuple[float, float, list[str]]:
    """Kill ``group``'s primary under the flow and bring the dead server back as a replica
    ``REPLICA_BACK_AFTER_S`` after the kill; wait for the first request sent after the kill to be
    answered. Returns the seconds to the promotion, the seconds until that request was answered,
    and what /ready said was missing meanwhile (the datastores named, figures left out)."""
    killed = time.monotonic()
    group.kill_primary_and_wait_failover()
    promoted = time.monotonic() - killed
    back = threading.Thread(target=lambda: (time.sleep(max(0.0, REPLICA_BACK_AFTER_S - promoted)),
                                            group.restart_as_replica()), daemon=True)
    back.start()
    probe = f"n{flow.rounds + 1}"  # the last request of a round that starts after the kill
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not any(answers(c)[probe] for c in clients):
        time.sleep(0.02)
    assert any(answers(c)[probe] for c in clients), f"no answer to {probe} within 60 s of the failover"
    answered = time.monotonic() - killed
    back.join(60)
    reasons = sorted({re.sub(r"[\d.]+", "N", why.split(" (")[0]) for at, ok, why in ready if at >= killed and not ok})
    return promoted, answered, reasons


def run_venue(tmp_path: Path, kills: list[str], store_lines: str = "", shared: bool = False) -> None:
    """The topology, the flow, the primaries of the groups named in ``kills`` killed in turn
    (``store``, ``p0``, ``p1``), then every guarantee checked. ``shared``: the partitions live on
    the session store's group instead, and the conductors deliver events to the inboxes
    themselves (``fixgw up``'s layout, on Sentinel)."""
    # A returning replica's full sync starts at once (Valkey's default waits 5 s for more replicas
    # to share a diskless transfer): shorter runs; with the default, replicaAcks waits 5 s longer.
    sync_now = {"repl-diskless-sync-delay": 0}
    with Sentinels(name="venue-sentinel") as sentinels, \
            SentinelGroup("e2e-store", aof=True, sentinels=sentinels, **sync_now) as store, \
            SentinelGroup("matching-p0", sentinels=sentinels, **sync_now) as p0, \
            SentinelGroup("matching-p1", sentinels=sentinels, **sync_now) as p1:
        groups = {"store": store, "p0": p0, "p1": p1}
        partitions = [store, store] if shared else [p0, p1]
        system = System(tmp_path, store, partitions, inbox_delivery="direct" if shared else "outbox",  # type: ignore[arg-type]
                        lock_ttl="10s", store_lines=store_lines)
        system.start()
        stop_watch = threading.Event()
        ready: list[tuple[float, bool, str]] = []
        try:
            c1, c2, dc = system.client("CLIENT1"), system.client("CLIENT2"), system.client("DROPCOPY")
            flow = Flow(c1, c2)
            watcher = threading.Thread(target=watch_ready, args=(system.gateway.http_port, ready, stop_watch),
                                       daemon=True)
            watcher.start()
            flow.thread.start()
            time.sleep(1.5)
            outcomes = []
            for n, name in enumerate(kills):
                group = groups[name]
                promoted, answered, reasons = failover(group, ready, flow, [c1, c2])
                outcomes.append((group.group, reasons))
                print(f"failover {n + 1} of {group.group}: promoted in {promoted:.1f} s; a request sent after the "
                      f"kill answered {answered:.1f} s after it; /ready meanwhile: {reasons or 'always 200'}")
                time.sleep(1)
            flow.stop.set()
            flow.thread.join(5)
            sent = flow.sent
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and sum((answers(c1) + answers(c2)).values()) < len(sent):
                time.sleep(0.2)
            time.sleep(1)  # anything extra would have arrived by now
            got = answers(c1) + answers(c2)
            unanswered = sorted(set(sent) - set(got))
            twice = sorted(k for k, n in got.items() if n > 1)
            print(f"{len(sent)} requests sent, {len(got)} answered")
            assert not unanswered, f"{len(unanswered)} of {len(sent)} requests unanswered: {unanswered[:20]}"
            assert not twice, f"answered more than once: {twice[:20]}"
            for c in (c1, c2, dc):
                seqs = sequence_numbers(c)
                assert len(seqs) == len(set(seqs)), f"{c.name}: a sequence number came twice"
            order_fills = fills(c1) | fills(c2)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not order_fills <= fills(dc):
                time.sleep(0.2)
            assert order_fills and order_fills <= fills(dc), f"the drop copy lacks {len(order_fills - fills(dc))} fills"
            for name, reasons in outcomes:
                assert reasons, f"/ready stayed 200 while {name} had no primary"
            status, body = http_json(system.gateway.http_port)
            assert status == 200, f"/ready is true once every datastore is back: {body}"
        finally:
            stop_watch.set()
            system.stop()


def test_failovers_of_the_session_store_and_a_partition_leave_no_request_unanswered(tmp_path: Path) -> None:
    run_venue(tmp_path, ["store", "store", "store", "p1"])


def test_one_datastore_holding_everything_with_replica_acks_and_direct_delivery(tmp_path: Path) -> None:
    """``fixgw up``'s layout on a Sentinel group: the session store and both partitions on one
    datastore, the conductors appending events to the inboxes in their own commits, and
    replicaAcks = 1. Right after the promotion the new primary has no replica, so no write can be
    acknowledged: the gateway holds them (``failoverWait``) until the old primary is back."""
    run_venue(tmp_path, ["store"], store_lines="replicaAcks = 1\nreplicaAckTimeout = \"300ms\"", shared=True)


def test_a_claim_its_replicas_did_not_confirm_is_answered_once_from_what_landed(tmp_path: Path) -> None:
    """replicaAcks = 1 and the session store's replica frozen while an order's ClOrdID is claimed
    (the partitions on a datastore of their own, so the claim is written first and the command
    after it): the claim lands on the primary, no replica confirms it within failoverWait. The
    order is neither refused nor accepted on that guess: the gateway stops with the reason; its
    successor asks the client to send the order again, finds the claim (the replica has it now)
    and publishes its own command. The client gets one answer, New, and the cell one order."""
    import signal

    from datastore.embedded import standalone
    from tests.system_helpers import reports

    primary = standalone(name="store").start()
    replica = standalone(name="store-replica", replicaof=f"{primary.host} {primary.port}").start()
    partitions = standalone(name="partitions").start()
    system = System(tmp_path, primary, [partitions, partitions], inbox_delivery="outbox",
                    store_lines='replicaAcks = 1\nreplicaAckTimeout = "300ms"\nfailoverWait = "1s"')
    try:
        deadline = time.monotonic() + 30
        while replica.client().info("replication").get("master_link_status") != "up":
            assert time.monotonic() < deadline, "the replica did not sync"
            time.sleep(0.05)
        system.start()
        client = system.client("CLIENT1")
        client.order("o1", "1", "1", "10.00", symbol="T1")
        assert client.wait(lambda: answers(client)["o1"] == 1, 20), "o1 was not answered"

        assert replica.proc is not None
        replica.proc.send_signal(signal.SIGSTOP)
        try:
            client.order("o2", "1", "1", "10.00", symbol="T1")
            gateway = system.gateway
            assert gateway.proc is not None
            # Held for failoverWait; then whatever the gateway makes of the claim, the replica
            # comes back at once: an answer on a guess would now be committed and sent.
            deadline = time.monotonic() + 30
            while not re.search(r"ClOrdID o2|not stored", gateway.output()) and gateway.alive:
                assert time.monotonic() < deadline, "the claim's write was not given up"
                time.sleep(0.01)
            assert any(b"o2" in k for k in primary.client().scan_iter(match="*clordid*")), "claimed on the primary"
        finally:
            replica.proc.send_signal(signal.SIGCONT)
        client.wait(lambda: not gateway.alive or bool(reports(client, "o2")), 30)
        assert not reports(client, "o2"), f"o2 was answered on a guess: {reports(client, 'o2')}"
        assert not gateway.alive and gateway.proc.returncode == 4, gateway.output()[-3000:]
        assert "not confirmed by its replicas" in gateway.output(), gateway.output()[-3000:]
        system.gateway.start().wait_active(60)
        assert client.wait(lambda: answers(client)["o2"] >= 1, 60), f"o2 unanswered: {reports(client, 'o2')}"
        time.sleep(1)  # a second answer would have come by now
        got = [r for r in reports(client, "o2") if r[35] == "9" or r.get(150) in ("0", "8", "4", "5")]
        assert [(r.get(150), r.get(39)) for r in got] == [("0", "0")], f"o2 answered: {got}"
        accepted = list(partitions.client().scan_iter(match="matching:*:accepted-order:*"))
        assert len(accepted) == 2, f"the cells accepted o1 and o2 once each: {accepted}"
    finally:
        system.stop()
        for server in (replica, primary, partitions):
            server.stop()
