"""The order-entry dispatcher: matching events become FIX messages for sessions.

The gateway's inbox streams are read in batches of dispatchBatchSize; each event goes to its
owning session(s) and to every drop-copy session (filtered by account); each session's
messages of a batch are stored with their events' inbox entries in one group commit, every
session's in one round trip (``GatewayApplication.deliver_many``), so every event becomes a
message exactly once per session across crashes; the stream entries are acknowledged after
every session they concern has them. A logged-out session's messages
are stored and reach it, as resends, after its next logon. An entry that cannot be
dispatched goes to the inbox's dead-letter stream; the dispatcher never stops on one.

Ordering is per session: a session whose group commit is refused (its store fenced it, say)
is *parked* — the entries it has not got stay pending in the group, the other sessions' go on
being delivered and acknowledged, and every ``PARKED_RETRY_S`` the parked session is given its
pending entries again, oldest first, until it has them all (``_retry_parked``).

The drop copy follows behind (``drop_copy_every``): while order entry is busy, the drop-copy
inbox is read at most that often, so its entries come in batches that share one group commit
and the order-entry reports in between wait for neither the copies' commit nor their sends.
After a quiet moment the first copy goes out at once. A gateway serving drop copies only reads
its inbox every cycle.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from redis.exceptions import RedisError

from datastore.connection import RedisClient, is_cluster, own_connections, round_trip, text
from matching.contracts import ContractError, DealExecuted, Event, EventType, OrderAccepted, parse_event
from matching.instruments import InstrumentTable
from matching.linger import Linger
from matching.storage import Entries, ensure_group, read_group_command, read_groups_entries
from matching.tables import ShardedLru
from sessionstore import DROP_COPY, GatewayKey, OrderIndex, SessionKey, StoreError
from sessionstore.store import NO_INDEX

from . import translation as tr
from .config import SessionConfig
from .context import GatewayContext
from .fixmsg import SessionMessage, body_text, transact_time
from .retention import Retention

log = logging.getLogger("fixgw.dispatcher")

GROUP = "fixgw-dispatcher"
CONSUMER = "dispatcher"  # one active dispatcher per gateway (the lock holder)
CLOSED_STATUSES = frozenset("2348C")  # OrdStatus: filled, done for day, canceled, rejected, expired
PARKED_RETRY_S = 0.5  # how often a parked session is given its pending entries again
OPEN_VIEWS_CACHED = 100_000  # open orders' views kept in memory, oldest dropped first (~0.5 KB each: ~50 MB full)


class OpenViews:
    """The views this process committed last, of orders still open, by (session, order id).

    The dispatcher is the only writer of order views and the process ends when it loses a
    lock, so these are what Redis holds, and a batch's events need no read for them. Closed
    orders' views are read from Redis (retention removes them there: the cache never serves one
    that is gone), and so is any order whose last commit is in doubt. At most ``limit``
    entries, the least recently committed dropped first.

    ``OrderedDict`` tables: dropping the oldest of a full plain ``dict`` (``del d[next(iter(d))]``)
    walks past every slot deleted before it until the dict is rebuilt — 47 µs an eviction at
    100,000 entries against 0.8 µs here, paid for every view committed once the cache is full
    (two an order with a drop copy). Split by hash (``ShardedLru``): one table of 100,000 is
    rebuilt whole as it grows and as its evictions use its slots up, 30 ms and more with the
    interpreter held (matching/tables.py).
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        # Keyed by one string, not a (session, order id) tuple: a tuple is in the collector's
        # sight until a collection untracks it, and with allocations and frees balanced once
        # the cache is full, collections came seldom and the next one walked every key (90,000
        # tuples, a 50 ms pause with the interpreter held, 330-390 s into a long run at 400/s).
        self._views: ShardedLru[str, tr.OrderView] = ShardedLru(limit)

    def __len__(self) -> int:
        return len(self._views)

    def get(self, session: str, order_id: str) -> tr.OrderView | None:
        return self._views.get(_slot(session, order_id))

    def committed(self, session: str, deliveries: list[tuple[SessionMessage, tr.OrderView | None]],
                  sent: list[SessionMessage]) -> None:
        """After a session's group commit of ``deliveries`` (each with the view it carries):
        those in ``sent`` that the group commit stored (``seq`` set) are what Redis holds; the
        others were found delivered before (stored by an earlier attempt, perhaps with another
        view) or went one at a time through QuickFIX's callback (the fallback), so their orders
        are read next time."""
        stored = {id(d) for d in sent if d.seq}
        cache = self._views
        for d, view in deliveries:
            if not d.order_id:
                continue
            slot = _slot(session, d.order_id)
            if id(d) in stored and view is not None and view.status not in CLOSED_STATUSES:
                cache.set(slot, view)  # the most recent: the oldest entries are the first dropped
            else:
                cache.discard(slot)

    def forget(self, session: str, deliveries: list[SessionMessage]) -> None:
        """A commit that failed (or may have landed): its orders are read next time."""
        for d in deliveries:
            self._views.discard(_slot(session, d.order_id))


def _slot(session: str, order_id: str) -> str:
    return f"{session}\x00{order_id}"  # (a session's key text holds no NUL)


def read_and_acknowledge(client: RedisClient, read: tuple[Any, ...], to_ack: list[tuple[str, list[bytes]]]
                         ) -> list[tuple[str, Any]]:
    """``read`` (an XREADGROUP of the group ``GROUP``) and the XACKs of ``to_ack`` (stream,
    ids) in one round trip; each stream's entries read.

    Behind a read that blocks, the XACKs go after it: a server runs one client's commands in
    order, so they wait while the read blocks and every reply comes back together, and the
    dispatcher waits for, and is woken by, one reply a cycle. In front, their replies would come
    back at once and wake it a second time in every cycle
    (docs/decisions/2026-12-07-acknowledgements-behind-the-read.md). An entry then stays
    pending until the read returns (its block at most); a successor that reads it again finds
    it in the sessions' inboxes (never a second message). In front of a read that does not
    block (own pending entries, from a position): replies come together either way, and the
    read never returns what was just acknowledged."""
    behind = "BLOCK" in read
    acks = [("XACK", name, GROUP, *ids) for name, ids in to_ack]
    if is_cluster(client):  # redis-py's node routing (and its reply shape); each node runs its part in order
        pipe = client.pipeline(transaction=False)
        for command in [read, *acks] if behind else [*acks, read]:
            pipe.execute_command(*command)
        replies = pipe.execute()
        reply = replies[0] if behind else replies[-1]
        return [(text(stream), entries) for stream, entries in reply or []]
    replies = round_trip(client, [read, *acks] if behind else [*acks, read])
    for r in replies:
        if isinstance(r, Exception):
            raise r
    return read_groups_entries(replies[0] if behind else replies[-1])


class EventSource(Protocol):
    """What the dispatcher needs of the behaviour that started it (order entry): the instrument
    table its events are read with, and how long a ClOrdID stays claimed."""

    table: InstrumentTable
    window_ms: int


class CopyPacing:
    """Which inboxes the dispatcher's next read takes, and how long it may wait for them: the
    drop copy's (``copies``) at most every ``every`` seconds while order entry keeps it busy.

    A read that returned copies makes the next ones due ``every`` later; until then the reads
    take the other inboxes only, and wait no longer than until the copies are due. A read that
    returned none (a quiet drop copy) leaves them due, so after a quiet moment a copy goes out
    at once. A gateway serving drop copies only, or ``every`` 0, reads every inbox each cycle."""

    def __init__(self, streams: list[str], every: float, copies: set[str],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.streams = streams
        self.every = every
        self.copies = copies if every > 0 and set(streams) - copies else set()
        self.others = [s for s in streams if s not in self.copies]
        self._clock = clock
        self._due = 0.0  # (clock) from when the next read takes the copies

    def next_read(self, block_ms: int) -> tuple[list[str], int]:
        """The inboxes to read now, and the read's wait in ms (``block_ms`` at most)."""
        wait_s = self._due - self._clock()
        if not self.copies or wait_s <= 0:
            return self.streams, block_ms
        return self.others, max(1, min(block_ms, math.ceil(round(wait_s * 1000, 6))))

    def read(self, with_entries: list[str]) -> None:
        """A read returned entries of these inboxes."""
        if self.copies and not self.copies.isdisjoint(with_entries):
            self._due = self._clock() + self.every

    def flow(self, parts: list[tuple[str, Any]]) -> int:
        """How many of a cycle's entries (per inbox) are the order flow's, the paced copies'
        left out: what the dispatcher's linger weighs. Counted, the copies (one a report) would
        bring its rate to the linger's threshold at half the order rate, and the pause exists
        for the rates where batching pays, not for a moderate flow."""
        return sum(len(entries) for name, entries in parts if name not in self.copies)


class Dispatcher(threading.Thread):
    """Turns inbox events into messages for sessions; the only writer of order views."""

    def __init__(self, behaviour: EventSource, context: GatewayContext) -> None:
        super().__init__(name="dispatcher", daemon=True)
        self.behaviour = behaviour
        self.context = context
        self.stop = threading.Event()
        self._last_offset: dict[tuple[str, int], tuple[int, int]] = {}  # (inbox kind, partition) → offset
        self._open_views = OpenViews(OPEN_VIEWS_CACHED)
        # Since when, and why, the entries read are not delivered (a store error, retried).
        self.failing: tuple[float, str] | None = None
        # Sessions whose commits were refused (session key → since when, why): their entries
        # wait in the group's pending list, the other sessions' go on (module docstring).
        self.parked: dict[str, tuple[float, str]] = {}
        self._next_parked_pass = 0.0
        self.client: RedisClient = context.client
        self.batch = context.store_settings.dispatchBatchSize
        self.linger = Linger(context.settings.dispatch_linger, self.batch)  # (after a small batch: matching/linger.py)
        ns = context.namespace
        # Each group's inbox (stream → group) and each group's kind: a group's dispatcher reads
        # the events of its own sessions, and the drop copy's group every copy.
        self.group_kinds = context.settings.groups()
        self.streams = {GatewayKey(ns, group).inbox_stream: group for group in self.group_kinds}
        self.sessions = {str(cfg.key(ns)): cfg for cfg in context.settings.session}
        self.key_text = {cfg.name: text for text, cfg in self.sessions.items()}  # asked for per event
        self.drop_copies = [cfg for cfg in context.settings.session if cfg.kind == DROP_COPY]
        self.copy_pacing = CopyPacing(list(self.streams), context.settings.drop_copy_every,
                                      {s for s, group in self.streams.items() if self.group_kinds[group] == DROP_COPY})
        self.session_ids = {str(cfg.key(ns)): context.session_id(cfg) for cfg in context.settings.session}

    def run(self) -> None:
        for stream in self.streams:
            ensure_group(self.client, stream, GROUP)
        # Retention's passes beside it, not between its batches (fixgw/retention.py).
        Retention(self.context, list(self.streams), self.stop).start()
        # the datastores it reads and commits to: a connection of its own to each
        with own_connections([self.client, *(s.client for s in self.context.stores.values())]):
            self._cycles()

    def _read(self, to_ack: list[tuple[str, list[bytes]]], positions: dict[str, Any] | None, block_ms: int | None,
              streams: list[str] | None = None) -> list[tuple[str, Any]]:
        """Read the next batch and acknowledge what the last cycle committed, one round trip
        (``read_and_acknowledge``): new entries of ``streams`` (``positions`` None; default
        every inbox), or this consumer's pending entries after each stream's position (only the
        streams given)."""
        if positions is None:
            read = read_group_command(GROUP, CONSUMER, streams or list(self.streams), ">", self.batch, block_ms)
        else:
            read = ("XREADGROUP", "GROUP", GROUP, CONSUMER, "COUNT", self.batch, "STREAMS", *positions,
                    *positions.values())
        return read_and_acknowledge(self.client, read, to_ack)

    def _cycles(self) -> None:
        # This consumer's pending entries first (a predecessor's, or a failed cycle's), paged by
        # each stream's position: entries held for parked sessions stay pending behind them.
        pending: dict[str, Any] | None = dict.fromkeys(self.streams, "0")
        # Entries committed but not yet acknowledged: their XACK travels with the next read, one
        # round trip instead of two per batch (behind it when it blocks: ``read_and_acknowledge``).
        # Lost with the process, they are read again by the successor and recognised by the
        # sessions' inboxes (never a second message).
        to_ack: list[tuple[str, list[bytes]]] = []
        while not self.stop.is_set():
            try:
                if not self.context.serving():
                    self.stop.wait(0.1)
                    continue
                if self.parked and time.monotonic() >= self._next_parked_pass:
                    to_ack += self._retry_parked()
                    self._next_parked_pass = time.monotonic() + PARKED_RETRY_S
                if pending is not None:
                    reply = self._read(to_ack, pending, None)
                else:
                    streams, block_ms = self.copy_pacing.next_read(self._block_ms())
                    reply = self._read(to_ack, None, block_ms, streams)
                    self.copy_pacing.read([name for name, entries in reply if entries])
                to_ack = []
                parts = [(stream_name, entries) for stream_name, entries in reply if entries]
                if pending is not None:
                    if not parts:
                        pending = None
                        continue
                    pending.update((name, entries[-1][0]) for name, entries in parts)
                if parts:
                    held = self._dispatch_streams([(self.streams[name], entries) for name, entries in parts])
                    to_ack += [(name, acked) for name, entries in parts
                               if (acked := [e for e, _ in entries if (self.streams[name], e) not in held])]
                self.failing = None
                self.linger.after(self.copy_pacing.flow(parts))
            except (RedisError, StoreError) as exc:
                log.error("dispatcher: %s; retrying (entries stay pending)", exc)
                self.failing = (self.failing[0] if self.failing else time.monotonic(), f"{type(exc).__name__}: {exc}")
                pending = dict.fromkeys(self.streams, "0")
                self.stop.wait(0.5)

    def _block_ms(self) -> int:
        """How long a read for new entries may wait: a parked session's next pass bounds it."""
        if not self.parked:
            return 200
        return max(1, min(200, int((self._next_parked_pass - time.monotonic()) * 1000)))

    def _retry_parked(self) -> list[tuple[str, list[bytes]]]:
        """Give each parked session its pending entries again, oldest first, a batch at a time;
        one refused again stays parked and gets nothing more in this pass (its order holds);
        one that got every entry it was waiting for is unparked. Returns the entries now
        delivered to every session they concern (to acknowledge)."""
        acks: list[tuple[str, list[bytes]]] = []
        for stream, kind in self.streams.items():
            waiting = {key for key in self.parked if self.sessions[key].gateway == kind}
            position: Any = "0"
            while waiting:
                entries: Entries = next((e for _, e in self._read([], {stream: position}, None) if e), [])
                if not entries:
                    for key in waiting:
                        log.info("dispatcher: %s has every entry it was waiting for: no longer parked", key)
                        del self.parked[key]
                    break
                position = entries[-1][0]
                held, refused = self._dispatch_entries(kind, entries, only=waiting)
                waiting -= refused
                if acked := [e for e, _ in entries if e not in held]:
                    acks.append((stream, acked))
        self.context.metrics.parked_sessions.set(len(self.parked))
        return acks

    def _park(self, key: str, exc: StoreError) -> None:
        since = self.parked.get(key, (time.monotonic(), ""))[0]
        if key not in self.parked:
            log.error("dispatcher: %s refused its group commit (%s): its entries wait, the other sessions' go on; "
                      "tried again every %.1fs", key, exc, PARKED_RETRY_S)
            self._next_parked_pass = time.monotonic() + PARKED_RETRY_S
        self.parked[key] = (since, f"{type(exc).__name__}: {exc}")
        self.context.metrics.parked_sessions.set(len(self.parked))

    def problems(self, limit_s: float) -> list[str]:
        """For /ready: entries not delivered for longer than ``limit_s`` — every session's (the
        dispatcher's reads or commits fail) or a parked session's — and why."""
        now, failing, parked = time.monotonic(), self.failing, dict(self.parked)  # (the HTTP thread asks)
        waiting = ([("event dispatcher", failing)] if failing is not None else []) + list(parked.items())
        return [f"{who}: entries not delivered for {now - since:.0f}s: {why}"
                for who, (since, why) in waiting if now - since > limit_s]

    def _dispatch_streams(self, parts: list[tuple[str, list[tuple[bytes, dict[bytes, bytes] | None]]]]
                          ) -> set[tuple[str, bytes]]:
        """A cycle's entries of every inbox stream (order entry, drop copy) dispatched together,
        so that every session's group commit goes in one round trip; if that fails for any
        reason but the store's, one stream at a time (``_dispatch_entries``). Returns the
        entries held for a parked session, by (kind, id): they stay pending."""
        if len(parts) == 1:
            kind, entries = parts[0]
            return {(kind, e) for e in self._dispatch_entries(kind, entries)[0]}
        try:
            held, _ = self.dispatch([(kind, [fields for _, fields in entries]) for kind, entries in parts])
            return {(kind, e) for (kind, entries), flags in zip(parts, held)
                    for (e, _), h in zip(entries, flags) if h}
        except (RedisError, StoreError):
            raise  # the store: the entries stay pending and are retried
        except Exception as exc:  # noqa: BLE001 (a bad entry or a bug; isolate it)
            log.warning("dispatcher: a batch of %d streams failed (%s); one stream at a time", len(parts), exc)
            return {(kind, e) for kind, entries in parts for e in self._dispatch_entries(kind, entries)[0]}

    def _dispatch_entries(self, kind: str, entries: list[tuple[bytes, dict[bytes, bytes] | None]],
                          only: set[str] | None = None) -> tuple[set[bytes], set[str]]:
        """Dispatch a batch; if it fails for any reason but the store's, one entry at a time,
        and an entry that fails alone goes to the inbox's dead-letter stream with the error —
        the dispatcher never stops, and never loops, on one bad entry. Returns the ids of the
        entries held for a parked session, and the sessions refused (``dispatch``)."""
        try:
            [held], refused = self.dispatch([(kind, [fields for _, fields in entries])], only)
            return {e for (e, _), h in zip(entries, held) if h}, refused
        except (RedisError, StoreError):
            raise  # the store: the entries stay pending and are retried
        except Exception as exc:  # noqa: BLE001 (a bad entry or a bug; isolate it)
            if len(entries) > 1:
                log.warning("dispatcher: a batch of %d failed (%s); one entry at a time", len(entries), exc)
                held_ids: set[bytes] = set()
                refused = set()
                for entry in entries:
                    if only is not None and not only - refused:
                        held_ids.add(entry[0])  # (every session of the pass refused: the rest waits)
                        continue
                    ids, no = self._dispatch_entries(kind, [entry], None if only is None else only - refused)
                    held_ids |= ids
                    refused |= no
                return held_ids, refused
            entry_id, fields = entries[0]
            dead = GatewayKey(self.context.namespace, kind).inbox_dead_letter
            log.error("dispatcher: inbox entry %s moved to %s: %s: %s", entry_id, dead, type(exc).__name__, exc)
            moved: dict[Any, Any] = {**(fields or {}), "x-original-id": entry_id, "x-error": f"{type(exc).__name__}: {exc}"}
            self.client.xadd(dead, moved)
            self.context.metrics.dispatcher_dead_lettered.inc()
            return set(), set()

    def dispatch(self, parts: list[tuple[str, list[dict[bytes, bytes] | None]]], only: set[str] | None = None
                 ) -> tuple[list[list[bool]], set[str]]:
        """Turn batches of inbox entries (each with its inbox's kind) into messages, grouped per
        session, and hand every session's messages to the gateway as one group commit each, all
        in one round trip (``deliver_many``; views read once per session).

        To the sessions not parked, or (a parked session's pass, entries read before: their
        order was checked then) only to those in ``only``. A session whose commit is refused
        is parked. Returns, per part and entry, whether it is held (a session it concerns is
        parked and has not got it), and the sessions refused."""
        routed: list[tuple[SessionConfig, Event, tuple[str, ...]]] = []
        seen: dict[tuple[str, int], tuple[int, int]] = {}  # offsets reached (``_check_order``)
        concerns: list[list[list[tuple[SessionConfig, tuple[str, ...]]]]] = []  # per part and entry: its targets
        copies: set[tuple[str, str]] = set()  # (kind, event id) routed in this call
        for kind, batch in parts:
            concerns.append([])
            for fields in batch:
                raw = (fields or {}).get(b"event")
                if raw is None:
                    raise ContractError("inbox entry has no event field")  # → dead letter, alone
                event = parse_event(raw)
                targets = self.targets(kind, event)
                concerns[-1].append(targets)
                if (kind, event.event_id) in copies:
                    # The same event twice in one batch (published again, at least once): the
                    # sessions' inboxes only know what was committed before this batch, so the
                    # copy is dropped here or its reports would be committed and sent twice.
                    continue
                copies.add((kind, event.event_id))
                if only is None:
                    self._check_order(kind, event, (fields or {}).get(b"x-partition-offset"), seen)
                routed += [(cfg, event, roles) for cfg, roles in targets
                           if (self.key_text[cfg.name] in only if only is not None
                               else self.key_text[cfg.name] not in self.parked)]
        views = self._views(routed)
        per_session: dict[str, list[tuple[SessionMessage, tr.OrderView | None]]] = {}  # with the view each commits
        table = self.behaviour.table
        made = transact_time()  # (whole seconds: one reading serves the batch)
        for cfg, event, roles in routed:
            key = self.key_text[cfg.name]
            known = {oid: views.get((key, oid)) for oid in order_ids(event, roles)}
            for out in tr.event_messages(event, known, table, cfg.begin_string, roles, made):
                if out.view is not None:
                    views[(key, out.order_id)] = out.view  # the next event of this order sees it
                view_json = out.view.to_json() if out.view is not None else ""
                text = out.text or body_text(out.msg_type, out.fields)
                delivery = SessionMessage(text, out.msg_type, out.inbox_id, out.order_id, view_json,
                                    index=self._index(out.view, cfg.kind == DROP_COPY), plain=True)
                per_session.setdefault(key, []).append((delivery, out.view))
        if not per_session:
            self._last_offset.update(seen)
            return self._held(concerns, routed, set()), set()
        # The order-entry sessions' reports are sent first, the drop copies' after them.
        batches = sorted(per_session.items(), key=lambda kv: self.sessions[kv[0]].kind == DROP_COPY)
        try:
            results = self.context.deliver_many(
                [(self.session_ids[key], [d for d, _ in pairs]) for key, pairs in batches])
        except BaseException:
            for key, pairs in batches:  # the commits may or may not have landed
                self._open_views.forget(key, [d for d, _ in pairs])
            raise
        refused: set[str] = set()
        for (key, pairs), result in zip(batches, results):
            if isinstance(result, StoreError):
                self._open_views.forget(key, [d for d, _ in pairs])
                self._park(key, result)
                refused.add(key)
            else:
                self._open_views.committed(key, pairs, result)
        self._last_offset.update(seen)
        return self._held(concerns, routed, refused), refused

    def _held(self, concerns: list[list[list[tuple[SessionConfig, tuple[str, ...]]]]],
              routed: list[tuple[SessionConfig, Event, tuple[str, ...]]], refused: set[str]) -> list[list[bool]]:
        """Per entry: does a parked session still wait for it (refused now, or not given it)?"""
        if not self.parked:
            return [[False] * len(part) for part in concerns]
        got = {self.key_text[cfg.name] for cfg, _, _ in routed} - refused
        waiting = self.parked.keys() - got
        return [[any(self.key_text[cfg.name] in waiting for cfg, _ in targets) for targets in part]
                for part in concerns]

    def _index(self, view: tr.OrderView | None, drop_copy: bool) -> OrderIndex:
        """How the order's ClOrdID records and retention follow this message (``OrderIndex``).
        A drop copy holds no ClOrdID records (the order-entry session claimed them): only the
        retention of its views follows the order."""
        if view is None:
            return NO_INDEX
        state = "closed" if view.status in CLOSED_STATUSES else "open"
        if drop_copy:
            return OrderIndex(state, window_ms=self.behaviour.window_ms)
        return OrderIndex(state, view.cl_ord_id, view.orig_cl_ord_id if view.orig_cl_ord_id != view.cl_ord_id else "",
                          self.behaviour.window_ms)

    def _views(self, routed: list[tuple[SessionConfig, Event, tuple[str, ...]]]
               ) -> dict[tuple[str, str], tr.OrderView | None]:
        """Each session's last view of every order the batch concerns: one read per session,
        for the views neither in ``OpenViews`` nor known not to exist. An order's first event is
        its acceptance, and its first view is what the dispatcher commits for it: nothing to read.
        (An acceptance delivered again is found in the session's inbox and dropped, whatever it
        was built from.)"""
        wanted: dict[str, tuple[SessionConfig, set[str]]] = {}
        for cfg, event, roles in routed:
            ids = wanted.setdefault(self.key_text[cfg.name], (cfg, set()))[1]
            if not isinstance(event.payload, OrderAccepted):
                ids.update(order_ids(event, roles))
        views: dict[tuple[str, str], tr.OrderView | None] = {}
        by_store: dict[int, tuple[Any, list[tuple[str, SessionKey, list[str]]]]] = {}
        for key, (cfg, ids) in wanted.items():  # the sessions of one datastore: one round trip
            missing = []
            for oid in sorted(ids):
                view = self._open_views.get(key, oid)
                if view is None:
                    missing.append(oid)
                else:
                    views[(key, oid)] = view
            if not missing:
                continue
            store = self.context.stores[cfg.gateway]
            by_store.setdefault(id(store.client), (store, []))[1].append((key, cfg.key(self.context.namespace),
                                                                           missing))
        for store, sessions in by_store.values():
            replies = store.order_views_of([(session, ordered) for _, session, ordered in sessions])
            for (key, _, ordered), raw in zip(sessions, replies):
                for oid, v in zip(ordered, raw):
                    views[(key, oid)] = tr.OrderView.from_json(v) if v else None
        return views

    def _check_order(self, kind: str, event: Event, offset_raw: bytes | None,
                     seen: dict[tuple[str, int], tuple[int, int]]) -> None:
        """Watch that each partition's events arrive in partition order. ``seen``: the offsets
        this batch reached, kept once it is delivered (a batch retried after a failed commit
        is not out of order: its offsets were never taken as reached).

        Decided: the dispatcher delivers in arrival order and never holds back or drops an
        event (an execution must reach its session); order is the publisher's guarantee
        (one fenced outbox worker per partition, publishing its pending entries first; with
        direct delivery the conductor's own commits, in order, once the outbox has published
        what was committed before). A
        republished event (at-least-once) arrives behind newer ones and is recognised by the
        sessions' inboxes; an *undelivered* event arriving behind a newer one would be a broken
        guarantee: it is logged and counted (fixgw_events_out_of_order_total), never silent.
        """
        if not offset_raw:
            return
        ms, _, seq = offset_raw.decode().partition("-")
        offset = (int(ms), int(seq or 0))
        last = seen.get((kind, event.partition)) or self._last_offset.get((kind, event.partition))
        if last is None or offset > last:
            seen[(kind, event.partition)] = offset
            return
        inbox_ids = [f"{event.event_id}:{role}" for role in "OMT"]  # see translation.event_messages
        ns = self.context.namespace
        fresh = [cfg for cfg, _ in self.targets(kind, event) if self.key_text[cfg.name] not in self.parked
                 and not any(self.context.stores[cfg.gateway].delivered(cfg.key(ns), i) for i in inbox_ids)]
        if fresh:
            self.context.metrics.events_out_of_order.labels(str(event.partition)).inc()
            log.error("dispatcher: event %s (partition %d offset %s) arrived after offset %s-%s and was not "
                      "delivered before: delivering it late", event.event_id, event.partition,
                      offset_raw.decode(), *last)

    def targets(self, group: str, event: Event) -> list[tuple[SessionConfig, tuple[str, ...]]]:
        """The sessions of ``group`` (its inbox's) that ``event`` concerns, with their roles in it."""
        p = event.payload
        parts: dict[str, Any] = {"maker": p.maker, "taker": p.taker} if isinstance(p, DealExecuted) else {"order": p}
        if self.group_kinds.get(group) != DROP_COPY:
            by_owner: dict[str, list[str]] = {}
            for role, state in parts.items():
                by_owner.setdefault(state.owner, []).append(role)
            fsg: list[tuple[SessionConfig, tuple[str, ...]]] = []
            for owner, roles in by_owner.items():
                cfg = self.sessions.get(owner)  # (an owner is its session's key: its group included)
                if cfg is not None and cfg.kind != DROP_COPY and cfg.gateway == group:
                    fsg.append((cfg, tuple(roles)))
            return fsg
        if event.type is EventType.COMMAND_REFUSED:
            return []  # no order came of it: nothing for a drop copy
        dc: list[tuple[SessionConfig, tuple[str, ...]]] = []
        for cfg in self.drop_copies:
            if cfg.gateway != group:
                continue
            heard = tuple(r for r, state in parts.items() if not cfg.accounts or state.account in cfg.accounts)
            if heard:
                dc.append((cfg, heard))
        return dc



def order_ids(event: Event, roles: tuple[str, ...]) -> list[str]:
    """The orders of ``event`` a session hears about in these roles."""
    p = event.payload
    if isinstance(p, DealExecuted):
        return [(p.maker if r == "maker" else p.taker).order_id for r in roles]
    return [p.order_id]
