"""The front's cost a message: every byte a client sends and receives crosses it.

The gateway's ``Front`` (``fixgw/front.py``) relays a logged-on client's messages to an engine
that answers each one at once (a loopback echo standing in for QuickFIX), so the figures are the
front's own: its thread's CPU a relayed message, and a message's round trip through it. Side by
side in one run: the same ``Front`` on uvloop's event loop (what the gateway runs) and on
Python's standard selector loop (the baseline).

    .venv/bin/python bench/front_bench.py [--messages 20000] [--runs 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fixgw.front import Front, FrontLimits, SessionGate  # noqa: E402


def fix_message(body: str) -> bytes:
    """``body`` framed as FIX 4.4 (BodyLength and CheckSum right: the front checks the framing)."""
    raw = body.encode()
    head = b"8=FIX.4.4\x019=%d\x01" % len(raw)
    return head + raw + b"10=%03d\x01" % (sum(head + raw) % 256)


LOGON = fix_message("35=A\x0134=1\x0149=CLIENT1\x0152=20261205-07:00:00.000\x0156=FIXGW\x0198=0\x01108=30\x01")
ORDER = fix_message("35=D\x0134=2\x0149=CLIENT1\x0152=20261205-07:00:00.000\x0156=FIXGW\x0111=ORD123456\x01"
                    "55=ACME\x0154=1\x0140=2\x0144=1.00\x0138=1\x0159=1\x0160=20261205-07:00:00.000\x01")


def engine(listener: socket.socket) -> None:
    """Answers each connection's bytes with the same bytes (the Logon's answer is a Logon)."""
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=echo, args=(conn,), daemon=True).start()


def echo(conn: socket.socket) -> None:
    with conn:
        while data := conn.recv(65536):
            conn.sendall(data)


def thread_cpu(tid: int) -> float:
    fields = Path(f"/proc/self/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(new_loop: Callable[[], asyncio.AbstractEventLoop], messages: int) -> tuple[float, float, float]:
    """(µs of the front's CPU a relayed message, round trip p50 µs, p99 µs)."""
    listener = socket.create_server(("127.0.0.1", 0))
    threading.Thread(target=engine, args=(listener,), daemon=True).start()
    gates = {("CLIENT1", "FIXGW"): SessionGate("CLIENT1")}
    front = Front("127.0.0.1", 0, listener.getsockname()[1], gates, FrontLimits(), new_loop=new_loop).start()
    try:
        assert front._server is not None  # noqa: SLF001 (the port it was given)
        port = front._server.sockets[0].getsockname()[1]  # noqa: SLF001
        tid = front._thread.native_id  # noqa: SLF001
        assert tid is not None
        client = socket.create_connection(("127.0.0.1", port))
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        client.sendall(LOGON)
        receive(client, len(LOGON))
        took = []
        cpu = thread_cpu(tid)
        for _ in range(messages):
            started = time.perf_counter()
            client.sendall(ORDER)
            receive(client, len(ORDER))
            took.append(time.perf_counter() - started)
        cpu = thread_cpu(tid) - cpu
        client.close()
        time.sleep(0.2)  # the front sees the close and ends the connection before it is stopped
    finally:
        front.stop()
        listener.close()
    took.sort()
    # each round trip is two relayed messages: the client's, and the engine's answer
    return 1e6 * cpu / (2 * messages), 1e6 * took[len(took) // 2], 1e6 * took[int(len(took) * 0.99)]


def receive(sock: socket.socket, size: int) -> None:
    got = 0
    while got < size:
        chunk = sock.recv(65536)
        if not chunk:
            raise RuntimeError("the front closed the connection")
        got += len(chunk)


LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {"uvloop": uvloop.new_event_loop,
                                                              "standard": asyncio.new_event_loop}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=20000)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--one", choices=LOOPS, help=argparse.SUPPRESS)  # one measurement, in a process of its own
    args = ap.parse_args()
    if args.one:
        print(json.dumps(measure(LOOPS[args.one], args.messages)))
        return
    # Each loop in a fresh process, as the gateway runs one for its life: a second loop made in
    # the same process ran the standard loop's relay faster than the gateway ever sees it.
    print(f"the front relaying {args.messages} messages of {len(ORDER)} bytes each way, one at a time")
    for run in range(args.runs):
        ours, base = (json.loads(subprocess.run([sys.executable, __file__, "--one", kind, "--messages",
                                                 str(args.messages)], capture_output=True, text=True,
                                                check=True).stdout) for kind in LOOPS)
        print(f"run {run + 1}: uvloop {ours[0]:.1f} µs CPU a message, round trip p50 {ours[1]:.0f} / p99 {ours[2]:.0f} µs;"
              f" standard loop {base[0]:.1f} µs, p50 {base[1]:.0f} / p99 {base[2]:.0f} µs;"
              f" CPU {base[0] / ours[0]:.2f}× less, p50 {base[1] / ours[1]:.2f}× lower")


if __name__ == "__main__":
    main()
