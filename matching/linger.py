"""A short pause after a small batch, so that the next one grows (Kafka's ``linger.ms``,
PostgreSQL's ``commit_delay``) — only when entries arrive fast enough to fill it.

Each loop of the order path — the gateway's intake and dispatcher, the cell's conductor and
outbox — pays a fixed cost per cycle: a round trip or two, a wake-up of its process and of
Valkey, its own per-batch Python. Below saturation a cycle finds a handful of entries, so an
order pays for many cycles: at 1,000 orders/s the processes together (the load generator's
included) spent ~1.7 ms of CPU an order against ~0.85 ms when saturated. With a 1 ms linger:
1.56–1.63 ms (docs/benchmarks.md, 2026-12-02 · 14e5a02). The last stage, the gateway's dispatcher, has a linger of its
own (``dispatch_linger``), by the same rule: at 1,000 orders/s it saved the whole system 8–13 %
of its CPU an order (docs/decisions/2026-12-07-the-dispatcher-lingers-above-1000-a-second.md).

After a cycle that handled at least two entries but less than a full batch, the loop pauses
for the linger before it reads again — if the entries of the recent cycles arrived at a rate
that brings at least one more within the pause. A cycle of one entry (a quiet moment: latency
first) and a full batch (a backlog: the next read is full anyway) go on at once, so neither the
unloaded latency nor the burst throughput pays for it; and at a moderate rate, where two
entries in a cycle are a coincidence and the pause would mostly wait for nothing, neither does
the steady flow: at 400 requests/s a 1 ms pause after every such cycle cost the whole system
more CPU a request, not less (2.15 / 1.99 ms against 1.80 / 1.67 without, the worst 30 s
window's p99 7.0 / 6.6 ms against 5.5 / 5.4; docs/decisions/2026-12-04-linger-by-arrival-rate.md).
"""

from __future__ import annotations

import time
from collections.abc import Callable

MAX_LINGER_S = 0.1  # longer would be a misconfiguration: every small batch waits for it
WEIGHT = 0.1  # of the last cycle in the moving averages of entries and time per cycle (~10 cycles)


class Linger:
    def __init__(self, seconds: float, full: int, clock: Callable[[], float] = time.monotonic) -> None:
        if seconds < 0:
            raise ValueError(f"linger must not be negative, got {seconds}")
        self.seconds = seconds
        self.full = full
        self._clock = clock
        self._last: float | None = None  # when the previous cycle ended
        self._entries = 0.0  # moving averages per cycle: entries handled, and seconds from the last end
        self._span = 0.0

    @property
    def arrival_rate(self) -> float:
        """Entries per second over the recent cycles (their moving averages' ratio)."""
        return self._entries / self._span if self._span > 0 else 0.0

    def observe(self, handled: int) -> None:
        """A cycle ended having handled ``handled`` entries (0: none)."""
        now = self._clock()
        if self._last is not None:
            self._entries += WEIGHT * (handled - self._entries)
            self._span += WEIGHT * (now - self._last - self._span)
        self._last = now

    def pause_after(self, handled: int) -> float:
        """How long to pause after a cycle that handled ``handled`` entries, at the rate seen."""
        if not self.seconds or not 2 <= handled < self.full:
            return 0.0
        return self.seconds if self.arrival_rate * self.seconds >= 1.0 else 0.0

    def after(self, handled: int) -> None:
        self.observe(handled)
        pause = self.pause_after(handled)
        if pause:
            time.sleep(pause)  # (its entries are the next cycle's: the pause counts in that cycle's span)
