"""The dispatcher lock: one holder, takeover after expiry, fencing of a stalled former holder."""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from datastore.connection import connect
from datastore.embedded import ValkeyProcess
from datastore.settings import RedisEndpoint
from sessionstore import (
    DispatcherLock,
    FencedWrite,
    GatewayKey,
    OutboundRecord,
    SessionStore,
)

pytestmark = pytest.mark.slow  # starts servers or processes: not in `make unit`


def gateway() -> GatewayKey:
    return GatewayKey("locktest", f"g{uuid.uuid4().hex[:8]}")


def record(seq: int) -> OutboundRecord:
    return OutboundRecord(seq, seq, b"8", b"35=8|" + str(seq).encode())


def test_two_contenders_only_one_holds(endpoint: RedisEndpoint) -> None:
    client = connect(endpoint)
    gw = gateway()
    a = DispatcherLock(client, gw, ttl=5, renewal=1, holder="a")
    b = DispatcherLock(client, gw, ttl=5, renewal=1, holder="b")
    assert a.try_acquire()
    assert not b.try_acquire()
    assert a.held and not b.held
    assert a.holder() == a.token
    with pytest.raises(FencedWrite, match="never acquired"):
        b.check()
    assert a.release()
    assert b.try_acquire() and b.epoch == a.epoch + 1
    b.release()


def test_renewal_keeps_the_lock_past_its_ttl(valkey: ValkeyProcess) -> None:
    client = valkey.client()
    gw = gateway()
    a = DispatcherLock(client, gw, ttl=1.0, renewal=0.1)  # a renewal would have to stall 0.9 s to miss
    assert a.try_acquire()
    time.sleep(2.0)  # twice the TTL: held only if renewed
    assert a.held
    assert a.lease.renewals >= 5, "each confirmed renewal is counted (fixgw_lock_renewals_total)"
    assert not DispatcherLock(client, gw, ttl=1.0, renewal=0.1).try_acquire()
    a.release()


def test_takeover_after_ttl_expiry_fences_the_stalled_former_holder(valkey: ValkeyProcess) -> None:
    client = valkey.client()
    gw = gateway()
    session = gw.session("CLIENT1")
    lost: list[str] = []
    old = DispatcherLock(client, gw, ttl=0.5, renewal=0.1, on_lost=lost.append)
    assert old.try_acquire()
    old_store = SessionStore(client, old)
    old_store.stamp_owner(session)
    old_store.commit_outbound(session, record(1))

    old.lease.stop_renewing()  # the former holder stalls: no renewals (a GC pause, a frozen VM)
    deadline = time.monotonic() + 10
    while client.exists(old.lease.key) and time.monotonic() < deadline:  # its TTL runs out in the datastore
        time.sleep(0.05)
    new = DispatcherLock(client, gw, ttl=5, renewal=1)
    assert new.try_acquire(), "standby takes over once the TTL has run out"
    new_store = SessionStore(client, new)
    new_store.stamp_owner(session)
    new_store.commit_outbound(session, record(2))

    # The stalled holder wakes up: its local lease check stops it first...
    with pytest.raises(FencedWrite, match="lock not held"):
        old_store.commit_outbound(session, record(3))
    assert lost and "expired" in lost[0]
    # ...and even if it skipped that check, the owner epoch inside the script refuses it.
    from sessionstore.store import FixedEpoch

    sneaky = SessionStore(client, FixedEpoch(old.epoch))
    with pytest.raises(FencedWrite, match=f"owned by epoch {new.epoch}"):
        sneaky.commit_outbound(session, record(3))
    assert new_store.load_state(session).last_sent_seq_num == 2
    new.release()


def test_holder_whose_lock_is_taken_notices_and_stops(valkey: ValkeyProcess) -> None:
    client = valkey.client()
    gw = gateway()
    lost = threading.Event()
    a = DispatcherLock(client, gw, ttl=2, renewal=0.1, on_lost=lambda r: lost.set())
    assert a.try_acquire()
    client.set(gw.lock, "someone-else")  # e.g. an operator forced it, or expiry raced
    assert lost.wait(2)
    assert not a.held
    with pytest.raises(FencedWrite, match="another holder"):
        a.check()


def test_holder_cut_off_from_redis_stops_within_its_ttl(valkey: ValkeyProcess) -> None:
    client = valkey.client(socket_timeout=0.2)
    gw = gateway()
    a = DispatcherLock(client, gw, ttl=0.8, renewal=0.2)
    assert a.try_acquire()
    valkey.pause()
    try:
        time.sleep(1.2)
        assert not a.held
        with pytest.raises(FencedWrite):
            a.check()
    finally:
        valkey.resume()


def test_a_new_epoch_that_no_replica_confirmed_is_given_back() -> None:
    """A promoted replica that lacked the last epoch increment would hand the next holder an
    epoch already used: where the datastore has a replica, a take counts only once one has it."""
    from datastore.embedded import SentinelGroup

    with SentinelGroup("epochs") as group:
        client = group.primary.client()
        gw = gateway()
        first = DispatcherLock(client, gw, ttl=5, renewal=1, holder="first")
        assert first.try_acquire() and first.epoch == 1
        assert int(group.replica.client().get(gw.epoch)) == 1, "confirmed on the replica before it was used"
        first.release()
        group.replica.pause()  # the replica cannot acknowledge anything
        try:
            second = DispatcherLock(client, gw, ttl=5, renewal=1, holder="second")
            assert not second.try_acquire(), "an epoch no replica has is not used"
            assert client.get(gw.lock) is None, "and the lock is given back for the next attempt"
        finally:
            group.replica.resume()
        assert second.try_acquire() and second.epoch == 3
        second.release()
