"""The gateway process: standby until it holds the lock, then a QuickFIX acceptor on Redis.

Lifecycle: start the HTTP endpoints (/ready answers 503 while standby); wait for the
dispatcher lock of every session group it serves (``{ns/fsg}``, ``{ns/dc}``, …), meanwhile keeping
a copy of every session's stored messages in QuickFIX's FileStore format (``warm_copy``); stamp
each session with the new fencing epoch; check the copy against Redis and bring it up to date
(materialise); start the acceptor. Losing a lock ends the process at once (exit 3)
so nothing more is sent; SIGTERM logs sessions out, releases the locks and exits 0.
"""

from __future__ import annotations

import ipaddress
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import quickfix as fix
from redis.exceptions import RedisError

from datastore.availability import Availability
from datastore.clock import ClockWatch
from datastore.connection import check_credentials, connect, is_cluster
from datastore.embedded import listening_port_below_ephemeral
from datastore.memory import MemoryWatch
from datastore.settings import ConfigError
from matching.config import freeze_startup_objects, stop_on_signals
from matching.http import CellHttp
from matching.linger import Linger
from sessionstore import (
    DispatcherLock,
    GatewayKey,
    NotReplicated,
    SessionKey,
    SessionStore,
    StoreError,
    StoreUnavailable,
)
from sessionstore.move import MOVING, serving_group
from sessionstore.reader import StoreReader
from sessionstore.settings import SessionStoreSettings

from . import fixmsg, sendpath
from .admin import Operators, SessionAdmin
from .affinity import cpus_for, pin_threads, show_thread_names
from .application import GatewayApplication
from .config import GatewaySettings, MatchingLink, SessionConfig
from .context import Behaviour, GatewayContext, die
from .credentials import LogonLockout
from .descriptors import lift
from .engine_port import confine_to_loopback
from .filestore import claim_directory, complete_header, fresh_directory, write_session
from .front import Front, FrontLimits, SessionGate, tls_context
from .message_log import MessageLogFactory
from .metrics import GatewayMetrics
from .schedule import Schedule, utc_now
from .warm_copy import SessionCopy, WarmCopies

log = logging.getLogger("fixgw.gateway")


class Gateway:
    def __init__(self, settings: GatewaySettings, store_settings: SessionStoreSettings,
                 behaviour: Behaviour, on_lost: Callable[[str], None] | None = None,
                 matching: MatchingLink | None = None) -> None:
        self.settings = settings
        self.matching = matching or MatchingLink()
        self.store_settings = store_settings
        self.behaviour = behaviour
        self.metrics = GatewayMetrics()
        self.client = connect(store_settings, client_name="fixgw-gateway")
        check_credentials(self.client, store_settings, "[session_store]")
        self.namespace = store_settings.namespace
        self.on_lost = on_lost or (lambda reason: die(f"dispatcher lock lost: {reason}", 3))
        self.locks = {
            kind: DispatcherLock(self.client, GatewayKey(self.namespace, kind), ttl=store_settings.lockTtl,
                                 renewal=store_settings.lockRenewalInterval, on_lost=self._lost(kind))
            for kind in settings.groups()
        }
        # One view of the session store's availability for every caller: what /ready reports.
        # A write the replicas did not acknowledge (replicaAcks) is held too: right after a
        # promotion the new primary has no replica until the old one is back; replayed, the
        # scripts recognise what already landed.
        self.availability = Availability("session store", store_settings.failoverWait,
                                         (StoreUnavailable, NotReplicated))
        self.metrics.watch_availability(self.availability)
        self.metrics.watch_lock_renewals(lambda: sum(lock.lease.renewals for lock in self.locks.values()))
        # INFO's memory, persistence and replication sections: the memory watch and the datastore's gauges
        self.memory = MemoryWatch(lambda: {**self.client.info("memory"), **self.client.info("persistence"),
                                           **self.client.info("replication")},
                                  0.0 if is_cluster(self.client) else store_settings.memoryHighWater,
                                  on_ratio=self.metrics.datastore_memory.set, on_info=self.metrics.datastore_info)
        self.clock = ClockWatch(lambda: self.client.time(), 0.0 if is_cluster(self.client) else settings.max_clock_skew,
                                on_skew=self._clock_stepped, on_reading=self.metrics.clock_skew.set)
        self.stores = {kind: SessionStore(self.client, lock, on_write=self.metrics.store_write.observe,
                                          replica_acks=store_settings.replicaAcks,
                                          replica_timeout_ms=int(store_settings.replicaAckTimeout * 1000),
                                          availability=self.availability,
                                          replication_mark=lock.gateway.replication_mark)
                       for kind, lock in self.locks.items()}
        self.reader = StoreReader(self.client)
        # Scheduled sessions (fixgw/schedule.py), by QuickFIX's SessionID text: (settings, schedule,
        # how long an ended period's messages are kept, in ms)
        self.schedules: dict[str, tuple[SessionConfig, Schedule, int]] = {}
        for cfg in settings.session:
            plan = settings.schedule_of(cfg)
            if plan is not None:
                schedule = plan.schedule()
                self.schedules[cfg.session_id_text] = (cfg, schedule, int(plan.keep_periods * schedule.length
                                                                          .total_seconds() * 1000))
        self._period_starts: dict[str, int | None] = {}  # the stored sessionStartTime, as last seen
        self.copies: WarmCopies | None = None  # made when the process starts (``run``)
        # Sessions whose older entries QuickFIX was not given at takeover: the first number it holds.
        self.held_back: dict[str, int] = {}
        # Sessions listed here but served by another group (moved away, or not moved here yet):
        # not stamped, their Logons refused, left out of retention (key texts).
        self.away: set[str] = set()
        self._sessions_by_text = {cfg.session_id_text: cfg for cfg in settings.session}
        self._session_ids = {cfg.name: fix.SessionID(cfg.begin_string, cfg.sender_comp_id, cfg.target_comp_id)
                             for cfg in settings.session}
        self.acceptor: Any = None
        self.message_log: MessageLogFactory | None = None
        self.front: Front | None = None
        self.application: GatewayApplication | None = None
        self.active = threading.Event()
        self.stop_requested = threading.Event()
        self.http: CellHttp | None = None

    def _lost(self, kind: str) -> Callable[[str], None]:
        def lost(reason: str) -> None:
            self.metrics.lock_held.labels(kind).set(0)
            self.active.clear()
            self.on_lost(f"{self.namespace}/{kind}: {reason}")

        return lost

    def problems(self) -> list[str]:
        """Why this process is not serving: standby, a lost lock, a session thread stuck in a
        callback, or a behaviour part that died (e.g. the dispatcher). Empty when ready."""
        out = []
        if not self.active.is_set():
            copies = self.copies
            out.append("not active" if copies is None or not self.settings.standby_poll
                       else f"not active: standing by, local copy holds {copies.summary()}")
        out += self.availability.problems()
        memory = self.memory.problem()
        if memory is not None:
            out.append(f"session store: {memory}")
        clock = self.clock.problem()
        if clock is not None:
            out.append(clock)
        out += [f"{kind} lock not held" for kind, lock in self.locks.items() if not lock.held]
        if self.application is not None:
            out += [f"callback stalled: {s}" for s in self.application.watch.stalled(self.settings.callback_stall_limit)]
            if not self.application.intake.alive() and self.active.is_set():
                out.append("intake stopped")
        return out + self.behaviour.problems()

    @property
    def ready(self) -> bool:
        return not self.problems()

    @property
    def serving(self) -> bool:
        """Active with every lock held: the dispatcher delivers events, whatever else /ready
        reports (a held command, a stalled callback, the dispatcher's own retries must not
        stop the delivery of every other session's executions)."""
        return self.active.is_set() and all(lock.held for lock in self.locks.values())

    def serve_http(self) -> int:
        admin = SessionAdmin(self, Operators(self.settings.operator),
                             holder=lambda: next(iter(self.locks.values())).token)
        try:
            self.http = CellHttp(self.settings.http_port, self.metrics.registry, lambda: self.ready,
                                 problems=self.problems, admin=admin.handle, accepted=lift).start()
        except OSError as exc:  # (a port another process listens on: its reason, not a traceback)
            raise ConfigError(f"http_port {self.settings.http_port}: cannot listen there ({exc.strerror or exc})") from None
        return self.http.port

    def wait_for_locks(self) -> bool:
        """Standby: until every lock is ours (False if asked to stop meanwhile), try each lock
        and bring the local copy up to date every ``standby_poll``."""
        poll = self.settings.standby_poll or min(0.2, self.store_settings.lockRenewalInterval)
        log.info("standby: waiting for the dispatcher lock of %s",
                 ", ".join(f"{self.namespace}/{kind}" for kind in self.locks))
        warned = False
        while True:
            try:
                for kind, lock in self.locks.items():
                    if not lock.held and lock.try_acquire():
                        self.metrics.lock_held.labels(kind).set(1)
                if all(lock.held for lock in self.locks.values()):
                    return True
                if self.settings.standby_poll:
                    self._warm().catch_up()
                warned = False
            except (RedisError, StoreError) as exc:
                if not warned:  # once per outage: a standby waits through it
                    log.warning("standby: the session store is unreachable: %s", exc)
                    warned = True
            if self.stop_requested.wait(poll):
                return False

    def _warm(self) -> WarmCopies:
        """Every session's local copy, in a directory emptied when the process made it:
        whatever a previous process left there is never trusted."""
        if self.copies is None:
            store_dir = fresh_directory(Path(self.settings.state_dir) / "filestore")
            self.copies = WarmCopies(self.reader, {
                cfg.key(self.namespace): SessionCopy(store_dir, cfg.store_prefix, cfg.key(self.namespace))
                for cfg in self.settings.session})
        return self.copies

    def serves(self, cfg: SessionConfig) -> bool:
        """Does this gateway serve ``cfg``? The group the directory names for it (a session moved:
        ``sessionstore/move.py``), else the group its configuration names unless it is only a
        move target here."""
        group = serving_group(self.client, self.namespace, cfg.name)
        return group == cfg.gateway if group is not None else not cfg.move_target

    def materialise(self) -> dict[SessionKey, int]:
        """Stamp every session this gateway serves with our epoch, then make its local copy
        exactly what Redis holds (checked, and brought up to date: ``SessionCopy.finish``). A
        session moved away, or not moved here yet, is left as it is (its Logon is refused)."""
        copies = self._warm()
        last_sent: dict[SessionKey, int] = {}
        self.away.clear()
        for cfg in self.settings.session:
            key = cfg.key(self.namespace)
            store = self.stores[cfg.gateway]
            if not self.serves(cfg):
                self.away.add(str(key))
                log.info("%s: not served here (%s)", key, self._group_problem(cfg))
                continue
            store.stamp_owner(key)
            state = store.load_state(key)
            scheduled = self.schedules.get(cfg.session_id_text)
            period = scheduled[1].new_period_due(state.session_start_time, utc_now()) if scheduled else None
            if period is not None:  # a boundary passed while no gateway was active: the new period, once
                if store.start_period(key, period.start_ns, scheduled[2] if scheduled else 0):
                    log.info("%s: a new period of its schedule (%s) started at %s", key, scheduled[1].describe()
                             if scheduled else "", period.start.isoformat())
                state = store.load_state(key)
            if state.session_start_time is None:  # a session never stored before starts now
                store.reset(key, session_start_ns=time.time_ns())
                state = store.load_state(key)
            self._period_starts[cfg.session_id_text] = state.session_start_time
            self.metrics.period_start.labels(str(key)).set((state.session_start_time or 0) / 1e9)
            copy = copies.copies[key]
            copied = copy.finish(self.reader, state, self.settings.takeover_preload)
            if copy.held_back_below:
                self.held_back[cfg.session_id_text] = copy.held_back_below
            last_sent[key] = state.last_sent_seq_num
            self.metrics.sender_seq.labels(str(key)).set(state.sender_seq_num)
            self.metrics.target_seq.labels(str(key)).set(state.target_seq_num)
            log.info("%s materialised: next sender %d, next target %d, %d stored messages (%d of them "
                     "copied at takeover)", key, state.sender_seq_num, state.target_seq_num, copy.count, copied)
        return last_sent

    def rematerialise(self, cfg: SessionConfig) -> None:
        """Rewrite one session's FileStore from Redis (QuickFIX re-reads it on ``refresh``)."""
        store = self.stores[cfg.gateway]
        loaded = store.load(cfg.key(self.namespace))
        start = loaded.state.session_start_time or time.time_ns()
        write_session(Path(self.settings.state_dir) / "filestore", cfg.store_prefix, loaded, start)

    def start_acceptor(self, last_sent: dict[SessionKey, int]) -> None:
        state_dir = Path(self.settings.state_dir)
        cfg_path = state_dir / "quickfix.cfg"
        engine_port = listening_port_below_ephemeral()  # QuickFIX on loopback, behind the front
        cfg_path.write_text(self.settings.quickfix_settings(state_dir / "filestore", engine_port))
        qf_settings = fix.SessionSettings(str(cfg_path))
        sessions = {cfg.session_id_text: cfg for cfg in self.settings.session}
        self.application = GatewayApplication(sessions, self.stores, self.namespace, self.behaviour, self.metrics,
                                              last_sent, restore_local_copy=self.rematerialise,
                                              linger=Linger(self.settings.batch_linger,
                                                            self.store_settings.dispatchBatchSize),
                                              lockout=LogonLockout(self.settings.logon_lockout_after,
                                                                   self.settings.logon_lockout),
                                              clock_problem=self.clock.problem,
                                              held_back=self.held_back,
                                              complete_local_copy=lambda cfg: complete_header(
                                                  state_dir / "filestore", cfg.store_prefix),
                                              schedule_problem=self._logon_problem, away=self.away,
                                              native=sendpath.chosen(self.settings.order_path))
        logs = []
        if self.settings.message_log:
            self.message_log = MessageLogFactory(state_dir / "log")
            logs.append(self.message_log)
        self.acceptor = fix.ThreadedSocketAcceptor(self.application.engine_application(),
                                                   self.application.engine_store(fix.FileStoreFactory(qf_settings)),
                                                   qf_settings, *logs)
        # before the first connection: a request must never find it unstarted
        self.behaviour.start(self.context(self.application))
        self.acceptor.start()
        # QuickFIX's acceptor listens on every address whatever its settings say: only this host
        # may reach it, and it does so through the front (fixgw/engine_port.py)
        confine_to_loopback(engine_port)
        self.front = self._front(engine_port).start()
        self.active.set()
        threading.Thread(target=self._watch_logons, name="logon-watch", daemon=True).start()
        if self.schedules:
            threading.Thread(target=self._watch_schedules, name="schedule-watch", daemon=True).start()
        log.info("active: accepting FIX connections on %s:%d", self.settings.host, self.settings.port)

    def _front(self, engine_port: int) -> Front:
        """The front on ``[gateway] host:port`` (``fixgw/front.py``), passing admissible
        connections to QuickFIX on ``engine_port``."""
        s = self.settings
        gates = {(cfg.target_comp_id or "", cfg.sender_comp_id or ""): SessionGate(
            cfg.name, tuple(cfg.allowed_subjects),
            tuple(ipaddress.ip_network(a, strict=False) for a in cfg.allowed_addresses),
            cfg.password_hash is not None) for cfg in s.session}
        tls = None
        if s.tls is not None:
            tls = tls_context(str(s.tls.certificate), str(s.tls.key),
                              str(s.tls.client_ca) if s.tls.client_ca is not None else None, s.tls.min_version)
        limits = FrontLimits(s.max_pending_logons, s.max_pending_logons_per_address, s.logon_timeout,
                             s.max_message_size)
        front = Front(s.host, s.port, engine_port, gates, limits, tls,
                      on_refused=lambda session, reason: self.metrics.front_refused.labels(reason).inc(),
                      closed_for=self.clock.problem, engine_letting_go=self._engine_letting_go)
        self.metrics.watch_front(front.counters)
        return front

    def _engine_letting_go(self, name: str) -> bool:
        """Before a Logon of session ``name`` goes to QuickFIX (``Front._engine_let_go``): a
        connection QuickFIX was told to close from another thread (of any session) still has
        its thread, or session ``name`` is held by a connection not logged on."""
        if self.application is not None and self.application.drops.letting_go():
            return True
        sid = self._session_ids.get(name)
        if sid is None or not fix.Session.isSessionRegistered(sid):
            return False
        session = fix.Session.lookupSession(sid)
        return session is not None and not session.isLoggedOn()

    def context(self, application: GatewayApplication) -> GatewayContext:
        """What the behaviour is given of this gateway (``GatewayContext``)."""
        return GatewayContext(self.namespace, self.settings, self.store_settings, self.matching, self.client,
                              self.stores, self.metrics, application.intake, application.deliver_many,
                              application.answer, lambda: self.serving, application.session_id, self.memory.problem,
                              self.away)

    def _clock_stepped(self, problem: str) -> None:
        """The clocks disagree: every message stamped now carries a time one side rejects
        (SendingTime accuracy problem, a Reject the other side rejects in turn: a storm), so the
        connections are closed — no Logout, it would be refused too — and new ones are closed
        by the front before any message until the clocks agree."""
        if self.application is not None:
            self.application.disconnect_all(problem)

    def _group_problem(self, cfg: SessionConfig) -> str | None:
        group = serving_group(self.client, self.namespace, cfg.name)
        if group == MOVING:
            return "the session is being moved to another gateway of this venue: log on again in a moment"
        if group is not None and group != cfg.gateway:
            return f"the session is served by another gateway of this venue now (group {group})"
        if group is None and cfg.move_target:
            return "the session is served by another gateway of this venue"
        return None

    def _logon_problem(self, text: str) -> str | None:
        """Why the session may not log on here now: served by another group, or its schedule."""
        cfg = self._sessions_by_text.get(text)
        problem = self._group_problem(cfg) if cfg is not None else None  # (read at every Logon: a move)
        return problem if problem is not None else self._schedule_problem(text)

    def _schedule_problem(self, text: str) -> str | None:
        """Why the session may not log on now by its schedule, or None (for the Logon check)."""
        scheduled = self.schedules.get(text)
        if scheduled is None:
            return None
        _, schedule, _ = scheduled
        now = utc_now()
        if schedule.period_at(now) is None:
            return (f"outside the session's schedule ({schedule.describe()}); it opens at "
                    f"{schedule.next_boundary(now).isoformat(timespec='seconds')}")
        if schedule.new_period_due(self._period_starts.get(text), now) is not None:
            return f"a new period of the session is starting ({schedule.describe()}): log on again in a moment"
        return None

    def _watch_schedules(self, every: float = 0.25) -> None:
        """Each scheduled session, a few times a second: logged out at the end of its period, and
        started new (``start_new_period``) at the start of the next one."""
        while self.active.is_set() and not self.stop_requested.wait(every):
            for text, (cfg, schedule, keep_ms) in self.schedules.items():
                if str(cfg.key(self.namespace)) in self.away:
                    continue  # served by another group
                try:
                    self._keep_schedule(text, cfg, schedule, keep_ms)
                except Exception:  # noqa: BLE001 (a watch must never die quietly; tried again next round)
                    log.exception("%s: schedule", cfg.key(self.namespace))

    def _keep_schedule(self, text: str, cfg: SessionConfig, schedule: Schedule, keep_ms: int) -> None:
        app, key = self.application, cfg.key(self.namespace)
        if app is None:
            return
        now = utc_now()
        self.metrics.next_boundary.labels(str(key)).set(schedule.next_boundary(now).timestamp())
        sid = fix.SessionID(cfg.begin_string, cfg.sender_comp_id, cfg.target_comp_id)
        period = schedule.period_at(now)
        self.metrics.in_schedule.labels(str(key)).set(0 if period is None else 1)
        if period is None:
            session = fix.Session.lookupSession(sid)
            if session is not None and session.isLoggedOn():
                app.kick(sid, f"the session's period ended ({schedule.describe()}); it opens again at "
                              f"{schedule.next_boundary(now).isoformat(timespec='seconds')}")
            return
        if schedule.new_period_due(self._period_starts.get(text), now) is None:
            return
        started = app.start_new_period(sid, period.start_ns, keep_ms)
        state = self.stores[cfg.gateway].load_state(key)
        self._period_starts[text] = state.session_start_time
        self.metrics.period_start.labels(str(key)).set((state.session_start_time or 0) / 1e9)
        self.metrics.sender_seq.labels(str(key)).set(state.sender_seq_num)
        self.metrics.target_seq.labels(str(key)).set(state.target_seq_num)
        if started:
            log.info("%s: a new period of its schedule (%s) started at %s: numbers 1/1, the previous period's "
                     "messages %s", key, schedule.describe(), period.start.isoformat(),
                     f"kept {keep_ms // 1000} s" if keep_ms else "dropped")

    def _watch_logons(self) -> None:
        named: set[int] = set()
        while self.active.is_set() and not self.stop_requested.wait(1.0):
            self.metrics.ready.set(1 if self.ready else 0)
            show_thread_names(named)
            if self.application is not None:
                try:
                    self.application.drop_silent_connections(self.settings.logon_timeout)
                except Exception:  # noqa: BLE001 (a watch must never die quietly)
                    log.exception("logon watch failed")

    def stop(self) -> None:
        """Log every session out, then give the locks up so a standby takes over at once."""
        self.behaviour.stop()
        if self.front is not None:
            self.front.stop_listening()
        if self.acceptor is not None:
            self.active.clear()
            if self.application is not None:
                self.application.quiesce()
            self.acceptor.stop()  # the Logouts go out through the front
            self.acceptor = None
        if self.message_log is not None:
            self.message_log.close()  # (after the acceptor: its last events are logged)
            self.message_log = None
        if self.front is not None:
            self.front.stop()
            self.front = None
        if self.application is not None:
            self.application.intake.stop()  # the last inbound numbers, before the lock goes
        for kind, lock in self.locks.items():
            lock.release()
            self.metrics.lock_held.labels(kind).set(0)
        if self.http is not None:
            self.http.stop()

    def run(self) -> int:
        cpus = cpus_for(self.settings.cpu_affinity)
        if cpus:
            pin_threads(cpus)
        stop_on_signals(self.stop_requested)
        self._state_dir_hold = claim_directory(Path(self.settings.state_dir))
        port = self.serve_http()
        self._warm()
        print(f"fixgw: gateway http://127.0.0.1:{port}/ready (standby until the lock is ours)", flush=True)
        try:
            if not self.wait_for_locks():
                return 0
            took = time.monotonic()
            sessions = self.materialise()
            materialised = time.monotonic()
            self.memory.start()
            self.clock.start()
            if self.clock.limit_s:  # messages stamped with the datastore's clock (fixmsg.wall_ns)
                fixmsg.wall_ns = self.clock.now_ns
            freeze_startup_objects()  # (before the acceptor: the collection it starts with takes tens of ms)
            self.start_acceptor(sessions)
            log.info("took over in %.3f s: local copies checked and completed in %.3f s, the acceptor (QuickFIX "
                     "loading them) started in %.3f s", time.monotonic() - took, materialised - took,
                     time.monotonic() - materialised)
            print(f"fixgw: active, FIX acceptor on {self.settings.host}:{self.settings.port} "
                  f"({len(self.settings.session)} sessions, namespace {self.namespace}, send path "
                  f"{sendpath.described(sendpath.chosen(self.settings.order_path))})", flush=True)
            # (set by the signals' own thread, whichever thread the kernel handed a signal to:
            # ``stop_on_signals``)
            self.stop_requested.wait()
            return 0
        finally:
            self.memory.stop()
            self.clock.stop()
            self.stop()
