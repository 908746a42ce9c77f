"""A partition's keys as a relocation sees them (``matching/relocation.py``): which keys move,
a digest of each key's logical content (comparable across server versions), what the
partition holds, and which keys are written while it is copied (``ChangeTracker``)."""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import redis
from redis.exceptions import ResponseError

from datastore.connection import RedisClient, is_cluster, standalone_pool, text, text_or_none

from .keys import PartitionKeys

COPY_BATCH = 200


class RelocationError(Exception):
    """A step that cannot go on; the message says why and what to do."""


def partition_key_names(client: RedisClient, keys: PartitionKeys) -> list[str]:
    """Every key of the partition that moves with it (not the marker, not the leases)."""
    skip = {keys.relocation, keys.conductor_lease, keys.outbox_lease}
    pattern = keys.prefix.replace("{", "\\{").replace("}", "\\}") + ":*"
    names = {text(k) for k in client.scan_iter(match=pattern, count=1000)}
    return sorted(names - skip)


def _hasher(kind: str) -> tuple[Any, Callable[[Iterable[Any]], None]]:
    h = hashlib.sha256()
    h.update(kind.encode())

    def feed(items: Iterable[Any]) -> None:
        for item in items:
            h.update(b"\x00")
            h.update(item if isinstance(item, bytes) else str(item).encode())

    return h, feed


def _simple_digest(kind: str, content: Any) -> str:
    """The digest of a string (its value) or a hash (its field/value pairs, sorted)."""
    h, feed = _hasher(kind)
    if kind == "string":
        feed([content])
    else:
        feed(x for kv in sorted(content.items()) for x in kv)
    return h.hexdigest()


def key_digest(client: RedisClient, key: str) -> str:
    """A digest of a key's logical content, equal on two datastores (whatever their versions)
    when the content is: type and values, sorted where the type has no order; a stream's
    entries and each consumer group's position and pending count."""
    kind = text(client.type(key))
    if kind == "string":
        return _simple_digest(kind, client.get(key))
    if kind == "hash":
        return _simple_digest(kind, client.hgetall(key))
    h, feed = _hasher(kind)
    if kind == "zset":
        scored: list[tuple[bytes, float]] = client.zrange(key, 0, -1, withscores=True)  # type: ignore[assignment]
        feed(x for member, score in scored for x in (member, repr(score)))
    elif kind == "set":
        feed(sorted(client.smembers(key)))
    elif kind == "list":
        feed(client.lrange(key, 0, -1))
    elif kind == "stream":
        start = "-"
        while True:
            entries: list[tuple[bytes, dict[bytes, bytes]]] = client.xrange(key, min=start, count=1000)  # type: ignore[assignment]
            for entry_id, fields in entries:
                feed([entry_id, *(x for kv in sorted(fields.items()) for x in kv)])
            if len(entries) < 1000:
                break
            start = "(" + text(entries[-1][0])
        for g in sorted(client.xinfo_groups(key), key=lambda g: text(g["name"])):
            feed([g["name"], g["last-delivered-id"], g["pending"]])
    return h.hexdigest()


def key_digests(client: RedisClient, names: list[str]) -> dict[str, str]:
    """``key_digest`` of every key, the strings and hashes (the dedup records and the orders:
    nearly all of a partition's keys) read in pipelines of COPY_BATCH, so verifying a partition
    of a million keys takes thousands of round trips, not millions."""
    out: dict[str, str] = {}
    for i in range(0, len(names), COPY_BATCH):
        batch = names[i:i + COPY_BATCH]
        types = client.pipeline(transaction=False)
        for name in batch:
            types.type(name)
        kinds = [text(k) for k in types.execute()]
        reads = client.pipeline(transaction=False)
        simple = [(name, kind) for name, kind in zip(batch, kinds) if kind in ("string", "hash")]
        for name, kind in simple:
            if kind == "string":
                reads.get(name)
            else:
                reads.hgetall(name)
        for (name, kind), content in zip(simple, reads.execute() if simple else []):
            out[name] = _simple_digest(kind, content)
        for name, kind in zip(batch, kinds):
            if kind not in ("string", "hash"):
                out[name] = key_digest(client, name)
    return out


def summary(client: RedisClient, names: list[str], keys: PartitionKeys) -> dict[str, int]:
    """What the partition holds, by kind of key (for the plan and the verification)."""
    counts = {"keys": len(names), "orders": 0, "book entries": 0, "processed commands": 0, "accepted orders": 0}
    for name in names:
        rest = name[len(keys.prefix) + 1:]
        if rest.startswith("order:"):
            counts["orders"] += 1
        elif rest.startswith("book:"):
            counts["book entries"] += int(client.zcard(name))
        elif rest.startswith("processed-command:"):
            counts["processed commands"] += 1
        elif rest.startswith("accepted-order:"):
            counts["accepted orders"] += 1
    for stream in (keys.commands, keys.events):
        counts[f"{stream.rsplit(':', 1)[1]} stream entries"] = int(client.xlen(stream))
    return counts


def server_version(client: RedisClient) -> str:
    info: dict[str, Any] = client.info("server")
    if "valkey_version" in info:
        return f"Valkey {info['valkey_version']}"
    return f"Redis {info.get('redis_version', '?')}"


class ChangeTracker:
    """The partition's keys written on the source since ``start`` (keyspace notifications on a
    subscription of its own), for the pre-copy. ``sync`` returns once every notification sent
    before it has been read. The server's notification setting is put back on ``close``."""

    def __init__(self, client: RedisClient, keys: PartitionKeys, previous: str) -> None:
        self.client, self.keys, self._previous = client, keys, previous
        self.changed: set[str] = set()
        self._synced = threading.Event()
        self._token = f"relocation-sync:{keys.prefix}:{time.time_ns()}"
        db = int(standalone_pool(client).connection_kwargs.get("db", 0) or 0)
        self._prefix = f"__keyspace@{db}__:"
        # A connection outside the caller's pool (which may hold one connection only), with its settings.
        pool = standalone_pool(client)
        self._own = redis.Redis(connection_pool=redis.ConnectionPool(connection_class=pool.connection_class,
                                                                     **pool.connection_kwargs))
        self._pubsub = self._own.pubsub(ignore_subscribe_messages=True)
        self._pubsub.psubscribe(f"{self._prefix}{keys.prefix}:*")
        self._pubsub.subscribe(self._token)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, name="relocation-tracker", daemon=True)
        self._thread.start()

    @classmethod
    def start(cls, client: RedisClient, keys: PartitionKeys) -> ChangeTracker | None:
        if is_cluster(client):
            return None
        try:
            reply: dict[Any, Any] = client.config_get("notify-keyspace-events")
            previous = text_or_none(reply.get("notify-keyspace-events")) or ""
            client.config_set("notify-keyspace-events", "".join(sorted(set(previous) | set("KA"))))
        except ResponseError:
            return None
        tracker = cls(client, keys, previous)
        tracker.sync()  # subscribed before anything is copied
        return tracker

    def _read(self) -> None:
        while not self._stop.is_set():
            try:
                message = self._pubsub.get_message(timeout=0.1)
            except Exception:  # noqa: BLE001 (closed under it)
                return
            if message is None:
                continue
            channel = text(message["channel"])
            if channel == self._token:
                self._synced.set()
            elif message["type"] == "pmessage" and channel.startswith(self._prefix):
                self.changed.add(channel[len(self._prefix):])

    def sync(self, timeout: float = 30.0) -> None:
        self._synced.clear()
        self.client.publish(self._token, "sync")
        if not self._synced.wait(timeout):
            raise RelocationError("pre-copy: the keyspace notifications stopped arriving; run the command again")

    def settled(self) -> set[str]:
        """Every key written up to now (the cells have stood down: nothing more is written)."""
        self.sync()
        return set(self.changed)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        try:
            self._pubsub.close()
            self._own.close()
            self.client.config_set("notify-keyspace-events", self._previous)
        except Exception:  # noqa: BLE001 (best effort: the setting only adds notifications)
            pass
