"""Cell operations: HTTP endpoints, the process CLI, settings, Sentinel failover, Cluster."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from datastore.connection import connect
from datastore.embedded import Cluster, SentinelGroup, ValkeyProcess
from datastore.settings import ConfigError, RedisEndpoint
from matching.config import load_cell_settings
from matching.contracts import OrderPayload, OrderType, PlaceOrder, Side
from matching.http import CellHttp
from matching.keys import PartitionKeys
from matching.storage import reconcile
from tests.cell_helpers import cell_client, conductor, projected, run_until_idle, stream_events, submit_all
from tests.test_conductor import p0_flow, reference_events

pytestmark = pytest.mark.slow  # starts servers or processes: not in `make unit`

KEYS = PartitionKeys(0)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_http_ready_metrics_and_reconcile(valkey: ValkeyProcess) -> None:
    client = cell_client(RedisEndpoint(url=valkey.url))
    c = conductor(client)
    http = CellHttp(0, c.metrics.registry, lambda: c.has_lease, lambda pair: reconcile(valkey.client(), KEYS, pair))
    http.start()
    try:
        base = f"http://127.0.0.1:{http.port}"
        assert get(base + "/ready")[0] == 503  # no lease yet: visibly a standby
        submit_all(client, [PlaceOrder("c1", 0, 0, OrderPayload("a1", Side.SELL, OrderType.LIMIT, 5, 200))])
        run_until_idle(c)
        assert get(base + "/ready")[0] == 200
        code, text = get(base + "/metrics")
        assert code == 200
        assert 'matching_commands_total{kind="place",partition="0",status="applied"} 1.0' in text
        assert 'matching_conductor_lease_owned{partition="0"} 1.0' in text
        assert 'matching_last_command_duration_seconds{partition="0"}' in text
        code, text = get(base + "/reconcile?pairId=0")
        assert code == 200 and json.loads(text) == {"pairId": 0, "partition": 0, "indexedOrders": 1,
                                                     "scannedOrders": 1, "truncated": False, "healthy": True,
                                                     "issues": []}
        assert get(base + "/reconcile?pairId=x")[0] == 400
    finally:
        http.stop()


@pytest.mark.parametrize("env, message", [
    ({"MATCHING_DURABILITY": "fsync-please"}, "MATCHING_DURABILITY: Input should be 'memory' or 'aof-replicated'"),
    ({"REDIS_URL": "redis://h:1", "REDIS_CLUSTER_NODES": "h:1,h:2"}, "choose one topology, not url and nodes"),
    ({"REDIS_SENTINEL_HOSTS": "h:1"}, "REDIS_SENTINEL_HOSTS and REDIS_SENTINEL_NAME must be configured together"),
])
def test_bad_cell_settings_stop_boot(monkeypatch: pytest.MonkeyPatch, env: dict, message: str) -> None:
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(ConfigError, match=message):
        load_cell_settings().endpoint()


def test_cluster_nodes_use_the_real_cluster_client(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REDIS_CLUSTER_NODES", "10.0.0.1:7000, 10.0.0.2:7000")
    assert load_cell_settings().endpoint().topology == "cluster"


def test_conductor_process_serves_ready_and_releases_its_lease_on_sigterm(valkey: ValkeyProcess) -> None:
    from datastore.embedded import free_port

    port = free_port()
    env = {**os.environ, "REDIS_URL": valkey.url, "MATCHING_PARTITION_COUNT": "2", "MATCHING_PARTITION": "0",
           "MATCHING_HTTP_PORT": str(port), "PYTHONPATH": ROOT}
    proc = subprocess.Popen([sys.executable, "-m", "matching", "conductor"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout is not None
        assert "conductor p0 of 2 (memory, linger 1ms)" in proc.stdout.readline()
        deadline = time.monotonic() + 10
        while get(f"http://127.0.0.1:{port}/ready")[0] != 200 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert get(f"http://127.0.0.1:{port}/ready")[0] == 200
        assert valkey.client().get(KEYS.conductor_lease) is not None
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
        assert valkey.client().get(KEYS.conductor_lease) is None
    finally:
        proc.kill()


def test_conductor_process_refuses_a_bad_partition_before_touching_redis(valkey: ValkeyProcess) -> None:
    env = {**os.environ, "REDIS_URL": valkey.url, "MATCHING_PARTITION_COUNT": "2", "MATCHING_PARTITION": "7",
           "PYTHONPATH": ROOT}
    out = subprocess.run([sys.executable, "-m", "matching", "conductor"], env=env, capture_output=True, text=True)
    assert out.returncode == 2 and "MATCHING_PARTITION=7 is outside 0..1" in out.stderr
    assert valkey.client().dbsize() == 0


def test_cluster_conductor_keeps_a_partition_in_one_slot(valkey_cluster: Cluster) -> None:
    endpoint = RedisEndpoint(nodes=valkey_cluster.addresses)
    client = cell_client(endpoint)
    client.delete(KEYS.commands, KEYS.events, KEYS.meta)
    flow = p0_flow(4, 300)
    submit_all(client, flow)
    run_until_idle(conductor(client))
    assert projected(stream_events(client)) == reference_events(flow)
    some_keys = [KEYS.commands, KEYS.events, KEYS.meta, KEYS.conductor_lease, KEYS.book(0, Side.BUY),
                 KEYS.processed_command(flow[0].command_id), KEYS.order("x"), KEYS.accepted_order("y")]
    assert len({client.keyslot(k) for k in some_keys}) == 1


def drained(client) -> bool:  # type: ignore[no-untyped-def]
    """Every command of partition 0's stream delivered to the conductor and acknowledged."""
    info = client.xinfo_groups(KEYS.commands)[0]
    return bool(info["pending"] == 0 and info["last-delivered-id"] == client.xinfo_stream(KEYS.commands)["last-generated-id"])


def test_sentinel_failover_mid_stream_keeps_every_acknowledged_command() -> None:
    with SentinelGroup("matching-p0", aof=True, appendfsync="always") as group:
        endpoint = RedisEndpoint(sentinels=group.sentinel_addresses, sentinelGroup="matching-p0", maxAttempts=40,
                                 connectionTimeout="500ms")
        client = cell_client(endpoint)
        c = conductor(client, durability="aof-replicated", batch_size=20)  # the boot check passes
        flow = p0_flow(9, 500)
        submit_all(client, flow)
        assert client.execute_command("WAIT", 1, 5000) == 1
        client = connect(endpoint)  # the test's own observer; the conductor keeps its one connection
        stop = threading.Event()
        runner = threading.Thread(target=c.run, args=(stop,), kwargs={"block_ms": 50})
        runner.start()
        try:
            while len(client.keys(KEYS.processed_command("*"))) < 100:
                time.sleep(0.01)
            acked_before = {k for k in client.keys(KEYS.processed_command("*"))}
            old = group.primary if group.current_primary()[1] == group.primary.port else group.replica
            group.kill_primary_and_wait_failover()
            old.restart()  # it returns, and Sentinel makes it a replica of the new primary
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                try:
                    info = client.xinfo_groups(KEYS.commands)[0]
                    if info["pending"] == 0 and info["last-delivered-id"] == client.xinfo_stream(
                            KEYS.commands)["last-generated-id"]:
                        break
                except Exception:
                    pass
                time.sleep(0.1)
        finally:
            stop.set()
            runner.join(30)
        processed = {k for k in client.keys(KEYS.processed_command("*"))}
        assert acked_before <= processed
        assert len(processed) == len({cmd.command_id for cmd in flow})
        assert projected(stream_events(client)) == reference_events(flow)
        assert drained(client), "every command acknowledged (after WAITAOF), none left pending"


def test_sentinel_failover_with_an_outbox_publishes_every_event_once_in_order_and_only_durable_ones() -> None:
    from datastore.embedded import standalone
    from matching.config import Durability
    from matching.contracts import parse_event
    from matching.outbox import OutboxWorker, RedisStreamsPublisher, owner_routes
    from tests.reference_matcher import project

    with SentinelGroup("matching-p0", aof=True, appendfsync="always") as group, standalone() as inbox_store:
        endpoint = RedisEndpoint(sentinels=group.sentinel_addresses, sentinelGroup="matching-p0", maxAttempts=40,
                                 connectionTimeout="500ms")
        client = cell_client(endpoint)
        c = conductor(client, durability="aof-replicated", batch_size=20)
        target = inbox_store.client()
        outbox = OutboxWorker(connect(endpoint), connect(endpoint), 0,
                              RedisStreamsPublisher(target, owner_routes(lambda owner: "inbox", ["inbox"])),
                              durability=Durability.named("aof-replicated", 2000), read_count=25)
        outbox.ensure_group()
        flow = p0_flow(11, 400)
        submit_all(client, flow)
        assert client.execute_command("WAIT", 1, 5000) == 1
        observer = connect(endpoint)
        stop = threading.Event()
        runners = [threading.Thread(target=c.run, args=(stop,), kwargs={"block_ms": 50}),
                   threading.Thread(target=outbox.run, args=(stop,), kwargs={"block_ms": 50})]
        for r in runners:
            r.start()
        try:
            while target.xlen("inbox") < 100:
                time.sleep(0.01)
            old = group.primary if group.current_primary()[1] == group.primary.port else group.replica
            group.kill_primary_and_wait_failover()  # batches in flight in both the conductor and the outbox
            old.restart()
            expected = reference_events(flow)
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline:
                published = {f[b"messageId"] for _, f in target.xrange("inbox")}
                if len(published) >= len(expected):
                    break
                time.sleep(0.2)
        finally:
            stop.set()
            for r in runners:
                r.join(30)
        first_seen: dict[bytes, tuple[str, dict]] = {}
        for _, f in target.xrange("inbox"):
            first_seen.setdefault(f[b"messageId"], (f[b"x-partition-offset"].decode(), f))
        offsets = [tuple(int(x) for x in o.split("-")) for o, _ in first_seen.values()]
        assert offsets == sorted(offsets), "each event first published in partition order"
        events = [parse_event(f[b"event"]) for _, f in first_seen.values()]
        assert [project(e.payload) for e in events] == expected, \
            "every event published, none that the failover lost, in order"
        for e in events:  # published ⇒ its command's outcome survived the loss of the primary
            assert observer.get(KEYS.processed_command(e.command_id)) is not None
        assert drained(observer), "every command acknowledged (after WAITAOF), none left pending"


def test_cluster_failover_mid_stream_keeps_every_command_once() -> None:
    """The partition's slot loses its primary while the conductor works through its stream; the
    cluster promotes the replica and the conductor carries on there: every command processed
    once, the events exactly the reference matcher's."""
    with Cluster(3, replicas=1) as cluster:
        endpoint = RedisEndpoint(nodes=cluster.addresses, maxAttempts=40, connectionTimeout="500ms",
                                 socketTimeout="1s")
        client = cell_client(endpoint)
        c = conductor(client, batch_size=20)
        flow = p0_flow(13, 500)
        submit_all(client, flow)
        primary = cluster.primary_of(KEYS.commands)
        assert primary.client().execute_command("WAIT", 1, 5000) == 1
        observer = connect(endpoint)
        stop = threading.Event()
        runner = threading.Thread(target=c.run, args=(stop,), kwargs={"block_ms": 50})
        runner.start()
        try:
            while len(observer.keys(KEYS.processed_command("*"))) < 100:
                time.sleep(0.01)
            cluster.kill_primary_of(KEYS.commands)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                try:
                    if drained(observer):
                        break
                except Exception:  # noqa: BLE001 (the observer follows the failover too)
                    pass
                time.sleep(0.1)
        finally:
            stop.set()
            runner.join(30)
        assert drained(observer), "every command acknowledged on the promoted replica"
        promoted = cluster.primary_of(KEYS.commands).client()  # (KEYS goes to one node: the slot's)
        assert len(promoted.keys(KEYS.processed_command("*"))) == len({cmd.command_id for cmd in flow})
        assert projected(stream_events(observer)) == reference_events(flow)


def test_a_cell_started_while_its_datastore_has_no_primary_waits_for_one_and_serves(tmp_path: Path) -> None:
    """A conductor and an outbox started while their Sentinel group has no primary (both servers
    down, Sentinel answering "No master found"): they wait — they used to exit at boot with
    MasterNotFoundError, and only a supervisor's restart brought them back — and take their
    leases once the primary is back."""
    from tests.gateway_helpers import ROOT, cell_env

    with SentinelGroup("matching-p0") as group:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "MATCHING_PARTITION": "0", "MATCHING_PARTITION_COUNT": "2",
               "MATCHING_INSTRUMENTS": str(ROOT / "config" / "instruments.toml"), "MATCHING_LEASE_TTL_MS": "2000",
               **cell_env(group.url)}
        primary, replica = group.primary, group.replica
        replica.kill()
        primary.kill()
        sentinel = group.sentinels[0].client()
        deadline = time.monotonic() + 30
        while "s_down" not in str(sentinel.execute_command("SENTINEL", "MASTER", "matching-p0")):
            assert time.monotonic() < deadline, "Sentinel never saw the primary down"
            time.sleep(0.1)
        logs = [tmp_path / "conductor.log", tmp_path / "outbox.log"]
        cells = [subprocess.Popen([sys.executable, "-m", "matching", role], env=env, stdout=log.open("w"),
                                  stderr=subprocess.STDOUT) for role, log in zip(("conductor", "outbox"), logs)]
        try:
            time.sleep(3.0)  # booting against no primary at all
            assert all(c.poll() is None for c in cells), [log.read_text()[-1500:] for log in logs]
            primary.restart()
            replica.restart()
            client = connect(RedisEndpoint(sentinels=group.sentinel_addresses, sentinelGroup="matching-p0"))
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                try:
                    if client.exists(KEYS.conductor_lease) and client.exists(KEYS.outbox_lease):
                        break
                except Exception:  # noqa: BLE001 (Sentinel may not list the primary again yet)
                    pass
                assert all(c.poll() is None for c in cells), [log.read_text()[-1500:] for log in logs]
                time.sleep(0.2)
            assert client.exists(KEYS.conductor_lease) and client.exists(KEYS.outbox_lease), "both serve"
        finally:
            for c in cells:
                c.terminate()
            for c in cells:
                c.wait(15)
