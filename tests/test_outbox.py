"""The outbox worker against real Valkey: order, lease handoff, reclaim, dead letters, retries."""

from __future__ import annotations

import time

import msgspec
import pytest
from redis.exceptions import RedisError

from datastore.embedded import ValkeyProcess, standalone
from matching.contracts import Event, parse_event
from matching.keys import PartitionKeys
from matching.outbox import GROUP, OutboxWorker, RedisStreamsPublisher, backoff_seconds, owner_routes
from tests.cell_helpers import accepted

pytestmark = pytest.mark.slow  # starts servers or processes: not in `make unit`

KEYS = PartitionKeys(0)
INBOX = "{fix/fsg}/inbox"
DC = "{fix/dc}/inbox"


def add_events(client, n: int, start: int = 0) -> list[str]:  # type: ignore[no-untyped-def]
    ids = []
    for i in range(start, start + n):
        e = Event(f"cmd{i}:0", 0, 0, f"cmd{i}", accepted(f"o{i}", "fix/fsg/C1"))
        ids.append(client.xadd(KEYS.events, {"event": e.encode()}).decode())
    return ids


WORKERS: list[OutboxWorker] = []


@pytest.fixture(autouse=True)
def release_workers():  # type: ignore[no-untyped-def]
    """Stop every worker's lease renewal with its test (its server is gone after it)."""
    yield
    while WORKERS:
        w = WORKERS.pop()
        w.lease.stop_renewing()


def worker(cell, target, **kw) -> OutboxWorker:  # type: ignore[no-untyped-def]
    routes = owner_routes(lambda owner: "{%s}/inbox" % "/".join(owner.split("/")[:2]), [DC])
    w = OutboxWorker(cell, cell, 0, RedisStreamsPublisher(target, routes), **kw)
    w.ensure_group()
    WORKERS.append(w)
    return w


def drain(w: OutboxWorker, steps: int = 200) -> int:
    total = 0
    for _ in range(steps):
        n = w.step(block_ms=10)
        total += n
        if not n and w.retry_at <= time.monotonic() and w.client.xlen(KEYS.events) == 0:
            return total
    return total


def inbox_ids(target, stream: str = INBOX) -> list[str]:  # type: ignore[no-untyped-def]
    return [f[b"messageId"].decode() for _, f in target.xrange(stream)]


def test_events_reach_owner_and_drop_copy_inboxes_in_order_with_headers(valkey: ValkeyProcess) -> None:
    with standalone() as gateway_store:
        cell, target = valkey.client(), gateway_store.client()
        ids = add_events(cell, 250)
        w = worker(cell, target)
        assert drain(w) == 250
        assert inbox_ids(target) == [f"cmd{i}:0" for i in range(250)] == inbox_ids(target, DC)
        first = target.xrange(INBOX, count=1)[0][1]
        assert first[b"causationId"] == b"cmd0" and first[b"partition"] == b"0"
        assert first[b"x-partition-offset"].decode() == ids[0]
        assert parse_event(first[b"event"]).payload.order_id == "o0"
        assert cell.xlen(KEYS.events) == 0 and cell.hlen(KEYS.outbox_attempts) == 0  # acked, deleted
        assert w.metrics.published._value.get() == 250


def test_lease_handoff_standby_takes_over_without_loss(valkey: ValkeyProcess) -> None:
    cell = valkey.client()
    a = worker(cell, cell, consumer="a")
    b = worker(cell, cell, consumer="b")
    add_events(cell, 50)
    assert drain(a) == 50
    assert b.step(block_ms=10) == 0 and not b.has_lease and b.metrics.lease_owned._value.get() == 0
    a.release()
    add_events(cell, 30, start=50)
    assert drain(b) == 30
    assert inbox_ids(cell) == [f"cmd{i}:0" for i in range(80)]


def test_entries_left_pending_by_a_dead_consumer_are_reclaimed_first(valkey: ValkeyProcess) -> None:
    cell = valkey.client()
    add_events(cell, 10)
    dead = worker(cell, cell, consumer="dead")
    dead.client.xreadgroup(GROUP, "dead", {KEYS.events: ">"}, count=4)  # read, then "crashed"
    add_events(cell, 5, start=10)
    live = worker(cell, cell, consumer="live", claim_idle_ms=50)
    time.sleep(0.1)
    assert drain(live) == 15
    assert inbox_ids(cell) == [f"cmd{i}:0" for i in range(15)]
    assert cell.xpending(KEYS.events, GROUP)["pending"] == 0


def test_poison_entry_goes_to_dead_letter_in_one_transaction(valkey: ValkeyProcess) -> None:
    cell = valkey.client()
    add_events(cell, 2)
    poison = cell.xadd(KEYS.events, {"event": "{not an envelope"}).decode()
    add_events(cell, 2, start=2)
    w = worker(cell, cell)
    drain(w)
    dead = cell.xrange(KEYS.dead_letter)
    assert len(dead) == 1 and dead[0][1][b"x-original-id"].decode() == poison
    assert b"invalid event envelope" in dead[0][1][b"x-error"]
    assert inbox_ids(cell) == ["cmd0:0", "cmd1:0", "cmd2:0", "cmd3:0"]
    assert cell.xlen(KEYS.events) == 0 and w.metrics.dead_lettered._value.get() == 1


def test_publish_failure_retries_with_backoff_and_keeps_order(valkey: ValkeyProcess) -> None:
    cell = valkey.client()
    with standalone() as gateway_store:
        target = gateway_store.client(socket_timeout=0.5, socket_connect_timeout=0.5)
        w = worker(cell, target)
        add_events(cell, 20)
        gateway_store.kill()  # the inbox datastore is down
        assert w.step(block_ms=10) == 0
        attempts = cell.hgetall(KEYS.outbox_attempts)
        assert len(attempts) == 20 and set(attempts.values()) == {b"1"}
        assert w.retry_at > time.monotonic() - 0.01 and w.metrics.retried._value.get() == 20
        add_events(cell, 5, start=20)  # new events must not overtake the failed batch
        gateway_store.start()
        deadline = time.monotonic() + 10
        while cell.xlen(KEYS.events) and time.monotonic() < deadline:
            w.step(block_ms=10)
            time.sleep(0.02)
        assert inbox_ids(target) == [f"cmd{i}:0" for i in range(25)]
        assert cell.hlen(KEYS.outbox_attempts) == 0


def test_backoff_is_jittered_exponential_and_capped() -> None:
    import random

    rng = random.Random(1)
    samples = [[backoff_seconds(a, rng) for _ in range(200)] for a in (1, 2, 5, 30)]
    assert max(samples[0]) <= 0.1 and max(samples[1]) <= 0.2 and max(samples[2]) <= 1.6
    assert max(samples[3]) <= 30.0 and max(samples[3]) > 20  # capped at 30 s, jitter spreads it
    assert len(set(samples[2])) > 150


def test_envelope_fields_are_what_consumers_dedupe_on() -> None:
    e = Event("c1:0", 3, 19, "c1", accepted("o1", "fix/fsg/C1"))
    assert msgspec.msgpack.decode(e.encode())["eventId"] == "c1:0"
    assert parse_event(e.encode()) == e


# --- failover: nothing lost, nothing out of order, nothing before it is durable (issue 15) ----

def test_a_killed_workers_unpublished_batch_goes_out_first_and_at_once(valkey: ValkeyProcess) -> None:
    cell = valkey.client()
    add_events(cell, 10)
    dead = worker(cell, cell, consumer="dead")
    dead.client.xreadgroup(GROUP, "dead", {KEYS.events: ">"}, count=4)  # read, then SIGKILLed
    add_events(cell, 5, start=10)
    # an hour of claim idle time: only the claim at takeover can publish the dead worker's batch now
    successor = worker(cell, cell, consumer="successor", claim_idle_ms=3_600_000)
    assert drain(successor) == 15
    assert inbox_ids(cell) == [f"cmd{i}:0" for i in range(15)], "in stream order, the dead worker's batch first"


def test_a_stalled_former_holder_cannot_publish_after_its_successor_has(valkey: ValkeyProcess) -> None:
    with standalone() as gateway_store:
        cell, target = valkey.client(), gateway_store.client()
        old = worker(cell, target, consumer="old", lease_ttl_ms=300)
        add_events(cell, 10)
        assert old.step(block_ms=10) == 10  # old publishes under its epoch
        add_events(cell, 5, start=10)
        old.acknowledge_published()  # as its next read does, in the same round trip
        stalled = old.client.xreadgroup(GROUP, "old", {KEYS.events: ">"}, count=5)[0][1]
        old.lease.stop_renewing()  # SIGSTOP: no renewals, the batch in hand unpublished
        time.sleep(0.4)
        new = worker(cell, target, consumer="new", lease_ttl_ms=300)
        add_events(cell, 5, start=15)
        assert drain(new) == 10, "the stalled batch and the new events, in order"
        old.lease._valid_until = time.monotonic() + 10  # it still believes it holds the lease
        assert old._deliver(stalled) == 0, "refused at the stream: a newer epoch publishes here"
        assert not old.has_lease, "and it stands down"
        assert inbox_ids(target) == [f"cmd{i}:0" for i in range(20)] == inbox_ids(target, DC)


def test_a_holder_fenced_by_a_stale_worker_takes_a_newer_epoch(valkey: ValkeyProcess) -> None:
    cell = valkey.client()
    holder = worker(cell, cell, consumer="holder")
    add_events(cell, 3)
    assert drain(holder) == 3
    # a stale worker that never published before takes an epoch at the stream after ours
    cell.hincrby("{fix/fsg}/inbox:publishers", "0", 1)
    add_events(cell, 2, start=3)
    assert drain(holder) == 2, "the lease is still ours: a newer epoch, published"
    assert inbox_ids(cell) == [f"cmd{i}:0" for i in range(5)]


def test_an_error_on_acknowledgement_leaves_the_batch_first_in_line(valkey: ValkeyProcess) -> None:
    with standalone() as gateway_store:
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        cell = valkey.client(socket_timeout=0.2, retry=Retry(NoBackoff(), 0))  # the error reaches us
        target = gateway_store.client()
        routes = owner_routes(lambda owner: "{%s}/inbox" % "/".join(owner.split("/")[:2]))
        inner = RedisStreamsPublisher(target, routes)

        class PausesTheCellAfterPublishing:
            """Publishes for real, then the cell stops taking writes: the ack cannot land."""

            def __init__(self) -> None:
                self.once = True

            def begin_term(self, partition, still_holder):  # type: ignore[no-untyped-def]
                inner.begin_term(partition, still_holder)

            def publish(self, deliveries):  # type: ignore[no-untyped-def]
                inner.publish(deliveries)
                if self.once:
                    self.once = False
                    valkey.client().execute_command("CLIENT", "PAUSE", 1000, "WRITE")

        w = OutboxWorker(cell, valkey.client(), 0, PausesTheCellAfterPublishing())
        w.ensure_group()
        WORKERS.append(w)
        add_events(cell, 5)
        with pytest.raises(RedisError):
            w.step(block_ms=10)
        time.sleep(1.1)
        add_events(valkey.client(), 3, start=5)
        drain(w)
        published = inbox_ids(target)
        assert published[:5] == published[5:10] == [f"cmd{i}:0" for i in range(5)], \
            "the unacknowledged batch again, before anything newer"
        assert published[10:] == ["cmd5:0", "cmd6:0", "cmd7:0"]
        assert valkey.client().xpending(KEYS.events, GROUP)["pending"] == 0


def test_in_aof_replicated_mode_nothing_is_published_before_it_is_durable() -> None:
    from matching.config import Durability

    with standalone(aof=True, appendfsync="always") as primary, \
            standalone(aof=True, appendfsync="always") as replica:
        replica.client().execute_command("REPLICAOF", "127.0.0.1", primary.port)
        deadline = time.monotonic() + 10
        while replica.client().info("replication").get("master_link_status") != "up":
            assert time.monotonic() < deadline, "replica never synced"
            time.sleep(0.05)
        cell = primary.client()
        w = worker(cell, cell, durability=Durability.named("aof-replicated", 300))
        replica.client().config_set("appendonly", "no")  # the replica can no longer fsync our events
        add_events(cell, 4)
        for _ in range(3):
            assert w.step(block_ms=10) == 0
        assert inbox_ids(cell) == [] and w.metrics.not_durable._value.get() >= 1
        replica.client().config_set("appendonly", "yes")
        deadline = time.monotonic() + 15
        while not inbox_ids(cell) and time.monotonic() < deadline:
            w.step(block_ms=10)
            time.sleep(0.05)
        assert inbox_ids(cell) == [f"cmd{i}:0" for i in range(4)], "published once a replica has them on disk"


def test_backlog_gauges_move_while_events_flow(valkey: ValkeyProcess) -> None:
    cell = valkey.client()
    add_events(cell, 250)
    w = worker(cell, cell, read_count=100)
    assert w.step(block_ms=10) == 100  # a read that returned entries still updates the gauges
    assert w.metrics.stream_length._value.get() == 250
