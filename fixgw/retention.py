"""Retention passes (docs/architecture.md, retention), on a thread of their own.

Every ``retention_interval`` while the gateway serves: the acknowledged inbox stream entries
older than ``inbox_retention``; each session's delivered-event records and closed orders'
views older than ``delivery_retention``. A pass is tens of round trips (a minute's inbox at
400 requests/s is ~50 bounded XTRIM calls): on the dispatcher's thread they held every report
waiting behind them, here they only share Valkey with it. Retention is fenced like every
session write (the store's epoch), so it needs no lock of the dispatcher's.
"""

from __future__ import annotations

import logging
import threading
import time

from redis.exceptions import RedisError

from datastore.connection import RedisClient, own_connections
from matching.storage import trim_acknowledged
from sessionstore import StoreError

from .context import GatewayContext

log = logging.getLogger("fixgw.retention")

RETENTION_LIMIT, RETENTION_PASSES = 1000, 20  # per session and pass: bounded work, the rest next time


class Retention(threading.Thread):
    """Runs a pass every ``retention_interval`` until ``stop`` is set (the dispatcher's)."""

    def __init__(self, context: GatewayContext, streams: list[str], stop: threading.Event) -> None:
        super().__init__(name="retention", daemon=True)
        self.context = context
        self.streams = streams
        self.stop = stop
        self.client: RedisClient = context.client

    def run(self) -> None:
        with own_connections([self.client, *(s.client for s in self.context.stores.values())]):
            while not self.stop.is_set():
                if not self.context.serving():
                    self.stop.wait(0.1)
                    continue
                try:
                    self.run_once()
                except (RedisError, StoreError) as exc:  # the store: the next pass tries again
                    log.warning("retention: pass stopped (%s); the next one in %gs", exc,
                                self.context.matching.retention_interval)
                self.stop.wait(self.context.matching.retention_interval)

    def run_once(self, now_ms: int | None = None) -> tuple[int, int, int]:
        """One pass. Returns (stream entries, views, event records) removed."""
        link = self.context.matching
        now = int(time.time() * 1000) if now_ms is None else now_ms
        entries = sum(trim_acknowledged(self.client, stream, int(link.inbox_retention * 1000), now)
                      for stream in self.streams)
        views = events = 0
        cutoff = now - int(link.delivery_retention * 1000)
        for cfg in self.context.settings.session:
            if str(cfg.key(self.context.namespace)) in self.context.away:
                continue  # served by another group: its keys are that group's to trim
            store = self.context.stores[cfg.gateway]
            for _ in range(RETENTION_PASSES):
                v, e = store.trim_delivered(cfg.key(self.context.namespace), cutoff, RETENTION_LIMIT)
                views, events = views + v, events + e
                if v < RETENTION_LIMIT and e < RETENTION_LIMIT:
                    break
        metrics = self.context.metrics
        metrics.retention_passes.inc()
        for record, n in (("inbox stream entries", entries), ("closed views", views), ("event records", events)):
            metrics.retention_removed.labels(record).inc(n)
        if entries or views or events:
            log.info("retention: %d inbox stream entries, %d closed orders' views, %d delivered-event records removed",
                     entries, views, events)
        return entries, views, events
