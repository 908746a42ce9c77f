"""This host's wall clock against its datastore's: a step of either (an hour, a leap of NTP)
shows as a skew. While they disagree by more than a limit, the gateway serves nothing that
carries a timestamp it cannot trust: it logs its sessions out with the reason and refuses
Logons until the clocks agree again (``fixgw/gateway.py``)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from redis.exceptions import RedisError

log = logging.getLogger("fixgw.clock")


def skew_s(before: float, server_time: tuple[int, int], after: float) -> float:
    """This host's clock minus the server's, the server's reading taken as the midpoint of the
    round trip (``before`` and ``after``: this host's wall clock around ``TIME``)."""
    seconds, micros = server_time
    return (before + after) / 2 - (seconds + micros / 1e6)


def skew_problem(skew: float, limit_s: float) -> str | None:
    if not limit_s or abs(skew) <= limit_s:
        return None
    return (f"clock: this host's clock is {abs(skew):.1f} s {'ahead of' if skew > 0 else 'behind'} the session "
            f"store's (limit {limit_s:g} s): sessions are logged out and Logons refused until they agree")


class ClockWatch:
    """Compares the clocks every ``period_s`` on a thread of its own; ``problem()`` says why the
    gateway does not serve now; ``on_skew(problem)`` runs when the clocks start to disagree."""

    def __init__(self, server_time: Callable[[], tuple[int, int]], limit_s: float, period_s: float = 0.25,
                 on_skew: Callable[[str], None] | None = None,
                 on_reading: Callable[[float], None] | None = None) -> None:
        self._server_time = server_time
        self.limit_s = limit_s
        self.period_s = period_s
        self._on_skew = on_skew
        self._on_reading = on_reading
        self._problem: str | None = None
        self._anchor: tuple[int, int] | None = None  # (the datastore's time, monotonic), in ns
        self._beyond = 0  # readings in a row beyond the limit
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="clock-watch", daemon=True)

    def problem(self) -> str | None:
        return self._problem

    def now_ns(self) -> int:
        """The wall clock as both agreed at the last poll where they did (within the limit),
        carried on by this host's monotonic clock: a step of either wall clock does not move it.
        The host's own before the first poll."""
        anchor = self._anchor
        if anchor is None:
            return time.time_ns()
        return anchor[0] + (time.monotonic_ns() - anchor[1])

    def poll(self) -> None:
        try:
            mono_before, before = time.monotonic_ns(), time.time()
            server = self._server_time()
            after, mono_after = time.time(), time.monotonic_ns()
        except RedisError:
            return  # the datastore's availability is watched elsewhere
        round_trip_s = (mono_after - mono_before) / 1e9
        if self.limit_s and round_trip_s > self.limit_s:
            return  # the reading is uncertain by half the round trip: too slow to judge (a loaded host)
        skew = skew_s(before, server, after)
        if self._anchor is None or skew_problem(skew, self.limit_s) is None:
            seconds, micros = server
            self._anchor = (seconds * 1_000_000_000 + micros * 1000, (mono_before + mono_after) // 2)
        if self._on_reading is not None:
            self._on_reading(skew)
        problem = skew_problem(skew, self.limit_s)
        # Two readings in a row beyond the limit before acting: a step persists, a fluke does not.
        self._beyond = self._beyond + 1 if problem is not None else 0
        if problem is not None and self._beyond < 2:
            return
        was = self._problem
        self._problem = problem
        if problem is not None and was is None:
            log.error("%s", problem)
            if self._on_skew is not None:
                self._on_skew(problem)
        elif problem is None and was is not None:
            log.warning("clock: this host's clock agrees with the session store's again (%+.3f s): serving", skew)

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            self.poll()

    def start(self) -> ClockWatch:
        if self.limit_s:
            self.poll()
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
