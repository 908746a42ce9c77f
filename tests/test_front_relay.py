"""The front's relay of a logged-on connection, against a plain TCP server standing for the engine:
every byte passes in order both ways, what came behind the Logon in the same write included, and
a client that does not read holds the engine back instead of the front buffering without end."""

from __future__ import annotations

import os
import random
import socket
import threading
import time

from fixgw.descriptors import floor
from fixgw.front import Front, FrontLimits, SessionGate, without_field

from .gateway_helpers import listening_port_below_ephemeral


def message(msg_type: str, body: str = "") -> bytes:
    """A FIX 4.4 message CLIENT → GW (BodyLength and CheckSum right: the front reads them)."""
    return without_field(f"8=FIX.4.4\x019=0\x0135={msg_type}\x0149=CLIENT\x0156=GW\x01{body}10=000\x01".encode(), 0)


class Engine:
    """Accepts one connection; records what it receives; sends what it is told to."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.received = bytearray()
        self.conn: socket.socket | None = None
        self.accepted = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        self.conn, _ = self.listener.accept()
        self.accepted.set()
        while chunk := self.conn.recv(65536):
            self.received += chunk

    def until_received(self, size: int, timeout: float = 10.0) -> bytes:
        deadline = time.monotonic() + timeout
        while len(self.received) < size and time.monotonic() < deadline:
            time.sleep(0.01)
        return bytes(self.received)


def started_front(engine: Engine) -> Front:
    port = listening_port_below_ephemeral()
    gates = {("CLIENT", "GW"): SessionGate("GW-CLIENT")}
    return Front("127.0.0.1", port, engine.port, gates, FrontLimits(logon_timeout_s=30.0)).start()


def receive(client: socket.socket, size: int, timeout: float = 10.0) -> bytes:
    client.settimeout(timeout)
    data = bytearray()
    while len(data) < size:
        chunk = client.recv(65536)
        if not chunk:
            break
        data += chunk
    return bytes(data)


def test_the_logon_and_what_came_behind_it_pass_in_order_and_the_answers_come_back() -> None:
    engine = Engine()
    front = started_front(engine)
    try:
        logon = message("A", "98=0\x01108=30\x01")
        orders = b"".join(message("D", f"11=ORDER-{i}\x01") for i in range(50))
        with socket.create_connection(("127.0.0.1", front.port)) as client:
            client.sendall(logon + orders)  # one write: the front reads the Logon and more
            assert engine.until_received(len(logon) + len(orders)) == logon + orders
            answer = message("A", "98=0\x01108=30\x01")
            assert engine.accepted.wait(5) and engine.conn is not None
            engine.conn.sendall(answer)
            assert receive(client, len(answer)) == answer
            later = message("D", "11=LATER\x01")
            client.sendall(later)
            assert engine.until_received(len(logon) + len(orders) + len(later)).endswith(later)
    finally:
        front.stop()


def test_a_client_that_does_not_read_holds_the_engine_back_and_then_gets_every_byte() -> None:
    engine = Engine()
    front = started_front(engine)
    try:
        with socket.create_connection(("127.0.0.1", front.port)) as client:
            logon = message("A", "98=0\x01108=30\x01")
            client.sendall(logon)
            engine.until_received(len(logon))
            assert engine.accepted.wait(5) and engine.conn is not None
            engine.conn.sendall(logon)
            assert receive(client, len(logon)) == logon
            # More than every kernel buffer on the way can hold while nobody reads (the relay passes
            # bytes on without parsing them once the Logon is answered).
            payload = random.Random(7).randbytes(64 * 1024 * 1024)
            view = memoryview(payload)
            engine.conn.settimeout(1.0)
            sent = 0
            try:
                while sent < len(payload):
                    sent += engine.conn.send(view[sent:sent + 1024 * 1024])
            except TimeoutError:
                pass  # the engine's send blocked for a second: held back
            assert sent < len(payload), "the front took everything in for a client that did not read"
            engine.conn.settimeout(None)
            rest = threading.Thread(target=engine.conn.sendall, args=(view[sent:],), daemon=True)
            rest.start()
            assert receive(client, len(payload)) == payload
            rest.join(5)
            assert not rest.is_alive()
    finally:
        front.stop()


def test_a_logon_waits_until_the_engine_has_let_go_of_the_sessions_previous_connection() -> None:
    """While the engine still holds the session's previous connection (told to drop, its thread
    not ended), a new connection is not passed on: its descriptor could be read by that thread.
    It is passed on, Logon first, as soon as the engine lets go."""
    engine = Engine()
    letting_go = threading.Event()
    letting_go.set()
    asked: list[str] = []

    def engine_letting_go(session: str) -> bool:
        asked.append(session)
        return letting_go.is_set()

    front = Front("127.0.0.1", listening_port_below_ephemeral(), engine.port, {("CLIENT", "GW"): SessionGate("GW-CLIENT")},
                  FrontLimits(logon_timeout_s=30.0), engine_letting_go=engine_letting_go).start()
    try:
        logon = message("A", "98=0\x01108=30\x01")
        with socket.create_connection(("127.0.0.1", front.port)) as client:
            client.sendall(logon)
            assert not engine.accepted.wait(0.5), "passed on while the engine still held the previous connection"
            assert set(asked) == {"GW-CLIENT"}
            letting_go.clear()
            assert engine.accepted.wait(5), "not passed on once the engine let go"
            assert engine.until_received(len(logon)) == logon
    finally:
        front.stop()


def front_sockets(front_port: int, engine_port: int) -> dict[str, tuple[int, int]]:
    """This process's connected sockets of the front: the client's side (its own port) and the
    engine's (to the engine's port), each as (descriptor number, TCP_NODELAY)."""
    found: dict[str, tuple[int, int]] = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            if not os.readlink(f"/proc/self/fd/{name}").startswith("socket:"):
                continue
            probe = socket.socket(fileno=os.dup(int(name)))
        except OSError:
            continue
        with probe:
            try:
                local, peer = probe.getsockname(), probe.getpeername()
                nodelay = probe.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
            except OSError:
                continue
            if local[1] == front_port:
                found["client side"] = (int(name), nodelay)
            elif peer[1] == engine_port:
                found["engine side"] = (int(name), nodelay)
    return found


def test_the_fronts_sockets_are_numbered_above_quickfixs_and_send_at_once() -> None:
    """Both sides of a relayed connection: numbered from ``descriptors.floor()`` up (a QuickFIX
    thread may poll a lower number it has just closed), and with Nagle's delay off."""
    engine = Engine()
    front = started_front(engine)
    try:
        with socket.create_connection(("127.0.0.1", front.port)) as client:
            logon = message("A", "98=0\x01108=30\x01")
            client.sendall(logon)
            assert engine.until_received(len(logon)) == logon  # relayed: both sides set up
            sockets = front_sockets(front.port, engine.port)
            assert set(sockets) == {"client side", "engine side"}, sockets
            for side, (number, nodelay) in sockets.items():
                assert number >= floor(), (side, number)
                assert nodelay, f"{side}: TCP_NODELAY off"
    finally:
        front.stop()
