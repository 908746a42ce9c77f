"""The machine's floor: what one round trip to Valkey costs before any of our code runs.

Every stage of the order path (intake → cell → outbox → dispatcher) crosses processes
through Valkey at least once, so the round trip printed here, times the hops, bounds the
latency any design can reach on this machine. Compare it with the figures of
``gateway_bench.py`` and ``e2e_bench.py`` measured on the same machine.

    .venv/bin/python bench/rtt_bench.py [--count 5000]
"""

from __future__ import annotations

import argparse
import socket
import sys
import threading
import time
from pathlib import Path

import hiredis

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from datastore.embedded import standalone  # noqa: E402


def ping_round_trips(port: int, count: int, pipeline: int) -> float:
    """µs per PING, ``pipeline`` PINGs per round trip, raw socket + hiredis (no redis-py)."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    reader, packed = hiredis.Reader(), hiredis.pack_command(("PING",)) * pipeline
    started = time.perf_counter()
    for _ in range(count // pipeline):
        sock.sendall(packed)
        got = 0
        while got < pipeline:
            if reader.gets() is False:
                reader.feed(sock.recv(65536))
            else:
                got += 1
    sock.close()
    return (time.perf_counter() - started) / (count // pipeline * pipeline) * 1e6


def ping_after_idle(port: int, count: int, idle_s: float) -> float:
    """Median µs of one PING sent after ``idle_s`` of quiet: what a hop of the order path costs
    at a low rate, when both processes (and, on a VM, their idle vCPUs) must be woken."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    reader, packed = hiredis.Reader(), hiredis.pack_command(("PING",))
    took = []
    for _ in range(count):
        time.sleep(idle_s)
        started = time.perf_counter()
        sock.sendall(packed)
        while reader.gets() is False:
            reader.feed(sock.recv(65536))
        took.append((time.perf_counter() - started) * 1e6)
    sock.close()
    return sorted(took)[len(took) // 2]


def thread_round_trips(count: int) -> float:
    """µs per round trip between two threads of one process over a socketpair."""
    a, b = socket.socketpair()

    def echo() -> None:
        for _ in range(count):
            b.sendall(b.recv(16))

    worker = threading.Thread(target=echo)
    worker.start()
    started = time.perf_counter()
    for _ in range(count):
        a.sendall(b"x")
        a.recv(16)
    elapsed = time.perf_counter() - started
    worker.join()
    return elapsed / count * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=5000)
    args = ap.parse_args()
    with standalone() as server:
        port = int(server.url.rsplit(":", 1)[1].split("/")[0])
        one = ping_round_trips(port, args.count, 1)
        hundred = ping_round_trips(port, args.count, 100)
        idle = ping_after_idle(port, 200, 0.01)
    threads = thread_round_trips(args.count)
    print(f"{'round trip':52} {'µs':>8}")
    print(f"{'PING to Valkey, one per round trip (other process)':52} {one:8.1f}")
    print(f"{'PING to Valkey, 100 per round trip, per PING':52} {hundred:8.1f}")
    print(f"{'PING to Valkey after 10 ms idle (median)':52} {idle:8.1f}")
    print(f"{'two threads of one process (socketpair)':52} {threads:8.1f}")
    print(f"\nbatching ratio (one per trip / 100 per trip) = {one / hundred:.0f}x")
    print(f"waking from idle adds {idle - one:.0f} µs to a round trip; an unloaded order crosses ~8 such hops")


if __name__ == "__main__":
    main()
