"""Seed 004's byte formats, byte for byte."""

from __future__ import annotations

import pytest

from sessionstore.codec import (
    RECORD_HEADER_SIZE,
    STATE_WIDTHS,
    OutboundRecord,
    SessionState,
    StoreCorruption,
    decode_record,
    decode_state,
    encode_seq_field,
    encode_state,
)
from sessionstore.keys import SessionKey, chunk_index, parse_key

KEY = "{ember/fsg/CLIVNDDEF1}/store/0"


def test_seed_example_seq_7_is_field_07000000_of_chunk_0() -> None:
    session = SessionKey("ember", "fsg", "CLIVNDDEF1")
    assert encode_seq_field(7) == bytes.fromhex("07000000")
    assert session.chunk_of(7) == "{ember/fsg/CLIVNDDEF1}/store/0"
    assert session.state == "{ember/fsg/CLIVNDDEF1}/state"


def test_chunk_boundaries_1023_1024_1025() -> None:
    assert [chunk_index(s) for s in (1023, 1024, 1025, 2047, 2048)] == [0, 1, 1, 1, 2]


def test_state_field_widths_are_4_4_8_8_4() -> None:
    assert list(STATE_WIDTHS.values()) == [4, 4, 8, 8, 4]
    encoded = encode_state(SessionState(5, 9, 1_700_000_000_000_000_000, 1_700_000_000_000_000_001, 4))
    assert {k: len(v) for k, v in encoded.items()} == {
        "senderSeqNum": 4, "targetSeqNum": 4, "sessionStartTime": 8, "connectionStartTime": 8, "lastSentSeqNum": 4}
    assert encoded["senderSeqNum"] == bytes.fromhex("05000000")
    assert encoded["sessionStartTime"] == (1_700_000_000_000_000_000).to_bytes(8, "little")


def test_state_round_trip_and_missing_fields_take_defaults() -> None:
    state = SessionState(12, 34, 111, 222, 11)
    raw = {k.encode(): v for k, v in encode_state(state).items()}
    assert decode_state("k", raw) == state
    assert decode_state("k", {}) == SessionState(1, 1, None, None, 0)
    assert decode_state("k", {b"targetSeqNum": b"\x09\x00\x00\x00"}).target_seq_num == 9


def test_state_field_of_wrong_width_names_key_and_field() -> None:
    with pytest.raises(StoreCorruption, match=r"k/state field lastSentSeqNum: expected 4 bytes, found 3"):
        decode_state("k/state", {b"lastSentSeqNum": b"\x01\x00\x00"})


def test_record_layout_is_byte_exact() -> None:
    rec = OutboundRecord(seq_num=7, sending_time=0x0102030405060708, msg_type=b"D", body=b"8=FIX.4.4\x01")
    raw = rec.encode()
    expected = (
        (24 + 1 + 10).to_bytes(4, "little")
        + (7).to_bytes(4, "little")
        + (0x0102030405060708).to_bytes(8, "little")
        + (1).to_bytes(4, "little")
        + (10).to_bytes(4, "little")
        + b"D"
        + b"8=FIX.4.4\x01"
    )
    assert RECORD_HEADER_SIZE == 24
    assert raw == expected
    assert decode_record(KEY, encode_seq_field(7), raw) == rec


def test_truncated_record_is_a_clear_error() -> None:
    raw = OutboundRecord(7, 1, b"8", b"x" * 50).encode()
    with pytest.raises(StoreCorruption, match=r"store/0 field 7: record length says 75 bytes, value has 60"):
        decode_record(KEY, encode_seq_field(7), raw[:60])
    with pytest.raises(StoreCorruption, match="truncated"):
        decode_record(KEY, encode_seq_field(7), raw[:10])


def test_wrong_seq_num_inside_record_is_a_clear_error() -> None:
    raw = OutboundRecord(8, 1, b"8", b"body").encode()
    with pytest.raises(StoreCorruption, match=r"field 7: record carries seqNum 8"):
        decode_record(KEY, encode_seq_field(7), raw)


def test_inconsistent_type_and_body_lengths_are_reported() -> None:
    raw = bytearray(OutboundRecord(7, 1, b"8", b"body").encode())
    raw[16:20] = (5).to_bytes(4, "little")  # msgTypeLen lies
    with pytest.raises(StoreCorruption, match="msgTypeLen 5"):
        decode_record(KEY, encode_seq_field(7), bytes(raw))


def test_keys_share_one_hash_tag_and_parse_back() -> None:
    s = SessionKey("uat", "dc", "CLIENT1")
    assert {k.split("}")[0] for k in (s.state, s.chunk(3), s.owner, s.inbox, s.clordid("A1"))} == {"{uat/dc/CLIENT1"}
    assert parse_key(s.chunk(3)) == (s, "store/3")
    assert parse_key("{uat/dc}/lock") is None
    assert SessionKey.parse("uat/dc/CLIENT1") == s
    with pytest.raises(ValueError, match="namespace/gateway/name"):
        SessionKey.parse("uat/CLIENT1")
    with pytest.raises(ValueError, match="must not contain"):
        SessionKey("u{", "dc", "x")


def test_fast_record_path_agrees_with_the_construct_definition() -> None:
    import random

    from sessionstore.codec import RECORD

    rng = random.Random(7)
    for _ in range(300):
        msg_type = bytes(rng.choice(b"0123456789ABDFGHj") for _ in range(rng.randint(1, 2)))
        body = rng.randbytes(rng.randint(0, 2000))
        rec = OutboundRecord(rng.randint(1, 2**32 - 1), rng.randint(-(2**63), 2**63 - 1), msg_type, body)
        built = RECORD.build(dict(record_length=24 + len(msg_type) + len(body), seq_num=rec.seq_num,
                                  sending_time=rec.sending_time, msg_type_len=len(msg_type), body_len=len(body),
                                  msg_type=msg_type, body=body))
        assert rec.encode() == built
        parsed = RECORD.parse(built)
        assert decode_record(KEY, encode_seq_field(rec.seq_num), built) == OutboundRecord(
            parsed.seq_num, parsed.sending_time, parsed.msg_type, parsed.body)
