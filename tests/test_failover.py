"""Sentinel failover: the store follows the promoted replica and goes on."""

from __future__ import annotations

import pytest

from datastore.connection import connect
from datastore.embedded import SentinelGroup
from datastore.settings import RedisEndpoint
from sessionstore import FixedEpoch, OutboundRecord, SessionKey, SessionStore

pytestmark = pytest.mark.slow  # starts servers or processes: not in `make unit`


def test_store_reconnects_to_the_promoted_replica_after_the_primary_dies() -> None:
    with SentinelGroup("failover", aof=True, appendfsync="always") as group:
        endpoint = RedisEndpoint(sentinels=group.sentinel_addresses, sentinelGroup=group.group,
                                 maxAttempts=20, socketTimeout="1s", connectionTimeout="500ms")
        client = connect(endpoint)
        store = SessionStore(client, FixedEpoch(1))
        session = SessionKey("fo", "fsg", "CLIENT1")
        store.stamp_owner(session)
        for seq in range(1, 51):
            store.commit_outbound(session, OutboundRecord(seq, seq, b"8", b"x" * 100))
        # WAIT so the replica has every write before we kill the primary (asynchronous
        # replication could otherwise lose the tail; the matching cell uses WAITAOF for that).
        assert client.execute_command("WAIT", 1, 5000) == 1
        promoted = group.kill_primary_and_wait_failover()
        for seq in range(51, 101):
            store.commit_outbound(session, OutboundRecord(seq, seq, b"8", b"x" * 100))
        loaded = store.load(session)
        assert [m.seq_num for m in loaded.messages] == list(range(1, 101))
        assert promoted.client().hlen(session.chunk(0)) == 100


def test_with_replica_acks_every_acknowledged_commit_survives_the_loss_of_the_primary() -> None:
    with SentinelGroup("acks") as group:  # no AOF, no helper WAIT: only replicaAcks protects
        endpoint = RedisEndpoint(sentinels=group.sentinel_addresses, sentinelGroup=group.group,
                                 maxAttempts=20, socketTimeout="1s", connectionTimeout="500ms")
        store = SessionStore(connect(endpoint), FixedEpoch(1), replica_acks=1, replica_timeout_ms=1000)
        session = SessionKey("fo", "fsg", "ACKED")
        store.stamp_owner(session)
        for seq in range(1, 201):
            store.commit_outbound(session, OutboundRecord(seq, seq, b"8", b"y" * 200))
        group.kill_primary_and_wait_failover()  # right after the last acknowledged commit
        assert store.load_state(session).last_sent_seq_num == 200
        assert len(store.load(session).messages) == 200


def test_replica_acks_that_cannot_be_met_are_an_error_not_a_silent_success() -> None:
    from datastore.embedded import standalone
    from sessionstore import NotReplicated

    with standalone() as server:  # no replica at all
        store = SessionStore(connect(RedisEndpoint(url=server.url)), FixedEpoch(1), replica_acks=1,
                             replica_timeout_ms=100)
        session = SessionKey("fo", "fsg", "LONELY")
        with pytest.raises(NotReplicated, match="only 0 of 1 replicas"):
            store.stamp_owner(session)


def test_store_holds_writes_through_a_cluster_failover_and_loses_none() -> None:
    """The session's slot loses its primary mid-flow; the cluster promotes its replica (after
    cluster-node-timeout) and every write made meanwhile waits, then lands there."""
    import time

    from datastore.availability import Availability
    from datastore.embedded import Cluster
    from sessionstore import StoreUnavailable

    with Cluster(3, replicas=1) as cluster:
        endpoint = RedisEndpoint(nodes=cluster.addresses, socketTimeout="500ms", connectionTimeout="500ms",
                                 maxAttempts=2)
        availability = Availability("session store", 30.0, (StoreUnavailable,))
        store = SessionStore(connect(endpoint), FixedEpoch(1), availability=availability)
        session = SessionKey("fo", "fsg", "CLUSTERED")
        store.stamp_owner(session)
        for seq in range(1, 51):
            store.commit_outbound(session, OutboundRecord(seq, seq, b"8", b"z" * 100))
        primary = cluster.primary_of(session.state)
        assert primary.client().execute_command("WAIT", 1, 5000) == 1
        primary.kill()
        killed = time.monotonic()
        for seq in range(51, 101):  # the first of these waits for the promotion
            store.commit_outbound(session, OutboundRecord(seq, seq, b"8", b"z" * 100))
        held = time.monotonic() - killed
        assert availability.outages == 1 and availability.problems() == [], "it went away once, and is back"
        assert cluster.primary_of(session.state) is not primary
        loaded = store.load(session)
        assert [m.seq_num for m in loaded.messages] == list(range(1, 101))
        assert held > 1.0, "the writes really waited for the promotion"
