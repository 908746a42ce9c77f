"""A session's keys handed from one group to another (``sessionstore/move.py``), in each
topology: every key under the new group's tag as it was (contents and expiries), the old ones
gone but the owner, which fences the old group for good; run again, nothing changes; moved
back, the marker left at the first group's tag does not stand in the way."""

from __future__ import annotations

import uuid

import pytest

from datastore.connection import connect
from datastore.settings import RedisEndpoint
from sessionstore import FixedEpoch, OutboundRecord, SessionKey, SessionStore, StoreError
from sessionstore.move import copy_keys, fence_source, moved_marker

pytestmark = pytest.mark.slow  # starts servers or processes: not in `make unit`


def message(seq: int) -> OutboundRecord:
    body = b"8=FIX.4.4\x019=5\x0135=8\x0134=" + str(seq).encode() + b"\x0110=000\x01"
    return OutboundRecord(seq, 1_700_000_000_000_000_000 + seq, b"8", body)


def contents(client, session: SessionKey) -> dict[str, object]:  # type: ignore[no-untyped-def]
    """Every key of ``session`` but its owner, by suffix, with its value (by type) and whether it expires."""
    out: dict[str, object] = {}
    for raw in client.scan_iter(match=session.every_key, count=1000):
        key = raw.decode() if isinstance(raw, bytes) else raw
        if key == session.owner:
            continue
        kind = client.type(key)
        kind = kind.decode() if isinstance(kind, bytes) else kind
        value = {"hash": client.hgetall, "zset": lambda k: client.zrange(k, 0, -1, withscores=True),
                 "string": client.get}[kind](key)
        out[key[len(session.tag):]] = (kind, value, client.pttl(key) > 0)
    return out


def test_a_sessions_keys_move_to_another_group_whole_and_fenced(endpoint: RedisEndpoint) -> None:
    client = connect(endpoint)
    name = f"S{uuid.uuid4().hex[:10]}"
    source, dest = SessionKey("test", "a", name), SessionKey("test", "b", name)
    store_a = SessionStore(client, FixedEpoch(3))
    store_a.stamp_owner(source)
    store_a.commit_outbound_many(source, [message(s) for s in range(1, 1100)])  # two chunks
    store_a.set_next_target_seq_num(source, 42)
    assert store_a.claim_clordid(source, "ord-1", '{"orderId":"o1"}', 60_000)
    client.zadd(source.inbox, {"event-1": 1})
    before = contents(client, source)
    assert {"/state", "/store/0", "/store/1", "/clordid:ord-1", "/inbox"} <= set(before)

    fence_source(client, source, "b")
    with pytest.raises(StoreError, match="moved to b"):
        store_a.set_next_target_seq_num(source, 43)  # a late write of the old group: refused
    with pytest.raises(StoreError, match="moved to b"):
        SessionStore(client, FixedEpoch(4)).stamp_owner(source)  # and no takeover stamps over it
    moved = copy_keys(client, source, "b")
    assert moved == len(before)
    assert contents(client, dest) == before, "every key under b's tag, contents and expiries as they were"
    assert contents(client, source) == {} and client.get(source.owner) == moved_marker("b").encode()
    assert copy_keys(client, source, "b") == 0 and contents(client, dest) == before, "run again: nothing changes"

    store_b = SessionStore(client, FixedEpoch(1))
    store_b.stamp_owner(dest)
    assert store_b.load_state(dest).target_seq_num == 42
    assert [m.seq_num for m in store_b.load(dest).messages] == list(range(1, 1100))
    # back to a: the marker left there is cleared by the copy, and a takes it again
    fence_source(client, dest, "a")
    copy_keys(client, dest, "a")
    SessionStore(client, FixedEpoch(5)).stamp_owner(source)
    assert contents(client, source) == before
