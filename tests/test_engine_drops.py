"""``EngineDrops`` on a real ``ThreadedSocketAcceptor``: a connection QuickFIX was told to close
from another thread keeps its session registered until the connection's own thread has ended,
and the front is held back (``letting_go``) exactly that long."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import quickfix as fix

from fixgw.engine_drops import EngineDrops
from fixgw.fixat import RawSession
from tests.gateway_helpers import wait_until
from tests.test_engine_threads import LOGON, ORDER, serving


class HeldInFromApp(fix.Application):  # type: ignore[misc]
    """Holds the connection's thread in ``fromApp`` until told to go on."""

    def __init__(self) -> None:
        super().__init__()
        self.inside = threading.Event()
        self.go_on = threading.Event()

    def onCreate(self, sid: Any) -> None: ...  # noqa: N802
    def onLogon(self, sid: Any) -> None: ...  # noqa: N802
    def onLogout(self, sid: Any) -> None: ...  # noqa: N802
    def toAdmin(self, message: Any, sid: Any) -> None: ...  # noqa: N802
    def fromAdmin(self, message: Any, sid: Any) -> None: ...  # noqa: N802
    def toApp(self, message: Any, sid: Any) -> None: ...  # noqa: N802

    def fromApp(self, message: Any, sid: Any) -> None:  # noqa: N802
        self.inside.set()
        self.go_on.wait(20)


def test_a_connection_closed_from_another_thread_is_let_go_only_when_its_thread_ends(tmp_path: Path) -> None:
    app = HeldInFromApp()
    sid = fix.SessionID("FIX.4.4", "FIXGW", "CLIENT1")
    drops = EngineDrops()
    with serving(tmp_path, app) as port:  # type: ignore[arg-type]
        client = RawSession(port)
        try:
            client.send(LOGON)
            assert client.read() is not None
            client.send(ORDER.format(n=1))
            assert app.inside.wait(10), "the order did not reach fromApp"
            assert not drops.letting_go(), "nothing was dropped yet"
            drops.note(sid)
            closing = threading.Thread(target=fix.Session.lookupSession(sid).disconnect, daemon=True)
            closing.start()  # from this thread, not the connection's: as the gateway's watches do
            closing.join(10)
            assert not closing.is_alive()
            assert client.read(timeout=10) is None, "the connection was not closed"
            assert drops.letting_go(), "let go while the connection's thread was still in fromApp"
            app.go_on.set()
            wait_until(lambda: not drops.letting_go(), "the connection's thread ended and let go", 10)
            assert not fix.Session.isSessionRegistered(sid)
        finally:
            app.go_on.set()
            client.close()
