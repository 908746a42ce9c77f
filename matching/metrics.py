"""Prometheus metrics of a cell process; every one carries the partition label.

A healthy aggregate hides one stalled market, so nothing here is summed across partitions.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, GCCollector, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector
from redis.exceptions import RedisError


class ConductorMetrics:
    def __init__(self, partition: int, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        p = str(partition)
        r = self.registry
        GCCollector(registry=r)  # python_gc_*: the collector's passes pause the process
        r.register(GCPauses())
        self.commands = Counter("matching_commands", "Commands processed", ["partition", "kind", "status"], registry=r)
        self.duplicate_commands = Counter("matching_duplicate_commands", "Redelivered commands answered from "
                                          "processed-command", ["partition"], registry=r).labels(p)
        self.duplicate_orders = Counter("matching_duplicate_order_identities", "Places skipped: order id accepted "
                                        "before under another command id", ["partition"], registry=r).labels(p)
        self.failures = Counter("matching_failures", "Commands that failed or were refused",
                                ["partition", "reason"], registry=r)
        self.events = Counter("matching_events_created", "Events committed", ["partition", "type"], registry=r)
        self.last_duration = Gauge("matching_last_command_duration_seconds", "Duration of the last command (batch "
                                   "time / batch size)", ["partition"], registry=r).labels(p)
        self.lease_owned = Gauge("matching_conductor_lease_owned", "1 while this conductor holds the lease",
                                 ["partition"], registry=r).labels(p)
        self.lease_taken = Counter("matching_conductor_lease_taken", "Times this conductor took the lease (a "
                                   "flapping lease counts up on both)", ["partition"], registry=r).labels(p)
        self.batch_commands = Histogram("matching_batch_commands", "Commands per batch processed",
                                        ["partition"], buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024),
                                        registry=r).labels(p)
        self.batch_seconds = Histogram("matching_batch_seconds", "Time to process and commit a batch",
                                       ["partition"], buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1,
                                                               0.25, 0.5, 1.0, 2.5), registry=r).labels(p)
        self.durability_failures = Counter("matching_durability_failures", "Batches not committed: WAITAOF (or "
                                           "WAIT) did not confirm them in time", ["partition"], registry=r).labels(p)
        self.backlog = Gauge("matching_commands_backlog", "Commands in the partition's stream not yet read by its "
                             "conductor (the consumer group's lag)", ["partition"], registry=r).labels(p)
        self.partition = p
        self._children: dict[tuple[str, ...], Any] = {}  # labels() costs more than inc(): once per label set

    def _child(self, metric: Counter, *labels: str) -> Any:
        key = (metric._name, *labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(self.partition, *labels)
        return child

    def command(self, kind: str, status: str, n: int = 1) -> None:
        self._child(self.commands, kind, status).inc(n)

    def failure(self, reason: str) -> None:
        self._child(self.failures, reason).inc()

    def event(self, kind: str, n: int = 1) -> None:
        self._child(self.events, kind).inc(n)


class OutboxMetrics:
    def __init__(self, partition: int, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        p = str(partition)
        r = self.registry
        GCCollector(registry=r)
        r.register(GCPauses())
        self.published = Counter("matching_outbox_published", "Events published", ["partition"], registry=r).labels(p)
        self.retried = Counter("matching_outbox_retried", "Event publications retried", ["partition"],
                               registry=r).labels(p)
        self.dead_lettered = Counter("matching_outbox_dead_lettered", "Entries moved to the dead-letter stream",
                                     ["partition"], registry=r).labels(p)
        self.stream_length = Gauge("matching_outbox_stream_length", "Entries in the events stream", ["partition"],
                                   registry=r).labels(p)
        self.pending = Gauge("matching_outbox_pending", "Entries delivered to the group, not yet acknowledged",
                             ["partition"], registry=r).labels(p)
        self.not_durable = Counter("matching_outbox_not_durable", "Batches held back: WAITAOF did not confirm them",
                                   ["partition"], registry=r).labels(p)
        self.lease_owned = Gauge("matching_outbox_lease_owned", "1 while this worker holds the outbox lease",
                                 ["partition"], registry=r).labels(p)


class BacklogProbe:
    """A consumer group's lag on its stream (Redis 7's XINFO GROUPS) into ``gauge``, at most once
    every ``every_s`` (called from a loop that turns far more often)."""

    def __init__(self, client: Any, stream: str, group: str, gauge: Any, every_s: float = 1.0) -> None:
        self.client, self.stream, self.group, self.gauge, self.every_s = client, stream, group, gauge, every_s
        self._due = 0.0

    def measure(self) -> None:
        now = time.monotonic()
        if now < self._due:
            return
        self._due = now + self.every_s
        try:
            for group in self.client.xinfo_groups(self.stream):
                if group.get("name") in (self.group, self.group.encode()) and group.get("lag") is not None:
                    self.gauge.set(int(group["lag"]))
        except RedisError:
            pass  # (the loop reports the datastore's trouble)


class CounterFrom(Collector):
    """A counter whose value another object keeps (a lease counts its own renewals)."""

    def __init__(self, name: str, documentation: str, value: Callable[[], int]) -> None:
        self.name, self.documentation, self.value = name, documentation, value

    def collect(self) -> Iterator[CounterMetricFamily]:
        yield CounterMetricFamily(self.name, self.documentation, value=self.value())


class _PauseClock:
    """Times every pass of this process's garbage collector (``gc.callbacks``): one per process,
    however many registries report it."""

    def __init__(self) -> None:
        self.seconds = 0.0  # all passes together
        self.long = 0  # passes of 5 ms or more
        self.longest = 0.0
        self._started = 0.0
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        took = time.perf_counter() - self._started
        self.seconds += took
        self.long += took >= LONG_PAUSE_S
        self.longest = max(self.longest, took)


LONG_PAUSE_S = 0.005
_pause_clock: _PauseClock | None = None


class GCPauses(Collector):
    """``python_gc_pause_seconds_total``, ``python_gc_long_pauses_total`` (5 ms or more) and
    ``python_gc_longest_pause_seconds``: what the collections cost, beside how many there were
    (``GCCollector``)."""

    def __init__(self) -> None:
        global _pause_clock
        if _pause_clock is None:
            _pause_clock = _PauseClock()
        self.clock = _pause_clock

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        yield CounterMetricFamily("python_gc_pause_seconds", "Time this process spent in garbage collection passes "
                                  "(every thread paused)", value=self.clock.seconds)
        yield CounterMetricFamily("python_gc_long_pauses", "Garbage collection passes of 5 ms or more",
                                  value=self.clock.long)
        yield GaugeMetricFamily("python_gc_longest_pause_seconds", "The longest garbage collection pass since start",
                                value=self.clock.longest)
