"""A standby's local copy of the stored sessions (``fixgw/warm_copy.py``), against real Valkey:
kept in step while a writer commits, made exactly what Redis holds at takeover whatever changed
under it, and never a write."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.exceptions import NoPermissionError

from datastore.connection import connect
from datastore.embedded import ValkeyProcess
from datastore.settings import RedisEndpoint
from fixgw.filestore import complete_header, write_session
from fixgw.fixmsg import filled_body
from fixgw.warm_copy import SessionCopy
from sessionstore import FixedEpoch, OutboundRecord, SessionKey, SessionStore
from sessionstore.codec import encode_seq_field, encode_state_field
from sessionstore.reader import StoreReader
from tests.store_helpers import report_text, store_history

pytestmark = pytest.mark.slow  # starts servers

KEY = SessionKey("t", "fsg", "CLIENT1")
PREFIX = "FIX.4.4-FIXGW-CLIENT1"
SUFFIXES = ("body", "header", "seqnums", "session")


def record(seq: int, text: str = "") -> OutboundRecord:
    body = filled_body(text or report_text(seq), "FIX.4.4", "FIXGW", "CLIENT1", seq, "20261203-10:00:00.000")
    return OutboundRecord(seq, time.time_ns(), b"8", body)


def full_load_files(tmp: Path, client: Any) -> dict[str, bytes]:
    """The files a gateway without a copy writes at takeover (every message read from Redis)."""
    loaded = SessionStore(client, FixedEpoch(0)).load(KEY)
    assert loaded.state.session_start_time is not None
    write_session(tmp / "full", PREFIX, loaded, loaded.state.session_start_time)
    return {s: (tmp / "full" / f"{PREFIX}.{s}").read_bytes() for s in SUFFIXES}


def copy_files(copy: SessionCopy) -> dict[str, bytes]:
    return {s: copy.paths[s].read_bytes() for s in SUFFIXES}


def caught_up(copy: SessionCopy, reader: StoreReader) -> SessionCopy:
    state, unsent = reader.states([KEY])[0]
    copy.catch_up(reader, state, unsent)
    return copy


def finished(copy: SessionCopy, reader: StoreReader) -> int:
    return copy.finish(reader, reader.states([KEY])[0][0])


def test_a_copy_kept_in_step_with_a_writer_ends_as_a_full_load_byte_for_byte(tmp_path: Path,
                                                                             valkey: ValkeyProcess) -> None:
    """A standby copies 2,500 stored reports, then what a writer commits meanwhile; the whole
    chunks are sealed (checked against the server's digest); at takeover only what was committed
    since the last poll is copied, and the files are those a full load writes."""
    client = connect(RedisEndpoint(url=valkey.url))
    store_history(client, KEY, 2500)
    reader = StoreReader(client)
    copy = caught_up(SessionCopy(tmp_path / "warm", PREFIX, KEY), reader)
    assert copy.count == 2500 and copy.top == 2500
    writer = SessionStore(client, FixedEpoch(1))
    writer.stamp_owner(KEY)
    writer.commit_outbound_many(KEY, [record(s) for s in range(2501, 2601)])
    caught_up(copy, reader)
    assert sorted(i for i, c in copy.chunks.items() if c.sealed) == [0, 1], "the two whole chunks are sealed"
    writer.commit_outbound_many(KEY, [record(s) for s in range(2601, 2611)])
    assert finished(copy, reader) == 10, "only what was committed since the last poll is copied at takeover"
    assert copy_files(copy) == full_load_files(tmp_path, client)


def test_a_chunk_copied_in_parts_is_sealed_by_the_servers_digest(tmp_path: Path, valkey: ValkeyProcess) -> None:
    """A chunk copied while it could still change is sealed once it can not, if the server's
    digest of it matches the copy's; a number replaced meanwhile makes it copied again."""
    client = connect(RedisEndpoint(url=valkey.url))
    store_history(client, KEY, 2500)
    reader = StoreReader(client)
    copy = caught_up(SessionCopy(tmp_path / "warm", PREFIX, KEY), reader)
    assert not copy.chunks[2].sealed, "chunk 2 (2048-3071) is not whole yet"
    writer = SessionStore(client, FixedEpoch(1))
    writer.stamp_owner(KEY)
    client.hset(KEY.chunk(2), encode_seq_field(2100), record(2100, report_text(77777)).encode())
    writer.commit_outbound_many(KEY, [record(s) for s in range(2501, 3200)])
    caught_up(copy, reader)
    assert 2 not in copy.chunks or not copy.chunks[2].sealed, "the copy of chunk 2 differs: not sealed"
    caught_up(copy, reader)
    assert copy.chunks[2].sealed, "copied again whole, chunk 2 is sealed"
    finished(copy, reader)
    assert copy_files(copy) == full_load_files(tmp_path, client)
    other = caught_up(SessionCopy(tmp_path / "warm2", PREFIX, KEY), reader)
    writer.commit_outbound_many(KEY, [record(s) for s in range(3200, 4100)])
    caught_up(other, reader)
    assert other.chunks[3].sealed, "a chunk copied in parts, unchanged, is sealed by its digest"


def replace_a_number_in_the_open_chunk(client: Any, writer: SessionStore) -> None:
    client.hset(KEY.chunk(2), encode_seq_field(2550), record(2550, report_text(99999)).encode())


def lose_a_record_of_a_sealed_chunk(client: Any, writer: SessionStore) -> None:
    client.hdel(KEY.chunk(0), encode_seq_field(100))


def reset_the_session(client: Any, writer: SessionStore) -> None:
    writer.reset(KEY, session_start_ns=time.time_ns() + 5_000_000_000)
    writer.commit_outbound_many(KEY, [record(s) for s in range(1, 41)])


def lose_the_last_writes(client: Any, writer: SessionStore) -> None:
    """As a failover to a replica that lacked them: the last 80 numbers are gone."""
    client.hdel(KEY.chunk(2), *(encode_seq_field(s) for s in range(2521, 2601)))
    client.hset(KEY.state, mapping={"senderSeqNum": encode_state_field("senderSeqNum", 2521),
                                    "lastSentSeqNum": encode_state_field("lastSentSeqNum", 2520)})


@pytest.mark.parametrize("change", [replace_a_number_in_the_open_chunk, lose_a_record_of_a_sealed_chunk,
                                    reset_the_session, lose_the_last_writes],
                         ids=["a number replaced in the open chunk", "a record gone from a sealed chunk",
                              "the session reset", "the datastore lost the last writes"])
def test_the_copy_is_never_trusted_over_redis(tmp_path: Path, valkey: ValkeyProcess,
                                             change: Callable[[Any, SessionStore], None]) -> None:
    """Whatever changed under a copy that was in step (a number replaced, a record gone, a
    reset, writes a failover lost), the takeover's check finds it and the files end as a full
    load of what Redis holds now."""
    client = connect(RedisEndpoint(url=valkey.url))
    store_history(client, KEY, 2600)
    reader = StoreReader(client)
    copy = caught_up(SessionCopy(tmp_path / "warm", PREFIX, KEY), reader)
    assert sorted(i for i, c in copy.chunks.items() if c.sealed) == [0, 1]
    writer = SessionStore(client, FixedEpoch(1))
    writer.stamp_owner(KEY)
    change(client, writer)
    finished(copy, reader)
    assert copy_files(copy) == full_load_files(tmp_path, client)


def test_the_copy_only_reads(tmp_path: Path, valkey: ValkeyProcess) -> None:
    """The copy is kept and finished by a datastore user that may not write anything: a
    standby's copy can never change what the active gateway stored."""
    admin = connect(RedisEndpoint(url=valkey.url))
    store_history(admin, KEY, 1500)
    admin.execute_command("ACL", "SETUSER", "standby", "on", ">standby-pw", "~*", "&*", "-@all", "+@read",
                          "+@connection", "+evalsha", "+eval", "+script|load")
    reading = redis.Redis(port=valkey.port, username="standby", password="standby-pw")
    with pytest.raises(NoPermissionError):
        reading.set("anything", "1")
    reader = StoreReader(reading)
    copy = caught_up(SessionCopy(tmp_path / "warm", PREFIX, KEY), reader)
    writer = SessionStore(admin, FixedEpoch(1))
    writer.stamp_owner(KEY)
    writer.commit_outbound_many(KEY, [record(s) for s in range(1501, 1511)])
    caught_up(copy, reader)
    assert finished(copy, reader) == 0
    assert copy_files(copy) == full_load_files(tmp_path, admin)


def test_quickfix_is_given_the_last_entries_and_the_older_ones_go_back_in_front(tmp_path: Path,
                                                                              valkey: ValkeyProcess) -> None:
    """``takeover_preload``: the header QuickFIX loads holds whole chunks covering at least the
    last N messages; the entries held back, put back in front of what QuickFIX appended since,
    make the header a full load writes (with those appended)."""
    client = connect(RedisEndpoint(url=valkey.url))
    store_history(client, KEY, 5000)
    reader = StoreReader(client)
    copy = caught_up(SessionCopy(tmp_path / "warm", PREFIX, KEY), reader)
    copy.finish(reader, reader.states([KEY])[0][0], preload=1500)
    assert copy.held_back_below == 3 * 1024, "chunks 3 and 4 (3072-5000) cover the last 1,500"
    given = copy.paths["header"].read_bytes()
    assert given.startswith(b"3072,") and given.endswith(b" ") and given.count(b",") == 2 * (5000 - 3071)
    appended = b"5001,%d,10 " % copy.paths["body"].stat().st_size  # as QuickFIX appends after a send
    with open(copy.paths["header"], "ab") as f:
        f.write(appended)
    assert complete_header(copy.paths["header"].parent, PREFIX) > 0
    assert copy.paths["header"].read_bytes() == full_load_files(tmp_path, client)["header"] + appended
    assert complete_header(copy.paths["header"].parent, PREFIX) == 0, "nothing is held back any more"
