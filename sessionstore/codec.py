"""Binary formats of seed 004, byte for byte, written with ``construct``.

Owns: the session state hash (fixed-width little-endian fields) and the outbound
message record. Knows nothing of Redis connections or QuickFIX. Every decode validates
what the seed calls redundant (record length, sequence number) and raises
``StoreCorruption`` naming the key and the field rather than return wrong data.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from construct import Bytes, Int32ul, Int64sl, Struct, this


# --- the outbound record -------------------------------------------------------------
#
#  Record Length u32 | SeqNum u32 | SendingTime i64 ns | MsgTypeLen u32 | BodyLen u32 |
#  MsgType bytes | Body bytes
#
# Record Length counts the whole record, its own four bytes included (24 + type + body).
RECORD_HEADER = Struct(
    "record_length" / Int32ul,
    "seq_num" / Int32ul,
    "sending_time" / Int64sl,
    "msg_type_len" / Int32ul,
    "body_len" / Int32ul,
)
RECORD_HEADER_SIZE = RECORD_HEADER.sizeof()  # 24

RECORD = Struct(
    "record_length" / Int32ul,
    "seq_num" / Int32ul,
    "sending_time" / Int64sl,
    "msg_type_len" / Int32ul,
    "body_len" / Int32ul,
    "msg_type" / Bytes(this.msg_type_len),
    "body" / Bytes(this.body_len),
)
# Compiled once: the outbound record is on every message's path.
_RECORD = RECORD.compile()
_HEADER = RECORD_HEADER.compile()

SEQ_FIELD = Int32ul.compile()  # hash field name of a stored message: u32 LE seqNum

# --- the state hash ------------------------------------------------------------------
STATE_FIELDS = {
    "senderSeqNum": Int32ul,
    "targetSeqNum": Int32ul,
    "sessionStartTime": Int64sl,
    "connectionStartTime": Int64sl,
    "lastSentSeqNum": Int32ul,
}
STATE_WIDTHS = {name: fmt.sizeof() for name, fmt in STATE_FIELDS.items()}  # 4,4,8,8,4
_STATE = {name: fmt.compile() for name, fmt in STATE_FIELDS.items()}


class StoreCorruption(Exception):
    """Stored bytes do not decode to what the key and field promise."""

    def __init__(self, key: str, field: str, problem: str) -> None:
        super().__init__(f"{key} field {field}: {problem}")
        self.key = key
        self.field = field
        self.problem = problem


@dataclass(frozen=True, slots=True)
class SessionState:
    """The five fields of seed 004's state hash, with the seed's defaults."""

    sender_seq_num: int = 1
    target_seq_num: int = 1
    session_start_time: int | None = None  # ns since epoch; None = unset
    connection_start_time: int | None = None
    last_sent_seq_num: int = 0

    def with_(self, **changes: int | None) -> SessionState:
        return replace(self, **changes)


_ATTR = {
    "senderSeqNum": "sender_seq_num",
    "targetSeqNum": "target_seq_num",
    "sessionStartTime": "session_start_time",
    "connectionStartTime": "connection_start_time",
    "lastSentSeqNum": "last_sent_seq_num",
}


def encode_state_field(field: str, value: int) -> bytes:
    return _STATE[field].build(value)


def encode_state(state: SessionState) -> dict[str, bytes]:
    """Fields to HSET; unset timestamps are left out (a missing field means unset)."""
    out: dict[str, bytes] = {}
    for field, attr in _ATTR.items():
        value = getattr(state, attr)
        if value is not None:
            out[field] = encode_state_field(field, value)
    return out


def decode_state(key: str, raw: dict[bytes, bytes]) -> SessionState:
    """Decode an HGETALL of ``…/state``; missing fields take the seed's defaults."""
    values: dict[str, int] = {}
    for name_b, value in raw.items():
        name = name_b.decode("ascii", "replace")
        if name not in _STATE:
            raise StoreCorruption(key, name, "unknown state field")
        width = STATE_WIDTHS[name]
        if len(value) != width:
            raise StoreCorruption(key, name, f"expected {width} bytes, found {len(value)}")
        values[_ATTR[name]] = _STATE[name].parse(value)
    return SessionState(**values)


# --- outbound records ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OutboundRecord:
    """One outbound FIX message as stored: body is the complete message as sent."""

    seq_num: int
    sending_time: int  # ns since epoch
    msg_type: bytes
    body: bytes

    def encode(self) -> bytes:
        return _RECORD.build(
            dict(
                record_length=RECORD_HEADER_SIZE + len(self.msg_type) + len(self.body),
                seq_num=self.seq_num,
                sending_time=self.sending_time,
                msg_type_len=len(self.msg_type),
                body_len=len(self.body),
                msg_type=self.msg_type,
                body=self.body,
            )
        )


def encode_seq_field(seq_num: int) -> bytes:
    return SEQ_FIELD.build(seq_num)


def decode_seq_field(key: str, field: bytes) -> int:
    if len(field) != 4:
        raise StoreCorruption(key, field.hex(), f"field name must be 4 bytes, found {len(field)}")
    return SEQ_FIELD.parse(field)


def decode_record(key: str, field: bytes, raw: bytes) -> OutboundRecord:
    """Decode one ``/store/<chunk>`` value, checking it against its field and itself."""
    field_seq = decode_seq_field(key, field)
    where = f"{field_seq}"
    if len(raw) < RECORD_HEADER_SIZE:
        raise StoreCorruption(
            key, where, f"record truncated: {len(raw)} bytes, header alone is {RECORD_HEADER_SIZE}"
        )
    header = _HEADER.parse(raw)
    if header.record_length != len(raw):
        raise StoreCorruption(
            key, where, f"record length says {header.record_length} bytes, value has {len(raw)}"
        )
    expected = RECORD_HEADER_SIZE + header.msg_type_len + header.body_len
    if expected != len(raw):
        raise StoreCorruption(
            key,
            where,
            f"msgTypeLen {header.msg_type_len} + bodyLen {header.body_len} + header "
            f"{RECORD_HEADER_SIZE} = {expected}, value has {len(raw)}",
        )
    if header.seq_num != field_seq:
        raise StoreCorruption(key, where, f"record carries seqNum {header.seq_num}")
    parsed = _RECORD.parse(raw)
    return OutboundRecord(parsed.seq_num, parsed.sending_time, parsed.msg_type, parsed.body)
