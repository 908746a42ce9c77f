"""Seed 000's broker: the matching cell and the order flow over the machine's RabbitMQ.

Each test module run gets a virtual host of its own (``rabbitmqctl add_vhost``), deleted at the
end, so the queues keep seed 000's names (``matching:commands.pN``) without touching anyone
else's. Without a broker (or without ``rabbitmqctl``) these tests are skipped, saying so;
``FIXGW_REQUIRE_RABBITMQ=1`` (set by ``.ci/run``: CI here has the broker) makes that a failure.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import aio_pika
import pytest

from datastore.connection import connect
from datastore.embedded import ValkeyProcess, standalone
from datastore.settings import RedisEndpoint
from matching.amqp import (
    COMMAND_QUEUE_ARGUMENTS,
    AmqpCommandPublisher,
    AmqpLink,
    QueueConsumer,
    command_queue,
)
from matching.contracts import Command, Event, parse_event
from matching.keys import PartitionKeys
from tests.cell_helpers import p0_flow, projected, reference_events, stream_events
from tests.flows import TEST_INSTRUMENTS
from tests.gateway_helpers import ROOT
from tests.system_helpers import (
    Broker,
    CellProc,
    System,
    broker_missing,
    rabbitmq_vhost,
    rabbitmqctl,
    reports,
    summary,
    wait_reports,
)

pytestmark = pytest.mark.slow  # starts servers or processes: not in `make unit`

HOST, PORT = "127.0.0.1", 5672
REQUIRED = os.environ.get("FIXGW_REQUIRE_RABBITMQ") == "1"


@pytest.fixture()
def broker() -> Iterator[Broker]:
    """A virtual host of its own for each test: what one test leaves in a queue (a failure's
    unprocessed commands) is never consumed by the next."""
    missing = broker_missing(HOST, PORT)
    if missing:
        if REQUIRED:
            pytest.fail(f"FIXGW_REQUIRE_RABBITMQ=1 but {missing}")
        pytest.skip(f"{missing}: the RabbitMQ transport tests need the broker")
    with rabbitmq_vhost("fixgw-test") as b:
        yield b


def vhost_of(broker: Broker) -> str:
    return broker.url.rsplit("/", 1)[1]


def cell_env(server: ValkeyProcess, broker: Broker, partition: int, instruments: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "REDIS_URL": server.url, "MATCHING_PARTITION_COUNT": "2",
            "MATCHING_PARTITION": str(partition), "MATCHING_INSTRUMENTS": str(instruments),
            "MATCHING_LEASE_TTL_MS": "1500", **broker.cell_env()}


def publish_all(broker: Broker, commands: list[Command], batch: int = 100) -> None:
    link = AmqpLink(broker.full_url, "test-publisher")
    link.connect()
    try:
        publisher = AmqpCommandPublisher(link, 2)
        for i in range(0, len(commands), batch):
            publisher.publish(commands[i:i + batch])
    finally:
        link.close()


def processed(server: ValkeyProcess, partition: int = 0) -> int:
    return sum(1 for _ in server.client().scan_iter(PartitionKeys(partition).processed_command("*"), count=1000))


def wait_for(condition, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def instruments_table(tmp_path: Path) -> Path:
    """The random flows' instruments as a table file, for cell processes."""
    path = tmp_path / "instruments.toml"
    path.write_text("".join(f"""
[[instrument]]
symbol = "{i.symbol}"
pair_id = {i.pair_id}
tick_size = "{i.tick_size}"
lot_size = "{i.lot_size}"
min_quantity = "{i.min_quantity}"
max_quantity = "{i.max_quantity}"
min_price = "{i.min_price}"
max_price = "{i.max_price}"
""" for i in TEST_INSTRUMENTS.values()))
    return path


def test_command_queues_are_quorum_durable_and_single_active_consumer_at_the_broker(broker: Broker) -> None:
    link = AmqpLink(broker.full_url, "test-declare")
    link.connect()
    AmqpCommandPublisher(link, 2).declare()  # as the gateway does at start
    link.close()
    rows = json.loads(rabbitmqctl("list_queues", "-p", vhost_of(broker), "name", "type", "durable", "arguments",
                                  "--formatter", "json"))
    queues = {r["name"]: r for r in rows}
    for p in (0, 1):
        q = queues[command_queue(p)]
        assert (q["type"], q["durable"]) == ("quorum", True)
        assert {name: value for name, _type, value in q["arguments"]} == COMMAND_QUEUE_ARGUMENTS


def test_a_killed_active_conductor_hands_the_queue_to_the_standby_and_no_command_is_lost_or_applied_twice(
        broker: Broker, tmp_path: Path) -> None:
    flow = p0_flow(21, 3000)[:1200]
    instruments = instruments_table(tmp_path)
    with standalone() as server:
        conductors = [subprocess.Popen([sys.executable, "-m", "matching", "conductor"],
                                       env={**cell_env(server, broker, 0, instruments), "MATCHING_BATCH_SIZE": "20"},
                                       stdout=open(tmp_path / f"c{i}.log", "wb"), stderr=subprocess.STDOUT)
                      for i in range(2)]
        try:
            wait_for(lambda: server.client().get(PartitionKeys(0).conductor_lease) is not None, 30, "a conductor lease")
            publish_all(broker, flow[:600])
            wait_for(lambda: processed(server) >= 150, 60, "the active conductor to work")
            token = server.client().get(PartitionKeys(0).conductor_lease).decode()
            active = next(c for c in conductors if f":{c.pid}:" in token)
            active.send_signal(signal.SIGKILL)  # mid-flow: a batch read, maybe committed, not acknowledged
            active.wait(10)
            publish_all(broker, flow[600:])
            wait_for(lambda: processed(server) == len({c.command_id for c in flow}), 120, "every command processed")
            standby = next(c for c in conductors if c is not active)
            assert standby.poll() is None and f":{standby.pid}:" in server.client().get(
                PartitionKeys(0).conductor_lease).decode(), "the standby took over"
            assert projected(stream_events(server.client())) == reference_events(flow), \
                "every command applied once, in order: events equal the reference matcher's"


            def left_in_queue() -> int:
                rows = json.loads(rabbitmqctl("list_queues", "-p", vhost_of(broker), "name", "messages",
                                              "--formatter", "json"))
                return int({r["name"]: r["messages"] for r in rows}[command_queue(0)])

            # The last batch is acknowledged just after its commit, and the broker's counts are
            # refreshed every few seconds: wait for it rather than read it once.
            wait_for(lambda: left_in_queue() == 0, 30, "every command acknowledged")
        finally:
            for c in conductors:
                c.kill()
                c.wait(10)


def test_the_lease_holder_consumes_even_when_a_standby_conductor_started_first(broker: Broker, tmp_path: Path) -> None:
    """The lease says which conductor writes a partition, and only the lease holder subscribes
    to its queue. A standby that subscribed at start could be the consumer the broker makes
    active (single active consumer): frozen or merely waiting for the lease, it would hold every
    command while the lease holder's consumer waited behind it for good — seen as the active
    conductor processing nothing when the two started in the other order."""
    flow = p0_flow(23, 3000)[:200]
    instruments = instruments_table(tmp_path)
    with standalone() as server:
        lease = PartitionKeys(0).conductor_lease
        server.client().set(lease, "test:0:someone-else", px=120_000)  # both start as standbys

        started: list[subprocess.Popen[bytes]] = []

        def start(name: str) -> subprocess.Popen[bytes]:
            log = tmp_path / f"{name}.log"
            started.append(subprocess.Popen([sys.executable, "-m", "matching", "conductor"],
                                            env=cell_env(server, broker, 0, instruments), stdout=open(log, "wb"),
                                            stderr=subprocess.STDOUT))
            wait_for(lambda: b"matching: conductor p0" in log.read_bytes(), 30, f"{name} started")
            return started[-1]

        try:
            first = start("first")  # up (and, before the fix, subscribed) before the second starts
            second = start("second")
            first.send_signal(signal.SIGSTOP)  # alive to the broker, but it cannot take the lease
            server.client().delete(lease)
            wait_for(lambda: f":{second.pid}:" in (server.client().get(lease) or b"").decode(), 30,
                     "the second conductor to take the lease")
            publish_all(broker, flow)
            wait_for(lambda: processed(server) == len({c.command_id for c in flow}), 60,
                     "the lease holder to process every command")
        finally:
            for proc in started:
                proc.send_signal(signal.SIGCONT)
                proc.kill()
                proc.wait(10)


def test_broker_connections_closed_mid_stream_lose_nothing_and_duplicate_nothing_the_inboxes_cannot_absorb(
        broker: Broker, tmp_path: Path) -> None:
    flow = p0_flow(22, 3000)[:1000]
    instruments = instruments_table(tmp_path)
    # A consumer of our own on the event exchange: what settlement or market data would see.
    watcher_link = AmqpLink(broker.full_url, "test-watcher")
    watcher_link.connect()

    async def declare(channel: aio_pika.abc.AbstractChannel) -> aio_pika.abc.AbstractQueue:
        exchange = await channel.declare_exchange("matching.events", aio_pika.ExchangeType.TOPIC, durable=True)
        q = await channel.declare_queue("test.all-events", durable=True, arguments={"x-queue-type": "quorum"})
        await q.bind(exchange, "#.p0")
        return q

    watcher = QueueConsumer(watcher_link, "test.all-events", 1000, declare)
    watcher.restart()
    with standalone() as server:
        cells = [CellProc(role, 0, server.url, instruments, tmp_path / f"{role}.log", broker=broker).start()
                 for role in ("conductor", "outbox")]
        try:
            publish_all(broker, flow[:500])
            wait_for(lambda: processed(server) >= 100, 60, "the conductor to work")
            # The broker closes every client connection of the vhost: the cells' and our watcher's.
            rabbitmqctl("close_all_connections", "-p", vhost_of(broker), "closed by the test")
            publish_all(broker, flow[500:])
            wait_for(lambda: processed(server) == len({c.command_id for c in flow}), 120, "every command processed")
            expected = reference_events(flow)
            first: dict[str, Event] = {}  # each event as it first arrived: the order consumers see
            duplicates = 0
            deadline = time.monotonic() + 60
            while len(first) < len(expected) and time.monotonic() < deadline:
                if not watcher.healthy:
                    watcher.restart()
                batch = watcher.read(1000, 500)
                for _, fields, _delivery in batch:
                    event = parse_event(fields[b"body"])  # type: ignore[index]
                    duplicates += event.event_id in first
                    first.setdefault(event.event_id, event)
                watcher.ack([d for *_, d in batch])
            assert projected(list(first.values())) == expected, \
                "every event published, none lost, in order: each command applied once (the reference matcher's)"
            assert duplicates <= 1000, "republished at most a batch per lost connection (consumers dedupe on messageId)"
        finally:
            for cell in cells:
                cell.stop()
            watcher.stop()
            watcher_link.close()


@pytest.fixture()
def system(broker: Broker, tmp_path: Path) -> Iterator[System]:
    with standalone(aof=True) as server:
        s = System(tmp_path, server, [server, server], broker=broker)
        s.start()
        try:
            yield s
        finally:
            s.stop()


def test_the_order_flow_end_to_end_over_rabbitmq(system: System) -> None:
    c1, c2, dc = system.client("CLIENT1"), system.client("CLIENT2"), system.client("DROPCOPY")
    c1.order("r-sell", "2", "5", "10.00", symbol="T1")
    wait_reports(c1, "r-sell", 1)
    c2.order("r-buy", "1", "3", "10.00", symbol="T1")
    assert summary(wait_reports(c2, "r-buy", 2)) == [("8", "0", "0"), ("8", "F", "2")]
    assert summary(wait_reports(c1, "r-sell", 2)) == [("8", "0", "0"), ("8", "F", "1")]
    c1.replace("r-sell2", "r-sell", "2", "4", "10.05", symbol="T1")
    replaced = wait_reports(c1, "r-sell2", 1)[0]
    assert (replaced[150], replaced[41], replaced[38], replaced[44]) == ("5", "r-sell", "4", "10.05")
    c1.cancel("r-cxl", "r-sell2", "2", symbol="T1")
    canceled = wait_reports(c1, "r-cxl", 1)[0]
    assert (canceled[150], canceled[39], canceled[41]) == ("4", "4", "r-sell2")
    copies = wait_reports(dc, "r-buy", 2) + wait_reports(dc, "r-sell", 2) + wait_reports(dc, "r-cxl", 1)
    ours = reports(c1) + reports(c2, "r-buy")
    assert {r[17] for r in copies} <= {r[17] for r in ours}, "the drop copy sees the sessions' own reports"
    assert len({r[17] for r in reports(dc)}) == len({r[17] for r in ours}), "all of them, once each"
    assert connect(RedisEndpoint(url=system.store.url)).xlen(PartitionKeys(0).commands) == 0, \
        "no command went through the Redis stream"


# --- without a broker: refusals at start (these need no RabbitMQ) --------------------------


def test_a_cell_whose_broker_is_unreachable_stops_at_start_saying_so(tmp_path: Path) -> None:
    with standalone() as server:
        closed = socket.socket()
        closed.bind((HOST, 0))
        port = closed.getsockname()[1]  # bound, never listening: connections are refused
        try:
            for role in ("conductor", "outbox"):
                env = {**os.environ, "PYTHONPATH": str(ROOT), "REDIS_URL": server.url, "MATCHING_PARTITION": "0",
                       "MATCHING_TRANSPORT": "rabbitmq", "MATCHING_AMQP_URL": f"amqp://guest@{HOST}:{port}/",
                       "MATCHING_AMQP_PASSWORD_ENV": "UNREACHABLE_BROKER_PASSWORD", "UNREACHABLE_BROKER_PASSWORD": "x"}
                out = subprocess.run([sys.executable, "-m", "matching", role], env=env, capture_output=True, text=True,
                                     timeout=60)
                assert out.returncode == 2, out.stderr
                assert f"RabbitMQ at amqp://guest:***@{HOST}:{port}/ is unreachable or refused us" in out.stderr
        finally:
            closed.close()


@pytest.mark.parametrize("env,expected", [
    ({"MATCHING_AMQP_URL": "amqp://guest:guest@127.0.0.1/"}, "amqp_url must not carry a password"),
    ({"MATCHING_AMQP_URL": "amqp://guest@127.0.0.1/", "MATCHING_AMQP_PASSWORD_ENV": "FIXGW_NO_SUCH_VARIABLE"},
     "the AMQP password variable FIXGW_NO_SUCH_VARIABLE is not set"),
    ({}, "MATCHING_TRANSPORT=rabbitmq needs MATCHING_AMQP_URL"),
    ({"MATCHING_AMQP_URL": "http://127.0.0.1/"}, "amqp_url must start with amqp:// or amqps://"),
])
def test_broker_settings_that_would_leak_or_cannot_work_are_refused(env: dict[str, str], expected: str) -> None:
    from datastore.settings import ConfigError
    from matching.config import load_cell_settings

    with pytest.MonkeyPatch.context() as mp:
        for k in [k for k in os.environ if k.startswith("MATCHING_AMQP")]:
            mp.delenv(k)
        for k, v in {**env, "MATCHING_TRANSPORT": "rabbitmq"}.items():
            mp.setenv(k, v)
        with pytest.raises(ConfigError, match=expected):
            load_cell_settings()
