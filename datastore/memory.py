"""How full a datastore's memory is, watched from beside it: new orders are refused, with the
reason, while it is above a high-water mark of its ``maxmemory``, so that what is already in
flight (reports, cancels, heartbeats, resends) still finds room. At ``maxmemory`` itself
(``noeviction``) the server refuses writes and they are held like a failover
(``sessionstore.errors.StoreRefusingWrites``)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from redis.exceptions import RedisError

log = logging.getLogger("fixgw.memory")


def memory_problem(info: dict[str, Any], high_water: float) -> str | None:
    """Why new orders are refused, from ``INFO memory`` (None: they are not). No ``maxmemory``
    (0) or no mark (``high_water`` 0): never."""
    limit = int(info.get("maxmemory", 0) or 0)
    used = int(info.get("used_memory", 0) or 0)
    if not limit or not high_water or used < high_water * limit:
        return None
    return (f"datastore memory at {100 * used / limit:.0f} % of its maxmemory ({used // 1048576} of "
            f"{limit // 1048576} MiB, high-water mark {100 * high_water:.0f} %): new orders are refused "
            "until memory is freed")


class MemoryWatch:
    """Reads ``INFO memory`` every ``period_s`` on a thread of its own; ``problem()`` says why new
    orders are refused now. A failed read keeps the last answer (the availability of the
    datastore is watched elsewhere)."""

    def __init__(self, info: Callable[[], dict[str, Any]], high_water: float, period_s: float = 1.0,
                 on_ratio: Callable[[float], None] | None = None,
                 on_info: Callable[[dict[str, Any]], None] | None = None) -> None:
        self._info = info
        self._on_info = on_info  # each INFO read, for gauges
        self.high_water = high_water
        self.period_s = period_s
        self._on_ratio = on_ratio
        self._problem: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="memory-watch", daemon=True)

    def problem(self) -> str | None:
        return self._problem

    def poll(self) -> None:
        try:
            info = self._info()
        except RedisError:
            return
        problem = memory_problem(info, self.high_water)
        if problem != self._problem and (problem is None) != (self._problem is None):
            log.warning("%s", problem or "datastore memory below its high-water mark again: new orders accepted")
        self._problem = problem
        limit = int(info.get("maxmemory", 0) or 0)
        if self._on_info is not None:
            self._on_info(info)
        if self._on_ratio is not None:
            self._on_ratio(int(info.get("used_memory", 0) or 0) / limit if limit else 0.0)

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            self.poll()

    def start(self) -> MemoryWatch:
        self.poll()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
