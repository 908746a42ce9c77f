"""The session store against real Valkey, in standalone, Sentinel and Cluster topologies."""

from __future__ import annotations

import uuid

import pytest

from datastore.connection import connect
from datastore.settings import RedisEndpoint
from sessionstore import (
    FencedWrite,
    FixedEpoch,
    OutboundRecord,
    SequenceReuse,
    SessionKey,
    SessionState,
    SessionStore,
    StoreCorruption,
    StoreError,
)
from sessionstore.codec import encode_seq_field
from sessionstore.store import batch_outcome, write_together
from tests.store_helpers import CountedStore

pytestmark = pytest.mark.slow  # starts servers or processes: not in `make unit`


def new_session() -> SessionKey:
    return SessionKey("test", "fsg", f"S{uuid.uuid4().hex[:10]}")


def message(seq: int, msg_type: bytes = b"8") -> OutboundRecord:
    body = b"8=FIX.4.4\x019=5\x0135=" + msg_type + b"\x0134=" + str(seq).encode() + b"\x0110=000\x01"
    return OutboundRecord(seq, 1_700_000_000_000_000_000 + seq, msg_type, body)


@pytest.fixture
def store(endpoint: RedisEndpoint) -> SessionStore:
    return SessionStore(connect(endpoint), FixedEpoch(1))


def claimed(store: SessionStore) -> SessionKey:
    session = new_session()
    store.stamp_owner(session)
    return session


def test_new_session_loads_seed_defaults(store: SessionStore) -> None:
    loaded = store.load(new_session())
    assert loaded.state == SessionState(1, 1, None, None, 0)
    assert loaded.messages == []


def test_commit_advances_sequence_numbers_atomically(store: SessionStore) -> None:
    session = claimed(store)
    for seq in (1, 2, 3):
        assert store.commit_outbound(session, message(seq))
    state = store.load_state(session)
    assert (state.sender_seq_num, state.last_sent_seq_num) == (4, 3)
    assert [m.seq_num for m in store.load(session).messages] == [1, 2, 3]


def test_every_key_of_a_session_hashes_to_one_slot(valkey_cluster) -> None:  # type: ignore[no-untyped-def]
    client = connect(RedisEndpoint(nodes=valkey_cluster.addresses))
    session = new_session()
    keys = [session.state, session.owner, session.inbox, session.chunk(0), session.chunk(7), session.clordid("X")]
    slots = {client.execute_command("CLUSTER", "KEYSLOT", k) for k in keys}
    assert len(slots) == 1
    gateway = session.gateway_key
    assert client.execute_command("CLUSTER", "KEYSLOT", gateway.lock) == client.execute_command(
        "CLUSTER", "KEYSLOT", gateway.epoch)


def test_chunk_boundaries_1023_1024_1025(store: SessionStore) -> None:
    session = claimed(store)
    store.commit_outbound_many(session, [message(s) for s in range(1, 1026)])
    raw0 = store.client.hgetall(session.chunk(0))
    raw1 = store.client.hgetall(session.chunk(1))
    assert encode_seq_field(1023) in raw0 and encode_seq_field(1024) not in raw0
    assert {encode_seq_field(1024), encode_seq_field(1025)} == set(raw1)
    assert [m.seq_num for m in store.iter_messages(session, 1022, 1026)] == [1022, 1023, 1024, 1025]


def test_load_after_5000_messages_returns_every_one_in_order(store: SessionStore) -> None:
    session = claimed(store)
    for start in range(1, 5001, 500):
        store.commit_outbound_many(session, [message(s) for s in range(start, start + 500)])
    loaded = store.load(session)
    assert [m.seq_num for m in loaded.messages] == list(range(1, 5001))
    assert loaded.messages[4999] == message(5000)
    assert loaded.state.last_sent_seq_num == 5000


def test_replayed_commit_is_harmless_but_different_content_is_refused(store: SessionStore) -> None:
    session = claimed(store)
    store.commit_outbound(session, message(1))
    assert store.commit_outbound(session, message(1)) is False  # identical replay
    with pytest.raises(SequenceReuse, match="seqNum 1 already sent"):
        store.commit_outbound(session, message(1, b"0"))
    assert store.load(session).messages == [message(1)]


def test_a_batch_with_a_reused_number_writes_nothing(store: SessionStore) -> None:
    session = claimed(store)
    store.commit_outbound_many(session, [message(1), message(2)])
    with pytest.raises(SequenceReuse):
        store.commit_outbound_many(session, [message(3), message(2, b"0")])
    assert store.load_state(session).last_sent_seq_num == 2
    assert [m.seq_num for m in store.load(session).messages] == [1, 2]


def test_target_and_connection_start_are_recorded(store: SessionStore) -> None:
    session = claimed(store)
    store.set_next_target_seq_num(session, 42)
    store.record_connection_start(session, 1_234)
    state = store.load_state(session)
    assert (state.target_seq_num, state.connection_start_time, state.sender_seq_num) == (42, 1_234, 1)


def test_reset_drops_every_chunk_and_starts_a_new_session(store: SessionStore) -> None:
    session = claimed(store)
    store.commit_outbound_many(session, [message(s) for s in range(1, 2100)])
    store.set_next_target_seq_num(session, 77)
    store.record_connection_start(session, 5)
    deleted = store.reset(session, session_start_ns=99)
    assert deleted == 3
    assert [store.client.exists(session.chunk(i)) for i in range(3)] == [0, 0, 0]
    assert store.load(session) == store.load(session).__class__(SessionState(1, 1, 99, 5, 0), [])
    store.commit_outbound(session, message(1))  # seq 1 is free again in the new session
    assert store.load_state(session).sender_seq_num == 2


def test_writer_with_an_old_epoch_is_fenced(store: SessionStore) -> None:
    session = claimed(store)
    store.commit_outbound(session, message(1))
    newer = SessionStore(store.client, FixedEpoch(2))
    newer.stamp_owner(session)
    with pytest.raises(FencedWrite, match="owned by epoch 2, writer holds 1"):
        store.commit_outbound(session, message(2))
    with pytest.raises(FencedWrite):
        store.set_next_target_seq_num(session, 9)
    with pytest.raises(FencedWrite, match="newer epoch 2"):
        store.stamp_owner(session)  # an old holder cannot re-claim
    assert store.load_state(session).last_sent_seq_num == 1
    newer.commit_outbound(session, message(2))


def test_unclaimed_session_refuses_writes(store: SessionStore) -> None:
    with pytest.raises(FencedWrite, match="owned by epoch none"):
        store.commit_outbound(new_session(), message(1))


def test_corrupt_records_are_reported_naming_key_and_field(store: SessionStore) -> None:
    session = claimed(store)
    store.commit_outbound_many(session, [message(1), message(2)])
    good = message(2).encode()
    store.client.hset(session.chunk(0), encode_seq_field(2), good[:-3])
    with pytest.raises(StoreCorruption, match=r"/store/0 field 2: record length says"):
        store.load(session)
    store.client.hset(session.chunk(0), encode_seq_field(2), message(9).encode())
    with pytest.raises(StoreCorruption, match=r"/store/0 field 2: record carries seqNum 9"):
        store.load(session)


def test_an_event_becomes_a_message_once_per_session(store: SessionStore) -> None:
    session = claimed(store)
    assert store.commit_batch(session, [(message(1), "ev1:O", "o1", '{"status":"0"}'),
                                        (message(2), "ev2:O", "o2", "")]) == set()
    # the same event again (a redelivery after a crash): refused, nothing written
    assert store.commit_batch(session, [(message(3), "ev1:O", "o1", '{"status":"2"}')]) == {"ev1:O"}
    assert store.delivered(session, "ev1:O") and store.delivered_many(session, ["ev1:O", "ev9:O"]) == {"ev1:O"}
    assert store.load_state(session).last_sent_seq_num == 2, "the refused replay consumed no number"
    assert store.order_views(session, ["o1", "o2"]) == ['{"status":"0"}', None]


def test_a_clordid_and_the_view_of_its_order_are_read_together(store: SessionStore) -> None:
    """What a cancel or a replace needs of its original: the claim's record and the view the
    dispatcher stored last, in one round trip; each None when absent; and again after the
    server lost its scripts (a restart, SCRIPT FLUSH)."""
    session = claimed(store)
    assert store.claim_clordid(session, "A1", '{"orderId":"o1","pairId":10}', 60_000)
    assert store.claim_clordid(session, "A2", '{"orderId":"o2","pairId":10}', 60_000)
    assert store.commit_batch(session, [(message(1), "ev1:O", "o1", '{"status":"0"}')]) == set()
    assert store.order_of_clordid(session, "A1") == ('{"orderId":"o1","pairId":10}', '{"status":"0"}')
    assert store.order_of_clordid(session, "A2") == ('{"orderId":"o2","pairId":10}', None)
    assert store.order_of_clordid(session, "A9") == (None, None)
    for node in store.client.get_primaries() if hasattr(store.client, "get_primaries") else [None]:
        (store.client.get_redis_connection(node) if node is not None else store.client).script_flush()
    assert store.order_of_clordid(session, "A1") == ('{"orderId":"o1","pairId":10}', '{"status":"0"}')


class Refusing:
    """A fence whose lock was lost."""

    epoch = 1

    def check(self) -> None:
        raise FencedWrite("lock lost")


def test_group_commits_of_two_stores_on_one_datastore_go_in_one_round_trip(store: SessionStore) -> None:
    """A gateway's order-entry and drop-copy stores share a datastore: a dispatcher cycle's group
    commits of every session go in one round trip, every store's fence checked, and each
    session's outcome is its own (stored, found delivered, refused)."""
    fsg, dc = CountedStore(store.client, FixedEpoch(1)), CountedStore(store.client, FixedEpoch(1))
    trader, copy = claimed(fsg), SessionKey("test", "dc", f"D{uuid.uuid4().hex[:10]}")
    dc.stamp_owner(copy)
    fsg.writes.clear()
    dc.writes.clear()
    replies = write_together([(fsg, [fsg.commit_batch_call(trader, [(message(1), "e1:O", "o1", "v1")])]),
                              (dc, [dc.commit_batch_call(copy, [(message(1), "e1:O", "o1", "v1"),
                                                                 (message(2), "e2:O", "o2", "v2")])])])
    assert fsg.writes == [2] and dc.writes == [], "both sessions' scripts in one round trip"
    assert [batch_outcome(r) for [r] in replies] == [set(), set()]
    assert fsg.load_state(trader).last_sent_seq_num == 1 and dc.load_state(copy).last_sent_seq_num == 2
    # one session's event again (found delivered: nothing written there), the other's new
    replies = write_together([(fsg, [fsg.commit_batch_call(trader, [(message(2), "e1:O", "o1", "v1")])]),
                              (dc, [dc.commit_batch_call(copy, [(message(3), "e3:O", "o3", "v3")])])])
    assert [batch_outcome(r) for [r] in replies] == [{"e1:O"}, set()]
    assert fsg.load_state(trader).last_sent_seq_num == 1 and dc.load_state(copy).last_sent_seq_num == 3
    # a session whose epoch is stale is refused in its place; the other is stored
    stale = SessionStore(store.client, FixedEpoch(0))
    replies = write_together([(stale, [stale.commit_batch_call(trader, [(message(2), "e2:O", "o2", "v2")])]),
                              (dc, [dc.commit_batch_call(copy, [(message(4), "e4:O", "o4", "v4")])])])
    with pytest.raises(FencedWrite):
        batch_outcome(replies[0][0])
    assert batch_outcome(replies[1][0]) == set() and dc.load_state(copy).last_sent_seq_num == 4
    # a store that lost its lock stops the whole write: nothing of either session is written
    lost = SessionStore(store.client, Refusing())
    with pytest.raises(FencedWrite):
        write_together([(fsg, [fsg.commit_batch_call(trader, [(message(2), "e2:O", "o2", "v2")])]),
                        (lost, [lost.commit_batch_call(copy, [(message(5), "e5:O", "o5", "v5")])])])
    assert fsg.load_state(trader).last_sent_seq_num == 1 and dc.load_state(copy).last_sent_seq_num == 4


def test_a_batch_must_continue_the_sequence_and_an_identical_replay_is_harmless(store: SessionStore) -> None:
    session = claimed(store)
    store.commit_outbound(session, message(1))
    with pytest.raises(SequenceReuse):
        store.commit_batch(session, [(message(3), "e3:O", "", "")])  # a gap
    batch = [(message(2), "e2:O", "", ""), (message(3), "e3:O", "", "")]
    assert store.commit_batch(session, batch) == set()
    assert store.commit_batch(session, batch) == set(), "redis-py retrying after a lost reply"
    assert store.load_state(session).last_sent_seq_num == 3


def test_answers_and_the_inbound_number_they_answer_are_stored_together_or_not_at_all(store: SessionStore) -> None:
    session = claimed(store)
    store.set_next_target_seq_num(session, 5)
    refused = store.commit_batch_call(session, [(message(2), "", "", "")], target=9)  # a gap: refused
    with pytest.raises(SequenceReuse):
        batch_outcome(store.write([refused], raise_on_error=False)[0])
    assert store.load_state(session).target_seq_num == 5, "no answer stored, so the number stays"
    stored = store.commit_batch_call(session, [(message(1), "", "", ""), (message(2), "", "", "")], target=9)
    assert batch_outcome(store.write([stored])[0]) == set()
    state = store.load_state(session)
    assert (state.target_seq_num, state.last_sent_seq_num) == (9, 2)
    unnumbered = store.commit_batch_call(session, [(message(3), "", "", "")])
    assert batch_outcome(store.write([unnumbered])[0]) == set()
    assert store.load_state(session).target_seq_num == 9, "a batch without a number leaves it as it was"


def test_only_a_number_committed_ahead_and_unsent_can_take_another_message(store: SessionStore) -> None:
    session = claimed(store)
    store.commit_batch(session, [(message(1), "e1:O", "o1", "v1"), (message(2), "e2:O", "o2", "v2"),
                                 (message(3), "e3:O", "o3", "v3")])
    heartbeat = message(2, b"0")
    with pytest.raises(SequenceReuse):  # the owner says it has sent up to 2: number 2 is taken for good
        store.commit_displacing(session, heartbeat, sent_up_to=2)
    store.commit_displacing(session, heartbeat, sent_up_to=1)  # QuickFIX gave 2 to a heartbeat
    assert not store.delivered(session, "e2:O"), "the displaced event will be delivered again if we stop now"
    assert [m.body for m in store.load(session).messages][1] == heartbeat.body
    store.commit_displacing(session, message(3, b"9"), sent_up_to=2, inbox_id="e2:O", order_id="o2",
                            order_view="v2")
    assert store.delivered(session, "e2:O") and not store.delivered(session, "e3:O")
    store.commit_displacing(session, message(4), sent_up_to=3, inbox_id="e3:O", order_id="o3", order_view="v3")
    state = store.load_state(session)
    assert (state.last_sent_seq_num, state.sender_seq_num) == (4, 5)
    assert store.delivered_many(session, ["e1:O", "e2:O", "e3:O"]) == {"e1:O", "e2:O", "e3:O"}
    with pytest.raises(SequenceReuse):  # sent and never committed ahead: never rewritten
        store.commit_displacing(session, message(4, b"0"), sent_up_to=3)


def test_clordid_window_remembers_the_first_use(store: SessionStore) -> None:
    session = claimed(store)
    assert store.claim_clordid(session, "A1", '{"orderId":"x"}', 60_000)
    assert not store.claim_clordid(session, "A1", '{"orderId":"y"}', 60_000)
    assert store.clordid_record(session, "A1") == '{"orderId":"x"}'
    assert 0 < store.client.pttl(session.clordid("A1")) <= 60_000
    stale = SessionStore(store.client, FixedEpoch(99))
    with pytest.raises(FencedWrite):
        stale.claim_clordid(session, "B1", "{}", 60_000)


def test_several_sessions_targets_in_one_round_trip_each_fenced(store: SessionStore) -> None:
    a, b = claimed(store), claimed(store)
    store.set_next_target_seq_nums({a: 17, b: 4})
    assert (store.load_state(a).target_seq_num, store.load_state(b).target_seq_num) == (17, 4)
    stale = SessionStore(store.client, FixedEpoch(0))
    with pytest.raises(FencedWrite):
        stale.set_next_target_seq_nums({a: 99})
    assert store.load_state(a).target_seq_num == 17


def test_a_claim_and_its_append_land_together_or_not_at_all(shared_standalone) -> None:  # type: ignore[no-untyped-def]
    store = SessionStore(connect(RedisEndpoint(url=shared_standalone.url)), FixedEpoch(1))
    session = claimed(store)
    tag = uuid.uuid4().hex
    stream, guard = f"test:{{{tag}}}:commands", f"test:{{{tag}}}:relocation"
    assert store.claim_clordid_and_append(session, "c1", "rec", 60_000, stream, {"command": "one"}, guard)
    assert not store.claim_clordid_and_append(session, "c1", "rec2", 60_000, stream, {"command": "two"}, guard)
    entries = store.client.xrange(stream)
    assert [f[b"command"] for _, f in entries] == [b"one"], "a second use appends nothing"
    assert store.clordid_record(session, "c1") == "rec"
    with pytest.raises(FencedWrite):
        SessionStore(store.client, FixedEpoch(0)).claim_clordid_and_append(session, "c2", "r", 1000, stream,
                                                                           {"command": "x"}, guard)
    assert store.client.xlen(stream) == 1 and store.clordid_record(session, "c2") is None
    # While the guard (a partition's relocation marker) exists: nothing claimed, nothing appended.
    store.client.hset(guard, "state", "frozen")
    with pytest.raises(StoreError, match="RELOCATING"):
        store.claim_clordid_and_append(session, "c3", "r3", 60_000, stream, {"command": "three"}, guard)
    assert store.client.xlen(stream) == 1 and store.clordid_record(session, "c3") is None
