"""The gateway's Prometheus metrics: per-session sequence numbers and traffic, store latency, locks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, GCCollector, Histogram

from datastore.availability import Availability
from matching.metrics import CounterFrom, GCPauses

from .front import FrontCounters


class GatewayMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        r = self.registry = registry or CollectorRegistry()
        GCCollector(registry=r)  # python_gc_*: the collector's passes, which pause every thread of the process
        r.register(GCPauses())
        self.sender_seq = Gauge("fixgw_session_next_sender_seq_num", "Next outbound MsgSeqNum", ["session"], registry=r)
        self.target_seq = Gauge("fixgw_session_next_target_seq_num", "Next expected inbound MsgSeqNum", ["session"],
                                registry=r)
        self.logged_on = Gauge("fixgw_session_logged_on", "1 while the session is logged on", ["session"], registry=r)
        self.in_schedule = Gauge("fixgw_session_in_schedule", "1 while the session's schedule has it open (always, "
                                 "without a schedule)", ["session"], registry=r)
        self.ready = Gauge("fixgw_ready", "1 while /ready answers 200 (the active gateway serving, nothing stalled)",
                           registry=r)
        self.batch_messages = Histogram("fixgw_group_commit_batch_messages", "Messages of one session committed "
                                        "together (group commit)", buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512),
                                        registry=r)
        self.datastore_used = Gauge("fixgw_datastore_used_memory_bytes", "The session store's used memory (INFO)",
                                    registry=r)
        self.datastore_max = Gauge("fixgw_datastore_maxmemory_bytes", "The session store's maxmemory (0: none)",
                                   registry=r)
        self.datastore_rewrite = Gauge("fixgw_datastore_aof_rewrite_in_progress", "1 while the session store "
                                       "rewrites its AOF", registry=r)
        self.datastore_replicas = Gauge("fixgw_datastore_connected_replicas", "Replicas connected to the session "
                                        "store's primary", registry=r)
        self.datastore_lag = Gauge("fixgw_datastore_replica_lag_bytes", "How far the slowest replica is behind "
                                   "the session store's primary (replication offsets)", registry=r)
        self.next_boundary = Gauge("fixgw_session_next_boundary_timestamp_seconds", "When a scheduled session next "
                                   "opens, closes or starts a new period (Unix time)", ["session"], registry=r)
        self.period_start = Gauge("fixgw_session_period_start_timestamp_seconds", "When the stored FIX session "
                                  "began (sessionStartTime, Unix time)", ["session"], registry=r)
        self.messages_in = Counter("fixgw_messages_in", "Messages received", ["session", "msg_type"], registry=r)
        self.messages_out = Counter("fixgw_messages_out", "Messages sent (resends included)", ["session", "msg_type"],
                                    registry=r)
        self.store_write = Histogram("fixgw_store_write_seconds", "Latency of one session-store write",
                                     buckets=(0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 1.0),
                                     registry=r)
        self.store_failures = Counter("fixgw_store_failures", "Outbound messages vetoed: not stored",
                                      ["session"], registry=r)
        self.datastore_memory = Gauge("fixgw_datastore_memory_used_ratio", "The session store's used memory as a share "
                                      "of its maxmemory (0 when it has none); above memoryHighWater new orders are "
                                      "refused", registry=r)
        self.clock_skew = Gauge("fixgw_clock_skew_seconds", "This host's wall clock minus the session store's "
                                "(above max_clock_skew either way, the sessions are logged out)", registry=r)
        self.lock_held = Gauge("fixgw_lock_held", "1 while this process holds the dispatcher lock", ["gateway"],
                               registry=r)
        self.callback_errors = Counter("fixgw_callback_errors", "Unexpected errors caught in a QuickFIX callback "
                                       "(the session carried on)", ["session", "callback"], registry=r)
        self.refused_logons = Counter("fixgw_refused_logons", "Logons refused before QuickFIX acted on them",
                                      ["session"], registry=r)
        self.logon_lockouts = Counter("fixgw_logon_lockouts", "Sessions locked after a run of refused Logons",
                                      ["session"], registry=r)
        self.front_refused = Counter("fixgw_front_refused", "Connections the front closed before the engine saw "
                                     "them, by reason", ["reason"], registry=r)
        self.refused_requests = Counter("fixgw_refused_requests", "Application messages refused with a reject",
                                        ["session", "reason"], registry=r)
        self.events_out_of_order = Counter("fixgw_events_out_of_order", "Undelivered events that arrived behind a "
                                           "newer event of their partition (a broken publisher guarantee)",
                                           ["partition"], registry=r)
        self.group_commit_misses = Counter("fixgw_group_commit_misses", "Deliveries committed ahead that went out "
                                           "under another number or other bytes (stored again, one by one)",
                                           ["session"], registry=r)
        self.canceled_on_disconnect = Counter("fixgw_canceled_on_disconnect", "Cancels sent for open orders when "
                                              "their session logged out or dropped", ["session"], registry=r)
        self._sent: dict[tuple[str, str], Any] = {}  # label children, looked up per message: cached
        self._sender_seq: dict[str, Any] = {}
        self._target_seq: dict[Any, Any] = {}  # by SessionKey
        self._received: dict[tuple[str, str], Any] = {}
        self.parked_sessions = Gauge("fixgw_dispatcher_parked_sessions", "Sessions whose group commits were "
                                     "refused: their entries wait, tried again twice a second", registry=r)
        self.dispatcher_dead_lettered = Counter("fixgw_dispatcher_dead_lettered", "Inbox entries moved to the "
                                                "inbox dead-letter stream (not turned into messages)", registry=r)
        self.commands_held = Counter("fixgw_commands_held", "Commands a partition's datastore or the broker did not "
                                     "confirm: held and appended again, in order, until it does", ["partition"],
                                     registry=r)

        self.retention_removed = Counter("fixgw_retention_removed", "Records the retention pass removed: acknowledged "
                                         "inbox stream entries, closed orders' views, delivered-event records",
                                         ["record"], registry=r)
        self.retention_passes = Counter("fixgw_retention_passes", "Retention passes run", registry=r)

    def watch_lock_renewals(self, renewals: Callable[[], int]) -> None:
        """``fixgw_lock_renewals_total``: the dispatcher locks' confirmed renewals (their leases count them)."""
        self.registry.register(CounterFrom("fixgw_lock_renewals", "Confirmed renewals of this process's "
                                            "dispatcher locks", renewals))

    def watch_front(self, counters: FrontCounters) -> None:
        Gauge("fixgw_front_pending_logons", "Connections the front holds that have not logged on yet",
              registry=self.registry).set_function(lambda: counters.pending)

    def datastore_info(self, info: dict[str, Any]) -> None:
        """Gauges from one INFO of the session store (``datastore.memory.MemoryWatch``)."""
        self.datastore_used.set(int(info.get("used_memory", 0) or 0))
        self.datastore_max.set(int(info.get("maxmemory", 0) or 0))
        self.datastore_rewrite.set(int(info.get("aof_rewrite_in_progress", 0) or 0))
        replicas = [v for k, v in info.items() if k.startswith("slave") and isinstance(v, dict)]
        self.datastore_replicas.set(len(replicas))
        primary = int(info.get("master_repl_offset", 0) or 0)
        self.datastore_lag.set(max((primary - int(r.get("offset", 0)) for r in replicas), default=0))

    def watch_availability(self, availability: Availability) -> None:
        """The session store's availability as gauges read at scrape time (``datastore.availability``)."""
        r = self.registry
        Gauge("fixgw_session_store_unavailable_seconds", "Seconds since the session store stopped taking writes "
              "(0 while it takes them)", registry=r).set_function(lambda: availability.down_for or 0.0)
        Gauge("fixgw_session_store_operations_waiting", "Writes and reads waiting for the session store to take them "
              "again (a failover)", registry=r).set_function(lambda: availability.holding)
        Gauge("fixgw_session_store_operations_held", "Operations that had to wait for the session store, since start",
              registry=r).set_function(lambda: availability.held_total)
        Gauge("fixgw_session_store_outages", "Times the session store stopped taking writes, since start",
              registry=r).set_function(lambda: availability.outages)

    def sent(self, session: str, msg_type: str, seq: int) -> None:
        """One outbound message (``seq`` 0: a resend, which leaves the next number as it is)."""
        counter = self._sent.get((session, msg_type))
        if counter is None:
            counter = self._sent[(session, msg_type)] = self.messages_out.labels(session, msg_type)
        counter.inc()
        if seq:
            gauge = self._sender_seq.get(session)
            if gauge is None:
                gauge = self._sender_seq[session] = self.sender_seq.labels(session)
            gauge.set(seq + 1)

    def target(self, session: Any, seq: int) -> None:
        """The next inbound number recorded for ``session`` (a SessionKey; every intake cycle)."""
        gauge = self._target_seq.get(session)
        if gauge is None:
            gauge = self._target_seq[session] = self.target_seq.labels(str(session))
        gauge.set(seq)

    def received(self, session: str, msg_type: str) -> None:
        counter = self._received.get((session, msg_type))
        if counter is None:
            counter = self._received[(session, msg_type)] = self.messages_in.labels(session, msg_type)
        counter.inc()

