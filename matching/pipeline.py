"""The conductor's pipelined commit loop (``Conductor.run`` on a standalone or Sentinel datastore,
nothing pending to work off).

Pipelined (``run``, standalone or Sentinel, nothing pending to work off): behind a full
batch k, batch k+1 is read on a second connection with a plain XREAD past k (it writes
nothing: no fsync, no pending list to replicate) and its dedup read is sent there just before
k's transaction goes out; k+1 is matched and staged while the datastore commits k, and sent in
the next turn, once k is confirmed, on the same connection, under a WATCH taken right after
k's EXEC. Its transaction moves the consumer group's cursor past it (XGROUP SETID, with the
entries-read count), so a read-ahead batch is delivered exactly when it is committed. Commits
stay in order, one at a time. Any failure drops k+1 with the mirror, and both are read again
(pending, or not yet past the cursor) before anything newer.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any, cast

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError, ResponseError

from datastore.connection import (
    RedisClient,
    command_on,
    new_connection,
    node_of,
    owned_connection,
    read_replies,
    send_commands,
    text,
)

from .config import Durability
from .contracts import (
    Command,
)
from .domain import Cell
from .errors import DurabilityFailed, LeaseLost, PoisonCommand
from .keys import PartitionKeys
from .metrics import ConductorMetrics
from .storage import (
    WAITAOF_SLICE_MS,
    Entries,
    FencedOut,
    Inboxes,
    commit_commands,
    fenced_read,
    group_entries_read,
    wait_aof,
)

GROUP = "matching-conductor"
# One active conductor per partition, so one consumer name: what a dead holder left
# pending is simply this consumer's pending list, read first by its successor.
CONSUMER = "conductor"


@dataclass
class Batch:
    """A batch matched and staged whose commit is not yet confirmed (the pipelined loop)."""

    entries: list[tuple[bytes, dict[bytes, bytes] | None]]
    commands: list[Command]  # parsed: their poison marks are dropped once committed
    writes: list[tuple[Any, ...]]  # the transaction's commands (``commit_commands``), maybe none
    command_ids: set[str]  # for the next batch's dedup: its reads may run before this commit
    accepted: dict[str, bytes]  # order id → command id that accepted it, likewise
    read_ahead: bool = False  # read past the group (XREAD): its commit moves the group's cursor
    entries_read: int | None = None  # the group's entries-read once committed, if known (``_stage``)


class PipelinedCommits:
    """Batch k+1 read, matched and staged while batch k commits; mixed into ``Conductor``, whose
    state and single-batch steps it uses (declared here for the type checker)."""

    client: RedisClient
    partition: int
    keys: PartitionKeys
    durability: Durability
    batch_size: int
    cell: Cell | None
    metrics: ConductorMetrics
    token: str
    inboxes: Inboxes | None
    _next_batch: Batch | None
    _reader: Any
    _durable_unacked: list[bytes]
    _wait_deadline: float
    _own_pending: bool
    _isolate: bool
    _failing: tuple[bytes | None, int]
    _poison: dict[str, str]
    _dead: dict[bytes, str]

    @property
    def has_lease(self) -> bool:
        raise NotImplementedError

    def _point(self, name: str) -> None:
        raise NotImplementedError

    def _lose(self, why: str) -> None:
        raise NotImplementedError

    def acknowledge_durable(self) -> None:
        raise NotImplementedError

    def _suspect(self, entries: list[tuple[bytes, dict[bytes, bytes] | None]], exc: Exception) -> None:
        raise NotImplementedError

    def _read(self, stream: str, start: str, count: int, block_ms: int | None = None) -> Entries:
        raise NotImplementedError

    def _read_entries(self, replies: list[Any]) -> Entries:
        raise NotImplementedError

    def _parse(self, entries: list[tuple[bytes, dict[bytes, bytes] | None]]) -> Any:
        raise NotImplementedError

    def _dedup_keys(self, commands: list[Command]) -> list[str]:
        raise NotImplementedError

    def _match(self, commands: list[Command], replies: list[Any], in_flight: Batch | None = None) -> Any:
        raise NotImplementedError

    def _pipelines(self) -> Any | None:
        """The connection the pipelined loop commits on, or None for one batch at a time: a
        command stream on a standalone or Sentinel datastore, the loop's own connection held
        (``run``), and nothing unusual to work off first (own pending entries, isolation of a
        failing entry, entries to dead-letter)."""
        if self._own_pending or self._isolate or self._dead:
            return None
        return owned_connection(self.client)

    def _step_pipelined(self, conn: Any, stream: str, block_ms: int) -> int:
        """Read batch k+1 on a second connection (past the group: ``_send_read_ahead``), send
        its dedup read there and batch k's transaction right behind it, then match and stage
        k+1 while the datastore works on k (the transaction, the fsyncs; in aof-replicated
        mode WAITAOF goes out once k's EXEC has answered, and the replica's part overlaps too
        when k+1's reads came back first); then read k's replies. The order of commits is
        unchanged: k+1 is sent only once k is confirmed, in the next step, on the same
        connection, fenced by a WATCH taken right after k's EXEC. k+1's dedup reads run before
        k's EXEC: k's command and order ids count as processed for it. If k fails, k+1
        (matched on top of it) is dropped with the mirror; neither moved the group's cursor
        past it nor was acknowledged, so both are read again before anything newer."""
        started = time.perf_counter()
        batch = self._next_batch
        self._next_batch = None
        following: Batch | None = None
        try:
            if batch is None:  # the pipeline is empty: the first batch is read and fenced as usual
                entries = self._read(stream, ">", self.batch_size, block_ms)
                if not entries:
                    return 0
                batch = self._stage(entries, partial(self._fenced_lookup, conn), None, read_ahead=False)
            self._point("before-exec")
            # Read ahead only behind a full batch: one that drained the stream says the next read
            # would most likely find nothing, and at low rates that read was one round trip
            # more per order (unloaded p50 about +0.25 ms, 3 alternating runs at 100 orders/s).
            failed: BaseException | None = None
            entries = []
            entries_read: int | None = None
            if len(batch.entries) >= self.batch_size:
                try:
                    entries, entries_read = self._read_ahead_replies(self._send_read_ahead(stream, batch, conn), batch)
                except BaseException as exc:  # noqa: BLE001 (k is still committed, then this is raised)
                    failed = exc
            sent: list[int | None] = []  # k's transaction: None while handed to the socket, then its reply count

            def lookup_then_commit(keys: list[str]) -> list[Any]:
                """k+1's dedup read goes out just before k's transaction: the server answers it
                first instead of after k's EXEC (and, aof-replicated, its fsync), and k+1 is
                matched while k commits."""
                with self._on_reader() as reader:
                    if keys:
                        send_commands(reader, [("MGET", *keys)])
                    sent.append(None)
                    sent[0] = self._send_commit(conn, batch)
                    [replies] = read_replies(reader, 1) if keys else [[]]
                if isinstance(replies, Exception):
                    raise replies
                return cast(list[Any], replies)

            if failed is None and entries:
                try:
                    following = self._stage(entries, lookup_then_commit, batch, read_ahead=True,
                                            entries_read=entries_read)
                except BaseException as exc:  # noqa: BLE001 (likewise)
                    failed, following = exc, None
            if not sent:
                sent.append(self._send_commit(conn, batch))
            expected = sent[0]
            if expected is None:
                # Sending k's transaction failed: never again on this connection, which redis-py
                # would reconnect without the WATCH that fences it. k stays pending.
                assert failed is not None
                raise failed
            self._confirm(conn, batch, expected)
            if failed is not None:
                if isinstance(failed, Exception) and not isinstance(failed, (RedisError, PoisonCommand)):
                    self._suspect(entries, failed)
                raise failed
        except BaseException:
            self.cell = None  # the mirror may be ahead of Redis now
            self._own_pending = True  # what was read stays pending and is read again first
            raise
        self._next_batch = following
        self._failing = (None, 0)
        took = time.perf_counter() - started
        self.metrics.last_duration.set(took / len(batch.entries))
        self.metrics.batch_commands.observe(len(batch.entries))
        self.metrics.batch_seconds.observe(took)
        return len(batch.entries)

    def _stage(self, entries: list[tuple[bytes, dict[bytes, bytes] | None]],
               lookup: Callable[[list[str]], list[Any]], in_flight: Batch | None, *, read_ahead: bool,
               entries_read: int | None = None) -> Batch:
        """Parse, look up and match ``entries`` into a batch ready to commit. ``read_ahead``:
        they were read past the consumer group (``_send_read_ahead``), so the commit itself
        moves the group's cursor past them, fenced like the rest of it, with the group's
        entries-read count when known (``entries_read``, with them: operators' XINFO lag stays
        exact; unknown, Valkey estimates it again at the next group read); otherwise they were
        delivered to us and are acknowledged (memory: in the commit; aof-replicated: once
        durable, with the next read)."""
        assert self.cell is not None
        commands, dead = self._parse(entries)
        replies = lookup(self._dedup_keys(commands))
        self._point("after-reads")
        staged = self._match(commands, replies, in_flight)
        acked = [] if read_ahead or not self.durability.is_memory else [entry_id for entry_id, _ in entries]
        writes = commit_commands(self.keys, staged, self.cell.next_priority, dead, (GROUP, acked),
                                 self.inboxes) if staged or dead else []
        if read_ahead:
            count = () if entries_read is None else ("ENTRIESREAD", entries_read)
            writes.append(("XGROUP", "SETID", self.keys.commands, GROUP, entries[-1][0], *count))
        accepted = {s.accepted_order: s.command_id.encode() for s in staged if s.accepted_order}
        return Batch(entries, commands, writes, {c.command_id for c in commands}, accepted, read_ahead,
                      entries_read)

    def _fenced_lookup(self, conn: Any, keys: list[str]) -> list[Any]:
        """WATCH the lease, check it, and MGET ``keys``, on the commit connection."""
        try:
            read = fenced_read(conn, self.keys, self.token, *([("MGET", *keys)] if keys else []))
        except FencedOut as exc:
            self._lose(str(exc))
            raise LeaseLost(f"partition {self.partition}: {exc}") from None
        replies = read[0] if keys else []
        if isinstance(replies, Exception):
            raise replies
        return cast(list[Any], replies)

    @contextmanager
    def _on_reader(self) -> Iterator[Any]:
        """The second connection (opened on first use; ``checked_out`` would hand back the
        commit connection). After any error it is disconnected, so its next use starts on a
        clean socket, never behind an unread reply."""
        if self._reader is None:
            self._reader = new_connection(self.client)
        try:
            self._reader.connect()
            yield self._reader
        except BaseException:
            self._reader.disconnect()
            raise

    def _send_read_ahead(self, stream: str, behind: Batch, conn: Any) -> int:
        """Ask for the entries after ``behind``'s, not waiting for any, on the second connection
        (behind the XACK of a durable batch, as ``_read``). A plain XREAD, not XREADGROUP: it
        writes nothing, so in ``aof-replicated`` mode it costs no fsync and no replication of a
        pending list (XREADGROUP propagates an XCLAIM an entry: measured, the read-ahead's round
        trip was ~18 µs a command there), and the batch's own commit moves the group's cursor
        past it (``XGROUP SETID`` in the transaction; ``_stage``). A batch dropped before its
        commit was never delivered: the next read of ``>`` finds it again. Returns how many
        replies to read (``_read_ahead_replies``). Behind a batch delivered through the group,
        the group's entries-read count is asked for too (it counts ``behind``'s entries then,
        and a read-ahead batch adds its own: the stream's entries are never deleted ahead of
        the cursor)."""
        ack = [("XACK", stream, GROUP, *self._durable_unacked)] if self._durable_unacked else []
        count = [("XINFO", "GROUPS", stream)] if behind.entries_read is None else []
        with self._on_reader() as reader:
            if node_of(reader) != node_of(conn):
                # In a failover the two connections can reach different nodes (a restarted old
                # primary, while a Sentinel still names it): dedup records read elsewhere than
                # the commits go would let a processed command through again.
                raise RedisConnectionError(f"partition {self.partition}: the read-ahead reached {node_of(reader)}, "
                                           f"the commits go to {node_of(conn)}")
            return send_commands(reader, [*ack, *count, ("XREAD", "COUNT", self.batch_size, "STREAMS", stream,
                                                      behind.entries[-1][0])])

    def _read_ahead_replies(self, expected: int, behind: Batch) -> tuple[Entries, int | None]:
        """The entries read ahead, and the group's entries-read once they are committed."""
        with self._on_reader() as reader:
            replies = read_replies(reader, expected)
        entries = self._read_entries(replies)
        known = behind.entries_read if behind.entries_read is not None else group_entries_read(replies[-2], GROUP)
        return entries, None if known is None else known + len(entries)

    def _send_commit(self, conn: Any, batch: Batch) -> int:
        """Batch k's transaction (or, with only duplicates, the XACK of its entries in memory
        mode) — sent, not waited for; in memory mode WATCH and GET of the lease for k+1 follow
        in the same packet. Returns how many replies to read."""
        d = self.durability
        commands: list[tuple[Any, ...]] = []
        if batch.writes:
            commands += [("MULTI",), *batch.writes, ("EXEC",)]
        elif d.is_memory:
            commands.append(("XACK", self.keys.commands, GROUP, *[entry_id for entry_id, _ in batch.entries]))
        if not d.is_memory:
            # aof-replicated: WAITAOF goes out only once the transaction's reply is read
            # (``_send_wait``), in ``wait_aof``'s short slices. WAITAOF sent with the EXEC, or
            # while other writes of ours reached the replica, missed its first slice most of
            # the time (a replica's ack can report the fsynced offset from before the write it
            # waits for; one WAITAOF for the whole timeout then sat out a second): measured on
            # Valkey 9.1, 7–8k commands/s that way against 11–14k this way.
            return send_commands(conn, commands) if commands else 0
        return send_commands(conn, [*commands, ("WATCH", self.keys.conductor_lease), ("GET", self.keys.conductor_lease)])

    def _send_wait(self, conn: Any) -> int:
        """WAITAOF (a first slice of ``wait_aof``'s: the rest, if needed, when its reply is
        read), then WATCH and GET of the lease for the next batch."""
        d = self.durability
        self._wait_deadline = time.monotonic() + d.timeout_ms / 1000
        return send_commands(conn, [("WAITAOF", d.local_fsyncs, d.replica_fsyncs, min(WAITAOF_SLICE_MS, d.timeout_ms)),
                                 ("WATCH", self.keys.conductor_lease), ("GET", self.keys.conductor_lease)])

    def _confirm(self, conn: Any, batch: Batch, expected: int) -> None:
        """Batch k's transaction is sent (``expected`` replies): in aof-replicated mode, once
        its EXEC has answered, WAITAOF (``_send_commit``: why not sooner); then its replies."""
        early: list[Any] = []
        if not self.durability.is_memory:
            early, expected = read_replies(conn, expected), self._send_wait(conn)
        self._receive_commit(conn, batch, early, expected)

    def _receive_commit(self, conn: Any, batch: Batch, early: list[Any], expected: int) -> None:
        """Batch k's replies (``early``: those already read — the transaction's, in
        aof-replicated mode): its transaction applied, durable as the policy asks, the lease
        still ours. Raises as the one-batch path does."""
        d = self.durability
        replies = [*early, *read_replies(conn, expected)]  # ..., WATCH's +OK, GET's holder
        at = 0
        if batch.writes:
            at = len(batch.writes) + 2
            queued, result = replies[1:at - 1], replies[at - 1]
            if isinstance(result, Exception):
                refused = [r for r in queued if isinstance(r, ResponseError)]
                raise ResponseError(f"transaction aborted: {result}; queued errors: {refused[:1]}")
            if result is None:
                self._lose("lease changed during the commit (WATCH)")
                raise LeaseLost(f"partition {self.partition}: lease changed during the commit (WATCH)")
            errors = [r for r in result if isinstance(r, Exception)]
            if errors:
                raise ResponseError(f"{len(errors)} commands failed inside EXEC: {errors[0]}")
        elif d.is_memory:
            at = 1
            if isinstance(replies[0], Exception):
                raise replies[0]
        self._point("after-exec")
        if not d.is_memory:
            waited = replies[at]
            if isinstance(waited, Exception):
                raise waited
            if int(waited[0]) < d.local_fsyncs or int(waited[1]) < d.replica_fsyncs:
                left_ms = int((self._wait_deadline - time.monotonic()) * 1000)
                if left_ms > 0:  # the next slices (``wait_aof``): nothing else is in flight on conn now
                    waited = wait_aof(partial(command_on, conn), d.local_fsyncs, d.replica_fsyncs, left_ms)
            if int(waited[0]) < d.local_fsyncs or int(waited[1]) < d.replica_fsyncs:
                self.metrics.failure("durability")
                raise DurabilityFailed(f"WAITAOF {d.local_fsyncs} {d.replica_fsyncs} {d.timeout_ms} confirmed "
                                       f"local={waited[0]} replicas={waited[1]}")
            if not batch.read_ahead:  # (a read-ahead batch's commit moved the group's cursor itself)
                self._durable_unacked += [entry_id for entry_id, _ in batch.entries]  # with the next read
        self._point("after-durability")
        for cmd in batch.commands:
            self._poison.pop(cmd.command_id, None)  # recorded as processed now: never seen again
        holder = replies[-1]
        if holder is None or isinstance(holder, Exception) or text(holder) != self.token:
            self._lose(f"lease held by {holder!r}")
            raise LeaseLost(f"partition {self.partition}: lease held by {holder!r}")

    def _watch_again(self, conn: Any) -> None:
        """WATCH the lease anew for the staged batch (after a renewal of our own touched it)."""
        self._fenced_lookup(conn, [])

    def finish(self) -> None:
        """On a clean stop: commit the staged batch, then acknowledge what waits for a read."""
        conn = owned_connection(self.client)
        if self._next_batch is not None and conn is not None and self.has_lease:
            batch, self._next_batch = self._next_batch, None
            self._confirm(conn, batch, self._send_commit(conn, batch))
        self._next_batch = None
        self.acknowledge_durable()

