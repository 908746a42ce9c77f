"""Tables that grow without stopping the process (``matching.tables``, the book's levels):
pure, no servers. What bounds a stop is the size of the largest table a step rebuilds."""

from __future__ import annotations

import pytest

from matching import domain
from matching.domain import Level
from matching.tables import LRU_SHARD_MIN, SHARDS, ShardedDict, ShardedLru


def test_a_sharded_dict_is_a_dict_to_its_user() -> None:
    table: ShardedDict[str, int] = ShardedDict()
    plain: dict[str, int] = {}
    for i in range(5000):
        table[f"o{i}"] = plain[f"o{i}"] = i
    for i in range(0, 5000, 3):
        assert table.pop(f"o{i}") == plain.pop(f"o{i}")
    del table["o1"], plain["o1"]
    assert len(table) == len(plain)
    assert sorted(table) == sorted(plain) and sorted(table.values()) == sorted(plain.values())
    assert dict(table.items()) == plain
    assert table.get("o2") == 2 and table.get("o3") is None and table.get("o3", -1) == -1
    assert "o2" in table and "o3" not in table
    with pytest.raises(KeyError):
        table["o3"]


def test_no_shard_of_a_large_table_holds_much_more_than_its_share() -> None:
    """A table grows one shard at a time: the largest step moves one shard's entries."""
    table: ShardedDict[str, None] = ShardedDict()
    n = 100_000
    for i in range(n):
        table[f"e2e/fsg/CLIENT1:{i}:0123456789abcdef"] = None
    assert max(map(len, table._shards)) < 1.5 * n / SHARDS


def test_a_small_lru_drops_exactly_the_least_recently_set() -> None:
    cache: ShardedLru[str, int] = ShardedLru(3)
    for key in "abc":
        cache.set(key, 1)
    cache.set("a", 2)  # a is now the most recent: b goes first
    cache.set("d", 1)
    assert [cache.get(k) for k in "abcd"] == [2, None, 1, 1]
    cache.discard("c")
    assert len(cache) == 2 and cache.get("c") is None


def test_a_large_lru_keeps_its_limit_and_its_newest_entries() -> None:
    limit = 100_000
    cache: ShardedLru[tuple[str, str], int] = ShardedLru(limit)
    assert len(cache._shards) > 1 and limit // len(cache._shards) >= LRU_SHARD_MIN
    for i in range(150_000):
        cache.set(("ns/fsg/C1", f"o{i}"), i)
        assert i > 1000 or len(cache) == i + 1
    assert len(cache) <= limit
    assert all(cache.get(("ns/fsg/C1", f"o{i}")) == i for i in range(149_000, 150_000))
    assert cache.get(("ns/fsg/C1", "o0")) is None


def test_a_deep_level_keeps_time_priority_across_its_tables() -> None:
    level = Level()
    for priority in range(1, 3001):
        level.append(f"o{priority}", priority)
    assert max(len(t) for t in level._tables) <= domain.LEVEL_CHUNK
    gone = set(range(1, 1100)) | set(range(1500, 3001, 7))  # the whole first table and more
    for priority in sorted(gone, reverse=True):
        level.remove(f"o{priority}", priority)
    left = [f"o{p}" for p in range(1, 3001) if p not in gone]
    assert list(level) == left and len(level) == len(left) and level.first() == left[0]
    level.append("late", 3001)
    assert list(level)[-1] == "late"
    for oid in list(level):
        level.remove(oid, 3001 if oid == "late" else int(oid[1:]))
    assert not level and len(level) == 0


def test_an_order_cannot_join_a_level_ahead_of_its_priority() -> None:
    """The tables are found by priority: a level only ever grows at its back (a rebuild
    restores in priority order), and a store holding two orders of one priority says so."""
    level = Level()
    level.append("a", 5)
    with pytest.raises(ValueError, match="priority 5"):
        level.append("b", 5)
