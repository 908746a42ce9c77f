"""The session store, instrumented for tests against real Valkey."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from fixgw.fixmsg import filled_body
from sessionstore import OutboundRecord, SessionKey, SessionState, SessionStore
from sessionstore.codec import encode_seq_field, encode_state
from sessionstore.keys import chunk_index


class CountedStore(SessionStore):
    """The real store, counting its round trips (each ``write`` is one, of ``len(calls)`` calls)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.writes: list[int] = []
        super().__init__(*args, **kwargs)

    def write(self, calls: list[Any], raise_on_error: bool = True, also_fenced_by: Any = ()) -> list[Any]:
        self.writes.append(len(calls))
        return super().write(calls, raise_on_error, also_fenced_by)


def report_text(seq: int) -> str:
    """The body of a plausible ExecutionReport (FIX 4.4: every required field) for number ``seq``,
    its fields in the order QuickFIX writes them (ascending tags), as a resend writes it again."""
    return (f"35=8\x016=0\x0111=H{seq}\x0114=0\x0117=E{seq}\x0137=O{seq}\x0138=100\x0139=0\x0140=2\x01"
            f"44=10.25\x0154=1\x0155=ACME\x0160=20261203-09:00:00\x01150=0\x01151=100\x01")


def store_history(client: Any, key: SessionKey, count: int, *, sender: str = "FIXGW", target: str | None = None,
                  begin_string: str = "FIX.4.4", start_ns: int | None = None, first: int = 1) -> dict[int, bytes]:
    """Store ``count`` outbound reports (numbers ``first``…) for ``key`` directly, in seed 004's
    format, as a gateway that sent them would have left them (state included), a chunk per
    command and many commands per round trip. Returns each number's stored message."""
    target = target or key.name
    start_ns = start_ns or time.time_ns()
    stamp = datetime.fromtimestamp(start_ns // 1_000_000_000, UTC).strftime("%Y%m%d-%H:%M:%S.000")
    bodies: dict[int, bytes] = {}
    pipe = client.pipeline(transaction=False)
    pending = 0
    chunk: list[bytes] = []
    chunk_at = chunk_index(first)
    last = first + count - 1
    for seq in range(first, last + 1):
        body = filled_body(report_text(seq), begin_string, sender, target, seq, stamp)
        bodies[seq] = body
        chunk += [encode_seq_field(seq), OutboundRecord(seq, start_ns, b"8", body).encode()]
        if chunk_index(seq + 1) != chunk_at or seq == last:
            pipe.hset(key.chunk(chunk_at), mapping=dict(zip(chunk[::2], chunk[1::2])))
            chunk, chunk_at, pending = [], chunk_index(seq + 1), pending + 1
            if pending >= 64:
                pipe.execute()
                pending = 0
    state = SessionState(sender_seq_num=last + 1, target_seq_num=1, session_start_time=start_ns,
                         last_sent_seq_num=last)
    pipe.hset(key.state, mapping=encode_state(state))
    pipe.execute()
    return bodies
