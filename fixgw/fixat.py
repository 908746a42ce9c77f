"""``fixgw-at``: runs QuickFIX's scripted acceptance sessions (``.def`` files) against an acceptor.

Line format (see ``tests/conformance/quickfix-at/README.md``): ``iCONNECT``/``iDISCONNECT`` open and
close a connection, ``eDISCONNECT`` expects the acceptor to close it, ``I<msg>`` sends,
``E<msg>`` reads one message and compares it; an optional ``N,`` after the letter picks
connection N. ``<TIME>``/``<TIME±N>`` become UTC timestamps. Missing BodyLength and
CheckSum are computed. Tags listed in ``fields.fmt`` compare by regular expression.
"""

from __future__ import annotations

import argparse
import re
import socket
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

SOH = b"\x01"
BEGIN = re.compile(rb"8=[^\x01]*\x019=(\d+)\x01")  # a message's BeginString and BodyLength
_TIME = re.compile(rb"<TIME([+-]\d+)?>")
DEFAULT_TIMEOUT = 12.0


def fix_time(offset: int = 0) -> bytes:
    return (datetime.now(UTC) + timedelta(seconds=offset)).strftime("%Y%m%d-%H:%M:%S").encode()


def substitute_time(raw: bytes) -> bytes:
    return _TIME.sub(lambda m: fix_time(int(m.group(1) or 0)), raw)


def checksum(data: bytes) -> bytes:
    return b"%03d" % (sum(data) % 256)


def complete(raw: bytes) -> bytes:
    """Insert BodyLength after BeginString and append CheckSum where the line has none."""
    fields = [f for f in raw.split(SOH) if f]
    if fields and fields[0].startswith(b"8=") and not any(f.startswith(b"9=") for f in fields):
        rest = [f for f in fields[1:] if not f.startswith(b"10=")]
        body = SOH.join(rest) + SOH
        fields = [fields[0], b"9=%d" % len(body)] + rest + [f for f in fields[1:] if f.startswith(b"10=")]
    message = SOH.join(fields) + SOH
    if not any(f.startswith(b"10=") for f in fields):
        message += b"10=" + checksum(message) + SOH
    return message


@dataclass(frozen=True, slots=True)
class Step:
    line: int
    action: str  # connect | disconnect | expect-disconnect | send | expect
    conn: int
    data: bytes = b""


def parse_def(path: Path) -> list[Step]:
    steps = []
    for n, raw in enumerate(path.read_bytes().split(b"\n"), 1):
        raw = raw.rstrip(b"\r")
        if not raw.strip() or raw.startswith(b"#"):
            continue
        letter, rest = raw[:1], raw[1:]
        conn = 1
        m = re.match(rb"^(\d+),", rest)
        if m:
            conn, rest = int(m.group(1)), rest[m.end():]
        if letter == b"i" and rest == b"CONNECT":
            steps.append(Step(n, "connect", conn))
        elif letter == b"i" and rest == b"DISCONNECT":
            steps.append(Step(n, "disconnect", conn))
        elif letter == b"e" and rest == b"DISCONNECT":
            steps.append(Step(n, "expect-disconnect", conn))
        elif letter == b"I":
            steps.append(Step(n, "send", conn, rest))
        elif letter == b"E":
            steps.append(Step(n, "expect", conn, rest))
        else:
            raise ValueError(f"{path.name}:{n}: cannot read {raw[:40]!r}")
    return steps


def load_formats(path: Path) -> dict[bytes, re.Pattern[bytes]]:
    formats = {}
    for line in path.read_bytes().splitlines():
        if b"=" in line:
            tag, _, pattern = line.partition(b"=")
            formats[tag.strip()] = re.compile(pattern.strip())
    return formats


class Connection:
    """A TCP connection that reads whole FIX messages."""

    def __init__(self, host: str, port: int) -> None:
        self.sock = socket.create_connection((host, port), timeout=5)
        self.buffer = b""
        self.pos = 0  # where the next message starts in ``buffer``: taken messages are not copied out

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_message(self, timeout: float) -> bytes | None:
        """The next message, or None when the peer closed the connection."""
        deadline = time.monotonic() + timeout
        while True:
            message = self._take()
            if message is not None:
                return message
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no message within {timeout:.0f}s")
            self.sock.settimeout(remaining)
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                raise TimeoutError(f"no message within {timeout:.0f}s") from None
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                return None
            self.buffer = self.buffer[self.pos:] + chunk
            self.pos = 0

    def _take(self) -> bytes | None:
        # By offset: a read of 64 KiB holds hundreds of messages, and cutting each one off the
        # front of the buffer copied the rest every time (a load generator's CPU went there).
        buffer = self.buffer
        start = buffer.find(b"8=", self.pos)
        if start < 0:
            return None
        m = BEGIN.match(buffer, start)
        if not m:
            return None
        end_body = m.end() + int(m.group(1))
        trailer = buffer.find(SOH, end_body)
        if trailer < 0:
            return None
        self.pos = trailer + 1
        return buffer[start:trailer + 1]

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


def frame(body: str | bytes, seq: int | str, sender: str, target: str, begin: str = "FIX.4.4") -> bytes:
    """A complete message from ``35=X|…`` body text (or bytes, any byte allowed): header,
    BodyLength, SendingTime, CheckSum."""
    raw = body.encode() if isinstance(body, str) else body
    msg_type, _, rest = raw.partition(SOH)
    head = f"8={begin}\x01".encode() + msg_type + SOH
    return complete(head + f"34={seq}\x0149={sender}\x0152={fix_time().decode()}\x0156={target}\x01".encode() + rest)


class RawSession:
    """A hand-driven FIX session over a socket (tests and benchmarks): no engine in between."""

    def __init__(self, port: int, sender: str = "CLIENT1", target: str = "FIXGW", seq: int = 1,
                 host: str = "127.0.0.1") -> None:
        self.conn = Connection(host, port)
        self.sender, self.target, self.seq = sender, target, seq

    def send(self, body: str | bytes) -> None:
        self.conn.send(frame(body, self.seq, self.sender, self.target))
        self.seq += 1

    def send_many(self, bodies: list[str]) -> None:
        """Several messages in one write, as a client that pipelines sends what it has queued."""
        framed = []
        for body in bodies:
            framed.append(frame(body, self.seq, self.sender, self.target))
            self.seq += 1
        self.conn.send(b"".join(framed))

    def read(self, timeout: float = 10.0) -> bytes | None:
        return self.conn.read_message(timeout)

    def close(self) -> None:
        self.conn.close()


def compare(expected: bytes, received: bytes, formats: dict[bytes, re.Pattern[bytes]]) -> str | None:
    exp = [f.partition(b"=") for f in expected.split(SOH) if f]
    got = [f.partition(b"=") for f in received.split(SOH) if f]
    if [t for t, _, _ in exp] != [t for t, _, _ in got]:
        return f"tags differ: expected {[t.decode() for t, _, _ in exp]} got {[t.decode() for t, _, _ in got]}"
    for (tag, _, want), (_, _, have) in zip(exp, got):
        pattern = formats.get(tag)
        if pattern is not None:
            # Anchored at the start only, as the QuickFIX runner's Ruby `=~` effectively is:
            # the suite's 122 pattern has no milliseconds while its BodyLengths count them.
            if not pattern.match(have):
                return f"tag {tag.decode()}={have.decode()!r} does not match /{pattern.pattern.decode()}/"
        elif want != have:
            return f"tag {tag.decode()}: expected {want.decode()!r} got {have.decode()!r}"
    return None


@dataclass(frozen=True, slots=True)
class Result:
    name: str
    passed: bool
    detail: str
    seconds: float


def run_def(path: Path, host: str, port: int, formats: dict[bytes, re.Pattern[bytes]],
            timeout: float = DEFAULT_TIMEOUT) -> Result:
    started = time.monotonic()
    conns: dict[int, Connection] = {}
    step: Step | None = None
    try:
        for step in parse_def(path):
            if step.action == "connect":
                conns[step.conn] = Connection(host, port)
            elif step.action == "disconnect":
                conns.pop(step.conn).close()
            elif step.action == "send":
                conns[step.conn].send(complete(substitute_time(step.data)))
            elif step.action == "expect":
                expected = complete(substitute_time(step.data))
                got = conns[step.conn].read_message(timeout)
                if got is None:
                    return Result(path.name, False, f"line {step.line}: connection closed, expected "
                                  f"{show(expected)}", time.monotonic() - started)
                problem = compare(expected, got, formats)
                if problem:
                    return Result(path.name, False, f"line {step.line}: {problem}\n  expected {show(expected)}\n"
                                  f"  received {show(got)}", time.monotonic() - started)
            elif step.action == "expect-disconnect":
                got = conns[step.conn].read_message(timeout)
                if got is not None:
                    return Result(path.name, False, f"line {step.line}: expected a disconnect, received "
                                  f"{show(got)}", time.monotonic() - started)
                conns.pop(step.conn).close()
        return Result(path.name, True, "", time.monotonic() - started)
    except (TimeoutError, OSError, KeyError) as exc:
        where = f"line {step.line}: " if step else ""
        return Result(path.name, False, f"{where}{type(exc).__name__}: {exc}", time.monotonic() - started)
    finally:
        for c in conns.values():
            c.close()


def show(message: bytes) -> str:
    return message.replace(SOH, b"|").decode("latin-1")


PAUSE_BETWEEN_DEFINITIONS = 0.2  # seconds


def run_suite(paths: list[Path], host: str, port: int, formats: dict[bytes, re.Pattern[bytes]],
              timeout: float = DEFAULT_TIMEOUT) -> Iterator[Result]:
    for n, path in enumerate(paths):
        if n:
            # A new connection for a session whose previous connection was closed a
            # millisecond ago can race QuickFIX's own teardown of it (seen under load); the
            # reference runner starts a process per definition, so it never meets that.
            time.sleep(PAUSE_BETWEEN_DEFINITIONS)
        yield run_def(path, host, port, formats, timeout)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="fixgw-at", description=__doc__.splitlines()[0])
    ap.add_argument("definitions", nargs="+", type=Path, help=".def files or folders of them")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--fields", type=Path, required=True, help="fields.fmt")
    ap.add_argument("--parallel", type=int, default=1, help="run this many folders at once")
    args = ap.parse_args(argv)
    formats = load_formats(args.fields)
    groups = [sorted(p.glob("*.def")) if p.is_dir() else [p] for p in args.definitions]
    failed = 0
    with ThreadPoolExecutor(max(1, args.parallel)) as pool:
        for results in pool.map(lambda g: list(run_suite(g, args.host, args.port, formats)), groups):
            for r in results:
                print(f"{'PASS' if r.passed else 'FAIL'} {r.name} ({r.seconds:.1f}s){'' if r.passed else chr(10) + '  ' + r.detail}")
                failed += not r.passed
    total = sum(len(g) for g in groups)
    print(f"{total - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
