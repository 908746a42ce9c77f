"""A short pause after a small batch, so that the next one grows (Kafka's ``linger.ms``,
PostgreSQL's ``commit_delay``).

Each loop of the order path — the gateway's intake and dispatcher, the cell's conductor and
outbox — pays a fixed cost per cycle: a round trip or two, a wake-up of its process and of
Valkey, its own per-batch Python. Below saturation a cycle finds a handful of entries, so an
order pays for many cycles: at 1,000 orders/s the processes together (the load generator's
included) spent ~1.7 ms of CPU an order against ~0.85 ms when saturated. With a 1 ms linger:
1.56–1.63 ms (docs/benchmarks.md, 2026-12-02 · 14e5a02). The last stage, the gateway's dispatcher, has a linger of its
own (``dispatch_linger``): its events arrive grouped by the cells' commits, and with the
gateway's threads on one CPU a pause there mostly held reports back (docs/benchmarks.md, 2026-12-02 · af21216).

After a cycle that handled at least two entries but less than a full batch, the loop pauses
for the linger before it reads again. A cycle of one entry (a quiet moment: latency first)
and a full batch (a backlog: the next read is full anyway) go on at once, so neither the
unloaded latency nor the burst throughput pays for it.
"""

from __future__ import annotations

import time

MAX_LINGER_S = 0.1  # longer would be a misconfiguration: every small batch waits for it


class Linger:
    def __init__(self, seconds: float, full: int) -> None:
        if seconds < 0:
            raise ValueError(f"linger must not be negative, got {seconds}")
        self.seconds = seconds
        self.full = full

    def pause_after(self, handled: int) -> float:
        """How long to pause after a cycle that handled ``handled`` entries (0: none)."""
        return self.seconds if 2 <= handled < self.full else 0.0

    def after(self, handled: int) -> None:
        pause = self.pause_after(handled)
        if pause:
            time.sleep(pause)
