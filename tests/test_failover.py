"""Sentinel failover: the store follows the promoted replica and goes on."""

from __future__ import annotations

from sessionstore import FixedEpoch, OutboundRecord, SessionKey, SessionStore, connect
from sessionstore.embedded import SentinelGroup
from sessionstore.settings import RedisEndpoint


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
