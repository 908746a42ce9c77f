"""The outbox worker: drains a partition's event stream to a publisher (seed 000's loop).

1. Hold ``:outbox-lease`` (SET NX PX 10000, renewed every 3.3 s by compare-and-expire on
   a timer); without it, sleep and retry, and /ready answers 503.
2. On taking the lease — and again every second — claim every entry pending in the group,
   whoever it was delivered to (XAUTOCLAIM; at takeover with no idle time: the lease makes
   that safe), so a dead or stalled predecessor's unpublished batch goes out first, at once.
3. Never read ahead of this consumer's own pending entries: they are read (in stream order)
   before anything new, and every error path leaves the worker re-reading them.
4. Otherwise XREADGROUP COUNT 250 BLOCK 1000 (seed 000 reads 100: 250 spreads each round trip's
   and each turn's fixed cost over more events, ~10% more events/s in 5 alternating pairs).
5. An entry that is not a valid envelope goes to the dead-letter stream in one MULTI
   (XADD, XACK, XDEL).
6. In ``aof-replicated`` mode, publish nothing that is not durable: before each batch, a
   write of our own and WAITAOF (``durable_barrier``) confirm that everything the primary
   holds is fsynced locally and on a replica; after a failover, what the new primary holds
   is confirmed again before it is published.
7. Publish the batch, fenced (``PUBLISH_FENCED``): each worker takes a new epoch at every
   stream it publishes to after taking the lease, and a stream refuses a partition's
   publisher whose epoch is not the newest — a stalled former holder cannot publish after
   its successor has. Only when every publish is confirmed, XACK + XDEL + HDEL attempts in
   one MULTI — with Redis Streams, in the round trip that publishes the next batch (the cell
   acknowledges one batch and reads the next while the target appends this one). A failed
   batch bumps each event's attempt counter and is retried after a jittered exponential
   backoff capped at 30 s, in the same order.

Delivery is at-least-once: a crash between publish and ack republishes, and consumers
deduplicate by messageId (= eventId). The publisher is an interface: Redis Streams now,
AMQP can follow with the same ``publish`` contract.
"""

from __future__ import annotations

import logging
import os
import random
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple, Protocol

from redis.exceptions import NoScriptError, RedisError, ResponseError

from datastore.connection import RedisClient, is_cluster, own_connections, round_trip, round_trips
from datastore.lease import Lease

from .config import LEASE_TTL_MS, Durability
from .contracts import ContractError, Event, parse_event
from .keys import TARGET_REPLICATION_MARK, PartitionKeys, publisher_fence
from .linger import Linger
from .metrics import OutboxMetrics
from .storage import Entries, durable_barrier, ensure_group, read_group, read_group_command, read_group_entries

log = logging.getLogger("matching.outbox")

GROUP = "matching-outbox-v1"
CLAIM_IDLE_MS = 30_000
READ_COUNT = 250  # (module docstring, step 4)
READ_BLOCK_MS = 200  # an idle read's wait: also the longest a stand-down (a relocation, SIGTERM) waits
BACKOFF_BASE_S = 0.1
BACKOFF_CAP_S = 30.0


class Delivery(NamedTuple):
    """One event ready to publish, with the headers every message carries. (A named tuple:
    one is made per event on the outbox's hot path, where a frozen dataclass's ``__init__``
    cost a microsecond each.)"""

    stream_id: str
    event: Event
    raw: bytes = b""  # the event as the stream holds it: published as it is, not encoded again

    @property
    def body(self) -> bytes:
        return self.raw or self.event.encode()

    @property
    def headers(self) -> dict[str, str]:
        return {"messageId": self.event.event_id, "causationId": self.event.command_id,
                "partition": str(self.event.partition), "x-partition-offset": self.stream_id}


Batch = tuple[RedisClient, list[tuple[Any, ...]]]  # a datastore and the commands for it


class PublishError(Exception):
    """The publisher could not confirm every message of a batch."""


class PublisherFenced(PublishError):
    """A newer outbox worker publishes this partition now: this one must stand down."""


class Publisher(Protocol):
    def begin_term(self, partition: int, still_holder: Callable[[], bool]) -> None:
        """The worker has just taken the lease: publish under a new epoch from now on."""

    def publish(self, deliveries: Sequence[Delivery]) -> None:
        """Publish in order; return only when every message is confirmed, else raise PublishError."""


# KEYS: the stream, its publisher fence (``publisher_fence``). ARGV: partition, the publisher's
# epoch at this stream ('new' = take the next one), then per entry: messageId, causationId,
# x-partition-offset, event. Appends every entry or none; returns the epoch used.
PUBLISH_FENCED = """
local epoch
if ARGV[2] == 'new' then
  epoch = redis.call('HINCRBY', KEYS[2], ARGV[1], 1)
else
  epoch = tonumber(ARGV[2])
  local current = tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0')
  if epoch ~= current then
    return redis.error_reply('FENCED partition ' .. ARGV[1] .. ' publishes here with epoch ' .. current ..
                             ', not ' .. epoch)
  end
end
for i = 3, #ARGV, 4 do
  redis.call('XADD', KEYS[1], '*', 'messageId', ARGV[i], 'causationId', ARGV[i+1], 'partition', ARGV[1],
             'x-partition-offset', ARGV[i+2], 'event', ARGV[i+3])
end
return epoch
"""


class RedisStreamsPublisher:
    """Publishes into Redis streams (the gateways' inboxes), routed per event (``destinations``:
    each stream once, as ``owner_routes`` gives them), fenced per stream."""

    def __init__(self, client: RedisClient, destinations: Callable[[Event], Iterable[str]], *,
                 replica_acks: int = 0, replica_timeout_ms: int = 1000) -> None:
        """``replica_acks``: confirm each publish on this many replicas of the target (WAIT
        behind an increment of ``TARGET_REPLICATION_MARK``) before it counts as published."""
        self.client = client
        self.destinations = destinations
        self.replica_acks = replica_acks
        self.replica_timeout_ms = replica_timeout_ms
        self._script = client.register_script(PUBLISH_FENCED)
        self._partition = 0
        self._still_holder: Callable[[], bool] = lambda: True
        self._epochs: dict[str, int] = {}  # this term's epoch at each stream published to

    def begin_term(self, partition: int, still_holder: Callable[[], bool]) -> None:
        self._partition = partition
        self._still_holder = still_holder
        self._epochs.clear()

    def publish(self, deliveries: Sequence[Delivery]) -> None:
        self.publish_beside(deliveries, None)

    def publish_beside(self, deliveries: Sequence[Delivery], beside: Batch | None,
                       meanwhile: Callable[[], None] | None = None) -> list[Any]:
        """Publish in order, fenced; return when every message is confirmed. ``beside`` (a
        client and its commands) goes out in the same round trip, on its own connection, and
        its replies are returned: the worker acknowledges the last batch and reads the next
        while this one is appended; ``meanwhile`` runs once the commands are sent, before
        any reply is read. A failed round trip, on either side, is a PublishError."""
        by_stream: dict[str, list[Delivery]] = {}  # each stream gets its events in stream order
        for d in deliveries:
            for stream in self.destinations(d.event):  # (each once: owner_routes)
                by_stream.setdefault(stream, []).append(d)
        beside_replies: list[Any] = []
        for retake in (True, False):
            fenced, sent_beside = self._publish_once(by_stream, beside, meanwhile)
            if beside is not None:
                beside_replies, beside, meanwhile = sent_beside, None, None  # once, with the first attempt
            if not fenced:
                return beside_replies
            # Another worker took an epoch at these streams after our term began. If the lease
            # is still ours it was a stalled former holder: take a newer epoch and publish again.
            if not retake or not self._still_holder():
                raise PublisherFenced(f"partition {self._partition}: fenced at {sorted(fenced)}")
            for stream in fenced:
                self._epochs.pop(stream, None)
            by_stream = {stream: by_stream[stream] for stream in fenced}
        return beside_replies

    def _publish_once(self, by_stream: dict[str, list[Delivery]], beside: Batch | None = None,
                      meanwhile: Callable[[], None] | None = None) -> tuple[list[str], list[Any]]:
        """One round trip; returns the streams that refused us as fenced, and ``beside``'s replies."""
        calls: list[tuple[Any, ...]] = []
        streams = list(by_stream)
        for stream in streams:
            args: list[str | int | bytes] = [self._partition, self._epochs.get(stream, "new")]
            for d in by_stream[stream]:
                args += [d.event.event_id, d.event.command_id, d.stream_id, d.body]
            # EVALSHA by hand: redis-py's Script in a pipeline asks SCRIPT EXISTS on every execute
            calls.append(("EVALSHA", self._script.sha, 2, stream, publisher_fence(stream), *args))
        if calls and self.replica_acks:
            # WAIT covers its own connection's last write: the mark makes that a write of this
            # round trip even when every publish in it was a replay the script recognised.
            calls += [("INCR", TARGET_REPLICATION_MARK), ("WAIT", self.replica_acks, self.replica_timeout_ms)]
        try:
            if beside is None:
                replies, beside_replies = round_trip(self.client, calls) if calls else [], []
            else:
                replies, beside_replies = round_trips([(self.client, calls), beside], meanwhile)
        except RedisError as exc:
            raise PublishError(f"publish failed: {exc}") from exc
        if calls and self.replica_acks:
            acked, _mark = replies.pop(), replies.pop()
            if not isinstance(acked, Exception) and int(acked) < self.replica_acks:
                raise PublishError(f"published on the target's primary, but only {acked} of {self.replica_acks} "
                                   f"replicas acknowledged within {self.replica_timeout_ms} ms")
        if any(isinstance(r, NoScriptError) for r in replies):
            self.client.script_load(PUBLISH_FENCED)  # a restarted target: load it, then publish again
            return self._publish_once(by_stream)[0], beside_replies
        fenced = []
        for stream, reply in zip(streams, replies):
            if isinstance(reply, Exception):
                if str(reply).startswith("FENCED"):
                    fenced.append(stream)
                    continue
                raise PublishError(f"publish to {stream} not confirmed: {reply}")
            self._epochs[stream] = int(reply)
        return fenced, beside_replies


def owner_routes(inbox_of: Callable[[str], str], also: Sequence[str] = ()) -> Callable[[Event], list[str]]:
    """Route each event to the inbox of every order owner it concerns, plus ``also`` (drop copy),
    each stream once (a deal's two owners may share a gateway, and so its inbox)."""

    inboxes: dict[str, str] = {}  # owner → inbox: one lookup per event on the hot path
    extra = list(also)

    def inbox(owner: str) -> str:
        found = inboxes.get(owner)
        if found is None:
            if len(inboxes) > 100_000:  # owners are sessions: bounded, but never trusted to be
                inboxes.clear()
            found = inboxes[owner] = inbox_of(owner)
        return found

    def destinations(event: Event) -> list[str]:
        return list(dict.fromkeys([inbox(o) for o in event.owners()] + extra))

    return destinations


def backoff_seconds(attempt: int, rng: random.Random | None = None) -> float:
    """Full-jitter exponential backoff: uniform(0, min(cap, base·2^(attempt-1)))."""
    ceiling = min(BACKOFF_CAP_S, BACKOFF_BASE_S * (2 ** max(0, attempt - 1)))
    return (rng or random).uniform(0, ceiling)


class OutboxWorker:
    def __init__(self, client: RedisClient, control: RedisClient, partition: int, publisher: Publisher, *,
                 metrics: OutboxMetrics | None = None, consumer: str | None = None,
                 lease_ttl_ms: int = LEASE_TTL_MS, lease_renew_s: float | None = None,
                 claim_idle_ms: int = CLAIM_IDLE_MS, read_count: int = READ_COUNT,
                 durability: Durability | None = None, linger_s: float = 0.0) -> None:
        self.client = client  # data connection: stream reads, acks, dead letters
        self.control = control  # control connection: the lease
        self.keys = PartitionKeys(partition)
        self.partition = partition
        self.publisher = publisher
        self.metrics = metrics or OutboxMetrics(partition)
        self.consumer = consumer or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.claim_idle_ms = claim_idle_ms
        self.read_count = read_count
        self.linger = Linger(linger_s, read_count)  # (the loop's pause after a small batch)
        # Renewed on a daemon thread: a publish can take longer than the renewal interval.
        self.lease = Lease(control, self.keys.outbox_lease, self.consumer, ttl_ms=lease_ttl_ms,
                           renew_s=lease_renew_s or lease_ttl_ms / 3000, name=f"partition {partition} outbox",
                           on_lost=self._stand_down)
        self.retry_at = 0.0  # monotonic time before which a failed batch is not retried
        self._attempt = 0
        self._next_claim = 0.0  # XAUTOCLAIM at most once a second: idle entries age in tens of seconds
        self._own_pending = True  # unknown at start; known empty once a read of "0" returns nothing
        # The next batch, read in the same round trip as the last one's acknowledgement. Those
        # entries are in our pending list already: whenever own pending is read instead, they
        # come with it, in stream order, so dropping this list never loses one.
        self._prefetched: Entries = []
        # Ack calls of the batch last published beside the cell's round trip (``_publish_beside``).
        self._unacked: list[tuple[Any, ...]] = []
        self._ready: list[Delivery] = []  # read ahead and parsed while the last batch was published
        self._pipelined = (isinstance(publisher, RedisStreamsPublisher) and not is_cluster(client)
                           and not is_cluster(publisher.client))
        self._claim_all = True  # on taking the lease: every pending entry of the group becomes ours
        self._next_gauges = 0.0
        self.durability = durability or Durability.named("memory")

    # --- lease ------------------------------------------------------------------------

    @property
    def has_lease(self) -> bool:
        return self.lease.held

    def try_lease(self) -> bool:
        if not self.lease.try_take():
            self.metrics.lease_owned.set(0)
            return False
        self.metrics.lease_owned.set(1)
        log.info("partition %d: outbox lease taken by %s", self.partition, self.consumer)
        self._claim_all = self._own_pending = True
        self.publisher.begin_term(self.partition, self._still_holder)
        self.lease.start_renewing(f"outbox-lease p{self.partition}")
        return True

    def _still_holder(self) -> bool:
        return self.lease.holder() == self.consumer

    def _stand_down(self, why: str) -> None:
        log.error("partition %d: outbox stands down: %s", self.partition, why)
        self.lease.lose(why)  # (a no-op when the lease itself found it lost)
        self._own_pending = True
        self.metrics.lease_owned.set(0)

    def release(self) -> None:
        self.lease.release()
        self.metrics.lease_owned.set(0)

    # --- the loop ---------------------------------------------------------------------

    def datastores(self) -> list[RedisClient]:
        """What the loop talks to: the stream it drains and, for Redis streams, where it publishes."""
        return [self.client] + ([self.publisher.client] if isinstance(self.publisher, RedisStreamsPublisher) else [])

    def ensure_group(self) -> None:
        ensure_group(self.client, self.keys.events, GROUP)

    def step(self, block_ms: int = READ_BLOCK_MS) -> int:
        """One turn of the loop; returns how many events were published. Whatever fails on
        the way (a read, a publish, the acknowledgement) leaves own pending to be read first."""
        try:
            return self._step(block_ms)
        except BaseException:
            self._own_pending = True
            raise

    def _step(self, block_ms: int) -> int:
        if not self.has_lease and not self.try_lease():
            return 0
        if time.monotonic() < self.retry_at:
            return 0
        entries: Entries = []
        if self._claim_all or time.monotonic() >= self._next_claim:
            # 2. what other consumers left pending becomes ours; it is then read in stream order
            if self._claim(0 if self._claim_all else self.claim_idle_ms):
                self._own_pending = True
            self._claim_all = False
            self._next_claim = time.monotonic() + 1.0
        retried = False  # entries read again may have attempt counters (ours or a predecessor's)
        prefetched, self._prefetched = self._prefetched, []
        ready, self._ready = self._ready, []
        if self._own_pending:
            # 3. our own pending (a failed or claimed batch) before anything new; what was
            # published already is acknowledged first, not read and published again
            self.acknowledge_published()
            entries = read_group(self.client, GROUP, self.consumer, self.keys.events, "0", self.read_count)
            self._own_pending = retried = bool(entries)
        elif ready:  # parsed while the last batch was published; the rest of the read-ahead stays
            self._prefetched = prefetched
            return self._publish(ready, retried)
        elif prefetched:
            entries, self._prefetched = prefetched[:self.read_count], prefetched[self.read_count:]
        if not entries:
            entries = self._read_new(block_ms)
        if time.monotonic() >= self._next_gauges:  # every cycle, at most once a second: a backlog shows
            self._gauges()
            self._next_gauges = time.monotonic() + 1.0
        if not entries:
            return 0
        return self._deliver(entries, retried)

    def _read_new(self, block_ms: int) -> Entries:
        """Sent once (``read_group``): a lost reply raises, and own pending is read first. A
        published batch not yet acknowledged is acknowledged in the same round trip, before it."""
        if not self._unacked:
            return read_group(self.client, GROUP, self.consumer, self.keys.events, ">", self.read_count, block_ms)
        read = read_group_command(GROUP, self.consumer, self.keys.events, ">", self.read_count, block_ms)
        replies = round_trip(self.client, [("MULTI",), *self._unacked, ("EXEC",), read])
        self._unacked = []
        return self._acknowledged_then_read(replies)

    def _claim(self, min_idle_ms: int) -> int:
        """XAUTOCLAIM every entry pending for longer than ``min_idle_ms`` to this consumer."""
        claimed, cursor = 0, "0-0"
        while True:
            # (not JUSTID: redis-py drops the cursor from a JUSTID reply)
            reply = self.client.xautoclaim(self.keys.events, GROUP, self.consumer, min_idle_ms, start_id=cursor,
                                           count=self.read_count)
            claimed += len(reply[1])
            cursor = reply[0].decode() if isinstance(reply[0], bytes) else reply[0]
            if cursor == "0-0":
                return claimed

    def _durable(self) -> bool:
        """aof-replicated: is everything the primary holds fsynced as the policy asks?"""
        d = self.durability
        if d.is_memory:
            return True
        local, replicas = durable_barrier(self.client, self.keys, d.local_fsyncs, d.replica_fsyncs, d.timeout_ms)
        if local >= d.local_fsyncs and replicas >= d.replica_fsyncs:
            return True
        log.warning("partition %d: events not durable yet (WAITAOF %d %d confirmed local=%d replicas=%d); "
                    "not published", self.partition, d.local_fsyncs, d.replica_fsyncs, local, replicas)
        self.metrics.not_durable.inc()
        self._own_pending = True
        self.retry_at = time.monotonic() + 0.2
        return False

    def _deliver(self, entries: Entries, retried: bool = True) -> int:
        return self._publish(self._parse(entries), retried)

    def _parse(self, entries: Entries) -> list[Delivery]:
        """Each entry's event, validated; an entry that is not one goes to the dead letters."""
        deliveries: list[Delivery] = []
        for entry_id, fields in entries:
            sid = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
            raw = (fields or {}).get(b"event")
            try:
                if raw is None:
                    raise ContractError("entry has no event field")
                deliveries.append(Delivery(sid, parse_event(raw), raw))
            except ContractError as exc:
                self._dead_letter(sid, fields or {}, str(exc))
        return deliveries

    def _publish(self, deliveries: list[Delivery], retried: bool) -> int:
        if not deliveries or not self._durable():
            return 0
        try:
            if self._pipelined:
                self._publish_beside(deliveries, retried)
            else:
                self.publisher.publish(deliveries)
        except PublisherFenced as exc:
            self._stand_down(str(exc))
            return 0
        except PublishError as exc:
            self._own_pending = True
            self._failed(deliveries, exc)
            return 0
        if not self._pipelined:
            self._acknowledge(deliveries, retried)
        self._attempt = 0
        self.retry_at = 0.0
        self.metrics.published.inc(len(deliveries))
        return len(deliveries)

    def _ack_calls(self, deliveries: list[Delivery], retried: bool) -> list[tuple[Any, ...]]:
        """XACK + XDEL (+ HDEL of attempt counters): for one MULTI."""
        ids = [d.stream_id for d in deliveries]
        acks: list[tuple[Any, ...]] = [("XACK", self.keys.events, GROUP, *ids), ("XDEL", self.keys.events, *ids)]
        if retried or self._attempt:  # attempt counters exist only for entries delivered before
            acks.append(("HDEL", self.keys.outbox_attempts, *[d.event.event_id for d in deliveries]))
        return acks

    def _publish_beside(self, deliveries: list[Delivery], retried: bool) -> None:
        """Redis Streams on standalone or Sentinel datastores: while the target appends this
        batch, the cell acknowledges the batch before it and reads ahead, in the same round
        trip on its own connection, and this process parses the batch read the round trip
        before (``meanwhile``): the datastores' work and ours overlap. This batch is
        acknowledged with the next one's publish, or before the next blocking read, or before
        own pending is read again: until then it stays pending, so a crash republishes it (at
        least once, as every crash between publish and acknowledgement). Everything read or
        parsed ahead is in our pending list, in stream order: dropped on any failure, it is
        read again from there."""
        assert isinstance(self.publisher, RedisStreamsPublisher)
        ahead, self._prefetched = self._prefetched[:self.read_count], self._prefetched[self.read_count:]
        # Nothing in hand to parse next time: read two batches, so one is parsed in each wait from now on.
        count = self.read_count if ahead or self._prefetched else 2 * self.read_count
        read = read_group_command(GROUP, self.consumer, self.keys.events, ">", count)
        beside = [("MULTI",), *self._unacked, ("EXEC",), read] if self._unacked else [read]

        def meanwhile() -> None:
            self._ready = self._parse(ahead)

        replies = self.publisher.publish_beside(deliveries, (self.client, beside), meanwhile if ahead else None)
        self._unacked = self._ack_calls(deliveries, retried)
        entries = self._acknowledged_then_read(replies) if len(beside) > 1 else self._entries(replies[0])
        self._prefetched += entries

    def acknowledge_published(self) -> None:
        """Acknowledge the published batch still pending (``_publish_beside``), if any."""
        if self._unacked:
            round_trip(self.client, self._unacked, transaction=True)
            self._unacked = []

    def _acknowledged_then_read(self, replies: list[Any]) -> Entries:
        """The replies of MULTI, acknowledgements, EXEC and a read: the entries read."""
        *queued, result, entries = replies
        if not isinstance(result, list):  # the acknowledgement failed; what was read is pending: read again
            self._own_pending = True
            raise ResponseError(f"acknowledgement failed: {result}; "
                                f"{[q for q in queued if isinstance(q, Exception)][:1]}")
        return self._entries(entries)

    def _entries(self, reply: Any) -> Entries:
        if isinstance(reply, Exception):  # what a failed read moved to pending is read from "0"
            self._own_pending = True
            return []
        return read_group_entries(reply)

    def _acknowledge(self, deliveries: list[Delivery], retried: bool) -> None:
        """One MULTI of ``_ack_calls``; on a standalone or Sentinel datastore the next batch is
        read in the same round trip (one round trip a batch fewer). Not a blocking read: tried,
        it cut the drain rate by a third (16k vs 24k events/s in bench/cell_bench.py's outbox
        row), for one round trip saved per batch at low rates."""
        acks = self._ack_calls(deliveries, retried)
        if is_cluster(self.client) or self._own_pending:
            round_trip(self.client, acks, transaction=True)
            return
        read = read_group_command(GROUP, self.consumer, self.keys.events, ">", self.read_count)
        self._prefetched = self._acknowledged_then_read(round_trip(self.client, [("MULTI",), *acks, ("EXEC",), read]))

    def _dead_letter(self, stream_id: str, fields: dict[bytes, bytes], why: str) -> None:
        log.error("partition %d: entry %s is not a valid envelope (%s); moved to %s", self.partition, stream_id,
                  why, self.keys.dead_letter)
        tx = self.client.pipeline(transaction=True)
        entry: dict[Any, Any] = {**fields, "x-original-id": stream_id, "x-error": why}
        tx.xadd(self.keys.dead_letter, entry)
        tx.xack(self.keys.events, GROUP, stream_id)
        tx.xdel(self.keys.events, stream_id)
        tx.execute()
        self.metrics.dead_lettered.inc()

    def _failed(self, deliveries: list[Delivery], exc: Exception) -> None:
        pipe = self.client.pipeline(transaction=False)
        for d in deliveries:
            pipe.hincrby(self.keys.outbox_attempts, d.event.event_id, 1)
        attempts = pipe.execute()
        self._attempt = max(int(a) for a in attempts)
        delay = backoff_seconds(self._attempt)
        self.retry_at = time.monotonic() + delay
        self.metrics.retried.inc(len(deliveries))
        log.warning("partition %d: publishing %d events failed (attempt %d): %s; retry in %.2fs",
                    self.partition, len(deliveries), self._attempt, exc, delay)

    def _gauges(self) -> None:
        try:
            self.metrics.stream_length.set(self.client.xlen(self.keys.events))
            self.metrics.pending.set(self.client.xpending(self.keys.events, GROUP)["pending"])
        except RedisError:
            pass

    def run(self, stop: threading.Event, block_ms: int = READ_BLOCK_MS) -> None:
        self.ensure_group()
        with own_connections(self.datastores()):
            self._loop(stop, block_ms)
            try:
                self.acknowledge_published()  # else a successor publishes the last batch again
            except RedisError as exc:
                log.warning("partition %d: last batch published but not acknowledged: %s", self.partition, exc)
        self.release()

    def _loop(self, stop: threading.Event, block_ms: int) -> None:
        while not stop.is_set():
            try:
                published = self.step(block_ms)
                self.linger.after(published)
                if not self.has_lease:
                    stop.wait(1.0)
                elif not published and time.monotonic() < self.retry_at:
                    stop.wait(min(0.2, self.retry_at - time.monotonic()))
            except RedisError as exc:
                log.error("partition %d: outbox: Redis error: %s; re-reading own pending first", self.partition, exc)
                stop.wait(0.5)
            except Exception:  # noqa: BLE001 (the loop must outlive any one batch)
                log.exception("partition %d: outbox step failed; re-reading own pending first", self.partition)
                stop.wait(0.5)
