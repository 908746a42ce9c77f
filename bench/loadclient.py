"""The benchmarks' load generator: a FIX client written for speed, so that a bench measures the
system and not its client.

``fixgw.fixat.RawSession`` is the tests' client: every message framed field by field, two
``datetime`` calls for its timestamps, one message per read with a socket timeout set before
each (three system calls). As the load of ``bench/e2e_bench.py`` it cost 0.14 ms of CPU an
order, a sixth of the whole system's. Here a message is framed with one ``%`` format, its
SendingTime text made once a second, and every read takes all the socket holds and splits it
into messages by their BodyLength, without a copy per message. It runs as a process of its own
and imports the standard library only: a client importing the system's modules (QuickFIX's
bindings among them) pays 0.8 s of CPU to start, charged to the 12,000 orders of a run.

    python bench/loadclient.py PORT [--orders 2000] [--rate 2000] [--seconds 5] [--sender CLIENT1]

prints one line of JSON: the burst's throughput, the paced orders' p50/p99 and wall-clock times
(``bench/e2e_bench.py``, ``bench/groups_bench.py``).
"""

from __future__ import annotations

import argparse
import gc
import json
import select
import socket
import statistics
import time

SOH = b"\x01"
TRAILER = 7  # "10=nnn\x01"
CHUNK = 262144  # bytes a read takes at most
PIPELINE = 50  # orders a write in the throughput run (bench/gateway_bench.py: PIPELINE)
ANSWERS_WAIT_S = 60.0  # after the paced run, how long its orders' answers are waited for at most


class LoadSession:
    """One FIX session driven by hand over a non-blocking socket (Logon, sends, reads): no
    engine, no checks beyond framing: the peer is the system under test."""

    def __init__(self, port: int, sender: str, target: str = "FIXGW", begin: str = "FIX.4.4",
                 host: str = "127.0.0.1") -> None:
        self.sock = socket.create_connection((host, port), timeout=10)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.setblocking(False)
        self.seq = 1
        self._begin = b"8=" + begin.encode() + b"\x019="
        self._from = b"\x0149=" + sender.encode() + b"\x0152="
        self._to = b"\x0156=" + target.encode() + b"\x01"
        self._second = -1
        self._stamp = b""
        self._buffer = b""
        self._readable = [self.sock]

    def sending_time(self) -> bytes:
        """UTC now as FIX's UTCTimestamp to the second, made once a second."""
        now = int(time.time())
        if now != self._second:
            self._second = now
            self._stamp = time.strftime("%Y%m%d-%H:%M:%S", time.gmtime(now)).encode()
        return self._stamp

    def frame(self, msg_type: bytes, fields: bytes) -> bytes:
        """A complete message: ``fields`` is the body after the header, ``tag=value\\x01`` each."""
        content = b"35=%s\x0134=%d%s%s%s%s" % (msg_type, self.seq, self._from, self.sending_time(), self._to, fields)
        self.seq += 1
        message = b"%s%d\x01%s" % (self._begin, len(content), content)
        return b"%s10=%03d\x01" % (message, sum(message) & 255)

    def send(self, msg_type: bytes, fields: bytes) -> None:
        self._write(self.frame(msg_type, fields))

    def send_many(self, messages: list[tuple[bytes, bytes]]) -> None:
        """Several messages in one write, as a client that pipelines sends what it has queued."""
        self._write(b"".join([self.frame(t, f) for t, f in messages]))

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                view = view[self.sock.send(view):]
            except BlockingIOError:
                select.select([], [self.sock], [], 1.0)

    def receive(self, timeout: float) -> list[bytes]:
        """The complete messages that arrive within ``timeout`` seconds (0: those already here);
        raises ``ConnectionError`` once the peer has closed the connection."""
        if select.select(self._readable, [], [], timeout)[0]:
            chunk = self.sock.recv(CHUNK)
            while chunk:
                self._buffer += chunk
                if len(chunk) < CHUNK:  # the socket is drained: no second read to find that out
                    return self._split()
                try:
                    chunk = self.sock.recv(CHUNK)
                except BlockingIOError:
                    return self._split()
            raise ConnectionError("the peer closed the connection")
        return self._split() if self._buffer else []

    def _split(self) -> list[bytes]:
        buffer, messages, pos = self._buffer, [], 0
        while True:
            length_at = buffer.find(b"\x019=", pos)
            if length_at < 0:
                break
            body_at = buffer.find(SOH, length_at + 3)
            if body_at < 0:
                break
            end = body_at + 1 + int(buffer[length_at + 3:body_at]) + TRAILER
            if end > len(buffer):
                break
            messages.append(buffer[pos:end])
            pos = end
        self._buffer = buffer[pos:]
        return messages

    def close(self) -> None:
        self.sock.close()


def field(message: bytes, tag: bytes) -> bytes | None:
    """The value of ``tag`` (``b"11"``) in a message, or None."""
    at = message.find(b"\x01" + tag + b"=")
    if at < 0:
        return None
    start = at + len(tag) + 2
    return message[start:message.find(SOH, start)]


def msg_type(message: bytes) -> bytes:
    """A message's MsgType (35): the field after BodyLength."""
    start = message.find(b"\x0135=") + 4
    return message[start:message.find(SOH, start)]


def orders_run(port: int, orders: int, rate: float, seconds: float, sender: str = "CLIENT1") -> None:
    """A burst of ``orders`` for throughput, then ``rate`` orders a second for ``seconds``: each
    order's time from its send to its first report."""
    # The load generator's own pauses would count as the gateway's latency. Its garbage is
    # acyclic (freed by reference counting), but its bookkeeping grows with every order, and the
    # cyclic collector's full passes over it stopped it for 17–25 ms at a time: the one spike of a
    # 2,000/s run, 12.7 s in, every run (2026-12-02, gc.callbacks in each process).
    gc.disable()
    session = LoadSession(port, sender)

    def order_fields(clordid: str) -> tuple[bytes, bytes]:
        # Buys far below the market on a quiet symbol: each order's first report is its New.
        return (b"D", b"11=%s\x0155=ACME\x0154=1\x0140=2\x0144=1.00\x0138=1\x0159=1\x0160=%s\x01"
                % (clordid.encode(), session.sending_time()))

    session.send(b"A", b"98=0\x01108=30\x01141=Y\x01")
    deadline = time.perf_counter() + 10
    while not session.receive(0.5):
        if time.perf_counter() > deadline:
            raise SystemExit("no Logon answer within 10 s")
    tag = f"{time.time_ns() % 10**9}"
    sent: dict[str, float] = {}
    first: dict[str, float] = {}
    wall: dict[str, list[float]] = {}  # paced orders: [sent, first report] on the wall clock (``stages``)

    def drain(until: float) -> None:
        while True:
            try:
                messages = session.receive(max(0.0, until - time.perf_counter()))
            except ConnectionError:
                raise SystemExit("gateway closed the connection") from None
            now = time.perf_counter()
            for msg in messages:
                if msg_type(msg) in (b"8", b"D"):
                    cl = (field(msg, b"11") or b"").decode()
                    if cl not in first:
                        first[cl] = now
                        if cl in wall:
                            wall[cl].append(time.time())
            if now >= until:
                return

    # throughput: orders written PIPELINE at a time (gateway_bench.PIPELINE says why)
    started = time.perf_counter()
    for first_i in range(0, orders, PIPELINE):
        batch = [f"T{tag}-{i}" for i in range(first_i, min(orders, first_i + PIPELINE))]
        at = time.perf_counter()
        sent.update(dict.fromkeys(batch, at))
        session.send_many([order_fields(cl) for cl in batch])
    deadline = time.perf_counter() + 120
    while len([c for c in sent if c in first]) < orders and time.perf_counter() < deadline:
        drain(time.perf_counter() + 0.05)
    throughput = orders / (max(first[c] for c in sent) - started)
    # the burst on the wall clock, for a bench merging several load generators (groups_bench.py)
    to_wall = time.time() - time.perf_counter()
    burst = [started + to_wall, max(first[c] for c in sent) + to_wall]
    # A second of reading only: the paced run measures a steady rate, not the queue the burst
    # leaves behind it (its drop copies, acknowledgements, retention).
    drain(time.perf_counter() + 1.0)
    # paced latency
    paced: list[str] = []
    interval = 1.0 / rate
    t0 = time.perf_counter()
    n = int(rate * seconds)
    for i in range(n):
        due = t0 + i * interval
        drain(due)
        cl = f"L{tag}-{i}"
        sent[cl] = time.perf_counter()
        wall[cl] = [time.time()]
        paced.append(cl)
        session.send(*order_fields(cl))
    sends_done = time.perf_counter()
    # Every paced order's first answer, however long a saturated system takes to work off its
    # queue (at most ANSWERS_WAIT_S): one still unanswered then is one the system did not answer,
    # not one the client stopped waiting for.
    while any(c not in first for c in paced) and time.perf_counter() < sends_done + ANSWERS_WAIT_S:
        drain(time.perf_counter() + 0.05)
    lat = sorted((first[c] - sent[c]) * 1000 for c in paced if c in first)
    print(json.dumps({"throughput": throughput, "burst": burst, "p50_ms": statistics.median(lat),
                      "p99_ms": lat[int(len(lat) * 0.99) - 1], "answered": len(lat), "paced": n,
                      "achieved_rate": n / (sends_done - t0),
                      "wall": {cl: times for cl, times in wall.items() if len(times) == 2}}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("port", type=int)
    ap.add_argument("--orders", type=int, default=2000)
    ap.add_argument("--rate", type=float, default=2000)
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--sender", default="CLIENT1")
    args = ap.parse_args()
    orders_run(args.port, args.orders, args.rate, args.seconds, args.sender)


if __name__ == "__main__":
    main()
