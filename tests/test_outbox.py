"""The outbox worker against real Valkey: order, lease handoff, reclaim, dead letters, retries."""

from __future__ import annotations

import json
import time


from matching.contracts import Event, EventType, parse_event
from matching.keys import PartitionKeys
from matching.outbox import GROUP, OutboxWorker, RedisStreamsPublisher, backoff_seconds, owner_routes
from sessionstore.embedded import ValkeyProcess, standalone

KEYS = PartitionKeys(0)
INBOX = "{fix/fsg}/inbox"
DC = "{fix/dc}/inbox"


def add_events(client, n: int, start: int = 0) -> list[str]:  # type: ignore[no-untyped-def]
    ids = []
    for i in range(start, start + n):
        e = Event(f"cmd{i}:0", EventType.ORDER_ACCEPTED, 0, 0, f"cmd{i}", {"orderId": f"o{i}", "owner": "fix/fsg/C1"})
        ids.append(client.xadd(KEYS.events, {"event": e.encode()}).decode())
    return ids


def worker(cell, target, **kw) -> OutboxWorker:  # type: ignore[no-untyped-def]
    routes = owner_routes(lambda owner: "{%s}/inbox" % "/".join(owner.split("/")[:2]), [DC])
    w = OutboxWorker(cell, cell, 0, RedisStreamsPublisher(target, routes), **kw)
    w.ensure_group()
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
        assert parse_event(first[b"event"]).payload["orderId"] == "o0"
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
    e = Event("c1:0", EventType.DEAL_EXECUTED, 3, 19, "c1", {"price": 1})
    assert json.loads(e.encode())["eventId"] == "c1:0"
    assert parse_event(e.encode()) == e
