"""Binary formats of seed 004, byte for byte, written with ``construct``.

Owns: the session state hash (fixed-width little-endian fields) and the outbound
message record. Knows nothing of Redis connections or QuickFIX. Every decode validates
what the seed calls redundant (record length, sequence number) and raises
``StoreCorruption`` naming the key and the field rather than return wrong data.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, replace
from typing import Any

from construct import Bytes, FormatField, Int32ul, Int64sl, Struct, this

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


def _packer(fixed: Struct) -> struct.Struct:
    """A ``struct`` packer derived from a construct Struct of fixed-width fields.

    The outbound record is on every message's path, and construct's own build costs
    ~14 µs a record here (compiled) against <1 µs for ``struct``; deriving the packer from
    the construct definition keeps that definition the single source of the layout
    (tests check both agree byte for byte).
    """
    fmts = []
    for sub in fixed.subcons:
        field = sub.subcon
        assert isinstance(field, FormatField), f"{sub.name} is not fixed-width"
        assert field.fmtstr[0] == "<", f"{sub.name} is not little-endian"
        fmts.append(field.fmtstr[1:])
    return struct.Struct("<" + "".join(fmts))


_HEADER = _packer(RECORD_HEADER)

SEQ_FIELD = Int32ul  # hash field name of a stored message: u32 LE seqNum
_SEQ = _packer(Struct("seq_num" / SEQ_FIELD))

# --- the state hash ------------------------------------------------------------------
STATE_FIELDS = {
    "senderSeqNum": Int32ul,
    "targetSeqNum": Int32ul,
    "sessionStartTime": Int64sl,
    "connectionStartTime": Int64sl,
    "lastSentSeqNum": Int32ul,
}
STATE_WIDTHS = {name: fmt.sizeof() for name, fmt in STATE_FIELDS.items()}  # 4,4,8,8,4
_STATE = {name: struct.Struct(fmt.fmtstr) for name, fmt in STATE_FIELDS.items()}  # derived, as _packer


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

    def with_(self, **changes: Any) -> SessionState:
        return replace(self, **changes)


STATE_ATTRS = {
    "senderSeqNum": "sender_seq_num",
    "targetSeqNum": "target_seq_num",
    "sessionStartTime": "session_start_time",
    "connectionStartTime": "connection_start_time",
    "lastSentSeqNum": "last_sent_seq_num",
}


def encode_state_field(field: str, value: int) -> bytes:
    return _STATE[field].pack(value)


def encode_state(state: SessionState) -> dict[str, bytes]:
    """Fields to HSET; unset timestamps are left out (a missing field means unset)."""
    out: dict[str, bytes] = {}
    for field, attr in STATE_ATTRS.items():
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
        values[STATE_ATTRS[name]] = _STATE[name].unpack(value)[0]
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
        """The record bytes of seed 004 (layout: ``RECORD``)."""
        header = _HEADER.pack(
            RECORD_HEADER_SIZE + len(self.msg_type) + len(self.body),
            self.seq_num,
            self.sending_time,
            len(self.msg_type),
            len(self.body),
        )
        return header + self.msg_type + self.body


def encode_seq_field(seq_num: int) -> bytes:
    return _SEQ.pack(seq_num)


def decode_seq_field(key: str, field: bytes) -> int:
    if len(field) != 4:
        raise StoreCorruption(key, field.hex(), f"field name must be 4 bytes, found {len(field)}")
    return int(_SEQ.unpack(field)[0])


def decode_record(key: str, field: bytes, raw: bytes) -> OutboundRecord:
    """Decode one ``/store/<chunk>`` value, checking it against its field and itself."""
    field_seq = decode_seq_field(key, field)
    where = f"{field_seq}"
    if len(raw) < RECORD_HEADER_SIZE:
        raise StoreCorruption(
            key, where, f"record truncated: {len(raw)} bytes, header alone is {RECORD_HEADER_SIZE}"
        )
    record_length, seq_num, sending_time, type_len, body_len = _HEADER.unpack_from(raw)
    if record_length != len(raw):
        raise StoreCorruption(key, where, f"record length says {record_length} bytes, value has {len(raw)}")
    expected = RECORD_HEADER_SIZE + type_len + body_len
    if expected != len(raw):
        raise StoreCorruption(
            key,
            where,
            f"msgTypeLen {type_len} + bodyLen {body_len} + header {RECORD_HEADER_SIZE} = {expected}, "
            f"value has {len(raw)}",
        )
    if seq_num != field_seq:
        raise StoreCorruption(key, where, f"record carries seqNum {seq_num}")
    type_end = RECORD_HEADER_SIZE + type_len
    return OutboundRecord(seq_num, sending_time, raw[RECORD_HEADER_SIZE:type_end], raw[type_end:])


def fix_framing_problem(body: bytes, seq_num: int) -> str | None:
    """What is wrong with a stored FIX message's framing, or None: BodyLength (9) must count the
    bytes between its own field and CheckSum (10), CheckSum must be the byte sum mod 256, and
    MsgSeqNum (34) must be the number the message is stored under."""
    if not body.startswith(b"8=") or b"\x019=" not in body[:32]:
        return "does not start with BeginString (8) and BodyLength (9)"
    head_end = body.index(b"\x01", body.index(b"\x019=") + 1) + 1
    trailer = body.rfind(b"\x0110=")
    if trailer < 0 or not body.endswith(b"\x01") or len(body) - trailer != 8:
        return "does not end with a three-digit CheckSum (10)"
    declared = body[body.index(b"\x019=") + 3:head_end - 1]
    if not declared.isdigit() or int(declared) != trailer + 1 - head_end:
        return f"BodyLength (9) says {declared.decode('latin-1')}, the body has {trailer + 1 - head_end} bytes"
    checksum = body[trailer + 4:trailer + 7]
    if not checksum.isdigit() or int(checksum) != sum(body[:trailer + 1]) % 256:
        return f"CheckSum (10) says {checksum.decode('latin-1')}, the bytes sum to {sum(body[:trailer + 1]) % 256:03d}"
    at = body.find(b"\x0134=")
    if at < 0:
        return "has no MsgSeqNum (34)"
    value = body[at + 4:body.index(b"\x01", at + 1)]
    if value != str(seq_num).encode():
        return f"MsgSeqNum (34) is {value.decode('latin-1')}, stored under {seq_num}"
    return None
