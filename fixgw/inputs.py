"""What the gateway accepts from a counterparty: pure checks that say why an input is refused.

Rules of this file: plain text in, a reason (for the counterparty's Text field) or None out.
No QuickFIX, no Redis, so every check is tested on its own and every caller answers alike.
"""

from __future__ import annotations

import re

MSG_SEQ_NUM, MSG_TYPE, HEART_BT_INT, RESET_SEQ_NUM_FLAG = 34, 35, 108, 141
MAX_SEQ_NUM = 2**32 - 1  # the session store keeps sequence numbers as u32 (seed 004)
MAX_HEART_BT_INT = 3600  # seconds; longer than an hour is a mistake, not a heartbeat
WHOLE_NUMBER = re.compile(r"[0-9]{1,10}\Z")  # ASCII digits only: str.isdigit() takes any script's digits

# Text the gateway acts on (identifiers, symbols, accounts) must be printable ASCII and short:
# it becomes Redis keys, command fields and the echo in every report about the order.
PRINTABLE_ASCII = re.compile(r"[\x20-\x7e]*\Z")
TEXT_LIMITS = {11: ("ClOrdID", 64), 41: ("OrigClOrdID", 64), 1: ("Account", 64), 55: ("Symbol", 32),
               37: ("OrderID", 128)}


def split_fields(raw: str) -> list[tuple[int, str]]:
    """``tag=value`` pairs of a raw message in wire order; unparsable parts are skipped."""
    out: list[tuple[int, str]] = []
    for part in raw.split("\x01"):
        tag, sep, value = part.partition("=")
        # isascii() and isdigit() is WHOLE_NUMBER without a regex call (the hot path: every field)
        if sep and tag.isascii() and tag.isdigit() and len(tag) <= 10:
            out.append((int(tag), value))
    return out


def text_problem(fields: dict[int, str]) -> tuple[int, str] | None:
    """The first identifier/text field the gateway cannot take, with the reason."""
    for tag, (name, limit) in TEXT_LIMITS.items():
        value = fields.get(tag)
        if value is None:
            continue
        if not PRINTABLE_ASCII.match(value):
            return tag, f"{name} ({tag}) must be printable ASCII"
        if len(value) > limit:
            return tag, f"{name} ({tag}) is longer than {limit} characters"
    return None


def printable(value: str | None, default: str = "") -> str:
    """``value`` if it can be echoed in a report as it is, else ``default``."""
    return value if value is not None and PRINTABLE_ASCII.match(value) else default


def logon_problem(raw: str) -> str | None:
    """Why a Logon must be refused before QuickFIX acts on it, or None.

    QuickFIX resets a session's sequence numbers for ResetSeqNumFlag=Y *before* it checks the
    Logon's MsgSeqNum, so these checks run on the raw text, ahead of the engine.
    """
    fields = dict(split_fields(raw))
    seq = fields.get(MSG_SEQ_NUM, "")
    if not WHOLE_NUMBER.match(seq) or not 1 <= int(seq) <= MAX_SEQ_NUM:
        return f"MsgSeqNum (34) must be a whole number 1..{MAX_SEQ_NUM}, got {printable(seq[:20], '?')!r}"
    if fields.get(RESET_SEQ_NUM_FLAG) == "Y" and int(seq) != 1:
        return f"ResetSeqNumFlag=Y (141) needs MsgSeqNum (34) 1, got {seq}"
    hb = fields.get(HEART_BT_INT)
    if hb is None or not WHOLE_NUMBER.match(hb) or int(hb) > MAX_HEART_BT_INT:
        shown = "none" if hb is None else repr(printable(hb[:20], "?"))
        return f"HeartBtInt (108) must be a whole number of seconds 0..{MAX_HEART_BT_INT}, got {shown}"
    return None
