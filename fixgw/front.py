"""The front: what a FIX client reaches first. It owns the listening socket, so nothing a
client sends before it has logged on can take the gateway down, and QuickFIX only ever sees
connections that carry a complete, admissible Logon.

Rules of this file:
- Before its Logon is answered, a connection costs a few kilobytes of the front's and no
  thread of QuickFIX's: the front reads the Logon itself (bounded in size and time), checks it
  (the session exists; its certificate and address are the session's; a password sent to a
  session without one is dropped before any log sees it), and only then connects to QuickFIX
  on a loopback port of its own and passes the Logon on.
- Limits: ``max_pending_logons`` connections waiting to log on (``max_pending_logons_per_address``
  from one address), ``logon_timeout`` from accept to the gateway's Logon answer (TLS handshake
  included), ``max_message_size`` for every message in either phase, checked on its BodyLength
  before a byte of it is buffered (``InboundCheck``). A connection over a limit is closed and
  the reason logged and counted; nothing else changes.
- Its sockets, both sides, are numbered above QuickFIX's (``fixgw/descriptors.py``): a client
  reconnecting as QuickFIX closes its old connection must not take the number QuickFIX's old
  thread polls once more.
- TLS (``[gateway.tls]``) ends here, with Python's ``ssl``: only the configured CA is trusted
  (no default verify paths, so ``SSL_CERT_FILE``/``SSL_CERT_DIR`` and OpenSSL's directory are
  never read), TLS 1.2+ with ECDHE and AEAD ciphers only.

Knows nothing of sequence numbers or the session store: a refusal here is a closed connection
(the session's stored numbers cannot answer a connection that never reached it).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import re
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .descriptors import lifted_listeners, lifted_stream_socket
from .inputs import split_fields

log = logging.getLogger("fixgw.front")

SOH = b"\x01"
# A message starts "8=<BeginString>|9=<BodyLength>|".
HEADER = re.compile(rb"8=FIX[^\x01]{0,16}\x019=(\d+)\x01")
MAX_DIGITS = 10  # a longer BodyLength is over any limit (and ``int`` of thousands of digits refuses)
TRAILER_LEN = 7  # "10=xxx|"
SLACK = 64  # the header's own bytes before BodyLength counts
CHUNK = 65536
# QuickFIX's own wait for a session still registered to a connection (``setSession``: five tries
# a second apart); a previous connection that is closing lets go within milliseconds
ENGINE_LET_GO_S = 5.0
ECDHE_AEAD = "ECDHE+AESGCM:ECDHE+CHACHA20"


class InboundCheck:
    """A client's byte stream, checked as it passes (no message is assembled): every message's
    claimed BodyLength within the limit, and never more than a message's worth of bytes without
    a new message header — so the engine behind never buffers more than ``max_size`` plus a
    header of one message, however the stream is cut or garbled."""

    def __init__(self, max_size: int) -> None:
        self.max_size = max_size
        self._since_header = 0
        self._tail = b""

    def feed(self, chunk: bytes) -> str | None:
        """The problem with the stream so far, or None."""
        data = self._tail + chunk
        last_start = -1
        for m in HEADER.finditer(data):
            if over(m.group(1), self.max_size):
                return f"message of {m.group(1)[:12].decode()} bytes (BodyLength) over max_message_size {self.max_size}"
            last_start = m.start()
        if last_start >= 0:
            self._since_header = len(data) - last_start
        else:
            self._since_header += len(chunk)
        if self._since_header > self.max_size + SLACK + TRAILER_LEN:
            return f"{self._since_header} bytes without a message header (max_message_size {self.max_size})"
        self._tail = data[-40:]
        return None


def over(digits: bytes, max_size: int) -> bool:
    return len(digits) > MAX_DIGITS or int(digits) > max_size


def first_message(buffer: bytes, max_size: int) -> tuple[bytes | None, str | None]:
    """The first complete message of ``buffer`` (or None: more is needed), or a problem. Ends
    at the SOH of the field after the body (its CheckSum), as the engine's parser reads it."""
    m = HEADER.search(buffer)
    if m is None:
        return None, ("no FIX message header" if len(buffer) > SLACK + 16 else None)
    if over(m.group(1), max_size):
        return None, f"message of {m.group(1)[:12].decode()} bytes (BodyLength) over max_message_size {max_size}"
    end = buffer.find(SOH, m.end() + int(m.group(1)))
    if end < 0:
        return None, None
    return buffer[m.start():end + 1], None


def without_field(message: bytes, tag: int) -> bytes:
    """``message`` without every ``tag=`` field, BodyLength and CheckSum made again."""
    fields = [f for f in message.split(SOH) if f]
    kept = [f for f in fields[2:-1] if not f.startswith(b"%d=" % tag)]
    body = SOH.join(kept) + SOH
    head = fields[0] + SOH + b"9=%d" % len(body) + SOH
    checksum = sum(head + body) % 256
    return head + body + b"10=%03d" % checksum + SOH


@dataclass(frozen=True)
class SessionGate:
    """What the front checks of a Logon for one session (``SessionConfig``'s security settings)."""

    name: str
    allowed_subjects: tuple[str, ...] = ()  # certificate CN or DNS name; empty: any (the CA decides)
    allowed_networks: tuple[Any, ...] = ()  # ipaddress networks; empty: any
    has_password: bool = False


@dataclass
class FrontLimits:
    max_pending_logons: int = 256
    max_pending_logons_per_address: int = 64
    logon_timeout_s: float = 10.0
    max_message_size: int = 65536


@dataclass
class FrontCounters:
    """What the front refused, by reason (metrics read them)."""

    refused: dict[str, int] = field(default_factory=dict)
    pending: int = 0

    def count(self, reason: str) -> None:
        self.refused[reason] = self.refused.get(reason, 0) + 1


def certificate_names(cert: dict[str, Any] | None) -> set[str]:
    """The names a peer certificate (``SSLSocket.getpeercert()``) answers to: its CN and DNS SANs."""
    if not cert:
        return set()
    names = {value for rdn in cert.get("subject", ()) for key, value in rdn if key == "commonName"}
    names |= {value for kind, value in cert.get("subjectAltName", ()) if kind == "DNS"}
    return names


def logon_refusal(logon: bytes, gates: dict[tuple[str, str], SessionGate], peer: str,
                  cert: dict[str, Any] | None) -> str | None:
    """Why this Logon may not reach the engine, or None."""
    fields = dict(split_fields(logon.decode("latin-1")))
    if fields.get(35) != "A":
        return "the first message is not a Logon"
    gate = gates.get((fields.get(49, ""), fields.get(56, "")))
    if gate is None:
        return f"no session {fields.get(49, '')!r} → {fields.get(56, '')!r}"
    if gate.allowed_networks:
        address = ipaddress.ip_address(peer)
        if not any(address in net for net in gate.allowed_networks):
            return f"session {gate.name}: address {peer} not allowed"
    if gate.allowed_subjects and not certificate_names(cert) & set(gate.allowed_subjects):
        names = ", ".join(sorted(certificate_names(cert))) or "no certificate"
        return f"session {gate.name}: certificate ({names}) not allowed"
    return None


def tls_context(certificate: str, key: str, client_ca: str | None, min_version: str) -> ssl.SSLContext:
    """The server side of TLS: only ``client_ca`` is trusted (never the default paths)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3 if min_version == "TLSv1.3" else ssl.TLSVersion.TLSv1_2
    ctx.set_ciphers(ECDHE_AEAD)  # TLS 1.2; every TLS 1.3 suite is ECDHE + AEAD already
    ctx.options |= ssl.OP_NO_COMPRESSION | ssl.OP_CIPHER_SERVER_PREFERENCE
    ctx.load_cert_chain(certificate, key)
    if client_ca is not None:
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.load_verify_locations(cafile=client_ca)
    return ctx


class Front:
    """Listens on ``host:port``; passes admissible connections to the engine at ``engine_port``."""

    def __init__(self, host: str, port: int, engine_port: int, gates: dict[tuple[str, str], SessionGate],
                 limits: FrontLimits, tls: ssl.SSLContext | None = None,
                 on_refused: Callable[[str, str], None] = lambda session, reason: None,
                 closed_for: Callable[[], str | None] = lambda: None,
                 engine_letting_go: Callable[[str], bool] = lambda session: False) -> None:
        """``closed_for``: while it gives a reason, every new connection is closed at once, before
        any message (the gateway's clock disagrees with its datastore's: ``datastore/clock.py``).
        ``engine_letting_go(session)``: a Logon of ``session`` must wait for the engine to let go
        of a connection it was told to close (``_engine_let_go``)."""
        self.host, self.port, self.engine_port = host, port, engine_port
        self.closed_for = closed_for
        self.engine_letting_go = engine_letting_go
        self.gates, self.limits, self.tls = gates, limits, tls
        self.on_refused = on_refused
        self.counters = FrontCounters()
        self._pending_by_address: dict[str, int] = {}
        self.peers: dict[str, str] = {}  # session name → the address of the connection it is on
        self._loop = asyncio.new_event_loop()
        self._servers: list[asyncio.Server] = []
        self._thread = threading.Thread(target=self._loop.run_forever, name="fix-front", daemon=True)

    def start(self) -> Front:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._listen(), self._loop).result(10)
        return self

    async def _listen(self) -> None:
        for listener in lifted_listeners(self.host, self.port):
            self._servers.append(await asyncio.start_server(
                self._serve, sock=listener, ssl=self.tls, limit=CHUNK,
                ssl_handshake_timeout=self.limits.logon_timeout_s if self.tls is not None else None))

    def stop_listening(self) -> None:
        """No new connections; those that are open go on (the engine's Logouts pass through)."""
        async def close() -> None:
            for server in self._servers:
                server.close()
        try:
            asyncio.run_coroutine_threadsafe(close(), self._loop).result(5)
        except Exception:  # noqa: BLE001 (stopping)
            pass

    def stop(self) -> None:
        async def close() -> None:
            for server in self._servers:
                server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()
        try:
            asyncio.run_coroutine_threadsafe(close(), self._loop).result(5)
        except Exception:  # noqa: BLE001 (stopping: whatever is left goes with the loop)
            pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    def _refuse(self, peer: str, session: str, reason: str, kind: str) -> None:
        log.warning("front: connection from %s refused: %s", peer, reason)
        self.counters.count(kind)
        self.on_refused(session, kind)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = str((writer.get_extra_info("peername") or ("?",))[0])
        limits = self.limits
        session_name: str | None = None
        closed = self.closed_for()
        if closed is not None:
            self._refuse(peer, "", closed, "not-serving")
            writer.transport.abort()
            return
        if (self.counters.pending >= limits.max_pending_logons
                or self._pending_by_address.get(peer, 0) >= limits.max_pending_logons_per_address):
            self._refuse(peer, "", "too many connections waiting to log on", "pending-logons")
            writer.transport.abort()
            return
        self.counters.pending += 1
        self._pending_by_address[peer] = self._pending_by_address.get(peer, 0) + 1
        pending = True

        def logged_on() -> None:
            nonlocal pending
            if pending:
                pending = False
                self.counters.pending -= 1
                left = self._pending_by_address.get(peer, 1) - 1
                if left:
                    self._pending_by_address[peer] = left
                else:
                    self._pending_by_address.pop(peer, None)

        engine: asyncio.BaseTransport | None = None
        refused = True  # until the connection is passed on: then it ends gracefully (what was sent arrives)
        try:
            try:
                first = await asyncio.wait_for(self._read_logon(reader, peer), limits.logon_timeout_s)
            except TimeoutError:
                self._refuse(peer, "", f"no Logon within logon_timeout ({limits.logon_timeout_s:g}s)", "logon-timeout")
                return
            if first is None:
                return
            logon, after = first
            cert = writer.get_extra_info("peercert")
            refusal = logon_refusal(logon, self.gates, peer, cert)
            fields = dict(split_fields(logon.decode("latin-1")))
            gate = self.gates.get((fields.get(49, ""), fields.get(56, "")))
            if refusal is not None:
                self._refuse(peer, gate.name if gate else "", refusal, "logon-not-admitted")
                return
            assert gate is not None
            if not gate.has_password and b"\x01554=" in logon:
                logon = without_field(logon, 554)  # never into a message log or a store
            check = InboundCheck(limits.max_message_size)
            ended: asyncio.Future[bool] = asyncio.get_running_loop().create_future()

            def engine_answers(chunk: bytes) -> bool:
                if pending and b"\x0135=A\x01" in chunk:
                    logged_on()
                return True

            def client_sends(chunk: bytes) -> bool:
                problem = check.feed(chunk)
                if problem is not None:
                    self._refuse(peer, "", problem, "message-size")
                return problem is None

            await self._engine_let_go(gate.name)
            loop = asyncio.get_running_loop()
            engine_sock = lifted_stream_socket()
            engine_sock.setblocking(False)
            try:
                await loop.sock_connect(engine_sock, ("127.0.0.1", self.engine_port))
            except BaseException:
                engine_sock.close()
                raise
            engine_transport, engine_side = await loop.create_connection(
                lambda: Relay(ended, engine_answers), sock=engine_sock)
            engine = engine_transport
            # From here the client's connection relays from asyncio's read callback (``Relay``):
            # what the logon phase's reader holds beyond the Logon goes first.
            after += reader_take_all(reader)
            client_side = Relay(ended, client_sends)
            writer.transport.set_protocol(client_side)
            client_side.bind(writer.transport, engine_transport)
            engine_side.bind(engine_transport, writer.transport)
            client_side.transport.resume_reading()  # the reader may have paused it (its buffer's limit)
            problem = check.feed(after)
            if problem is not None:
                self._refuse(peer, gate.name, problem, "message-size")
                return
            engine_transport.write(logon + after)
            if reader.at_eof():
                ended.set_result(True)  # the client closed while the engine's connection opened
            self.peers[gate.name] = peer
            session_name = gate.name
            refused = False
            deadline: asyncio.Future[Any] = asyncio.ensure_future(self._logon_deadline(lambda: pending, peer))
            try:
                await asyncio.wait([ended, deadline], return_when=asyncio.FIRST_COMPLETED)
            finally:
                deadline.cancel()
            # the deadline, or a size refusal: aborted; either side closing: both closed gracefully
            refused = not ended.done() or ended.result() is False
        except (OSError, ssl.SSLError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 (one connection's bug must not stop the front)
            log.exception("front: connection from %s failed", peer)
        finally:
            logged_on()
            if session_name is not None and self.peers.get(session_name) == peer:
                del self.peers[session_name]
            for transport in (writer.transport, engine):
                if transport is None:
                    continue
                if refused:
                    transport.abort()  # type: ignore[attr-defined]
                else:  # flushed, then FIN: a Logout the engine sent before closing still arrives
                    transport.close()

    async def _engine_let_go(self, session: str) -> None:
        """Wait (a bounded time) until the engine has let go of the connections it was told to
        close, the session's previous one among them.

        QuickFIX closes a connection it is told to drop (a reset, a disconnect, the end of a
        period) on the caller's thread, while the connection's own thread may be between its
        poll and its read. A connection accepted in that moment, of any session, can get the
        closed descriptor's number, and the old thread then reads its Logon for a session that
        has no connection to answer on: the client waits, unanswered, until the Logon timeout.
        The old thread lets go of its session as it ends, so a Logon passed on after that
        reaches only its own connection's thread.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + ENGINE_LET_GO_S
        while self.engine_letting_go(session) and loop.time() < deadline:
            await asyncio.sleep(0.005)

    async def _logon_deadline(self, pending: Callable[[], bool], peer: str) -> None:
        await asyncio.sleep(self.limits.logon_timeout_s)
        if pending():
            self._refuse(peer, "", f"Logon not answered within logon_timeout ({self.limits.logon_timeout_s:g}s)",
                         "logon-timeout")
            return
        await asyncio.Event().wait()  # logged on: this task only ends when cancelled

    async def _read_logon(self, reader: asyncio.StreamReader, peer: str) -> tuple[bytes, bytes] | None:
        """The first message, and what came behind it in the same reads (passed on after it)."""
        buffer = b""
        while True:
            chunk = await reader.read(CHUNK)
            if not chunk:
                return None
            buffer += chunk
            logon, problem = first_message(buffer, self.limits.max_message_size)
            if problem is None and logon is None and len(buffer) > self.limits.max_message_size + SLACK + TRAILER_LEN:
                problem = f"{len(buffer)} bytes without a complete message (max_message_size)"
            if problem is not None:
                self._refuse(peer, "", problem, "message-size")
                return None
            if logon is not None:
                at = buffer.find(logon)
                if at > 0:  # bytes before the first header: the engine's parser skips them too
                    self._refuse(peer, "", "bytes before the first message", "logon-not-admitted")
                    return None
                return logon, buffer[len(logon):]


def reader_take_all(reader: asyncio.StreamReader) -> bytes:
    """What ``reader`` holds and nobody has read yet, taken out of it (no wait)."""
    buffered: bytearray = reader._buffer  # type: ignore[attr-defined]  # noqa: SLF001 (asyncio offers no non-blocking read of its buffer)
    data = bytes(buffered)
    buffered.clear()
    return data


class Relay(asyncio.Protocol):
    """One side of a logged-on connection. What it receives is passed on to the other side's
    transport from asyncio's read callback itself: no task or future per chunk, about a quarter of
    the front's CPU of a stream reader and writer per relayed message. The other side's flow
    control pauses this side's reading (its ``pause_writing`` is called when this side's writes
    fill the other's buffer)."""

    def __init__(self, ended: asyncio.Future[bool], passes: Callable[[bytes], bool]) -> None:
        """``passes``: inspects a chunk before it is passed on; False ends the connection, refused."""
        self.ended, self.passes = ended, passes
        self.transport: Any = None
        self.other: Any = None
        self._held = bytearray()  # received before ``bind`` (the engine's answer can be that quick)

    def bind(self, transport: asyncio.BaseTransport, other: asyncio.BaseTransport) -> None:
        self.transport, self.other = transport, other
        if self._held:
            held, self._held = bytes(self._held), bytearray()
            self.data_received(held)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if self.ended.done():
            return
        if self.other is None:
            self._held += data
            return
        if not self.passes(data):
            self.ended.set_result(False)
            return
        self.other.write(data)

    def eof_received(self) -> bool:
        self._end()
        return False  # the transport closes; the other side is closed gracefully by the front

    def connection_lost(self, exc: Exception | None) -> None:
        self._end()

    def pause_writing(self) -> None:
        if self.other is not None:
            self.other.pause_reading()

    def resume_writing(self) -> None:
        if self.other is not None:
            self.other.resume_reading()

    def _end(self) -> None:
        if not self.ended.done():
            self.ended.set_result(True)
