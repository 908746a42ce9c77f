"""Outbound-commit throughput of the Redis session store vs an in-memory dict store.

One connection, one session, 750-byte messages (seed 004's average). Each Redis run commits
through the real ``SessionStore`` (fence check + one script per commit, or one script per
batch), against a standalone Valkey with ``appendfsync everysec`` and with ``always``.
Baseline, same run: the same records encoded and kept in a Python dict.

Anchor: seed 004 measured ~27 µs added per outbound message (~35k msg/s).

Then what a cancel or a replace reads of its original order (the ClOrdID's record and the
order's view): one script (``ORDER_OF_CLORDID``) against the two reads it replaced (GET, then
HMGET with the record's order id), wall time and this process's CPU per lookup, in the same run.

    .venv/bin/python bench/store_bench.py [--messages 20000] [--batch 64]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from datastore.connection import connect  # noqa: E402
from datastore.embedded import _wait, standalone  # noqa: E402
from datastore.settings import RedisEndpoint  # noqa: E402
from sessionstore import FixedEpoch, OutboundRecord, SessionKey, SessionStore  # noqa: E402

BODY = b"8=FIX.4.4\x019=700\x0135=8\x01" + b"58=" + b"x" * 700 + b"\x0110=123\x01"


def records(n: int, start: int = 1) -> list[OutboundRecord]:
    return [OutboundRecord(s, time.time_ns(), b"8", BODY[:726]) for s in range(start, start + n)]


class DictStore:
    """The in-memory baseline: what a store costs with no I/O at all."""

    def __init__(self) -> None:
        self.chunks: dict[int, dict[int, bytes]] = {}
        self.sender = 1

    def commit_outbound(self, session: SessionKey, rec: OutboundRecord) -> None:
        self.chunks.setdefault(rec.seq_num // 1024, {})[rec.seq_num] = rec.encode()
        self.sender = rec.seq_num + 1


def run_single(store: object, session: SessionKey, recs: list[OutboundRecord]) -> float:
    commit = store.commit_outbound  # type: ignore[attr-defined]
    t = time.perf_counter()
    for rec in recs:
        commit(session, rec)
    return time.perf_counter() - t


def run_batched(store: SessionStore, session: SessionKey, recs: list[OutboundRecord], batch: int) -> float:
    t = time.perf_counter()
    for i in range(0, len(recs), batch):
        store.commit_outbound_many(session, recs[i : i + batch])
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=20000)
    ap.add_argument("--batch", type=int, default=64)
    args = ap.parse_args()
    n = args.messages
    rows: list[tuple[str, float]] = []

    base = run_single(DictStore(), SessionKey("b", "fsg", "D"), records(n))
    rows.append(("dict (in-memory baseline)", base))
    for fsync in ("everysec", "always"):
        with standalone(aof=True, appendfsync=fsync) as server:
            store = SessionStore(connect(RedisEndpoint(url=server.url)), FixedEpoch(1))
            s1, s2 = SessionKey("b", "fsg", "ONE"), SessionKey("b", "fsg", "BATCH")
            store.stamp_owner(s1)
            store.stamp_owner(s2)
            run_single(store, SessionKey("b", "fsg", "ONE"), [])  # warm the script cache
            rows.append((f"redis appendfsync={fsync}, one commit per message", run_single(store, s1, records(n))))
            rows.append((f"redis appendfsync={fsync}, {args.batch} per commit",
                         run_batched(store, s2, records(n), args.batch)))

    with standalone(aof=True, appendfsync="everysec") as primary:
        replica = standalone(aof=True, appendfsync="everysec", replicaof=f"127.0.0.1 {primary.port}").start()
        try:
            _wait(lambda: replica.client().info("replication").get("master_link_status") == "up", "replica")
            store = SessionStore(connect(RedisEndpoint(url=primary.url)), FixedEpoch(1), replica_acks=1)
            s1, s2 = SessionKey("b", "fsg", "ACK1"), SessionKey("b", "fsg", "ACKN")
            store.stamp_owner(s1)
            store.stamp_owner(s2)
            rows.append(("redis everysec + replicaAcks=1, one per message", run_single(store, s1, records(n))))
            rows.append((f"redis everysec + replicaAcks=1, {args.batch} per commit",
                         run_batched(store, s2, records(n), args.batch)))
        finally:
            replica.stop()

    lookups = []
    with standalone(aof=True, appendfsync="everysec") as server:
        store = SessionStore(connect(RedisEndpoint(url=server.url)), FixedEpoch(1))
        session = SessionKey("b", "fsg", "CANCELS")
        store.stamp_owner(session)
        count = min(n, 5000)
        for i in range(count):
            store.claim_clordid(session, f"C{i}", f'{{"orderId":"o{i}","pairId":10}}', 60_000)
        store.client.hset(session.orders, mapping={f"o{i}": '{"status":"0"}' for i in range(count)})

        def two_reads(clordid: str) -> None:
            record = store.clordid_record(session, clordid)
            assert record is not None
            store.order_views(session, [record.split('"')[3]])

        def one_script(clordid: str) -> None:
            store.order_of_clordid(session, clordid)

        for name, lookup in (("GET, then HMGET (two round trips)", two_reads),
                             ("ORDER_OF_CLORDID (one script)", one_script)) * 2:  # twice: the first warms up
            wall, cpu = time.perf_counter(), time.process_time()
            for i in range(count):
                lookup(f"C{i}")
            lookups.append((name, count, time.perf_counter() - wall, time.process_time() - cpu))

    print(f"{n} outbound messages of {len(BODY[:726])} bytes, one connection\n")
    print(f"{'store':52} {'µs/msg':>8} {'msg/s':>10} {'added µs':>9} {'vs seed 27µs':>12}")
    for name, secs in rows:
        us = secs / n * 1e6
        added = us - base / n * 1e6
        ratio = f"{27 / added:.2f}x" if added > 0 and name != rows[0][0] else "-"
        print(f"{name:52} {us:8.1f} {n / secs:10.0f} {added:9.1f} {ratio:>12}")
    print("\n'added µs' = µs/msg minus the dict baseline; 'vs seed' > 1 means cheaper than seed 004's 27 µs.")
    print(f"\nA cancel's read of its original order, {lookups[0][1]} lookups (second pass of each):")
    baseline = lookups[2]
    for name, count, wall, cpu in lookups[2:]:
        print(f"  {name:40} {wall / count * 1e6:7.1f} µs  {cpu / count * 1e6:6.1f} µs CPU (client)  "
              f"{baseline[2] / wall:5.2f}x the two reads' speed")


if __name__ == "__main__":
    main()
