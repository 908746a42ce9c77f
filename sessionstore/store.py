"""The Redis FIX session store, spoken in FIX terms: sessions, sequence numbers, messages.

Owns: loading a session, committing outbound messages with their state change, target
sequence numbers, resets, connection start. Every write passes the writer's ``Fence``
(locally: is my lock still held?) and then the owner-epoch check inside its script.
Knows nothing of QuickFIX; callers never see a Redis command.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, ReadOnlyError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from datastore.availability import Availability
from datastore.connection import RedisClient, checked_out, exchange, hash_of_bytes, is_cluster, text_or_none
from datastore.connection import round_trip as packed_round_trip

from . import scripts
from .codec import (
    OutboundRecord,
    SessionState,
    StoreCorruption,
    decode_record,
    decode_state,
    encode_seq_field,
    encode_state_field,
)
from .errors import (
    FencedWrite,
    NotReplicated,
    PartitionRelocating,
    SequenceReuse,
    StoreError,
    StoreRefusingWrites,
    StoreUnavailable,
    refuses_writes,
)
from .keys import CHUNK_SIZE, SessionKey, chunk_index

T = TypeVar("T")
Call = tuple[Any, ...]  # one Redis command, e.g. ("EVALSHA", sha, 2, key1, key2, arg...)

LOAD_PIPELINE_CHUNKS = 16  # chunks fetched per round trip when loading a session


class Fence(Protocol):
    """What a writer proves before each write: the epoch it holds, still valid."""

    @property
    def epoch(self) -> int: ...

    def check(self) -> None:
        """Raise FencedWrite if this writer must stop writing."""


@dataclass(frozen=True, slots=True)
class OrderIndex:
    """What a delivered message says about its order's records (see scripts._TRACK_ORDER):
    ``state`` 'open' keeps the ClOrdID record (OrigClOrdID lookups) while the order lives,
    'closed' starts its window and the retention of the order's view; ``replaced`` is a
    ClOrdID the order no longer answers to (a replace), whose record gets the window."""

    state: str = ""  # '' (nothing to track) | 'open' | 'closed'
    clordid: str = ""
    replaced: str = ""
    window_ms: int = 0


NO_INDEX = OrderIndex()


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
    except ReadOnlyError as exc:  # a demoted primary: the datastore is failing over
        raise StoreUnavailable(f"Redis is a replica now (failing over): {exc}") from exc
    except ResponseError as exc:
        error = store_error(exc)
        raise error from (exc if type(error) is StoreError else None)
    except (RedisConnectionError, RedisTimeoutError) as exc:
        raise StoreUnavailable(f"Redis unreachable: {exc}") from exc


def claimed(reply: Any) -> bool:
    """The reply of a claim call: True for a first use of the ClOrdID."""
    return reply not in (0, b"0")


def store_error(exc: ResponseError) -> StoreError:
    """An error reply as the store's own error (FENCED and SEQREUSE by name)."""
    # A redis-py pipeline reports "Command # N (...) of pipeline caused error: <reply>"
    text = str(exc).split("caused error: ", 1)[-1]
    if text.startswith("FENCED"):
        return FencedWrite(text)
    if text.startswith("SEQREUSE"):
        return SequenceReuse(text)
    if text.startswith("RELOCATING"):
        return PartitionRelocating(text)
    return StoreError(text)


class SessionStore:
    """Seed 004's storage for the sessions of one writer (one dispatcher)."""

    def __init__(self, client: RedisClient, fence: Fence,
                 on_write: Callable[[float], None] | None = None,
                 replica_acks: int = 0, replica_timeout_ms: int = 1000,
                 availability: Availability | None = None, replication_mark: str | None = None) -> None:
        """``availability``: how long an operation waits for the datastore to have a primary
        again (a failover) while the fence holds; none: it fails at once, as redis-py's own
        retries (maxAttempts) leave it."""
        self.client = client
        self.fence = fence
        self.availability = availability or Availability("session store", 0.0, (StoreUnavailable,))
        # WAIT for this many replicas after every write (same connection, same pipeline), so
        # a write acknowledged here survives the loss of the primary (replicaAcks setting).
        self.replica_acks = replica_acks
        self.replica_timeout_ms = replica_timeout_ms
        # Written just before each WAIT (GatewayKey.replication_mark): a WAIT after a write of
        # this connection's own covers every write the primary applied before it, the ones a
        # lost connection made included. Without it, a write retried on a new connection that
        # found its scripts' work already done wrote nothing, and WAIT on that connection
        # answered at once: "replicated", of a write only the old primary held (a split brain).
        self.replication_mark = replication_mark or "{fixgw}/replication-mark"
        self._on_write = on_write  # observes each write's latency in seconds (metrics)
        self._cluster = is_cluster(client)
        self._sources: dict[str, str] = {}  # sha → script, for reloading after NOSCRIPT
        self._commit = self._script(scripts.COMMIT_OUTBOUND)
        self._update = self._script(scripts.UPDATE_STATE)
        self._target_if_claimed = self._script(scripts.TARGET_IF_CLAIMED)
        self._reset = self._script(scripts.RESET_SESSION)
        self._stamp = self._script(scripts.STAMP_OWNER)
        self._batch = self._script(scripts.COMMIT_BATCH)
        self._displacing = self._script(scripts.COMMIT_DISPLACING)
        self._trim = self._script(scripts.TRIM_SESSION)
        self._claim = self._script(scripts.CLAIM_CLORDID)
        self._claim_append = self._script(scripts.CLAIM_AND_APPEND)
        self._next_sender = self._script(scripts.SET_NEXT_SENDER)
        self._reset_period = self._script(scripts.RESET_PERIOD)
        self._password = self._script(scripts.SET_PASSWORD)
        self._order_of_clordid = self._script(scripts.ORDER_OF_CLORDID)

    def _script(self, source: str) -> str:
        sha = hashlib.sha1(source.encode()).hexdigest()
        self._sources[sha] = source
        return sha

    def script_call(self, sha: str, keys: list[Any], args: list[Any]) -> Call:
        """One EVALSHA of a script of this store, to pass to ``write`` with other calls."""
        return ("EVALSHA", sha, len(keys), *keys, *args)

    # --- writes -----------------------------------------------------------------------

    def write(self, calls: list[Call], raise_on_error: bool = True, also_fenced_by: Iterable[Fence] = ()) -> list[Any]:
        """Send ``calls`` in one round trip, fenced, replicated to ``replica_acks`` replicas when
        asked; the replies in order. An error reply raises (translated: FencedWrite,
        SequenceReuse, StoreError) after every reply was read, or with ``raise_on_error=False``
        stands in its place, translated. ``also_fenced_by``: the fences of other stores whose
        calls ride along (``write_together``), each checked too.

        The hot path of the gateway (DESIGN §7): the commands are packed by hiredis and sent on
        one pooled connection, about a third of redis-py's per-command cost (the cell's commit
        does the same). Redis runs them in order, so a later call (a target number) never lands
        without the earlier ones (the commands it covers). A Cluster goes command by command.
        """
        self.fence.check()
        for fence in also_fenced_by:
            fence.check()
        started = time.perf_counter()
        replies = self._io(lambda: self._cluster_calls(calls) if self._cluster else self._packed_calls(calls))
        if self._on_write is not None:
            self._on_write(time.perf_counter() - started)
        replies = [store_error(r) if isinstance(r, ResponseError) else r for r in replies]
        if raise_on_error:
            for reply in replies:
                if isinstance(reply, StoreError):
                    raise reply
        return replies

    def _io(self, operation: Callable[[], T]) -> T:
        """``operation`` with Redis failures translated (``_translated``), held through a
        failover for as long as ``availability`` allows and the fence holds."""
        def translated() -> T:
            with _translated():
                return operation()

        return self.availability.call(translated, self.fence.check)

    def _packed_calls(self, calls: list[Call], replicated: bool = True) -> list[Any]:
        """``calls`` in one round trip on one pooled connection, their scripts loaded again if the
        server lost them; ``replicated``: a write, confirmed by ``replica_acks`` replicas."""
        replicated = replicated and bool(self.replica_acks)
        if replicated:
            calls = [*calls, ("INCR", self.replication_mark), ("WAIT", self.replica_acks, self.replica_timeout_ms)]
        with checked_out(self.client) as conn:
            def round_trip(todo: list[Call]) -> list[Any]:
                conn.connect()  # after a retry's disconnect: through Sentinel again, to the primary now
                replies = exchange(conn, todo)  # an error reply is kept in place: in step
                demoted = next((r for r in replies if isinstance(r, ReadOnlyError)), None)
                if demoted is not None:  # nothing was written: ask Sentinel for the primary again
                    raise demoted
                full = next((r for r in replies if isinstance(r, ResponseError) and refuses_writes(r)), None)
                if full is not None:  # memory or disk full: held (``availability``), then replayed
                    raise StoreRefusingWrites(f"the datastore refuses writes: {full}")
                return replies

            # redis-py's own retry on a dropped connection (the scripts recognise a replay).
            replies = conn.retry.call_with_retry(lambda: round_trip(calls), lambda _: conn.disconnect())
            missing = [i for i, r in enumerate(replies) if isinstance(r, NoScriptError)]
            if missing:  # a restarted or flushed server: load the scripts, run what did not run, in order
                for sha in {calls[i][1] for i in missing}:
                    conn.send_command("SCRIPT", "LOAD", self._sources[sha])
                    conn.read_response()
                for i, reply in zip(missing, round_trip([calls[i] for i in missing])):
                    replies[i] = reply
        if replicated:
            acked = replies.pop()
            replies.pop()  # the mark's INCR
            if not isinstance(acked, Exception) and int(acked) < self.replica_acks:
                raise NotReplicated(f"written on the primary, but only {acked} of {self.replica_acks} "
                                    f"replicas acknowledged within {self.replica_timeout_ms} ms")
        return replies

    def _cluster_calls(self, calls: list[Call]) -> list[Any]:
        # (replicaAcks are refused with a Cluster by the settings.)
        replies: list[Any] = []
        for call in calls:
            try:
                replies.append(self.client.execute_command(*call))
            except NoScriptError:
                self.client.script_load(self._sources[call[1]])
                replies.append(self.client.execute_command(*call))
            except ResponseError as exc:
                replies.append(exc)
        return replies

    def _eval(self, sha: str, keys: list[Any], args: list[Any]) -> Any:
        return self.write([self.script_call(sha, keys, args)])[0]

    def stamp_owner(self, session: SessionKey) -> None:
        """Claim ``session`` for this writer's epoch; older epochs are refused from now on."""
        self._eval(self._stamp, [session.owner, session.unsent], [self.fence.epoch])

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
        return int(self._eval(self._commit, keys, args))

    def commit_batch(self, session: SessionKey, deliveries: list[tuple[Any, ...]], sent: Iterable[int] = ()) -> set[str]:
        """Group commit: ``(record, inbox id, order id, order view[, OrderIndex])`` for numbers
        continuing lastSentSeqNum, before any is sent; ``sent`` are numbers of earlier batches
        now sent. Returns the inbox ids already delivered — then nothing was written."""
        return batch_outcome(self.write([self.commit_batch_call(session, deliveries, sent)])[0])

    def commit_batch_call(self, session: SessionKey, deliveries: list[tuple[Any, ...]], sent: Iterable[int] = (),
                          target: int | None = None) -> Call:
        """``commit_batch`` as a call, to write with other sessions' (``write_together``); its
        reply goes to ``batch_outcome``. ``target``: the next inbound number, stored with the
        batch when it is committed (not when the reply names deliveries found delivered)."""
        keys = [session.owner, session.state, session.inbox, session.orders, session.unsent, session.closed]
        window = max((d[4].window_ms for d in deliveries if len(d) > 4), default=0)
        args: list[Any] = [self.fence.epoch, len(deliveries), window,
                           "" if target is None else encode_state_field("targetSeqNum", target)]
        for rec, inbox_id, order_id, view, *more in deliveries:
            index = more[0] if more else NO_INDEX
            keys += [session.chunk_of(rec.seq_num), *self._index_keys(session, index)]
            args += [encode_seq_field(rec.seq_num), rec.encode(), rec.seq_num, inbox_id, order_id, view,
                     index.state, index.clordid, index.replaced]
        args += list(sent)
        return self.script_call(self._batch, keys, args)

    @staticmethod
    def _index_keys(session: SessionKey, index: OrderIndex) -> list[str]:
        # Unused slots name the owner key (every key of a script must be declared, and share the tag).
        return [session.clordid(index.clordid) if index.clordid else session.owner,
                session.clordid(index.replaced) if index.replaced else session.owner]

    def commit_displacing(self, session: SessionKey, record: OutboundRecord, sent_up_to: int, inbox_id: str = "",
                          order_id: str = "", order_view: str = "", index: OrderIndex = NO_INDEX) -> None:
        """Store ``record`` under a number a batch committed but nobody sent (see COMMIT_DISPLACING)."""
        keys = [session.owner, session.state, session.chunk_of(record.seq_num), session.inbox, session.orders,
                session.unsent, session.closed, *self._index_keys(session, index)]
        args = [self.fence.epoch, encode_seq_field(record.seq_num), record.encode(), record.seq_num, sent_up_to,
                inbox_id, order_id, order_view, index.state, index.clordid, index.replaced, index.window_ms]
        self._eval(self._displacing, keys, args)

    def trim_delivered(self, session: SessionKey, before_ms: int, limit: int = 1000) -> tuple[int, int]:
        """Retention: remove the views of orders closed before ``before_ms`` and the inbox
        entries committed before it, at most ``limit`` of each. Returns (views, entries) removed."""
        views, entries = self._eval(self._trim, [session.owner, session.inbox, session.orders, session.closed],
                                    [self.fence.epoch, before_ms, limit])
        return int(views), int(entries)

    def claim_clordid(self, session: SessionKey, clordid: str, value: str, window_ms: int) -> bool:
        """Seed 002's idempotency check: True the first time a ClOrdID is seen in the window."""
        return claimed(self.write([self.claim_call(session, clordid, value, window_ms)])[0])

    def claim_call(self, session: SessionKey, clordid: str, value: str, window_ms: int) -> Call:
        return self.script_call(self._claim, [session.owner, session.clordid(clordid)],
                                [self.fence.epoch, value, window_ms])

    def claim_clordid_and_append(self, session: SessionKey, clordid: str, value: str, window_ms: int,
                                 stream: str, fields: dict[str, bytes] | dict[str, str], guard: str) -> bool:
        """``claim_clordid`` and, only for a first use, the append of ``fields`` to ``stream``,
        atomically (one round trip): either both happened or neither. ``stream`` must live on
        this store's datastore, and that datastore must not be a Cluster. While the key
        ``guard`` exists, neither happens (PartitionRelocating)."""
        return claimed(self.write([self.claim_and_append_call(session, clordid, value, window_ms, stream,
                                                              fields, guard)])[0])

    def claim_and_append_call(self, session: SessionKey, clordid: str, value: str, window_ms: int,
                              stream: str, fields: dict[str, bytes] | dict[str, str], guard: str) -> Call:
        args: list[Any] = [self.fence.epoch, value, window_ms]
        for name, field_value in fields.items():
            args += [name, field_value]
        return self.script_call(self._claim_append, [session.owner, session.clordid(clordid), stream, guard], args)

    def clordid_record(self, session: SessionKey, clordid: str) -> str | None:
        return text_or_none(self._io(lambda: self.client.get(session.clordid(clordid))))

    def order_of_clordid(self, session: SessionKey, clordid: str) -> tuple[str | None, str | None]:
        """The ClOrdID's record and the stored view of the order it names (``ORDER_OF_CLORDID``),
        in one round trip; each None when absent."""
        calls = [self.script_call(self._order_of_clordid, [session.clordid(clordid), session.orders], [])]
        [reply] = self._io(lambda: self._cluster_calls(calls) if self._cluster
                           else self._packed_calls(calls, replicated=False))  # a read: nothing to confirm
        if isinstance(reply, Exception):
            raise store_error(reply) if isinstance(reply, ResponseError) else reply
        record, view = reply
        return text_or_none(record), text_or_none(view)

    def order_views(self, session: SessionKey, order_ids: list[str]) -> list[str | None]:
        return self.order_views_of([(session, order_ids)])[0]

    def order_views_of(self, wanted: list[tuple[SessionKey, list[str]]]) -> list[list[str | None]]:
        """``order_views`` of several sessions on this store's datastore in one round trip."""
        calls = [("HMGET", session.orders, *ids) for session, ids in wanted if ids]
        replies = self._io(lambda: packed_round_trip(self.client, calls)) if calls else []
        out: list[list[str | None]] = []
        at = 0
        for _, ids in wanted:
            if not ids:
                out.append([])
                continue
            reply = replies[at]
            at += 1
            if isinstance(reply, Exception):
                raise reply
            out.append([text_or_none(r) for r in reply])
        return out

    def all_order_views(self, session: SessionKey) -> dict[str, str]:
        """Every order view of the session (order id → view JSON)."""
        raw = hash_of_bytes(self._io(lambda: self.client.hgetall(session.orders)))
        return {k.decode(): v.decode() for k, v in raw.items()}

    def delivered_many(self, session: SessionKey, inbox_ids: list[str]) -> set[str]:
        """Which of ``inbox_ids`` the session's inbox already holds."""
        if not inbox_ids:
            return set()
        scores = self._io(lambda: self.client.zmscore(session.inbox, inbox_ids))
        return {i for i, score in zip(inbox_ids, scores) if score is not None}

    def delivered(self, session: SessionKey, inbox_id: str) -> bool:
        return self._io(lambda: self.client.zscore(session.inbox, inbox_id)) is not None

    def _update_state(self, session: SessionKey, fields: dict[str, int]) -> None:
        args: list[Any] = [self.fence.epoch]
        for name, value in fields.items():
            args += [name, encode_state_field(name, value)]
        self._eval(self._update, [session.owner, session.state], args)

    def set_next_sender_seq_num(self, session: SessionKey, seq_num: int) -> int:
        """An operator's next sender number: refused (SequenceReuse) unless it is above every
        number already sent. Returns the last number sent."""
        return int(self._eval(self._next_sender, [session.owner, session.state],
                              [self.fence.epoch, encode_state_field("senderSeqNum", seq_num)]))

    def set_password_hash(self, session: SessionKey, password_hash: str) -> None:
        """The session's new password hash (it replaces the configured one from now on)."""
        self._eval(self._password, [session.owner, session.password], [self.fence.epoch, password_hash])

    def password_hash(self, session: SessionKey) -> str | None:
        """The password hash the session's counterparty set, if it changed its password."""
        return text_or_none(self._io(lambda: self.client.get(session.password)))

    def set_next_target_seq_num(self, session: SessionKey, seq_num: int) -> None:
        """The next sequence number expected from the counterparty."""
        self._update_state(session, {"targetSeqNum": seq_num})

    def set_next_target_seq_nums(self, targets: dict[SessionKey, int]) -> None:
        """Several sessions' next expected numbers in one round trip (each write fenced)."""
        if targets:
            self.write(self.target_calls(targets))

    def target_calls(self, targets: dict[SessionKey, int]) -> list[Call]:
        return [self.script_call(self._update, [session.owner, session.state],
                                 [self.fence.epoch, "targetSeqNum", encode_state_field("targetSeqNum", seq_num)])
                for session, seq_num in targets.items()]

    def target_if_claimed_call(self, session: SessionKey, seq_num: int, claims: list[tuple[str, str]]) -> Call:
        """``session``'s next expected number, written only if every (ClOrdID, value) claim in
        ``claims`` holds that value (``TARGET_IF_CLAIMED``): the reply is 1 written, 0 not."""
        keys = [session.owner, session.state] + [session.clordid(clordid) for clordid, _ in claims]
        args = [self.fence.epoch, encode_state_field("targetSeqNum", seq_num)] + [value for _, value in claims]
        return self.script_call(self._target_if_claimed, keys, args)

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
                return int(self._eval(self._reset, keys, [self.fence.epoch, start, last_chunk, target]))
            except StoreError as exc:
                if not str(exc).startswith("RETRY"):
                    raise
        raise StoreError(f"{session}: reset kept racing with writes; is another writer active?")

    def start_period(self, session: SessionKey, period_start_ns: int, keep_ms: int = 0) -> bool:
        """A scheduled session's new period, exactly once: numbers back to 1, sessionStartTime the
        period's start, the previous period's chunks dropped (or kept ``keep_ms`` under their
        archive keys). Nothing is done (False) when the stored session began at or after the
        period's start: this period's already, or reset by a Logon within it."""
        start = encode_state_field("sessionStartTime", period_start_ns)
        for _ in range(5):
            state = self.load_state(session)
            if state.session_start_time is not None and state.session_start_time >= period_start_ns:
                return False
            stored = b"" if state.session_start_time is None else \
                encode_state_field("sessionStartTime", state.session_start_time)
            top = max(state.last_sent_seq_num, state.sender_seq_num - 1)
            last_chunk = chunk_index(top)
            keys: list[str] = [session.owner, session.state, session.unsent]
            for i in range(last_chunk + 1):
                keys += [session.chunk(i), session.archived_chunk(state.session_start_time or 0, i)]
            try:
                return int(self._eval(self._reset_period, keys, [self.fence.epoch, start, stored, last_chunk,
                                                                 keep_ms])) > 0
            except StoreError as exc:
                if not str(exc).startswith("RETRY"):
                    raise
        raise StoreError(f"{session}: new period kept racing with writes; is another writer active?")

    # --- reads ------------------------------------------------------------------------

    def load_state(self, session: SessionKey) -> SessionState:
        raw = hash_of_bytes(self._io(lambda: self.client.hgetall(session.state)))
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
            def read(chunks: list[int] = batch) -> list[Any]:
                pipe = self.client.pipeline(transaction=False)
                for index in chunks:
                    pipe.hgetall(session.chunk(index))
                return pipe.execute()

            replies = self._io(read)
            for index, raw in zip(batch, replies):
                key = session.chunk(index)
                records = [decode_record(key, field, value) for field, value in raw.items()]
                for rec in sorted(records, key=lambda r: r.seq_num):
                    if rec.seq_num // CHUNK_SIZE != index:
                        raise StoreCorruption(key, str(rec.seq_num), f"seqNum belongs in chunk {rec.seq_num // CHUNK_SIZE}")
                    if first <= rec.seq_num <= last:
                        yield rec


def batch_outcome(reply: Any) -> set[str]:
    """A group commit's reply (``commit_batch_call``): the inbox ids found delivered already
    (then nothing was written), or the error it stands for raised (SequenceReuse, FencedWrite,
    StoreError)."""
    if isinstance(reply, Exception):
        raise reply
    return {r.decode() if isinstance(r, bytes) else str(r) for r in reply or []}


def write_together(parts: list[tuple[SessionStore, list[Call]]]) -> list[list[Any]]:
    """Several stores' calls, one round trip per datastore: the stores of one gateway (order
    entry, drop copy) share theirs, so a dispatcher cycle's group commits of every session go
    together. Each store's fence is checked; each part's replies come back in order, error
    replies translated in place (``write(raise_on_error=False)``). A failed round trip raises
    StoreError, and no part of a datastore that failed was written by this call (a part of
    another datastore may have been)."""
    by_client: dict[int, list[int]] = {}
    for i, (store, _) in enumerate(parts):
        by_client.setdefault(id(store.client), []).append(i)
    out: list[list[Any]] = [[] for _ in parts]
    for indices in by_client.values():
        first = parts[indices[0]][0]
        calls = [call for i in indices for call in parts[i][1]]
        if not calls:
            continue
        others = {id(parts[i][0].fence): parts[i][0].fence for i in indices if parts[i][0].fence is not first.fence}
        replies = first.write(calls, raise_on_error=False, also_fenced_by=others.values())
        at = 0
        for i in indices:
            n = len(parts[i][1])
            out[i] = replies[at:at + n]
            at += n
    return out


def _batched(items: list[T], size: int) -> Iterable[list[T]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]
