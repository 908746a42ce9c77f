"""Gateway processes and FIX clients for end-to-end tests (real processes, real sockets)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import quickfix as fix

from datastore.embedded import listening_port_below_ephemeral
from datastore.settings import parse_address
from fixgw.demo import DemoClient
from fixgw.fixat import SOH, RawSession
from fixgw.inputs import split_fields

ROOT = Path(__file__).resolve().parent.parent


def http_status(port: int, path: str = "/ready") -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return 0


def http_json(port: int, path: str = "/ready") -> tuple[int, Any]:
    """Status and JSON body, whatever the status (a 503's body says why)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def http_text(port: int, path: str) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as r:
        return r.read().decode()


def wait_until(condition: Any, what: str, timeout: float = 15.0, every: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what}")


def endpoint_lines(address: str) -> str:
    """The TOML lines naming a datastore given as one address (a URL, sentinel://…, cluster://…)."""
    return "\n".join(f"{name} = {json.dumps(value)}" for name, value in parse_address(address).items())


def cell_env(address: str) -> dict[str, str]:
    """The environment variables naming a cell's datastore given as one address."""
    where = parse_address(address)
    if "sentinels" in where:
        return {"REDIS_SENTINEL_HOSTS": ",".join(where["sentinels"]), "REDIS_SENTINEL_NAME": where["sentinelGroup"]}
    if "nodes" in where:
        return {"REDIS_CLUSTER_NODES": ",".join(where["nodes"])}
    return {"REDIS_URL": where["url"]}


SESSIONS = """
[[gateway.session]]
name = "CLIENT1"
begin_string = "FIX.4.4"

[[gateway.session]]
name = "CLIENT2"
begin_string = "FIX.4.4"
"""


class GatewayProc:
    """``fixgw gateway`` as a child process with its own config, state dir and log."""

    def __init__(self, tmp: Path, redis_url: str, *, name: str = "gw", fix_port: int, mode: str = "at",
                 namespace: str = "t", lock_ttl: str = "1s", renewal: str = "250ms", sessions: str = SESSIONS,
                 extra: str = "", env: dict[str, str] | None = None, store_extra: str = "",
                 gateway_lines: str = "") -> None:
        """``gateway_lines``: more ``[gateway]`` settings (TOML lines); ``extra``: more tables."""
        self.name = name
        self.fix_port = fix_port
        self.http_port = listening_port_below_ephemeral()  # (an ephemeral one can be taken by a connection meanwhile)
        self.dir = tmp / name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.config = self.dir / "gateway.toml"
        self.config.write_text(f"""
[gateway]
mode = "{mode}"
port = {fix_port}
http_port = {self.http_port}
state_dir = "{self.dir / 'state'}"
{gateway_lines}
{extra}
{sessions}
[session_store]
namespace = "{namespace}"
{endpoint_lines(redis_url)}
lockTtl = "{lock_ttl}"
lockRenewalInterval = "{renewal}"
socketTimeout = "500ms"
connectionTimeout = "500ms"
maxAttempts = 2
{store_extra}
""")
        self.log = self.dir / "out.log"
        self.env = env or {}
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> GatewayProc:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "fixgw.cli", "gateway", "--config", str(self.config)],
            cwd=self.dir, stdout=open(self.log, "wb"), stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": str(ROOT), **self.env})
        return self

    def wait_active(self, timeout: float = 20.0) -> GatewayProc:
        wait_until(lambda: self.ready() == 200 or not self.alive, f"{self.name} to become active", timeout)
        assert self.alive, f"{self.name} exited: {self.output()}"
        return self

    def wait_http(self, timeout: float = 10.0) -> None:
        wait_until(lambda: self.ready() in (200, 503), f"{self.name} http", timeout)

    def ready(self) -> int:
        return http_status(self.http_port)

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def kill(self) -> None:
        if self.alive:
            self.signal(signal.SIGKILL)
            assert self.proc is not None
            self.proc.wait(10)

    def wait(self, timeout: float = 15.0) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout)

    def stop(self) -> None:
        if self.alive:
            self.signal(signal.SIGCONT)
            self.signal(signal.SIGTERM)
            try:
                self.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()


class FixClient(DemoClient):
    """The demo's QuickFIX initiator (``fixgw.demo.DemoClient``), without ResetOnLogon (the tests
    follow sequence numbers across reconnects), also keeping every application message by its
    MsgSeqNum and every admin message, and counting logons and logouts."""

    def __init__(self, tmp: Path, port: int, target: str = "FIXGW", sender: str = "CLIENT1",
                 begin: str = "FIX.4.4") -> None:
        self.app_messages: dict[int, str] = {}
        self.admin_in: list[str] = []
        self.logons = 0
        self.logouts = 0
        super().__init__(tmp / "clients", "127.0.0.1", port, sender, target, begin, reset_on_logon=False)

    # callbacks
    def onLogon(self, sid: fix.SessionID) -> None:  # noqa: N802
        with self.cond:  # (reentrant: counted before the demo's onLogon wakes the waiters)
            self.logons += 1
            super().onLogon(sid)

    def onLogout(self, sid: fix.SessionID) -> None:  # noqa: N802
        with self.cond:
            self.logouts += 1
            self.cond.notify_all()

    def fromAdmin(self, m: fix.Message, sid: fix.SessionID) -> None:  # noqa: N802
        with self.cond:
            self.admin_in.append(m.toString())
            self.cond.notify_all()

    def fromApp(self, m: fix.Message, sid: fix.SessionID) -> None:  # noqa: N802
        with self.cond:
            self.app_messages[int(m.getHeader().getField(34))] = m.toString()
            self.cond.notify_all()

    # driving
    def start(self) -> FixClient:
        assert self.initiator is not None
        self.initiator.start()
        return self

    def stop(self) -> None:
        self.close()

    def wait_for(self, condition: Any, what: str, timeout: float = 15.0) -> None:
        if not self.wait(condition, timeout):
            raise AssertionError(f"timed out waiting for {what}")

    def send_order(self, clordid: str, symbol: str = "ACME") -> bool:
        m = fix.Message()
        m.getHeader().setField(fix.MsgType("D"))
        m.setField(fix.ClOrdID(clordid))
        m.setField(fix.Symbol(symbol))
        m.setField(fix.Side("1"))
        m.setField(fix.OrdType("2"))
        m.setField(fix.Price(10))
        m.setField(fix.OrderQty(1))
        m.setField(fix.TransactTime())
        return bool(fix.Session.sendToTarget(m, self.sid))

    @property
    def session(self) -> Any:
        return fix.Session.lookupSession(self.sid)


# One parser of ``tag=value`` fields for the gateway and its tests (fixgw.inputs.split_fields);
# latin-1 maps each byte to one character and back, so values come back as the bytes sent.
def fields(raw: str | bytes) -> list[tuple[str, str]]:
    """A message's fields in wire order, tags as text."""
    text = raw.decode("latin-1") if isinstance(raw, bytes) else raw
    return [(str(tag), value) for tag, value in split_fields(text)]


def body_without(raw: str | bytes, drop: set[str]) -> list[tuple[str, str]]:
    return [(t, v) for t, v in fields(raw) if t not in drop]


RawFixClient = RawSession  # the tests' name for it


def parse(raw: bytes) -> dict[int, bytes]:
    """A received message's fields by tag (first occurrence), values as the bytes sent."""
    out: dict[int, bytes] = {}
    for tag, value in split_fields(raw.decode("latin-1")):
        out.setdefault(tag, value.encode("latin-1"))
    return out


class RawTrader:
    """A hand-driven order-entry session: logs on with ResetSeqNumFlag=Y, sends any bytes, and
    collects every message the gateway answers (a reader thread; TestRequests answered)."""

    def __init__(self, port: int, sender: str) -> None:
        self.session = RawSession(port, sender=sender)
        self.received: list[dict[int, bytes]] = []
        self.raw: list[bytes] = []  # the same messages, byte for byte
        self.closed = False
        self._cond = threading.Condition()
        self._send_lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                raw = self.session.read(timeout=60)
            except (TimeoutError, OSError):
                raw = None
            with self._cond:
                if raw is None:
                    self.closed = True
                    self._cond.notify_all()
                    return
                msg = parse(raw)
                self.received.append(msg)
                self.raw.append(raw)
                self._cond.notify_all()
            if msg.get(35) == b"1":
                self.send("35=0\x01112=" + msg.get(112, b"").decode("latin-1"))

    def send(self, body: str | bytes) -> int:
        """Send one message; returns the MsgSeqNum it went out with."""
        with self._send_lock:
            seq = self.session.seq
            self.session.send(body)
            return seq

    def logon(self) -> None:
        self.send("35=A\x0198=0\x01108=30\x01141=Y")
        self.wait_for(lambda m: m.get(35) == b"A", "Logon reply")

    def answers(self, seq: int, clordid: bytes | None = None, since: int = 0) -> list[dict[int, bytes]]:
        """What the gateway sent about the message sent as ``seq`` (RefSeqNum or ClOrdID),
        among the messages received from index ``since`` on."""
        with self._cond:
            return [m for m in self.received[since:] if m.get(45) == str(seq).encode()
                    or (clordid is not None and m.get(35) in (b"8", b"9") and clordid in (m.get(11), m.get(41)))]

    def wait_for(self, match: Any, what: str, timeout: float = 15.0) -> dict[int, bytes]:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for m in self.received:
                    if match(m):
                        return m
                left = deadline - time.monotonic()
                if left <= 0 or self.closed:
                    raise AssertionError(f"no {what}; received {self.received[-5:]}")
                self._cond.wait(min(left, 0.5))

    def wait_answer(self, seq: int, clordid: bytes | None = None, timeout: float = 15.0,
                    since: int = 0) -> dict[int, bytes]:
        self.wait_for(lambda m: bool(self.answers(seq, clordid, since)), f"answer to MsgSeqNum {seq}", timeout)
        return self.answers(seq, clordid, since)[0]

    def close(self) -> None:
        self.session.close()


__all__ = ["GatewayProc", "FixClient", "RawFixClient", "RawTrader", "SOH", "wait_until", "http_status", "body_without",
           "parse"]
