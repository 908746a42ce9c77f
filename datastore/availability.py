"""Whether a datastore has a primary that answers, and how long work waits for one.

A Sentinel or Cluster failover leaves a datastore without a primary for a few seconds, and
a promoted primary without a replica until the old one is back. The gateway's writers (the
intake, the dispatcher's commits, QuickFIX's callbacks) hold their work meanwhile instead of
failing it: ``Availability.call`` retries an operation whose failure is transient (connection
refused or reset, timeout, READONLY from a demoted primary, no primary known to Sentinel, fewer
replica acknowledgements than replicaAcks) with backoff, for at most ``wait_s`` — and only
while the caller may still write (its fence holds). What it waited for, and since when, is what
``/ready`` reports. Knows nothing of what the operations are.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TypeVar

log = logging.getLogger("fixgw.availability")

T = TypeVar("T")

FIRST_PAUSE_S = 0.02
MAX_PAUSE_S = 0.5
SLOW_S = 1.0  # an operation in flight this long is reported (a stalled datastore answers nothing, not an error)


class Availability:
    """One datastore's availability as its callers see it (shared by every caller in a process)."""

    def __init__(self, name: str, wait_s: float, transient: tuple[type[BaseException], ...],
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> None:
        self.name = name
        self.wait_s = wait_s
        self.transient = transient
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._down_since: float | None = None
        self._last_error = ""
        self._in_flight: dict[int, float] = {}  # thread → since when its operation runs
        self.holding = 0  # callers waiting right now
        self.held_total = 0  # operations that had to wait, since start (a metric)
        self.outages = 0  # times it went away, since start

    @property
    def down_for(self) -> float | None:
        """Seconds since the datastore stopped answering, or None while it answers."""
        since = self._down_since
        return None if since is None else self._clock() - since

    def problems(self) -> list[str]:
        """For /ready: what is missing, since when, and how much work waits for it."""
        down = self.down_for
        if down is None:
            started = min(self._in_flight.copy().values(), default=None)  # (copy: atomic, other threads write it)
            waited = 0.0 if started is None else self._clock() - started
            return [f"{self.name}: an operation has waited {waited:.1f}s for a reply"] if waited > SLOW_S else []
        return [f"{self.name}: not taking writes for {down:.1f}s ({self.holding} operations held; "
                f"{self._last_error})"]

    def call(self, operation: Callable[[], T], may_go_on: Callable[[], None] = lambda: None) -> T:
        """``operation()``, retried while its failure is transient, for at most ``wait_s`` from its
        first failure. ``may_go_on`` raises when the caller must stop waiting (its lock was lost).
        The last transient error is raised when the wait is over."""
        deadline: float | None = None
        pause = FIRST_PAUSE_S
        me = threading.get_ident()
        while True:
            self._in_flight[me] = self._clock()
            try:
                result = operation()
            except self.transient as exc:
                self._in_flight.pop(me, None)
                now = self._clock()
                self._went_away(now, exc)
                if deadline is None:
                    deadline = now + self.wait_s
                if now >= deadline:
                    raise
                may_go_on()
                with self._lock:
                    self.holding += 1
                    self.held_total += pause == FIRST_PAUSE_S
                try:
                    self._sleep(min(pause, deadline - now))
                finally:
                    with self._lock:
                        self.holding -= 1
                pause = min(pause * 2, MAX_PAUSE_S)
                continue
            except BaseException:
                self._in_flight.pop(me, None)
                raise
            self._in_flight.pop(me, None)
            if self._down_since is not None:
                self._came_back()
            return result

    def _went_away(self, now: float, exc: BaseException) -> None:
        with self._lock:
            self._last_error = f"{type(exc).__name__}: {exc}"[:200]
            if self._down_since is not None:
                return
            self._down_since = now
            self.outages += 1
        log.warning("%s: not taking writes (%s); holding work for up to %.1fs", self.name, self._last_error,
                    self.wait_s)

    def _came_back(self) -> None:
        with self._lock:
            since, self._down_since = self._down_since, None
        if since is not None:
            log.warning("%s: answering again after %.1fs", self.name, self._clock() - since)

    def mark_answering(self) -> None:
        """An operation outside ``call`` got through (e.g. a lease renewal): the datastore is back."""
        if self._down_since is not None:
            self._came_back()
