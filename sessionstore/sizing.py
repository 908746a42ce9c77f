"""``fixgw-sizing``: seed 004's Redis memory estimate, and a measurement to check it.

Estimate: n × m × X × G × B bytes, where B = 800 for 750-byte messages. B scales with the
message size: B = message size + 24 (record header) + 26 (Redis's per-field overhead,
the remainder of the seed's 800). Replicas multiply the primary figure; headroom covers
fragmentation. ``--measure`` writes synthetic messages through the real store and reports
what Redis actually spent per message.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from dataclasses import asdict, dataclass

from datastore.connection import RedisClient, connect
from datastore.settings import RedisEndpoint
from sessionstore.codec import RECORD_HEADER_SIZE, OutboundRecord
from sessionstore.keys import SessionKey, chunk_index
from sessionstore.store import FixedEpoch, SessionStore

SEED_MESSAGE_SIZE = 750
SEED_BYTES_PER_MESSAGE = 800
REDIS_FIELD_OVERHEAD = SEED_BYTES_PER_MESSAGE - SEED_MESSAGE_SIZE - RECORD_HEADER_SIZE  # 26
DEFAULT_HEADROOM = 25.0  # midpoint of the seed's 20–30 %
# Ours, beside seed 004's messages (MEMORY USAGE per entry on Valkey 9, realistic ids and views):
INBOX_ENTRY_BYTES = 110  # a delivered event's record in a session's inbox (sorted set)
CLOSED_VIEW_BYTES = 490  # a closed order's view (hash field, ~395) and its closing time (sorted set, ~95)
CLORDID_RECORD_BYTES = 740  # a ClOrdID's idempotency record (key, command and view JSON)


# A scheduled session's period, in days (fixgw/schedule.py): what its store holds before the next
# period starts new, the flow of every day of it counted (a weekly one's weekend included).
PERIOD_DAYS = {"daily": 1, "weekly": 7}


def days_kept(schedule: str, keep_periods: int = 0) -> int:
    """X for a schedule: its period's days, and as many again for each ended period kept."""
    return PERIOD_DAYS[schedule] * (1 + keep_periods)


def bytes_per_message(message_size: int) -> int:
    return message_size + RECORD_HEADER_SIZE + REDIS_FIELD_OVERHEAD


@dataclass(frozen=True, slots=True)
class Estimate:
    orders_per_day: int
    messages_per_order: int
    days: int
    gateways: int
    message_size: int
    bytes_per_message: int
    replicas: int
    headroom_pct: float
    primary_bytes: int
    with_replicas_bytes: int
    with_headroom_bytes: int
    with_headroom_20_bytes: int
    with_headroom_30_bytes: int
    retention_days: int = 7
    window_days: int = 1
    delivery_records_bytes: int = 0  # inbox entries and closed orders' views kept for the retention
    clordid_records_bytes: int = 0  # ClOrdID records kept for the idempotency window
    all_with_headroom_bytes: int = 0  # messages and records, replicas and headroom included


def estimate(orders_per_day: int, messages_per_order: int, days: int, gateways: int,
             message_size: int = SEED_MESSAGE_SIZE, replicas: int = 0,
             headroom_pct: float | None = None, retention_days: int = 7, window_days: int = 1) -> Estimate:
    """Seed 004's formula, plus the gateway's own records: a session's delivered-event entries
    and closed orders' views for ``delivery_retention`` (every gateway: order entry and drop
    copy), the ClOrdID records for ``idempotency_window`` (order entry only; open orders keep
    theirs longer — a few per open order). All inputs are whole numbers except the headroom."""
    for name, value in (("orders-per-day", orders_per_day), ("messages-per-order", messages_per_order),
                        ("days", days), ("gateways", gateways), ("message-size", message_size),
                        ("retention-days", retention_days), ("window-days", window_days)):
        if value < 1:
            raise ValueError(f"--{name} must be at least 1, got {value}")
    if replicas < 0:
        raise ValueError(f"--replicas must be 0 or more, got {replicas}")
    headroom = DEFAULT_HEADROOM if headroom_pct is None else headroom_pct
    if headroom < 0:
        raise ValueError(f"--headroom must be 0 or more, got {headroom}")
    per = bytes_per_message(message_size)
    primary = orders_per_day * messages_per_order * days * gateways * per
    with_replicas = primary * (1 + replicas)
    # Integer arithmetic in hundredths of a percent: no float rounding in the byte counts.
    def grow(pct: float) -> int:
        return with_replicas * (10000 + round(pct * 100)) // 10000

    delivery = orders_per_day * retention_days * gateways * (messages_per_order * INBOX_ENTRY_BYTES + CLOSED_VIEW_BYTES)
    clordids = orders_per_day * window_days * CLORDID_RECORD_BYTES
    everything = (primary + delivery + clordids) * (1 + replicas)
    return Estimate(orders_per_day, messages_per_order, days, gateways, message_size, per, replicas,
                    headroom, primary, with_replicas, grow(headroom), grow(20), grow(30), retention_days, window_days,
                    delivery, clordids, everything * (10000 + round(headroom * 100)) // 10000)


def gb(n: int) -> str:
    return f"{n / 1e9:.2f} GB"


def summary(e: Estimate, headroom_given: bool) -> str:
    lines = [
        "Redis memory for the FIX session store (seed 004's estimate)",
        f"  {e.orders_per_day:,} orders/day × {e.messages_per_order} messages/order × {e.days} days"
        f" × {e.gateways} gateways × {e.bytes_per_message} bytes/message",
        f"  ({e.bytes_per_message} = {e.message_size}-byte message + {RECORD_HEADER_SIZE}-byte record header"
        f" + {REDIS_FIELD_OVERHEAD} bytes Redis per-field overhead)",
        f"  primary data:          {gb(e.primary_bytes):>10}  ({e.primary_bytes:,} bytes)",
        f"  with {e.replicas} replica(s):     {gb(e.with_replicas_bytes):>10}",
    ]
    if headroom_given:
        lines.append(f"  with {e.headroom_pct:g}% headroom:    {gb(e.with_headroom_bytes):>10}")
    else:
        lines.append(f"  with 20% headroom:     {gb(e.with_headroom_20_bytes):>10}")
        lines.append(f"  with 30% headroom:     {gb(e.with_headroom_30_bytes):>10}")
    lines += [
        f"  plus the gateway's records: delivered events and closed orders' views for {e.retention_days} days"
        f" {gb(e.delivery_records_bytes):>10}",
        f"                              ClOrdID records for {e.window_days} day(s)"
        f"                         {gb(e.clordid_records_bytes):>10}",
        f"  everything, with {e.replicas} replica(s) and {e.headroom_pct:g}% headroom: {gb(e.all_with_headroom_bytes):>10}",
        "  A same-order-of-magnitude estimate: real message sizes vary by type and tags.",
    ]
    return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class Measurement:
    messages: int
    message_size: int
    memory_usage_bytes_per_message: float  # MEMORY USAGE of the chunk keys
    used_memory_bytes_per_message: float  # INFO used_memory before/after
    formula_bytes_per_message: int


def synthetic_message(seq: int, size: int) -> bytes:
    """A FIX-looking ExecutionReport padded to exactly ``size`` bytes."""
    head = f"8=FIX.4.4\x019=000\x0135=8\x0134={seq}\x0149=GW\x0156=CLIENT\x0158=".encode()
    tail = b"\x0110=000\x01"
    pad = max(0, size - len(head) - len(tail))
    return (head + b"x" * pad + tail)[:size]


def measure(client: RedisClient, messages: int, message_size: int, batch: int = 256) -> Measurement:
    """Write ``messages`` synthetic messages through the real store, measure, then delete them."""
    session = SessionKey("fixgw-sizing", "fsg", f"probe-{uuid.uuid4().hex[:12]}")
    store = SessionStore(client, FixedEpoch(1))
    before = int(client.info("memory")["used_memory"])
    try:
        store.stamp_owner(session)
        for start in range(1, messages + 1, batch):
            recs = [OutboundRecord(s, time.time_ns(), b"8", synthetic_message(s, message_size))
                    for s in range(start, min(start + batch, messages + 1))]
            store.commit_outbound_many(session, recs)
        after = int(client.info("memory")["used_memory"])
        chunks = [session.chunk(i) for i in range(chunk_index(messages) + 1)]
        usage = sum(int(client.memory_usage(k, samples=0) or 0) for k in chunks)
    finally:
        client.delete(session.state, session.owner, *[session.chunk(i) for i in range(chunk_index(messages) + 1)])
    return Measurement(messages, message_size, usage / messages, (after - before) / messages,
                       bytes_per_message(message_size))


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="fixgw-sizing", description="Estimate Redis memory for FIX session storage "
                                "(seed 004): n × m × X × G × bytes per message.")
    p.add_argument("--orders-per-day", type=int, metavar="N", help="n: orders per day")
    p.add_argument("--messages-per-order", type=int, metavar="M", help="m: FIX messages per order (1–16 typical)")
    p.add_argument("--days", type=int, metavar="X", help="X: days kept before the session resets (1 daily, 7 weekly)")
    p.add_argument("--schedule", choices=sorted(PERIOD_DAYS), help="instead of --days: the sessions' schedule "
                   "([gateway.schedule]): X is its period's days, times 1 + --keep-periods")
    p.add_argument("--keep-periods", type=int, default=0, metavar="K",
                   help="with --schedule: ended periods kept for audit (keep_periods, default 0)")
    p.add_argument("--gateways", type=int, metavar="G", help="G: gateways storing the same flow (2 = fsg + drop copy)")
    p.add_argument("--message-size", type=int, default=SEED_MESSAGE_SIZE, metavar="BYTES",
                   help="average FIX message size (default 750 → 800 bytes stored)")
    p.add_argument("--replicas", type=int, default=0, metavar="R", help="replica copies on top of the primary")
    p.add_argument("--headroom", type=float, default=None, metavar="PCT",
                   help="fragmentation headroom in percent (default: show 20%% and 30%%; JSON uses 25%%)")
    p.add_argument("--retention-days", type=int, default=7, metavar="D",
                   help="[matching] delivery_retention in days (default 7)")
    p.add_argument("--window-days", type=int, default=1, metavar="D",
                   help="[matching] idempotency_window in days (default 1)")
    p.add_argument("--json", action="store_true", help="print a JSON object")
    p.add_argument("--measure", action="store_true", help="measure bytes/message on a real Valkey (needs --url)")
    p.add_argument("--url", help="redis://host:port/db of a Valkey to measure on (data is deleted afterwards)")
    p.add_argument("--sample", type=int, default=5000, help="messages written by --measure (default 5000)")
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.measure:
        if not args.url:
            parser.error("--measure needs --url redis://host:port/db")
        if args.sample < 1 or args.message_size < 1:
            parser.error("--sample and --message-size must be at least 1")
        m = measure(connect(RedisEndpoint(url=args.url)), args.sample, args.message_size)
        if args.json:
            print(json.dumps(asdict(m)))
        else:
            diff = (m.memory_usage_bytes_per_message / m.formula_bytes_per_message - 1) * 100
            print(f"{m.messages} messages of {m.message_size} bytes written through the store, then deleted")
            print(f"  MEMORY USAGE:      {m.memory_usage_bytes_per_message:8.1f} bytes/message")
            print(f"  INFO used_memory:  {m.used_memory_bytes_per_message:8.1f} bytes/message")
            print(f"  formula:           {m.formula_bytes_per_message:8d} bytes/message ({diff:+.1f}% measured vs formula)")
        return 0
    if args.schedule is not None:
        if args.days is not None:
            parser.error("--schedule or --days, not both")
        if args.keep_periods < 0:
            parser.error("--keep-periods must be 0 or more")
        args.days = days_kept(args.schedule, args.keep_periods)
    missing = [f"--{n}" for n in ("orders-per-day", "messages-per-order", "days", "gateways")
               if getattr(args, n.replace("-", "_")) is None]
    if missing:
        parser.error(f"missing {', '.join(missing)}")
    try:
        e = estimate(args.orders_per_day, args.messages_per_order, args.days, args.gateways,
                     args.message_size, args.replicas, args.headroom, args.retention_days, args.window_days)
    except ValueError as exc:
        parser.error(str(exc))
    print(json.dumps(asdict(e)) if args.json else summary(e, args.headroom is not None))
    return 0


if __name__ == "__main__":
    sys.exit(main())
