"""FIX message helpers shared by the gateway's callbacks: wire bytes, body fields, replies.

Bytes: the bindings hand Python each std::string decoded as UTF-8 with ``surrogateescape``,
so any byte a client sends survives as a lone surrogate; ``wire_bytes`` turns the text back
into exactly the bytes QuickFIX has, whatever they are (FIX allows any byte in some fields).
What is *accepted* is decided in ``inputs`` (pure); this file only reads and builds messages.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from types import ModuleType

import quickfix as fix

from sessionstore import OrderIndex
from sessionstore.store import NO_INDEX

from .inputs import split_fields


def wire_bytes(message: fix.Message) -> bytes:
    """The message exactly as QuickFIX holds it (and sends it), byte for byte."""
    return message.toString().encode("utf-8", "surrogateescape")


# QuickFIX's own list (Message::isHeaderField): the fields it keeps in the header, which it
# writes 8, 9, 35 first and then in ascending tag order (message_order::header).
QUICKFIX_HEADER_TAGS = frozenset({8, 9, 35, 49, 56, 115, 128, 90, 91, 34, 50, 142, 57, 143, 116, 144, 129, 145, 43,
                                  97, 52, 122, 212, 213, 347, 369, 627})


def filled(text: str, begin_string: str, sender: str, target: str, seq: int, sending_time: str) -> bytes:
    """The wire bytes QuickFIX will send for the message whose ``toString()`` is ``text`` once
    ``Session::fill`` has set BeginString, SenderCompID, TargetCompID, MsgSeqNum and
    SendingTime: the header rebuilt in QuickFIX's order, BodyLength and CheckSum recomputed.

    One ``toString`` instead of a dozen calls into the bindings per message (each call hands
    the GIL over, and the intake thread and QuickFIX's threads contend for it: the profile's
    largest cost). ``toApp`` still compares what QuickFIX really sends with these bytes.
    """
    parts = text.encode("utf-8", "surrogateescape").split(b"\x01")[:-1]  # the last is after the final SOH
    header: dict[int, bytes] = {}
    at = 0
    for at, part in enumerate(parts):  # noqa: B007 (``at`` is where the body starts)
        tag = int(part[:part.index(b"=")])
        if tag not in QUICKFIX_HEADER_TAGS:
            break
        header[tag] = part
    else:
        at = len(parts)
    body = parts[at:-1] if parts and parts[-1].startswith(b"10=") else parts[at:]
    header[49] = b"49=" + sender.encode()
    header[56] = b"56=" + target.encode()
    header[34] = b"34=%d" % seq
    header[52] = b"52=" + sending_time.encode()
    msg_type = header.pop(35)
    header.pop(8, None)
    header.pop(9, None)
    rest = b"\x01".join([msg_type, *(header[t] for t in sorted(header)), *body]) + b"\x01"
    head = b"8=%s\x019=%d\x01" % (begin_string.encode(), len(rest))
    return head + rest + b"10=%03d\x01" % ((sum(head) + sum(rest)) % 256)


def filled_body(text: str, begin_string: str, sender: str, target: str, seq: int, sending_time: str) -> bytes:
    """``filled`` for a text ``body_text`` made (MsgType, then body fields only, none of them a
    header field): the header goes in front of the body as it is, without taking the text
    apart (the dispatcher's send path: every report, for every session it goes to)."""
    cut = text.index("\x01") + 1
    rest = (f"{text[:cut]}34={seq}\x0149={sender}\x0152={sending_time}\x0156={target}\x01{text[cut:]}"
            .encode("utf-8", "surrogateescape"))
    head = b"8=%s\x019=%d\x01" % (begin_string.encode(), len(rest))
    return head + rest + b"10=%03d\x01" % ((sum(head) + sum(rest)) % 256)


@dataclass(frozen=True, slots=True)
class Inbound:
    """An inbound application message, read once from its text.

    Every call into the bindings hands the GIL over (see ``filled``); a request used to make
    ten of them (header fields, flags, body) on QuickFIX's thread. Now one ``toString``."""

    text: str  # ``toString()`` of the message as it came
    msg_type: str
    seq: str  # MsgSeqNum as received
    poss_dup: bool  # PossDupFlag (43) = Y
    poss_resend: bool  # PossResend (97) = Y
    fields: dict[int, str]  # body fields as the wire text had them (no float ever touches a price); first wins

    @property
    def possdup(self) -> bool:
        """Possibly seen before, either way."""
        return self.poss_dup or self.poss_resend


def inbound(message: fix.Message) -> Inbound:
    """``Inbound`` from one ``toString``: header and body fields, the first of each tag wins."""
    body: dict[int, str] = {}
    header: dict[int, str] = {}
    text = message.toString()
    for tag, value in split_fields(text):
        if tag in QUICKFIX_HEADER_TAGS:
            header.setdefault(tag, value)
        elif tag != 10 and tag not in body:
            body[tag] = value
    return Inbound(text, header.get(35, ""), header.get(34, ""), header.get(43) == "Y", header.get(97) == "Y",
                   body)


def inbound_reader(native: ModuleType | None) -> Callable[[fix.Message], Inbound]:
    """``inbound``, or with the native order path the same made in C++ from one ``toString``
    (``inbound_parts`` in ``fixgw/_sendpath.cpp``: the same rules, the same result; ~10 µs an
    order less on QuickFIX's session thread, with the interpreter held)."""
    if native is None:
        return inbound
    parts = native.inbound_parts
    return lambda message: Inbound(*parts(message, QUICKFIX_HEADER_TAGS))


def build(msg_type: str, fields: list[tuple[int, str]]) -> fix.Message:
    m = fix.Message()
    m.getHeader().setField(fix.MsgType(msg_type))
    for tag, value in fields:
        if value != "":  # an empty field is a session-level reject at the counterparty
            m.setField(fix.StringField(tag, value))
    if msg_type == "8":
        m.setField(fix.TransactTime())
    return m


def body_text(msg_type: str, fields: list[tuple[int, str]]) -> str:
    """What ``build(msg_type, fields).toString()`` holds, without its 8/9/10, made in Python:
    fields in ascending tag order as QuickFIX keeps them (no repeating groups here), empty
    ones left out, TransactTime added to an ExecutionReport. ``from_text`` turns it into the
    message with two calls into the bindings instead of two per field (the dispatcher's
    profile: building reports was an eighth of its time). No header field may be among
    ``fields``: the text is MsgType, then body fields only (``filled_body``)."""
    body = {tag: value for tag, value in fields if value != ""}
    if not QUICKFIX_HEADER_TAGS.isdisjoint(body):  # (``filled_body`` relies on it)
        raise ValueError(f"header fields among a message's body fields: {sorted(QUICKFIX_HEADER_TAGS & set(body))}")
    if msg_type == "8" and 60 not in body:
        body[60] = transact_time()
    return f"35={msg_type}\x01" + "".join([f"{tag}={body[tag]}\x01" for tag in sorted(body)])


_second: tuple[int, str] = (0, "")


def _utc_second(now: int) -> str:
    """``now`` (whole seconds since the epoch) as QuickFIX writes a UTC timestamp, without
    fractions: formatted once a second, not once a message (a report or a batch asks for it)."""
    global _second
    second = _second  # one read: another thread may replace it meanwhile
    if second[0] != now:
        second = _second = (now, datetime.fromtimestamp(now, UTC).strftime("%Y%m%d-%H:%M:%S"))
    return second[1]


# The wall clock the gateway stamps its messages with: the host's, until the gateway anchors it
# to its datastore's (``datastore.clock.ClockWatch.now_ns``), which a step of the host's clock
# does not move. A report stamped by a stepped clock would be refused by the client's engine
# (SendingTime accuracy problem) and lost to it, its number consumed.
wall_ns: Callable[[], int] = time.time_ns


def transact_time() -> str:
    """TransactTime as QuickFIX's ``fix.TransactTime()`` writes it (UTC, whole seconds)."""
    return _utc_second(wall_ns() // 1_000_000_000)


def sending_time() -> str:
    """SendingTime as QuickFIX writes it (UTC, milliseconds)."""
    ms = wall_ns() // 1_000_000
    return f"{_utc_second(ms // 1000)}.{ms % 1000:03d}"


def from_text(text: str, into: fix.Message | None = None) -> fix.Message:
    """The message whose fields ``text`` lists (``body_text``); QuickFIX fills the header.
    ``into``: a message to refill instead of a new one (``setString`` clears it first)."""
    m = fix.Message() if into is None else into
    m.setString(text, False)
    return m


def session_reject(ref_seq: str, ref_msg_type: str, tag: int, reason_code: str, text: str) -> fix.Message:
    """Reject (35=3) of one inbound message: RefSeqNum, RefTagID, RefMsgType, reason, text."""
    return build("3", [(45, ref_seq), (371, str(tag)), (372, ref_msg_type), (373, reason_code), (58, text)])


def business_reject(ref_seq: str, ref_msg_type: str, text: str, ref_id: str = "") -> fix.Message:
    """BusinessMessageReject (35=j), reason 0 (Other), for a request we could not process."""
    return build("j", [(45, ref_seq), (372, ref_msg_type), (379, ref_id), (380, "0"), (58, text)])


@dataclass(slots=True)
class SessionMessage:
    """One event's message for one session, handed to ``GatewayApplication.deliver_many``."""

    text: str  # MsgType and body as QuickFIX's ``toString`` holds them; QuickFIX fills the header when it sends
    msg_type: str
    inbox_id: str  # what the session's inbox records: each event reaches a session once
    order_id: str = ""
    order_view: str = ""  # the order's view after this message ('' = unchanged)
    seq: int = 0  # the number it was committed under (0: not committed ahead)
    raw: bytes = b""  # the message exactly as committed
    sending_time: str = ""
    index: OrderIndex = NO_INDEX  # what this message does to its order's ClOrdID records and retention
    plain: bool = False  # ``text`` is what ``fixmsg.body_text`` made: MsgType, then body fields only
