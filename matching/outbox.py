"""The outbox worker: drains a partition's event stream to a publisher (seed 000's loop).

1. Hold ``:outbox-lease`` (SET NX PX 10000, renewed every 3.3 s by compare-and-expire on
   a timer); without it, sleep and retry, and /ready answers 503.
2. XAUTOCLAIM entries other consumers left pending for more than 30 s; publish those first.
3. Never read ahead of this consumer's own pending entries.
4. Otherwise XREADGROUP COUNT 100 BLOCK 1000.
5. An entry that is not a valid envelope goes to the dead-letter stream in one MULTI
   (XADD, XACK, XDEL).
6. Publish the batch; only when every publish is confirmed, XACK + XDEL + HDEL attempts in
   one MULTI. A failed batch bumps each event's attempt counter and is retried after a
   jittered exponential backoff capped at 30 s, in the same order.

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
from dataclasses import dataclass
from typing import Protocol

from redis.exceptions import RedisError, ResponseError

from sessionstore.connection import RedisClient
from sessionstore.scripts import RELEASE_LOCK, RENEW_LOCK  # a lease is a lock: same scripts

from .contracts import ContractError, Event, parse_event
from .keys import PartitionKeys
from .metrics import OutboxMetrics

log = logging.getLogger("matching.outbox")

GROUP = "matching-outbox-v1"
LEASE_TTL_MS = 10_000
LEASE_RENEW_S = 3.3
CLAIM_IDLE_MS = 30_000
READ_COUNT = 100
READ_BLOCK_MS = 1000
BACKOFF_BASE_S = 0.1
BACKOFF_CAP_S = 30.0


@dataclass(frozen=True, slots=True)
class Delivery:
    """One event ready to publish, with the headers every message carries."""

    stream_id: str
    event: Event

    @property
    def headers(self) -> dict[str, str]:
        return {"messageId": self.event.event_id, "causationId": self.event.command_id,
                "partition": str(self.event.partition), "x-partition-offset": self.stream_id}


class PublishError(Exception):
    """The publisher could not confirm every message of a batch."""


class Publisher(Protocol):
    def publish(self, deliveries: Sequence[Delivery]) -> None:
        """Publish in order; return only when every message is confirmed, else raise PublishError."""


class RedisStreamsPublisher:
    """Publishes into Redis streams (the gateways' inboxes), routed per event."""

    def __init__(self, client: RedisClient, destinations: Callable[[Event], Iterable[str]]) -> None:
        self.client = client
        self.destinations = destinations

    def publish(self, deliveries: Sequence[Delivery]) -> None:
        pipe = self.client.pipeline(transaction=False)
        expected = 0
        for d in deliveries:
            body = {**d.headers, "event": d.event.encode()}
            for stream in dict.fromkeys(self.destinations(d.event)):
                pipe.xadd(stream, body)
                expected += 1
        if not expected:
            return
        try:
            replies = pipe.execute(raise_on_error=False)
        except RedisError as exc:
            raise PublishError(f"publish failed: {exc}") from exc
        failed = [r for r in replies if isinstance(r, Exception) or not r]
        if failed or len(replies) != expected:
            raise PublishError(f"{len(failed)} of {expected} publications not confirmed: {failed[:1]}")


def owner_routes(inbox_of: Callable[[str], str], also: Sequence[str] = ()) -> Callable[[Event], list[str]]:
    """Route each event to the inbox of every order owner it concerns, plus ``also`` (drop copy)."""

    def destinations(event: Event) -> list[str]:
        p = event.payload
        owners = [p.get("owner"), (p.get("maker") or {}).get("owner"), (p.get("taker") or {}).get("owner")]
        return [inbox_of(o) for o in dict.fromkeys(owners) if o] + list(also)

    return destinations


def backoff_seconds(attempt: int, rng: random.Random | None = None) -> float:
    """Full-jitter exponential backoff: uniform(0, min(cap, base·2^(attempt-1)))."""
    ceiling = min(BACKOFF_CAP_S, BACKOFF_BASE_S * (2 ** max(0, attempt - 1)))
    return (rng or random).uniform(0, ceiling)


class OutboxWorker:
    def __init__(self, client: RedisClient, control: RedisClient, partition: int, publisher: Publisher, *,
                 metrics: OutboxMetrics | None = None, consumer: str | None = None,
                 lease_ttl_ms: int = LEASE_TTL_MS, lease_renew_s: float = LEASE_RENEW_S,
                 claim_idle_ms: int = CLAIM_IDLE_MS, read_count: int = READ_COUNT) -> None:
        self.client = client  # data connection: stream reads, acks, dead letters
        self.control = control  # control connection: the lease
        self.keys = PartitionKeys(partition)
        self.partition = partition
        self.publisher = publisher
        self.metrics = metrics or OutboxMetrics(partition)
        self.consumer = consumer or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.lease_ttl_ms = lease_ttl_ms
        self.lease_renew_s = lease_renew_s
        self.claim_idle_ms = claim_idle_ms
        self.read_count = read_count
        self._lease_until = 0.0
        self._renewer: threading.Timer | None = None
        self._renew = control.register_script(RENEW_LOCK)
        self._release = control.register_script(RELEASE_LOCK)
        self.retry_at = 0.0  # monotonic time before which a failed batch is not retried
        self._attempt = 0
        self._next_claim = 0.0  # XAUTOCLAIM at most once a second: idle entries age in tens of seconds
        self._own_pending = True  # unknown at start; known empty once a read of "0" returns nothing

    # --- lease ------------------------------------------------------------------------

    @property
    def has_lease(self) -> bool:
        return time.monotonic() < self._lease_until

    def try_lease(self) -> bool:
        sent = time.monotonic()
        if not self.control.set(self.keys.outbox_lease, self.consumer, nx=True, px=self.lease_ttl_ms):
            self.metrics.lease_owned.set(0)
            return False
        self._lease_until = sent + self.lease_ttl_ms / 1000
        self.metrics.lease_owned.set(1)
        log.info("partition %d: outbox lease taken by %s", self.partition, self.consumer)
        self._schedule_renewal()
        return True

    def _schedule_renewal(self) -> None:
        self._renewer = threading.Timer(self.lease_renew_s, self._renew_lease)
        self._renewer.daemon = True
        self._renewer.start()

    def _renew_lease(self) -> None:
        if not self._lease_until:
            return
        sent = time.monotonic()
        try:
            ok = int(self._renew(keys=[self.keys.outbox_lease], args=[self.consumer, self.lease_ttl_ms]))
        except RedisError as exc:
            log.warning("partition %d: outbox lease renewal failed: %s", self.partition, exc)
            ok = -1
        if ok == 1:
            self._lease_until = sent + self.lease_ttl_ms / 1000
        elif ok == 0:
            log.error("partition %d: outbox lease taken by another worker; standing by", self.partition)
            self._lease_until = 0.0
            self.metrics.lease_owned.set(0)
            return
        self._schedule_renewal()

    def release(self) -> None:
        if self._renewer is not None:
            self._renewer.cancel()
        if self._lease_until:
            try:
                self._release(keys=[self.keys.outbox_lease], args=[self.consumer])
            except RedisError:
                pass
        self._lease_until = 0.0
        self.metrics.lease_owned.set(0)

    # --- the loop ---------------------------------------------------------------------

    def ensure_group(self) -> None:
        try:
            self.client.xgroup_create(self.keys.events, GROUP, id="0", mkstream=True)
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    def step(self, block_ms: int = READ_BLOCK_MS) -> int:
        """One turn of the loop; returns how many events were published."""
        if not self.has_lease and not self.try_lease():
            return 0
        if time.monotonic() < self.retry_at:
            return 0
        entries: list[tuple[bytes, dict[bytes, bytes] | None]] = []
        if time.monotonic() >= self._next_claim:
            # 2. what dead consumers left behind, first
            claimed = self.client.xautoclaim(self.keys.events, GROUP, self.consumer, self.claim_idle_ms,
                                             start_id="0-0", count=self.read_count)
            entries = [e for e in (claimed[1] if claimed else []) if e[1] is not None]
            if not entries:
                self._next_claim = time.monotonic() + 1.0
        if not entries and self._own_pending:
            # 3. our own pending (a failed batch) before anything new
            reply = self.client.xreadgroup(GROUP, self.consumer, {self.keys.events: "0"}, count=self.read_count)
            entries = reply[0][1] if reply else []
            self._own_pending = bool(entries)
        if not entries:
            reply = self.client.xreadgroup(GROUP, self.consumer, {self.keys.events: ">"}, count=self.read_count,
                                           block=block_ms)
            entries = reply[0][1] if reply else []
        if not entries:
            self._gauges()
            return 0
        return self._deliver(entries)

    def _deliver(self, entries: list[tuple[bytes, dict[bytes, bytes] | None]]) -> int:
        deliveries: list[Delivery] = []
        for entry_id, fields in entries:
            sid = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
            raw = (fields or {}).get(b"event")
            try:
                if raw is None:
                    raise ContractError("entry has no event field")
                deliveries.append(Delivery(sid, parse_event(raw)))
            except ContractError as exc:
                self._dead_letter(sid, fields or {}, str(exc))
        if not deliveries:
            return 0
        try:
            self.publisher.publish(deliveries)
        except PublishError as exc:
            self._own_pending = True
            self._failed(deliveries, exc)
            return 0
        tx = self.client.pipeline(transaction=True)
        ids = [d.stream_id for d in deliveries]
        tx.xack(self.keys.events, GROUP, *ids)
        tx.xdel(self.keys.events, *ids)
        tx.hdel(self.keys.outbox_attempts, *[d.event.event_id for d in deliveries])
        tx.execute()
        self._attempt = 0
        self.retry_at = 0.0
        self.metrics.published.inc(len(deliveries))
        return len(deliveries)

    def _dead_letter(self, stream_id: str, fields: dict[bytes, bytes], why: str) -> None:
        log.error("partition %d: entry %s is not a valid envelope (%s); moved to %s", self.partition, stream_id,
                  why, self.keys.dead_letter)
        tx = self.client.pipeline(transaction=True)
        tx.xadd(self.keys.dead_letter, {**{k: v for k, v in fields.items()}, "x-original-id": stream_id,
                                        "x-error": why})
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
        while not stop.is_set():
            try:
                published = self.step(block_ms)
                if not self.has_lease:
                    stop.wait(1.0)
                elif not published and time.monotonic() < self.retry_at:
                    stop.wait(min(0.2, self.retry_at - time.monotonic()))
            except RedisError as exc:
                log.error("partition %d: outbox: Redis error: %s", self.partition, exc)
                stop.wait(0.5)
        self.release()
