"""Helpers for driving a real conductor against real Valkey in tests."""

from __future__ import annotations

from typing import Any

from datastore.connection import RedisClient, connect, own_connection
from datastore.settings import RedisEndpoint
from matching.conductor import Conductor
from matching.config import Durability
from matching.contracts import Command, Event, OrderAccepted, OrderType, Side, TimeInForce, parse_event
from matching.keys import PartitionKeys
from matching.producer import submit
from tests.flows import TEST_INSTRUMENTS, random_flow
from tests.reference_matcher import ReferenceMatcher, project


def cell_client(endpoint: RedisEndpoint, durability_timeout_ms: int = 2000) -> RedisClient:
    """A conductor's client: one connection, so WAITAOF follows its own writes."""
    return connect(endpoint.model_copy(update={
        "pool": endpoint.pool.model_copy(update={"maxTotal": 1, "maxIdle": 1}),
        "socketTimeout": max(5.0, durability_timeout_ms / 1000 + 3)}))


def conductor(client: RedisClient, durability: str = "memory", **kw: Any) -> Conductor:
    c = Conductor(client, partition=0, partition_count=2, instruments=TEST_INSTRUMENTS,
                  durability=Durability.named(durability), **kw)
    c.boot()
    return c


# A lease short enough for a test to outlive a crashed holder, long enough that a loaded machine's
# pause between a renewal and the commit it fences does not expire it (300 ms did, under four
# workers on two cores: the successor then found the lease gone, not the crash it was testing).
CRASH_LEASE_TTL_MS = 1500


def wait_lease_expired(client: RedisClient, partition: int = 0, timeout_s: float = 10) -> None:
    """Until the conductor lease a crashed (or abandoned) holder left has run out."""
    import time

    key = PartitionKeys(partition).conductor_lease
    deadline = time.monotonic() + timeout_s
    while client.exists(key):
        if time.monotonic() > deadline:
            raise AssertionError(f"{key} did not expire in {timeout_s} s")
        time.sleep(0.05)


def submit_all(client: RedisClient, commands: list[Command]) -> None:
    for cmd in commands:
        submit(client, cmd, 2)


def run_until_idle(c: Conductor, max_steps: int = 10_000) -> int:
    total = 0
    for _ in range(max_steps):
        n = c.step(block_ms=20)
        if not n:
            return total
        total += n
    raise AssertionError("conductor never went idle")


def stream_events(client: RedisClient, partition: int = 0) -> list[Event]:
    return [parse_event(fields[b"event"]) for _, fields in client.xrange(PartitionKeys(partition).events)]


def projected(events: list[Event]) -> list[tuple]:
    return [project(e.payload) for e in events]


def accepted(order_id: str, owner: str, quantity: int = 1, price: int | None = 200) -> OrderAccepted:
    """An order.accepted payload for a resting buy, for tests that need events but no cell."""
    return OrderAccepted(order_id, quantity, 0, quantity, 0, owner, "", Side.BUY, "", price, OrderType.LIMIT,
                         TimeInForce.GTC)


def p0_flow(seed: int, n: int) -> list:
    """A random flow's commands of partition 0."""
    return [c for c in random_flow(seed, n) if c.partition == 0]


def reference_events(flow: list, stp: str = "cancel-taker") -> list[tuple]:
    """The reference matcher's events for ``flow``, projected (``projected``)."""
    ref = ReferenceMatcher(TEST_INSTRUMENTS, stp)
    return [e for cmd in flow for e in ref.apply(cmd)]


def pipelined(c: Conductor, steps: int = 10_000) -> int:
    """Run ``c`` as ``Conductor.run`` does: with a connection of its own, so the pipelined loop
    (batch k+1 read and matched while batch k's transaction is on its way) is the one taken."""
    with own_connection(c.client):  # as Conductor.run holds it
        return run_until_idle(c, steps)
