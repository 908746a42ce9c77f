"""The Redis FIX session store, spoken in FIX terms: sessions, sequence numbers, messages.

Owns: loading a session, committing outbound messages with their state change, target
sequence numbers, resets, connection start. Every write passes the writer's ``Fence``
(locally: is my lock still held?) and then the owner-epoch check inside its script.
Knows nothing of QuickFIX; callers never see a Redis command.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from redis.client import Pipeline
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from . import scripts
from .codec import (
    OutboundRecord,
    StoreCorruption,
    SessionState,
    decode_record,
    decode_state,
    encode_seq_field,
    encode_state_field,
)
from .connection import RedisClient, is_cluster
from .errors import FencedWrite, NotReplicated, SequenceReuse, StoreError, StoreUnavailable
from .keys import CHUNK_SIZE, SessionKey, chunk_index

T = TypeVar("T")

LOAD_PIPELINE_CHUNKS = 16  # chunks fetched per round trip when loading a session


class Fence(Protocol):
    """What a writer proves before each write: the epoch it holds, still valid."""

    @property
    def epoch(self) -> int: ...

    def check(self) -> None:
        """Raise FencedWrite if this writer must stop writing."""


@dataclass(frozen=True, slots=True)
class FixedEpoch:
    """A fence for tools and tests that stamp sessions themselves (no lock renewal)."""

    epoch: int

    def check(self) -> None:
        return None


@dataclass(frozen=True, slots=True)
class LoadedSession:
    state: SessionState
    messages: list[OutboundRecord]  # every stored outbound message, by seqNum


def now_ns() -> int:
    return time.time_ns()


@contextmanager
def _translated() -> Iterator[None]:
    """Redis failures become the store's own errors, with the reason kept."""
    try:
        yield
    except ResponseError as exc:
        # A pipeline (replicaAcks, batched writes) reports "Command # N (...) of pipeline caused error: <reply>"
        text = str(exc).split("caused error: ", 1)[-1]
        if text.startswith("FENCED"):
            raise FencedWrite(text) from None
        if text.startswith("SEQREUSE"):
            raise SequenceReuse(text) from None
        raise StoreError(text) from exc
    except (RedisConnectionError, RedisTimeoutError) as exc:
        raise StoreUnavailable(f"Redis unreachable: {exc}") from exc


class SessionStore:
    """Seed 004's storage for the sessions of one writer (one dispatcher)."""

    def __init__(self, client: RedisClient, fence: Fence,
                 on_write: Callable[[float], None] | None = None,
                 replica_acks: int = 0, replica_timeout_ms: int = 1000) -> None:
        self.client = client
        self.fence = fence
        # WAIT for this many replicas after every write (same connection, same pipeline), so
        # a write acknowledged here survives the loss of the primary (replicaAcks setting).
        self.replica_acks = replica_acks
        self.replica_timeout_ms = replica_timeout_ms
        self._on_write = on_write  # observes each write's latency in seconds (metrics)
        self._commit = client.register_script(scripts.COMMIT_OUTBOUND)
        self._update = client.register_script(scripts.UPDATE_STATE)
        self._reset = client.register_script(scripts.RESET_SESSION)
        self._stamp = client.register_script(scripts.STAMP_OWNER)
        self._batch = client.register_script(scripts.COMMIT_BATCH)
        self._displacing = client.register_script(scripts.COMMIT_DISPLACING)
        self._claim = client.register_script(scripts.CLAIM_CLORDID)
        self._claim_append = client.register_script(scripts.CLAIM_AND_APPEND)
        self._forget = client.register_script(scripts.FORGET_CLORDID)

    # --- writes -----------------------------------------------------------------------

    def _write(self, fn: Callable[[Any], T]) -> T:
        """Run one write (``fn`` gets the client or pipeline to send it on), fenced, and
        replicated to ``replica_acks`` replicas when asked."""
        self.fence.check()
        started = time.perf_counter()
        with _translated():
            if self.replica_acks:
                pipe = self.client.pipeline(transaction=False)
                fn(pipe)
                pipe.execute_command("WAIT", self.replica_acks, self.replica_timeout_ms)
                result, acked = pipe.execute()
                if int(acked) < self.replica_acks:
                    raise NotReplicated(f"written on the primary, but only {acked} of {self.replica_acks} "
                                        f"replicas acknowledged within {self.replica_timeout_ms} ms")
            else:
                result = fn(self.client)
        if self._on_write is not None:
            self._on_write(time.perf_counter() - started)
        return result

    def stamp_owner(self, session: SessionKey) -> None:
        """Claim ``session`` for this writer's epoch; older epochs are refused from now on."""
        self._write(lambda c: self._stamp(client=c, keys=[session.owner, session.unsent], args=[self.fence.epoch]))

    def commit_outbound(self, session: SessionKey, record: OutboundRecord) -> bool:
        """Store one outbound message and advance senderSeqNum/lastSentSeqNum, atomically.

        Returns False when the identical message was already stored (a harmless replay).
        Raises SequenceReuse if a *different* message already holds that sequence number.
        """
        return self.commit_outbound_many(session, [record]) == 1

    def commit_outbound_many(self, session: SessionKey, records: list[OutboundRecord]) -> int:
        """Store several outbound messages (ascending seqNum) in one script: all or none."""
        if not records:
            return 0
        keys = [session.owner, session.state]
        args: list[Any] = [self.fence.epoch]
        for rec in records:
            keys.append(session.chunk_of(rec.seq_num))
            args += [encode_seq_field(rec.seq_num), rec.encode(), rec.seq_num]
        return int(self._write(lambda c: self._commit(client=c, keys=keys, args=args)))

    def commit_batch(self, session: SessionKey, deliveries: list[tuple[OutboundRecord, str, str, str]],
                     sent: Iterable[int] = ()) -> set[str]:
        """Group commit: ``(record, inbox id, order id, order view)`` for numbers continuing
        lastSentSeqNum, before any is sent; ``sent`` are numbers of earlier batches now sent.
        Returns the inbox ids already delivered — then nothing was written."""
        keys = [session.owner, session.state, session.inbox, session.orders, session.unsent]
        args: list[Any] = [self.fence.epoch, len(deliveries)]
        for rec, inbox_id, order_id, view in deliveries:
            keys.append(session.chunk_of(rec.seq_num))
            args += [encode_seq_field(rec.seq_num), rec.encode(), rec.seq_num, inbox_id, order_id, view]
        args += list(sent)
        reply = self._write(lambda c: self._batch(client=c, keys=keys, args=args))
        return {r.decode() if isinstance(r, bytes) else str(r) for r in reply or []}

    def commit_displacing(self, session: SessionKey, record: OutboundRecord, sent_up_to: int, inbox_id: str = "",
                          order_id: str = "", order_view: str = "") -> None:
        """Store ``record`` under a number a batch committed but nobody sent (see COMMIT_DISPLACING)."""
        keys = [session.owner, session.state, session.chunk_of(record.seq_num), session.inbox, session.orders,
                session.unsent]
        args = [self.fence.epoch, encode_seq_field(record.seq_num), record.encode(), record.seq_num, sent_up_to,
                inbox_id, order_id, order_view]
        self._write(lambda c: self._displacing(client=c, keys=keys, args=args))

    def claim_clordid(self, session: SessionKey, clordid: str, value: str, window_ms: int) -> bool:
        """Seed 002's idempotency check: True the first time a ClOrdID is seen in the window."""
        return int(self._write(lambda c: self._claim(client=c, keys=[session.owner, session.clordid(clordid)],
                                                   args=[self.fence.epoch, value, window_ms]))) == 1

    def claim_clordid_and_append(self, session: SessionKey, clordid: str, value: str, window_ms: int,
                                 stream: str, fields: dict[str, str]) -> bool:
        """``claim_clordid`` and, only for a first use, the append of ``fields`` to ``stream``,
        atomically (one round trip): either both happened or neither. ``stream`` must live on
        this store's datastore, and that datastore must not be a Cluster."""
        args: list[Any] = [self.fence.epoch, value, window_ms]
        for name, field_value in fields.items():
            args += [name, field_value]
        reply = self._write(lambda c: self._claim_append(client=c, keys=[session.owner, session.clordid(clordid), stream],
                                                         args=args))
        return reply not in (0, b"0")

    def clordid_record(self, session: SessionKey, clordid: str) -> str | None:
        with _translated():
            raw = self.client.get(session.clordid(clordid))
        return raw.decode() if raw is not None else None

    def forget_clordid(self, session: SessionKey, clordid: str) -> None:
        """Drop a claim (its request was refused after all); fenced like every session write."""
        self._write(lambda c: self._forget(client=c, keys=[session.owner, session.clordid(clordid)],
                                           args=[self.fence.epoch]))

    def order_views(self, session: SessionKey, order_ids: list[str]) -> list[str | None]:
        if not order_ids:
            return []
        with _translated():
            raw = self.client.hmget(session.orders, order_ids)
        return [r.decode() if r is not None else None for r in raw]

    def delivered_many(self, session: SessionKey, inbox_ids: list[str]) -> set[str]:
        """Which of ``inbox_ids`` the session's inbox already holds."""
        if not inbox_ids:
            return set()
        with _translated():
            flags = self.client.smismember(session.inbox, inbox_ids)
        return {i for i, flag in zip(inbox_ids, flags) if flag}

    def delivered(self, session: SessionKey, inbox_id: str) -> bool:
        with _translated():
            return bool(self.client.sismember(session.inbox, inbox_id))

    def _update_state(self, session: SessionKey, fields: dict[str, int]) -> None:
        args: list[Any] = [self.fence.epoch]
        for name, value in fields.items():
            args += [name, encode_state_field(name, value)]
        self._write(lambda c: self._update(client=c, keys=[session.owner, session.state], args=args))

    def set_next_target_seq_num(self, session: SessionKey, seq_num: int) -> None:
        """The next sequence number expected from the counterparty."""
        self._update_state(session, {"targetSeqNum": seq_num})

    def set_next_target_seq_nums(self, targets: dict[SessionKey, int]) -> None:
        """Several sessions' next expected numbers in one round trip (each write fenced)."""
        if not targets:
            return
        if is_cluster(self.client):  # redis-py's cluster pipeline refuses scripts: one write each
            for session, seq_num in targets.items():
                self.set_next_target_seq_num(session, seq_num)
            return

        def send(c: Any) -> Any:
            # EVALSHA by hand: redis-py's Script in a pipeline asks SCRIPT EXISTS on every
            # execute, one more round trip per flush (measured with py-spy).
            pipe = c if isinstance(c, Pipeline) else c.pipeline(transaction=False)
            for session, seq_num in targets.items():
                pipe.evalsha(self._update.sha, 2, session.owner, session.state, self.fence.epoch, "targetSeqNum",
                             encode_state_field("targetSeqNum", seq_num))
            return None if pipe is c else pipe.execute()

        try:
            self._write(send)
        except StoreError as exc:
            if not isinstance(exc.__cause__, NoScriptError):
                raise
            with _translated():
                self.client.script_load(scripts.UPDATE_STATE)  # first use, or a restarted server
            self._write(send)

    def set_next_sender_seq_num(self, session: SessionKey, seq_num: int) -> None:
        """Move senderSeqNum forward without a message (e.g. SequenceReset we issue)."""
        self._update_state(session, {"senderSeqNum": seq_num})

    def record_connection_start(self, session: SessionKey, when_ns: int | None = None) -> None:
        self._update_state(session, {"connectionStartTime": when_ns if when_ns is not None else now_ns()})

    def reset(self, session: SessionKey, session_start_ns: int | None = None, next_target: int = 1) -> int:
        """Start a new FIX session: drop every chunk wholesale, sequence numbers back to 1.

        ``next_target`` is for a reset by an inbound Logon that was already accepted (its
        own number is then consumed). Returns the number of chunk keys deleted.
        """
        start = encode_state_field("sessionStartTime", session_start_ns if session_start_ns is not None else now_ns())
        target = encode_state_field("targetSeqNum", next_target)
        for _ in range(5):
            state = self.load_state(session)
            top = max(state.last_sent_seq_num, state.sender_seq_num - 1)
            last_chunk = chunk_index(top)
            keys = [session.owner, session.state, session.unsent] + [session.chunk(i) for i in range(last_chunk + 1)]
            try:
                return int(self._write(lambda c: self._reset(client=c, keys=keys, args=[self.fence.epoch, start, last_chunk, target])))
            except StoreError as exc:
                if not str(exc).startswith("RETRY"):
                    raise
        raise StoreError(f"{session}: reset kept racing with writes; is another writer active?")

    # --- reads ------------------------------------------------------------------------

    def load_state(self, session: SessionKey) -> SessionState:
        with _translated():
            raw = self.client.hgetall(session.state)
        return decode_state(session.state, raw)

    def load(self, session: SessionKey) -> LoadedSession:
        """State plus every outbound message of the current session, chunk by chunk, pipelined."""
        state = self.load_state(session)
        top = max(state.last_sent_seq_num, state.sender_seq_num - 1)
        return LoadedSession(state, list(self.iter_messages(session, 1, top)))

    def iter_messages(self, session: SessionKey, first: int, last: int) -> Iterator[OutboundRecord]:
        """Stored messages with first <= seqNum <= last, in order, validated."""
        if last < first:
            return
        chunks = list(range(chunk_index(first), chunk_index(last) + 1))
        for batch in _batched(chunks, LOAD_PIPELINE_CHUNKS):
            with _translated():
                pipe = self.client.pipeline(transaction=False)
                for index in batch:
                    pipe.hgetall(session.chunk(index))
                replies = pipe.execute()
            for index, raw in zip(batch, replies):
                key = session.chunk(index)
                records = [decode_record(key, field, value) for field, value in raw.items()]
                for rec in sorted(records, key=lambda r: r.seq_num):
                    if rec.seq_num // CHUNK_SIZE != index:
                        raise StoreCorruption(key, str(rec.seq_num), f"seqNum belongs in chunk {rec.seq_num // CHUNK_SIZE}")
                    if first <= rec.seq_num <= last:
                        yield rec


def _batched(items: list[T], size: int) -> Iterable[list[T]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]
