"""Python's state for QuickFIX's own threads is kept between callbacks (``fixgw.engine_threads``):
on a real ``ThreadedSocketAcceptor``, a thread-local set in one ``fromApp`` is there in the next
on the same connection's thread, and the hold is given back at the session's logout, so a new
connection's thread starts afresh. Without ``keep`` every callback saw fresh thread-locals (the
bindings deleted the thread's state after each one)."""

from __future__ import annotations

import gc
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import quickfix as fix

from datastore.embedded import free_port
from fixgw import engine_threads
from fixgw.fixat import RawSession

LOGON = "35=A\x0198=0\x01108=30\x01"
ORDER = ("35=D\x0111=C{n}\x0155=ACME\x0154=1\x0140=2\x0144=1.00\x0138=1\x0159=0\x01"
         "60=20261205-07:00:00.000\x0121=1\x01")


class Token:
    pass


class Counting(fix.Application):  # type: ignore[misc]
    """Counts, in a thread-local, the app messages each thread has seen in a row."""

    def __init__(self, keep: bool) -> None:
        super().__init__()
        self.keep = keep
        self.local = threading.local()
        self.seen: list[tuple[int, int]] = []  # (native thread id, messages this thread-local counted before)
        self.cond = threading.Condition()
        self.freed = threading.Event()

    def onCreate(self, sid: Any) -> None: ...  # noqa: N802
    def onLogon(self, sid: Any) -> None: ...  # noqa: N802

    def onLogout(self, sid: Any) -> None:  # noqa: N802
        engine_threads.let_go()

    def toAdmin(self, message: Any, sid: Any) -> None: ...  # noqa: N802
    def fromAdmin(self, message: Any, sid: Any) -> None: ...  # noqa: N802
    def toApp(self, message: Any, sid: Any) -> None: ...  # noqa: N802

    def fromApp(self, message: Any, sid: Any) -> None:  # noqa: N802
        if self.keep:
            engine_threads.keep()
        count = getattr(self.local, "count", 0)
        self.local.count = count + 1
        if count == 0:  # freed with the thread's Python state
            self.local.token = token = Token()
            weakref.finalize(token, self.freed.set)
        with self.cond:
            self.seen.append((threading.get_native_id(), count))
            self.cond.notify_all()


def acceptor(tmp: Path, port: int, app: Counting) -> Any:
    (tmp / "store").mkdir(exist_ok=True)
    cfg = tmp / "acceptor.cfg"
    cfg.write_text(f"""[DEFAULT]
ConnectionType=acceptor
SocketAcceptPort={port}
StartTime=00:00:00
EndTime=00:00:00
UseDataDictionary=N
ResetOnLogout=Y
ResetOnDisconnect=Y
FileStorePath={tmp / "store"}
[SESSION]
BeginString=FIX.4.4
SenderCompID=FIXGW
TargetCompID=CLIENT1
""")
    settings = fix.SessionSettings(str(cfg))
    return fix.ThreadedSocketAcceptor(app, fix.MemoryStoreFactory(), settings)


def connect_and_send(port: int, app: Counting, orders: int) -> None:
    client = RawSession(port)
    client.send(LOGON)
    assert client.read() is not None  # the Logon's answer
    for n in range(orders):
        client.send(ORDER.format(n=n))
    with app.cond:
        assert app.cond.wait_for(lambda: len(app.seen) % orders == 0 and app.seen, 10)
    client.send("35=5\x01")  # Logout: QuickFIX's thread for this connection calls onLogout
    client.read()
    client.close()


@contextmanager
def serving(tmp: Path, app: Counting) -> Iterator[int]:
    """A ThreadedSocketAcceptor for ``app`` on a port of its own, stopped and destroyed after:
    QuickFIX's session registry is process-wide and keyed by SessionID, and an acceptor freed
    later by the collector would erase the next test's session from it. A port taken between
    ``free_port`` and the bind (another process's) is tried again with another."""
    for _ in range(5):
        port = free_port()
        engine = acceptor(tmp, port, app)
        try:
            engine.start()
            break
        except fix.RuntimeError as exc:  # destroyed now, its sessions out of the registry
            del engine
            gc.collect()
            if "Address already in use" not in str(exc):
                raise
    else:
        raise AssertionError("no free port for the acceptor in 5 tries")
    try:
        yield port
    finally:
        engine.stop()
        del engine
        gc.collect()


def run(tmp: Path, keep: bool) -> list[tuple[int, int]]:
    app = Counting(keep)
    with serving(tmp, app) as port:
        connect_and_send(port, app, 3)
        connect_and_send(port, app, 3)
        with app.cond:
            app.cond.wait_for(lambda: len(app.seen) == 6, 10)
    return app.seen


def test_a_kept_thread_sees_its_thread_locals_again_until_its_logout(tmp_path: Path) -> None:
    seen = run(tmp_path, keep=True)
    assert [count for _, count in seen] == [0, 1, 2, 0, 1, 2], seen


def test_the_state_is_freed_at_the_logout_on_its_thread(tmp_path: Path) -> None:
    app = Counting(keep=True)
    with serving(tmp_path, app) as port:
        connect_and_send(port, app, 3)
        assert app.freed.wait(10), "the thread's Python state (and its thread-locals) outlived its logout"


def test_without_keep_each_callback_starts_a_fresh_thread_state(tmp_path: Path) -> None:
    seen = run(tmp_path, keep=False)
    assert [count for _, count in seen] == [0] * 6, seen
