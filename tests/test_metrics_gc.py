"""The garbage collector's pauses are timed beside its pass counts, once per process."""

from __future__ import annotations

import gc

from prometheus_client import CollectorRegistry, generate_latest

from fixgw.metrics import GatewayMetrics
from matching.metrics import ConductorMetrics


def sample(registry: CollectorRegistry, name: str) -> float:
    for line in generate_latest(registry).decode().splitlines():
        if line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not exposed")


def test_each_collection_pass_adds_its_pause_to_every_registry_that_reports_it() -> None:
    gateway, cell = GatewayMetrics(), ConductorMetrics(0)
    before = sample(gateway.registry, "python_gc_pause_seconds_total")
    callbacks = len(gc.callbacks)
    GatewayMetrics()  # another registry in the same process: the clock is shared, not added again
    assert len(gc.callbacks) == callbacks
    gc.collect()
    after = sample(gateway.registry, "python_gc_pause_seconds_total")
    assert after > before
    assert sample(cell.registry, "python_gc_pause_seconds_total") == after
    assert sample(gateway.registry, "python_gc_longest_pause_seconds") > 0
    assert sample(gateway.registry, "python_gc_long_pauses_total") >= 0
