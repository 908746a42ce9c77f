"""Read-only access to stored sessions, for a local copy kept beside them (a standby's warm
FileStore, ``fixgw/warm_copy.py``).

A reader has no write operation and no fence: it can be handed to a process that does not hold
the dispatcher lock, and nothing it does changes what the writer stored. Its one script is
declared ``no-writes`` (the server refuses any write from it).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from datastore.connection import RedisClient, hash_of_bytes, is_cluster, text

from . import scripts
from .codec import SessionState, decode_record, decode_state, encode_seq_field
from .keys import CHUNK_SIZE, SessionKey, admin_audit, chunk_index
from .store import _translated

T = TypeVar("T")

PIPELINE_CHUNKS = 16  # chunks read per round trip


def records_digest(values: Iterable[bytes]) -> str:
    """What ``CHUNK_DIGESTS`` answers for a chunk holding ``values`` (in seqNum order)."""
    h = hashlib.sha1()
    for v in values:
        h.update(v)
    return h.hexdigest()


class StoreReader:
    """Stored sessions as they are now: states, the numbers committed ahead of sending, stored
    messages (raw, as the writer stored them), and per chunk a count and a digest."""

    def __init__(self, client: RedisClient) -> None:
        self.client = client
        self._cluster = is_cluster(client)
        self._digests = client.register_script(scripts.CHUNK_DIGESTS)

    def _read(self, operation: Callable[[], T]) -> T:
        with _translated():
            return operation()

    def _pipelined(self, commands: list[tuple[Any, ...]]) -> list[Any]:
        def run() -> list[Any]:
            pipe = self.client.pipeline(transaction=False)
            for command in commands:
                pipe.execute_command(*command)
            return list(pipe.execute())
        return self._read(run) if commands else []

    def states(self, sessions: list[SessionKey]) -> list[tuple[SessionState, set[int]]]:
        """Each session's state and the numbers committed but not yet known sent (which a
        later commit may still replace), in one round trip."""
        commands: list[tuple[Any, ...]] = []
        for s in sessions:
            commands += [("HGETALL", s.state), ("HKEYS", s.unsent)]
        replies = self._pipelined(commands)
        out = []
        for i, s in enumerate(sessions):
            raw, unsent = replies[2 * i], replies[2 * i + 1]
            out.append((decode_state(s.state, hash_of_bytes(_as_dict(raw))), {int(n) for n in unsent}))
        return out

    def records(self, session: SessionKey, first: int, last: int) -> Iterator[tuple[int, bytes, bytes]]:
        """(seqNum, record as stored, message body) for first <= seqNum <= last, in order; a
        number with nothing stored is left out. Each record is validated (``decode_record``)."""
        if last < first:
            return
        chunks = list(range(chunk_index(first), chunk_index(last) + 1))
        for at in range(0, len(chunks), PIPELINE_CHUNKS):
            batch = chunks[at:at + PIPELINE_CHUNKS]
            commands: list[tuple[Any, ...]] = []
            wanted: list[list[int]] = []
            for index in batch:
                seqs = list(range(max(first, index * CHUNK_SIZE), min(last, index * CHUNK_SIZE + CHUNK_SIZE - 1) + 1))
                wanted.append(seqs)
                commands.append(("HMGET", session.chunk(index), *(encode_seq_field(s) for s in seqs)))
            for index, seqs, values in zip(batch, wanted, self._pipelined(commands)):
                key = session.chunk(index)
                for seq, raw in zip(seqs, values):
                    if raw is not None:
                        yield seq, raw, decode_record(key, encode_seq_field(seq), raw).body

    def chunk_counts(self, session: SessionKey, indexes: list[int]) -> list[int]:
        """How many records each chunk holds."""
        return [int(n) for n in self._pipelined([("HLEN", session.chunk(i)) for i in indexes])]

    def chunk_digests(self, session: SessionKey, indexes: list[int]) -> list[str]:
        """Each chunk's ``records_digest``, computed by the server (one script call)."""
        if not indexes:
            return []
        keys = [session.chunk(i) for i in indexes]
        return [d.decode() if isinstance(d, bytes) else str(d) for d in self._read(lambda: self._digests(keys=keys))]


def audit_entries(client: RedisClient, namespace: str, count: int = 100) -> list[dict[str, str]]:
    """The last ``count`` operator actions of the namespace (``fixgw/admin.py``), oldest first."""
    out = []
    entries: list[Any] = list(client.xrevrange(admin_audit(namespace), count=count) or [])
    for entry_id, fields in reversed(entries):
        row = {text(k): text(v) for k, v in fields.items()}
        row["id"] = text(entry_id)
        out.append(row)
    return out


def _as_dict(raw: Any) -> dict[bytes, bytes]:
    """HGETALL through a pipeline's execute_command: a dict already, or a flat list."""
    if isinstance(raw, dict):
        return raw
    return dict(zip(raw[::2], raw[1::2]))
