"""FIX message helpers shared by the gateway's callbacks: wire bytes, body fields, replies.

Bytes: the bindings hand Python each std::string decoded as UTF-8 with ``surrogateescape``,
so any byte a client sends survives as a lone surrogate; ``wire_bytes`` turns the text back
into exactly the bytes QuickFIX has, whatever they are (FIX allows any byte in some fields).
What is *accepted* is decided in ``inputs`` (pure); this file only reads and builds messages.
"""

from __future__ import annotations

import quickfix as fix

from .inputs import split_fields

HEADER_TAGS = frozenset({8, 9, 35, 34, 49, 56, 52, 43, 97, 122, 115, 128, 116, 129, 144, 145, 50, 57, 142, 143, 10})


def wire_bytes(message: fix.Message) -> bytes:
    """The message exactly as QuickFIX holds it (and sends it), byte for byte."""
    return message.toString().encode("utf-8", "surrogateescape")


def message_fields(message: fix.Message) -> dict[int, str]:
    """Body fields as the wire text had them (no float ever touches a price); first wins."""
    out: dict[int, str] = {}
    for tag, value in split_fields(message.toString()):
        if tag not in HEADER_TAGS and tag not in out:
            out[tag] = value
    return out


def build(msg_type: str, fields: list[tuple[int, str]]) -> fix.Message:
    m = fix.Message()
    m.getHeader().setField(fix.MsgType(msg_type))
    for tag, value in fields:
        if value != "":  # an empty field is a session-level reject at the counterparty
            m.setField(fix.StringField(tag, value))
    if msg_type == "8":
        m.setField(fix.TransactTime())
    return m


def session_reject(ref_seq: str, ref_msg_type: str, tag: int, reason_code: str, text: str) -> fix.Message:
    """Reject (35=3) of one inbound message: RefSeqNum, RefTagID, RefMsgType, reason, text."""
    return build("3", [(45, ref_seq), (371, str(tag)), (372, ref_msg_type), (373, reason_code), (58, text)])


def business_reject(ref_seq: str, ref_msg_type: str, text: str, ref_id: str = "") -> fix.Message:
    """BusinessMessageReject (35=j), reason 0 (Other), for a request we could not process."""
    return build("j", [(45, ref_seq), (372, ref_msg_type), (379, ref_id), (380, "0"), (58, text)])
