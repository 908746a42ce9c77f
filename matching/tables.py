"""Hash tables that grow without stopping the process.

A Python ``dict`` grows by building a new table and moving every entry into it, in one step,
with the interpreter held. At 100,000 entries that step took 9–12 ms in isolation and 30–40 ms
in a loaded cell and gateway (caches cold), and a table keyed by order grows through it at
every doubling of the orders seen: a long run stalled the order path for 60–70 ms at the same
moment each time (docs/decisions/2026-12-06-tables-that-grow-without-a-stop.md). Split over
``SHARDS`` tables by the key's hash, one step moves one shard's entries: the same work in all,
in steps 256 times smaller. Valkey grows its own tables incrementally for the same reason.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Iterator
from typing import Generic, TypeVar, overload

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
D = TypeVar("D")

SHARDS = 256  # a power of two: the shard is the hash's low bits
LRU_SHARD_MIN = 1024  # entries a cache's shard holds at least


class ShardedDict(Generic[K, V]):
    """The part of ``dict`` the book uses, over ``SHARDS`` dicts. Iteration visits shard after
    shard: no order (the book keeps priority in its levels)."""

    __slots__ = ("_shards",)

    def __init__(self) -> None:
        self._shards: list[dict[K, V]] = [{} for _ in range(SHARDS)]

    def __getitem__(self, key: K) -> V:
        return self._shards[hash(key) & (SHARDS - 1)][key]

    def __setitem__(self, key: K, value: V) -> None:
        self._shards[hash(key) & (SHARDS - 1)][key] = value

    def __delitem__(self, key: K) -> None:
        del self._shards[hash(key) & (SHARDS - 1)][key]

    def __contains__(self, key: object) -> bool:
        return key in self._shards[hash(key) & (SHARDS - 1)]

    def __len__(self) -> int:
        return sum(map(len, self._shards))

    def __iter__(self) -> Iterator[K]:
        for shard in self._shards:
            yield from shard

    @overload
    def get(self, key: K) -> V | None: ...

    @overload
    def get(self, key: K, default: D) -> V | D: ...

    def get(self, key: K, default: object = None) -> object:
        return self._shards[hash(key) & (SHARDS - 1)].get(key, default)

    def pop(self, key: K) -> V:
        return self._shards[hash(key) & (SHARDS - 1)].pop(key)

    def values(self) -> Iterator[V]:
        for shard in self._shards:
            yield from shard.values()

    def items(self) -> Iterator[tuple[K, V]]:
        for shard in self._shards:
            yield from shard.items()


class ShardedLru(Generic[K, V]):
    """At most ``limit`` entries, each shard dropping its least recently set first: the oldest
    entries go first, to within one shard's share. A cache of up to ``LRU_SHARD_MIN`` entries a
    shard is one table, exactly least-recently-set."""

    __slots__ = ("_shards", "_per_shard", "_mask")

    def __init__(self, limit: int) -> None:
        shards = 1
        while shards * 2 <= SHARDS and limit // (shards * 2) >= LRU_SHARD_MIN:
            shards *= 2
        self._mask = shards - 1
        self._shards: list[OrderedDict[K, V]] = [OrderedDict() for _ in range(shards)]
        self._per_shard = max(1, limit // shards)

    def __len__(self) -> int:
        return sum(map(len, self._shards))

    def get(self, key: K) -> V | None:
        return self._shards[hash(key) & self._mask].get(key)

    def set(self, key: K, value: V) -> None:
        """``key`` becomes the most recent of its shard."""
        shard = self._shards[hash(key) & self._mask]
        shard.pop(key, None)
        shard[key] = value
        if len(shard) > self._per_shard:
            shard.popitem(last=False)

    def discard(self, key: K) -> None:
        self._shards[hash(key) & self._mask].pop(key, None)
