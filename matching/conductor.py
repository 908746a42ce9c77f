"""The conductor: the only writer of one partition (seed 000, steps 1–9).

Theory of operation. One active conductor per partition holds ``:conductor-lease``
(SET NX PX, renewed in the loop, fenced by WATCH at every commit). It reads its command
stream through a consumer group, its own pending entries first (a predecessor's
unacknowledged work is redelivered to it). For each batch: validate and route-check
(1, 2), look up processed-command and accepted-order records (3, 4), match against the
in-memory mirror of the book (5–7; safe because nobody else writes), stage every change,
event and dedup record into one MULTI/EXEC (8), wait for durability, then XACK (9). In
``memory`` mode the XACK rides inside the transaction (the stream lives on the partition's
own hash tag, so the acknowledgement and the records it stands for are one atomic unit, and
a round trip is saved); in ``aof-replicated`` mode it follows WAITAOF, so a batch whose
durability failed stays pending and is read again before anything new is matched. Any
failure between reading and acknowledging leaves the entries pending and marks the mirror
stale; the next step rebuilds it from Redis, and redelivery finds the processed-command
record if the commit had landed. Batching many commands into one
transaction with one WAITAOF is the group commit; results equal one-at-a-time.

Pipelined: ``matching/pipeline.py``.

Poison: one bad command must never stop the partition. An entry that cannot be read is
moved to ``:commands:dead-letter`` with the reason in the batch's own transaction; a
command the cell fails to apply is refused on the retry (its owner hears Rejected, reason
``cell-error``) instead of applied again; and a batch that keeps failing for any other
reason is retried one entry at a time until the entry at fault is dead-lettered.

Direct delivery (``MATCHING_INBOX_DELIVERY=direct``; ``fixgw up``'s default): when the
gateways' inbox streams live on the partition's own datastore (standalone or Sentinel), each
event is appended to its inboxes in the batch's own transaction instead of to the event stream
for the outbox to relay — fenced by the same WATCH, one process hop and one relay's work fewer
an order. Only in ``memory`` durability (the outbox waits for WAITAOF before it publishes; a
commit cannot) and with the Redis streams transport. Events committed before (outbox
delivery, another conductor's) must reach the inboxes first: after taking the lease a
direct conductor commits nothing until the event stream is empty, i.e. the outbox worker has
published and acknowledged every one of them.
"""
from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, Protocol, cast

from redis.exceptions import RedisError, ResponseError

from datastore.connection import (
    RedisClient,
    checked_out,
    command_on,
    is_cluster,
    own_connection,
    round_trip,
)
from datastore.lease import Lease

from .config import LEASE_TTL_MS, Durability
from .contracts import (
    Command,
    CommandResult,
    ContractError,
    Event,
    EventType,
    PlaceOrder,
    parse_command,
    partition_of,
    refused_command_route,
)
from .domain import Cell, Outcome, Reason, StpMode
from .errors import BootRefused, DurabilityFailed, LeaseLost, PoisonCommand, SimulatedCrash
from .instruments import Instrument
from .keys import PartitionKeys
from .linger import Linger
from .metrics import BacklogProbe, ConductorMetrics
from .outbox import GROUP as OUTBOX_GROUP
from .pipeline import CONSUMER, GROUP, Batch, PipelinedCommits
from .storage import (
    DeadCommand,
    Entries,
    FencedOut,
    Inboxes,
    StagedCommand,
    StreamClock,
    commit_commands,
    commit_fenced,
    commit_watched,
    ensure_group,
    partition_command,
    read_group,
    read_group_command,
    read_group_entries,
    rebuild_cell,
    trim_acknowledged,
    wait_aof,
)

__all__ = ["CONSUMER", "GROUP", "BootRefused", "CommandSource", "Conductor", "DurabilityFailed", "LeaseLost",
           "PoisonCommand", "SimulatedCrash", "check_durability"]

log = logging.getLogger("matching.conductor")


class CommandSource(Protocol):
    """Where commands come from when not the partition's stream (``matching.amqp``)."""

    @property
    def healthy(self) -> bool: ...

    def restart(self) -> None: ...

    def stop(self) -> None: ...

    def read(self, count: int, block_ms: int) -> list[tuple[bytes, dict[bytes, bytes] | None, Any]]: ...

    def ack(self, deliveries: Sequence[Any]) -> None: ...



TRIM_EVERY_S = 60.0  # retention passes over the command stream
POISON_AFTER = 3  # failures of the same single entry before it is dead-lettered
IDLE_BLOCK_MS = 200  # an idle read's wait: also the longest a stand-down (a relocation, SIGTERM) waits


def check_durability(client: RedisClient, keys: PartitionKeys, policy: Durability) -> None:
    """Seed 000's boot check, plus what WAITAOF 0 0 1 alone cannot see (AOF off, no replica)."""
    if policy.is_memory:
        return
    try:
        partition_command(client, keys, "WAITAOF", 0, 0, 1)
    except ResponseError as exc:
        raise BootRefused(f"aof-replicated refused: the datastore cannot run WAITAOF ({exc})") from None
    info = partition_command(client, keys, "INFO", "persistence")
    if str(info.get("aof_enabled", "0")) != "1":
        raise BootRefused("aof-replicated refused: AOF is off on the partition's primary (appendonly no)")
    client.hset(keys.meta, "durabilityProbe", str(time.time_ns()))
    local, replicas = wait_aof(lambda *a: partition_command(client, keys, *a), policy.local_fsyncs,
                               policy.replica_fsyncs, policy.timeout_ms)
    if int(local) < policy.local_fsyncs or int(replicas) < policy.replica_fsyncs:
        raise BootRefused(f"aof-replicated refused: WAITAOF {policy.local_fsyncs} {policy.replica_fsyncs} "
                          f"{policy.timeout_ms} confirmed only local={local} replicas={replicas} "
                          "(is a replica with AOF attached?)")


class Conductor(PipelinedCommits):
    def __init__(self, client: RedisClient, *, partition: int, partition_count: int,
                 instruments: dict[int, Instrument], durability: Durability,
                 stp_mode: StpMode = StpMode.CANCEL_TAKER, batch_size: int = 100,
                 lease_ttl_ms: int = LEASE_TTL_MS, lease_renew_s: float | None = None,
                 metrics: ConductorMetrics | None = None,
                 fault: Callable[[str], None] | None = None,
                 command_retention_ms: int = 86_400_000, source: CommandSource | None = None,
                 linger_s: float = 0.0, inboxes: Inboxes | None = None) -> None:
        if not 0 <= partition < partition_count:
            raise BootRefused(f"partition {partition} is outside 0..{partition_count - 1}")
        self.client = client
        self.partition = partition
        self.partition_count = partition_count
        self.keys = PartitionKeys(partition)
        self.instruments = {p: i for p, i in instruments.items() if partition_of(p, partition_count) == partition}
        self.durability = durability
        self.stp_mode = stp_mode
        self.batch_size = batch_size
        self.linger = Linger(linger_s, batch_size)  # (the loop's pause after a small batch)
        self.metrics = metrics or ConductorMetrics(partition)
        self._fault = fault
        self.token = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:10]}"
        self.cell: Cell | None = None  # the in-memory mirror; None = stale, rebuild before use
        self._own_pending = True  # unknown until a read of "0" comes back empty
        self._poison: dict[str, str] = {}  # command id → why the cell failed on it: refused on retry
        self._isolate = False  # after an unexplained failure: read pending entries one at a time
        self._failing: tuple[bytes | None, int] = (None, 0)  # first entry of the failing batch, times
        self._dead: dict[bytes, str] = {}  # entry ids to dead-letter when next read, with why
        self.heartbeat = time.monotonic()  # last turn of the loop (for /ready)
        self.clock = StreamClock()
        # Renewed inline by the loop (no thread): every commit also checks the token (WATCH).
        self.lease = Lease(client, self.keys.conductor_lease, self.token, ttl_ms=lease_ttl_ms,
                           renew_s=lease_renew_s or lease_ttl_ms / 3000,
                           name=f"partition {partition} conductor", on_lost=self._stand_down)
        # Acknowledged commands older than this are trimmed (never a pending or unread one): they
        # are only an audit trail once processed, since the book is rebuilt from its own keys.
        self.command_retention_ms = command_retention_ms
        self._next_trim = 0.0
        # Commands from a broker instead of the partition's stream (``transport = rabbitmq``):
        # acknowledged there after the commit and the durability wait; a batch read but not
        # acknowledged is held and processed again first, in order (the broker's pending list).
        self.source = source
        self._held: list[tuple[bytes, dict[bytes, bytes] | None, Any]] = []
        self._durable_unacked: list[bytes] = []  # entries of a durable batch, acknowledged with the next read
        # The pipelined loop (``_step_pipelined``): the next batch, matched and staged while the
        # one before it was committed, and a second connection that reads it meanwhile.
        self._next_batch: Batch | None = None
        self._reader: Any = None
        self._wait_deadline = 0.0  # aof-replicated: when the batch in flight's WAITAOF gives up
        # Direct delivery (module docstring): each event's inbox streams; None = the event stream.
        if inboxes is not None and (source is not None or not durability.is_memory or is_cluster(client)):
            raise BootRefused("direct inbox delivery needs the Redis streams transport, memory durability "
                              "and a standalone or Sentinel datastore (MATCHING_INBOX_DELIVERY=outbox otherwise)")
        self.inboxes = inboxes
        self._backlog = BacklogProbe(client, self.keys.commands, GROUP, self.metrics.backlog)
        self._relayed_first = inboxes is None  # direct: the event stream found empty since the lease was taken
        self._next_drain_log = 0.0

    # --- boot and lease ---------------------------------------------------------------

    def boot(self) -> None:
        """Refuse to run on a datastore or partition count we cannot honour."""
        meta = self.keys.meta
        self.client.hsetnx(meta, "partitionCount", self.partition_count)
        stored = int(cast(bytes, self.client.hget(meta, "partitionCount")))
        if stored != self.partition_count:
            raise BootRefused(f"partition count {self.partition_count} differs from the {stored} recorded in {meta}; "
                              "changing MATCHING_PARTITION_COUNT in place is forbidden (migrate instead)")
        check_durability(self.client, self.keys, self.durability)
        ensure_group(self.client, self.keys.commands, GROUP)

    @property
    def has_lease(self) -> bool:
        return self.lease.held

    def try_lease(self) -> bool:
        if not self.lease.try_take():
            self.metrics.lease_owned.set(0)
            return False
        self.metrics.lease_owned.set(1)
        self.metrics.lease_taken.inc()
        log.info("partition %d: conductor lease taken by %s", self.partition, self.token)
        self.cell = None
        # Whoever takes the lease — even one that held it before — first processes every
        # entry still pending in the group (one consumer name per partition: a stalled
        # predecessor's in-flight batch is in that list), in stream order, before new ones.
        self._own_pending = True
        self._isolate = False
        self._relayed_first = self.inboxes is None
        return True

    def _events_relayed(self) -> bool:
        """Direct delivery: is every event committed to the event stream published (the outbox
        acknowledges and deletes each one it published)? Until then nothing is committed."""
        ensure_group(self.client, self.keys.events, OUTBOX_GROUP)  # (XSETID needs the stream)
        left = int(self.client.xlen(self.keys.events))
        if left and time.monotonic() >= self._next_drain_log:
            self._next_drain_log = time.monotonic() + 5.0
            log.warning("partition %d: direct delivery waits for the outbox to publish the %d events committed "
                        "before it", self.partition, left)
        return not left

    def _renew_if_due(self) -> None:
        self.lease.renew_if_due()  # a lost lease stands the conductor down (``_stand_down``)

    def _lose(self, why: str) -> None:
        if self.lease.lost_reason is None:
            self.lease.lose(why)  # which stands the conductor down
        else:
            self._stand_down(why)

    def _stand_down(self, why: str) -> None:
        log.error("partition %d: conductor stopped writing: %s", self.partition, why)
        self.cell = None
        self._next_batch = None
        self.metrics.lease_owned.set(0)
        if self.source is not None:
            # Let the broker hand the queue (and what we held unacknowledged) to the conductor that
            # holds the lease now; we consume again when we hold it again.
            self._held = []
            self.source.stop()

    def release(self) -> None:
        if self.source is not None:
            self.source.stop()  # first: the broker hands what we held to the next lease holder
        self.lease.release()
        self.cell = None
        self._next_batch = None
        if self._reader is not None:
            self._reader.disconnect()
            self._reader = None
        self.metrics.lease_owned.set(0)
        log.info("partition %d: conductor lease released", self.partition)

    def rebuild(self) -> None:
        cell = Cell(self.instruments, self.stp_mode)
        counts, last = rebuild_cell(self.client, self.keys, cell, self.instruments)
        self.clock = StreamClock.after(last)
        self.cell = cell
        log.info("partition %d: book rebuilt from Redis: %s", self.partition, counts)

    # --- the loop ---------------------------------------------------------------------

    def step(self, block_ms: int = IDLE_BLOCK_MS) -> int:
        """One turn: hold the lease, read a batch (own pending first), process it. Whatever
        fails on the way leaves own pending to be read first: a read that failed may have
        delivered entries to us (its reply lost), and they come before anything newer."""
        try:
            return self._step(block_ms)
        except BaseException:
            self._own_pending = True
            raise

    def _step(self, block_ms: int) -> int:
        if not self.has_lease and not self.try_lease():
            return 0
        renewed = self.lease.renewed_at
        self._renew_if_due()
        if not self.has_lease:
            return 0
        if not self._relayed_first:
            self._relayed_first = self._events_relayed()
            if not self._relayed_first:
                time.sleep(0.05)
                return 0
        if self.cell is None:
            self._next_batch = None
            self.rebuild()
        if self.source is not None:
            return self._step_from_source(block_ms)
        stream = self.keys.commands
        conn = self._pipelines()
        if conn is not None:
            if self._next_batch is not None and self.lease.renewed_at != renewed:
                self._watch_again(conn)  # the renewal touched the key the staged batch's EXEC watches
            return self._step_pipelined(conn, stream, block_ms)
        entries = []
        if self._own_pending:  # a predecessor's or a failed batch's entries come first
            count = 1 if self._isolate else self.batch_size
            entries = self._read(stream, "0", count)
            self._own_pending = bool(entries)
            self._isolate = self._isolate and self._own_pending  # isolation ends with the pending list
        if not entries:
            entries = self._read(stream, ">", self.batch_size, block_ms)
        if entries:
            self.process(entries)
        if time.monotonic() >= self._next_trim:  # at most once a minute
            self._next_trim = time.monotonic() + TRIM_EVERY_S
            trimmed = trim_acknowledged(self.client, stream, self.command_retention_ms)
            if trimmed:
                log.info("partition %d: %d acknowledged commands older than %d ms trimmed", self.partition, trimmed,
                         self.command_retention_ms)
        return len(entries)

    def _read(self, stream: str, start: str, count: int, block_ms: int | None = None) -> Entries:
        """XREADGROUP, sent once (``read_group``). The last batch, durable but not yet
        acknowledged (aof-replicated), is acknowledged in the same round trip, before it."""
        if not self._durable_unacked:
            return read_group(self.client, GROUP, CONSUMER, stream, start, count, block_ms)
        return self._read_entries(round_trip(self.client, self._read_commands(stream, start, count, block_ms)))

    def _read_commands(self, stream: str, start: str, count: int, block_ms: int | None = None
                       ) -> list[tuple[Any, ...]]:
        """XREADGROUP, behind the XACK of a durable batch that waits for it."""
        ack = [("XACK", stream, GROUP, *self._durable_unacked)] if self._durable_unacked else []
        return [*ack, read_group_command(GROUP, CONSUMER, stream, start, count, block_ms)]

    def _read_entries(self, replies: list[Any]) -> Entries:
        """The entries of ``_read_commands``' replies (the XACK's, if any, checked first)."""
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply
        self._durable_unacked = []
        return read_group_entries(replies[-1])

    def acknowledge_durable(self) -> None:
        """Acknowledge the last batch if it waits for the next read to be (on a clean stop)."""
        if self._durable_unacked:
            round_trip(self.client, [("XACK", self.keys.commands, GROUP, *self._durable_unacked)])
            self._durable_unacked = []

    # --- commands from a broker; the run loop ------------------------------------------

    def _step_from_source(self, block_ms: int) -> int:
        assert self.source is not None
        if not self.source.healthy:
            self._held = []  # delivered on a channel that is gone: the broker delivers them again
            self.source.restart()
        if not self._held:
            self._held = self.source.read(self.batch_size, block_ms)
        if not self._held:
            return 0
        batch = self._held[:1] if self._isolate else self._held
        self.process([(entry_id, fields) for entry_id, fields, _ in batch])
        self.source.ack([delivery for *_, delivery in batch])  # after the commit and its durability
        self._held = self._held[len(batch):]
        self._isolate = self._isolate and bool(self._held)
        return len(batch)

    def run(self, stop: threading.Event, block_ms: int = IDLE_BLOCK_MS) -> None:
        with own_connection(self.client):  # one connection of its own for the loop's round trips
            self._loop(stop, block_ms)
            try:
                self.finish()
            except (RedisError, DurabilityFailed, LeaseLost) as exc:  # a successor reads it again
                log.warning("partition %d: last batch not committed or acknowledged: %s", self.partition, exc)
        self.release()

    def _loop(self, stop: threading.Event, block_ms: int) -> None:
        while not stop.is_set():
            self.heartbeat = time.monotonic()
            if self.has_lease and self.source is None:
                self._backlog.measure()
            try:
                handled = self.step(block_ms)
                if not handled and not self.has_lease:
                    stop.wait(1.0)
                self.linger.after(handled)
            except (RedisError, DurabilityFailed, LeaseLost) as exc:
                if isinstance(exc, DurabilityFailed):
                    self.metrics.durability_failures.inc()
                log.error("partition %d: %s: %s; batch not confirmed (pending unless its commit landed), mirror will be rebuilt",
                          self.partition, type(exc).__name__, exc)
                self.cell = None
                stop.wait(0.2)
            except PoisonCommand as exc:
                log.error("partition %d: %s; retrying the batch with it refused", self.partition, exc)
            except Exception:  # noqa: BLE001 (the loop must outlive any one batch)
                log.exception("partition %d: batch failed; retried one entry at a time", self.partition)
                self.cell = None
                stop.wait(0.2)

    def ready(self, stale_after_s: float = 10.0) -> bool:
        """Serving: holds the lease, the loop turns, batches are not failing over and over, and
        (direct delivery) it is not waiting for the outbox to publish what was committed before."""
        fresh = time.monotonic() - self.heartbeat < stale_after_s
        broker = self.source is None or self.source.healthy
        return self.has_lease and fresh and broker and self._failing[1] < POISON_AFTER and self._relayed_first

    def _point(self, name: str) -> None:
        if self._fault is not None:
            self._fault(name)

    def process(self, entries: list[tuple[bytes, dict[bytes, bytes] | None]]) -> None:
        started = time.perf_counter()
        try:
            self._process(entries)
        except BaseException as exc:
            self.cell = None  # the mirror may be ahead of Redis now
            self._own_pending = True  # the batch stays pending and is read again first
            if isinstance(exc, Exception) and not isinstance(exc, (RedisError, DurabilityFailed, LeaseLost,
                                                                   PoisonCommand)):
                self._suspect(entries, exc)
            raise
        self._failing = (None, 0)
        if entries:
            took = time.perf_counter() - started
            self.metrics.last_duration.set(took / len(entries))
            self.metrics.batch_commands.observe(len(entries))
            self.metrics.batch_seconds.observe(took)

    def _suspect(self, entries: list[tuple[bytes, dict[bytes, bytes] | None]], exc: Exception) -> None:
        """An unexplained failure: retry one entry at a time; an entry that fails alone
        POISON_AFTER times is dead-lettered, so the partition never loops on it."""
        first = entries[0][0] if entries else None
        times = self._failing[1] + 1 if self._failing[0] == first else 1
        self._failing = (first, times)
        self._isolate = True
        if first is not None and len(entries) == 1 and times >= POISON_AFTER:
            self._dead[first] = f"failed {times} times: {type(exc).__name__}: {exc}"[:500]
            self._failing = (None, 0)

    def _parse(self, entries: list[tuple[bytes, dict[bytes, bytes] | None]]
               ) -> tuple[list[Command], list[DeadCommand]]:
        """The batch's commands, and the entries set aside (dead-lettered with the reason)."""
        commands: list[Command] = []
        dead: list[DeadCommand] = []

        def refuse(entry_id: bytes, fields: dict[bytes, bytes], metric: str, why: str) -> None:
            log.error("partition %d: entry %s dead-lettered: %s", self.partition, entry_id, why)
            self.metrics.failure(metric)
            route = refused_command_route(fields.get(b"command"), f"{metric}: {why}"[:500])
            refusal = None
            if route is not None:  # its owner hears why (an ExecutionReport/OrderCancelReject/BMR)
                cause = route.command_id or f"entry-{entry_id.decode(errors='replace')}"
                refusal = (self.clock.next(), Event(f"{cause}:refused", self.partition, -1, cause, route))
                self.metrics.event(str(EventType.COMMAND_REFUSED))
            dead.append(DeadCommand(entry_id, fields, why, refusal))

        for entry_id, fields in entries:
            fields = fields or {}
            if entry_id in self._dead:
                refuse(entry_id, fields, "poison-entry", self._dead.pop(entry_id))
                continue
            raw = fields.get(b"command")
            if raw is None:
                refuse(entry_id, fields, "empty-entry", "entry has no command field")
                continue
            try:
                cmd = parse_command(raw, self.partition_count)
            except ContractError as exc:
                refuse(entry_id, fields, "invalid-command", f"invalid command: {exc}")
                continue
            if cmd.partition != self.partition:
                refuse(entry_id, fields, "wrong-partition", f"command for partition {cmd.partition}")
                continue
            commands.append(cmd)
        return commands, dead

    def _process(self, entries: list[tuple[bytes, dict[bytes, bytes] | None]]) -> None:
        if is_cluster(self.client):
            self._process_on(None, entries)
            return
        # One connection for the batch: the fence's WATCH, taken with the dedup reads, must be
        # on the connection that sends the EXEC.
        with checked_out(self.client) as conn:
            self._process_on(conn, entries)

    def _process_on(self, conn: Any, entries: list[tuple[bytes, dict[bytes, bytes] | None]]) -> None:
        assert self.cell is not None
        commands, dead = self._parse(entries)
        # Steps 3 and 4: the dedup reads happen before the transaction, in one round trip —
        # with the lease's WATCH and check (standalone, Sentinel), so the commit is one more.
        lookups = self._dedup_keys(commands)
        if conn is not None:
            replies = self._fenced_lookup(conn, lookups)
        else:
            replies = self._read_many(lookups) if lookups else []
        self._point("after-reads")
        staged = self._match(commands, replies)
        self._point("before-exec")
        # memory: the batch's entries are acknowledged inside its own transaction. aof-replicated:
        # only once WAITAOF confirmed it (seed 000's order), so a batch whose durability failed
        # stays pending and is read again before anything new: nothing new is matched until the
        # datastore confirms what came before. A broker source acknowledges after, below.
        in_tx = self.source is None and self.durability.is_memory
        acked = self._commit(conn, staged, dead, [entry_id for entry_id, _ in entries] if in_tx else [])
        self._point("after-durability")
        if not acked and self.source is None:  # acknowledged now that the batch is durable:
            ids = [entry_id for entry_id, _ in entries]
            if conn is None:
                self._on_commit_connection(conn, "XACK", self.keys.commands, GROUP, *ids)
            else:
                # with the next read, in its round trip: with appendfsync always, every round
                # trip that writes waits for an fsync, and an XACK of its own was one more a batch
                self._durable_unacked += ids
        for cmd in commands:
            self._poison.pop(cmd.command_id, None)  # recorded as processed now: never seen again

    def _dedup_keys(self, commands: list[Command]) -> list[str]:
        """What steps 3 and 4 read: each command's processed-command record, then each
        PlaceOrder's accepted-order marker (``_match`` takes the replies in that order)."""
        keys = [self.keys.processed_command(c.command_id) for c in commands]
        return keys + [self.keys.accepted_order(c.order.order_id) for c in commands if isinstance(c, PlaceOrder)]

    def _match(self, commands: list[Command], replies: list[Any], in_flight: Batch | None = None
               ) -> list[StagedCommand]:
        """Steps 5–7 for a batch whose dedup reads came back (``replies``: processed-command
        records, then accepted-order markers of its PlaceOrders): apply each new command to the
        mirror and stage what it writes. ``in_flight``: the batch committed meanwhile, whose
        records those reads may not have seen (the pipelined loop)."""
        places = [c for c in commands if isinstance(c, PlaceOrder)]
        processed = dict(zip((c.command_id for c in commands), replies[: len(commands)]))
        accepted_by = dict(zip((c.order.order_id for c in places), replies[len(commands):]))
        if in_flight is not None:
            for order_id, command_id in in_flight.accepted.items():
                accepted_by[order_id] = accepted_by.get(order_id) or command_id
        staged: list[StagedCommand] = []
        seen: set[str] = set(in_flight.command_ids) if in_flight is not None else set()
        counted: Counter[tuple[str, str]] = Counter()  # metrics, counted per batch
        created: Counter[EventType] = Counter()  # (a member's ``.value`` is a slow property: read once a batch)
        for cmd in commands:
            if processed.get(cmd.command_id) is not None or cmd.command_id in seen:
                self.metrics.duplicate_commands.inc()
                self.metrics.command(cmd.kind, "duplicate")
                continue
            seen.add(cmd.command_id)
            if isinstance(cmd, PlaceOrder) and accepted_by.get(cmd.order.order_id) is not None:
                self.metrics.duplicate_orders.inc()
                log.warning("partition %d: skipping duplicate order identity %s (command %s, accepted by %s)",
                            self.partition, cmd.order.order_id, cmd.command_id, accepted_by[cmd.order.order_id])
                staged.append(StagedCommand(cmd.command_id, CommandResult("duplicate-order")))
                self.metrics.command(cmd.kind, "duplicate-order")
                continue
            outcome = self._apply(cmd)
            events = [(self.clock.next(), Event(f"{cmd.command_id}:{n}", self.partition, cmd.pair_id,
                                                 cmd.command_id, payload))
                      for n, payload in enumerate(outcome.events)]
            accepted = None
            if isinstance(cmd, PlaceOrder) and outcome.status != "rejected":
                accepted = cmd.order.order_id
                accepted_by[accepted] = cmd.command_id.encode()  # a second place in this batch is a duplicate
            staged.append(StagedCommand(cmd.command_id, outcome.result([e.event_id for _, e in events]),
                                        list(outcome.changes.values()), events, accepted))
            counted[(cmd.kind, outcome.status)] += 1
            for payload in outcome.events:
                created[payload.event_type] += 1

        for (kind, status), n in counted.items():
            self.metrics.command(kind, status, n)
        for event_type, n in created.items():
            self.metrics.event(event_type.value, n)
        return staged

    def _on_commit_connection(self, conn: Any, *command: Any) -> Any:
        """One command on the connection the commits go over (WAITAOF covers that client's
        writes): the batch's own ``conn``, or the cluster's node of the partition (None)."""
        if conn is None:
            return partition_command(self.client, self.keys, *command)
        return command_on(conn, *command)

    def _read_many(self, keys: list[str]) -> list[bytes | None]:
        """MGET, packed (the loop's own connection: no pool checkout on the hot path)."""
        [reply] = round_trip(self.client, [("MGET", *keys)])
        if isinstance(reply, Exception):
            raise reply
        return cast(list[bytes | None], reply)

    def _apply(self, cmd: Command) -> Outcome:
        """The cell's outcome, or a refusal for a command the cell failed on before."""
        assert self.cell is not None
        if cmd.command_id in self._poison:
            self.metrics.failure("cell-error")
            return Cell.refuse(cmd, Reason.CELL_ERROR)
        try:
            return self.cell.apply(cmd)
        except Exception as exc:  # noqa: BLE001 (a bug or an input the domain did not foresee)
            self._poison[cmd.command_id] = f"{type(exc).__name__}: {exc}"
            log.exception("partition %d: the cell failed on command %s", self.partition, cmd.command_id)
            raise PoisonCommand(f"command {cmd.command_id} failed: {type(exc).__name__}: {exc}") from exc

    def _commit(self, conn: Any, staged: list[StagedCommand], dead: list[DeadCommand], entry_ids: list[bytes]
                ) -> bool:
        """Step 8 and the durability wait: one MULTI/EXEC for the batch, fenced, acknowledging
        its entries, then WAITAOF. Returns whether the entries were acknowledged. ``conn``: the
        connection ``fenced_read`` left watching the lease (None: a cluster, fenced here)."""
        assert self.cell is not None
        d = self.durability
        waitaof = None if d.is_memory else (d.local_fsyncs, d.replica_fsyncs, d.timeout_ms)
        commands = commit_commands(self.keys, staged, self.cell.next_priority, dead,
                                   (GROUP, entry_ids), self.inboxes) if staged or dead else []
        try:
            if commands:
                waited = commit_fenced(self.client, self.keys, self.token, commands, waitaof) if conn is None \
                    else commit_watched(conn, commands, waitaof)
            elif waitaof is not None:  # only duplicates: still wait, as seed 000's step 3 does
                waited = wait_aof(partial(self._on_commit_connection, conn), *waitaof)
            else:
                waited = None
        except FencedOut as exc:
            self._lose(str(exc))
            raise LeaseLost(f"partition {self.partition}: {exc}") from None
        self._point("after-exec")
        if waited is not None and (waited[0] < d.local_fsyncs or waited[1] < d.replica_fsyncs):
            self.metrics.failure("durability")
            raise DurabilityFailed(f"WAITAOF {d.local_fsyncs} {d.replica_fsyncs} {d.timeout_ms} confirmed "
                                   f"local={waited[0]} replicas={waited[1]}")
        return bool(commands) and bool(entry_ids)  # acknowledged inside the transaction
