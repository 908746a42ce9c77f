"""QuickFIX's FileStore kept in step with Redis while the gateway stands by, so that taking over
writes only what changed (DESIGN §4: the local copy is disposable; Redis is the truth).

A standby tails what the active gateway commits — reads only (``StoreReader``), never a write —
and appends it to each session's ``.body`` and ``.header`` exactly as QuickFIX writes them
(``filestore.py``). On taking the lock it stamps the sessions (the former holder is fenced from
then on) and checks its copy against Redis before QuickFIX loads it:

- the session's start time (a reset starts the copy again) and its last number;
- a chunk (``/store/<n>``, 1,024 numbers) that no later commit can change — every number in
  it below the unsent ones (group commit) and the last sent — is sealed: as read, when it was
  read whole once it was so, or else once the server's digest of it matched the copy's; at
  takeover its count is checked;
- every other chunk the copy holds is checked by its digest, computed by the server.

From the first chunk that does not match, the copy is dropped and read again from Redis. So the
work at takeover is a round trip, a digest of the last chunk or two per session, and what was
committed since the last poll — not every message the sessions ever stored.
"""

from __future__ import annotations

import hashlib
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sessionstore import SessionKey, SessionState
from sessionstore.keys import CHUNK_SIZE, chunk_index
from sessionstore.reader import StoreReader

from .filestore import creation_time_text, hold_back_header

log = logging.getLogger("fixgw.warm_copy")

APPEND_BATCH = 16_384  # records written to the files at a time (bounded memory for any session)
DIGEST_CHUNKS_PER_CALL = 4  # ~1 ms of the server's time per chunk of 1,024 reports
SEAL_PER_CATCH_UP = 64  # chunks sealed per catch-up: a standby that starts beside a long session
#                     seals its history over a few polls, never in one long stretch


@dataclass
class _Chunk:
    """What the copy holds of one ``/store/<n>``: where it starts in the files, how many records,
    the digest of their stored values so far, and whether it was verified once complete."""

    body_at: int
    header_at: int
    count: int = 0
    top: int = 0  # highest number copied into it
    digest: Any = field(default_factory=hashlib.sha1)
    sealed: bool = False


class SessionCopy:
    """One session's FileStore files (``prefix`` = ``BeginString-Sender-Target``) in ``directory``."""

    def __init__(self, directory: Path, prefix: str, key: SessionKey) -> None:
        self.key = key
        self.prefix = prefix
        self.held_back_below = 0  # after ``finish``: QuickFIX holds no entry below this number (0: all)
        self.paths = {suffix: directory / f"{prefix}.{suffix}" for suffix in ("body", "header", "seqnums", "session")}
        directory.mkdir(parents=True, exist_ok=True)
        self.start_time: int | None = None  # the session start the copy belongs to
        self.top = 0  # highest number copied
        self.chunks: dict[int, _Chunk] = {}
        self._clear()

    @property
    def count(self) -> int:
        return sum(c.count for c in self.chunks.values())

    def _clear(self) -> None:
        for suffix in ("body", "header"):
            self.paths[suffix].write_bytes(b"")
        self.top = 0
        self.chunks = {}

    def _sizes(self) -> tuple[int, int]:
        return self.paths["body"].stat().st_size, self.paths["header"].stat().st_size

    def _drop_from(self, index: int) -> None:
        """Forget chunk ``index`` and every later one: the files end where it began."""
        dropped = sorted(i for i in self.chunks if i >= index)
        if not dropped:
            return
        first = self.chunks[dropped[0]]
        os.truncate(self.paths["body"], first.body_at)
        os.truncate(self.paths["header"], first.header_at)
        for i in dropped:
            del self.chunks[i]
        self.top = max((c.top for c in self.chunks.values()), default=0)

    def _append(self, records: list[tuple[int, bytes, bytes]]) -> None:
        """Stored records (number, stored value, message) after ``top``, in order."""
        if not records:
            return
        body_at, header_at = self._sizes()
        bodies = bytearray()
        header = bytearray()
        for seq, raw, body in records:
            index = chunk_index(seq)
            chunk = self.chunks.get(index)
            if chunk is None:
                chunk = self.chunks[index] = _Chunk(body_at + len(bodies), header_at + len(header))
            chunk.count += 1
            chunk.top = seq
            chunk.digest.update(raw)
            header += b"%d,%d,%d " % (seq, body_at + len(bodies), len(body))
            bodies += body
        with open(self.paths["body"], "ab") as f:
            f.write(bodies)
        with open(self.paths["header"], "ab") as f:
            f.write(header)
        self.top = records[-1][0]

    def _restart_if_reset(self, state: SessionState) -> None:
        if state.session_start_time != self.start_time:
            if self.start_time is not None:
                log.info("%s: the session was reset; the local copy starts again", self.key)
            self._clear()
            self.start_time = state.session_start_time

    def catch_up(self, reader: StoreReader, state: SessionState, unsent: set[int]) -> int:
        """Copy what was committed since the last call, and seal the chunks that can no longer
        change. Returns how many records were copied."""
        self._restart_if_reset(state)
        last = _last_number(state)
        if last < self.top:  # fewer than the copy holds (a datastore failover lost the last writes)
            self._drop_from(chunk_index(last + 1))
        changeable_from = min([last + 1, *unsent])
        before = set(self.chunks)
        copied = self._copy(reader, last)
        # A chunk read whole now, below every number a later commit may replace (as the state
        # read before it says: new unsent numbers only ever come above lastSentSeqNum), holds
        # what it will always hold: sealed as read. A chunk read in part before is checked
        # against the server's digest once it can no longer change.
        for i, c in self.chunks.items():
            if i not in before and _whole_below(i, changeable_from):
                c.sealed, c.digest = True, None
        self._seal(reader, changeable_from)
        return copied

    def _copy(self, reader: StoreReader, last: int) -> int:
        """Append what Redis holds after ``top`` up to ``last``, a batch at a time."""
        copied = 0
        batch: list[tuple[int, bytes, bytes]] = []
        for record in reader.records(self.key, self.top + 1, last):
            batch.append(record)
            if len(batch) >= APPEND_BATCH:
                self._append(batch)
                copied, batch = copied + len(batch), []
        self._append(batch)
        return copied + len(batch)

    def _seal(self, reader: StoreReader, changeable_from: int) -> None:
        """Verify, once, each whole chunk below ``changeable_from`` (the first number a later
        commit may still replace) against the server's digest of it."""
        ready = [i for i, c in sorted(self.chunks.items())
                 if not c.sealed and _whole_below(i, changeable_from)][:SEAL_PER_CATCH_UP]
        for i, digest in zip(ready, digests(reader, self.key, ready)):
            if self.chunks[i].digest.hexdigest() != digest:
                log.warning("%s: chunk %d of the local copy differs from Redis; copied again", self.key, i)
                self._drop_from(i)
                return
            self.chunks[i].sealed = True
            self.chunks[i].digest = None  # (no longer needed)

    def verify(self, reader: StoreReader) -> int | None:
        """The first chunk of the copy that does not match Redis (None: all do). Sealed chunks by
        their count, the others by their digest."""
        sealed = [i for i, c in sorted(self.chunks.items()) if c.sealed]
        open_ = [i for i, c in sorted(self.chunks.items()) if not c.sealed]
        wrong = [i for i, n in zip(sealed, reader.chunk_counts(self.key, sealed)) if n != self.chunks[i].count]
        wrong += [i for i, d in zip(open_, digests(reader, self.key, open_))
                  if d != self.chunks[i].digest.hexdigest()]
        return min(wrong, default=None)

    def finish(self, reader: StoreReader, state: SessionState, preload: int = 0) -> int:
        """Make the copy exactly what Redis holds (called once the session is stamped: nobody
        else writes it now), with its sequence numbers and start time. ``preload``: when the
        copy holds more, QuickFIX is given only the entries of the last chunks holding at least
        that many (``hold_back_header``; ``held_back_below`` says from which number). Returns how
        many records were copied now."""
        self._restart_if_reset(state)
        last = _last_number(state)
        if last < self.top:
            self._drop_from(chunk_index(last + 1))
        copied = self._copy(reader, last)
        wrong = self.verify(reader)
        if wrong is not None:
            log.warning("%s: the local copy differs from Redis from chunk %d on; copied again from there",
                        self.key, wrong)
            self._drop_from(wrong)
            copied += self._copy(reader, last)
        assert state.session_start_time is not None, "a session is reset (started) before it is served"
        self.paths["seqnums"].write_bytes(f"{state.sender_seq_num:020d} : {state.target_seq_num:020d}".encode())
        self.paths["session"].write_bytes(creation_time_text(state.session_start_time).encode())
        self.held_back_below = 0
        if preload and self.count > preload:
            first = min(i for i in self.chunks if i >= chunk_index(max(1, self.top - preload)))
            if first > min(self.chunks):
                hold_back_header(self.paths["header"].parent, self.prefix, self.chunks[first].header_at)
                self.held_back_below = first * CHUNK_SIZE
        return copied


def digests(reader: StoreReader, key: SessionKey, indexes: list[int]) -> list[str]:
    """The server's digests of ``indexes``, a few chunks per script call: a call runs alone on
    the server, and the active gateway's commits wait behind it."""
    out: list[str] = []
    for at in range(0, len(indexes), DIGEST_CHUNKS_PER_CALL):
        out += reader.chunk_digests(key, indexes[at:at + DIGEST_CHUNKS_PER_CALL])
    return out


def _whole_below(index: int, number: int) -> bool:
    """Every number of chunk ``index`` is below ``number``."""
    return (index + 1) * CHUNK_SIZE <= number


def _last_number(state: SessionState) -> int:
    """The highest number that may hold a stored message (as ``SessionStore.load`` reads)."""
    return max(state.last_sent_seq_num, state.sender_seq_num - 1)


class WarmCopies:
    """Every session's copy, brought up to date together (one round trip for their states)."""

    def __init__(self, reader: StoreReader, copies: dict[SessionKey, SessionCopy]) -> None:
        self.reader = reader
        self.copies = copies

    def summary(self) -> str:
        """What the copies hold, for /ready while standing by."""
        return f"{sum(c.count for c in self.copies.values())} stored messages of {len(self.copies)} sessions"

    def catch_up(self) -> int:
        keys = list(self.copies)
        copied = 0
        for key, (state, unsent) in zip(keys, self.reader.states(keys)):
            copied += self.copies[key].catch_up(self.reader, state, unsent)
        return copied
