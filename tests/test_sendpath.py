"""The group commit's send path in C++ (``fixgw/sendpath.py``, ``fixgw/_sendpath.cpp``) against
a real QuickFIX acceptor and a client on a socket: a committed message goes out as committed
without Python's ``toApp``; a miss goes to Python's ``toApp`` with its delivery named first, and
nothing after it is sent from C++; every other callback reaches the Python application."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import quickfix as fix

from datastore.embedded import free_port
from datastore.settings import ConfigError
from fixgw import sendpath
from fixgw.config import GatewaySettings
from fixgw.fixat import RawSession
from fixgw.fixmsg import Inbound, body_text, filled_body, inbound, inbound_reader, sending_time
from tests.gateway_helpers import body_without

REPORT = body_text("8", [(6, "0"), (11, "c-1"), (14, "0"), (17, "e-1"), (37, "o-1"), (38, "10"), (39, "0"),
                         (54, "1"), (55, "T16"), (150, "0"), (151, "10")])
RESEND_CHANGES = {"43", "122", "52", "9", "10"}  # PossDupFlag, OrigSendingTime, SendingTime, BodyLength, CheckSum


def test_the_extension_is_built_and_order_path_chooses_it() -> None:
    """`make` builds the extension (a C++ compiler is part of the set-up); "auto" and "native"
    take it, "python" does not, and "native" without it is refused with the reason."""
    assert sendpath.native is not None, f"fixgw._sendpath is not built: {sendpath.why_not}"
    assert sendpath.chosen("auto") is sendpath.native
    assert sendpath.chosen("native") is sendpath.native
    assert sendpath.chosen("python") is None
    assert sendpath.described(sendpath.native) == "native (C++)"


def test_the_pinned_quickfix_is_the_release_of_the_vendored_headers() -> None:
    """The extension uses QuickFIX's classes across the library's boundary: the wheel pinned in
    pyproject.toml must be the release whose headers are in third_party/quickfix."""
    import re

    root = Path(__file__).resolve().parents[1]
    pinned = re.search(r'"quickfix-tls==([^"]+)"', (root / "pyproject.toml").read_text())
    assert pinned and pinned.group(1).startswith(sendpath.HEADERS + ".")
    assert f"QuickFIX {sendpath.HEADERS}" in (root / "third_party" / "quickfix" / "README.md").read_text()


def test_native_without_the_extension_is_refused_and_auto_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sendpath, "native", None)
    monkeypatch.setattr(sendpath, "why_not", "ImportError: no module")
    with pytest.raises(ConfigError, match=r'order_path = "native": the extension fixgw._sendpath is not built '
                                          r'\(ImportError: no module\)'):
        sendpath.chosen("native")
    assert sendpath.chosen("auto") is None
    assert sendpath.described(None) == "python (the extension is not built: ImportError: no module)"


class Recorder(fix.Application):  # type: ignore[misc]
    """The Python application behind the C++ one: what reaches it."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, str]] = []

    def onCreate(self, s: Any) -> None: return None  # noqa: E704,N802
    def onLogon(self, s: Any) -> None: self.calls.append(("onLogon", ""))  # noqa: E704,N802
    def onLogout(self, s: Any) -> None: return None  # noqa: E704,N802
    def toAdmin(self, m: Any, s: Any) -> None: self.calls.append(("toAdmin", m.getHeader().getField(35)))  # noqa: E704,N802
    def fromAdmin(self, m: Any, s: Any) -> None: self.calls.append(("fromAdmin", m.getHeader().getField(35)))  # noqa: E704,N802
    def fromApp(self, m: Any, s: Any) -> None: self.calls.append(("fromApp", m.getHeader().getField(35)))  # noqa: E704,N802

    def toApp(self, m: Any, s: Any) -> None:  # noqa: N802
        self.calls.append(("toApp", m.getHeader().getField(34)))


def started_acceptor(application: Any, store: Callable[[Any], Any] = lambda qf: fix.MemoryStoreFactory()
                     ) -> tuple[Any, RawSession, Path]:
    """A QuickFIX acceptor with the gateway's settings for CLIENT1 on a free port, given
    ``application`` and the store ``store(settings)`` makes, and a client logged on to it;
    and the acceptor's state directory (its files under ``store``)."""
    port = free_port()
    settings = GatewaySettings(port=port, http_port=0, session=[{"name": "CLIENT1", "begin_string": "FIX.4.4"}])
    state = Path(tempfile.mkdtemp())
    (state / "qf.cfg").write_text(settings.quickfix_settings(state / "store"))
    qf = fix.SessionSettings(str(state / "qf.cfg"))
    acceptor = fix.ThreadedSocketAcceptor(application, store(qf), qf)
    acceptor.start()
    client = RawSession(port, "CLIENT1", "FIXGW")
    client.send("35=A\x0198=0\x01108=30\x01")
    assert b"\x0135=A\x01" in (client.read(5) or b"")
    # QuickFIX answers the Logon before it counts the session logged on: a send in between
    # would be stored and not sent.
    session = fix.Session.lookupSession(fix.SessionID("FIX.4.4", "FIXGW", "CLIENT1"))
    deadline = time.monotonic() + 5
    while not session.isLoggedOn() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert session.isLoggedOn()
    return acceptor, client, state


def test_committed_sends_go_out_from_cpp_and_a_miss_goes_to_python_with_its_delivery() -> None:
    assert sendpath.native is not None, sendpath.why_not
    app = Recorder()
    acceptor, client, _ = started_acceptor(sendpath.native.front(app))
    try:
        assert ("fromAdmin", "A") in app.calls and ("toAdmin", "A") in app.calls, "admin callbacks reach Python"
        # QuickFIX runs onLogon after it has sent the Logon's answer: the client can read the
        # answer first, so the callbacks below are counted only once onLogon is in.
        deadline = time.monotonic() + 5
        while ("onLogon", "") not in app.calls and time.monotonic() < deadline:
            time.sleep(0.01)
        assert ("onLogon", "") in app.calls, "onLogon reaches Python"
        sid = fix.SessionID("FIX.4.4", "FIXGW", "CLIENT1")
        stamp = sending_time()
        committed = [filled_body(REPORT, "FIX.4.4", "FIXGW", "CLIENT1", seq, stamp) for seq in (2, 3)]
        missed: list[int] = []
        app.calls.clear()
        # Two committed as QuickFIX will send them, then one committed under a wrong number (a
        # miss), then one more that C++ must leave to the caller.
        wrong = filled_body(REPORT, "FIX.4.4", "FIXGW", "CLIENT1", 9, stamp)
        outcomes = sendpath.native.send_committed(sid, [REPORT] * 4, [*committed, wrong, committed[0]], [stamp] * 4,
                                                  missed.append)
        assert outcomes == "mmp", "two sent as committed, the third a miss; the fourth left to Python"
        assert missed == [2], "the miss's delivery named before Python's toApp runs"
        assert app.calls == [("toApp", "4")], "only the miss reached Python's toApp"
        received = [client.read(5) for _ in range(3)]
        assert received[:2] == committed, "sent exactly as committed"
        assert received[2] is not None and b"\x0134=4\x01" in received[2]
        # A message not committed (no bytes) goes to Python too.
        assert sendpath.native.send_committed(sid, [REPORT], [b""], [""], missed.append) == "p"
        assert missed == [2, 0]
    finally:
        client.close()
        acceptor.stop()


def test_the_committed_store_writes_no_message_keeps_the_numbers_and_resends_what_the_store_holds() -> None:
    """QuickFIX's store on the native path (``committed_store``): the messages QuickFIX stores are
    already in Redis, so its files get none of them; the numbers go on in memory; a
    ResendRequest is answered with what ``fetch`` reads (whole messages, PossDupFlag=Y); and
    when ``fetch`` fails, QuickFIX does not gap-fill what it could not read: it disconnects."""
    assert sendpath.native is not None, sendpath.why_not
    held: dict[int, bytes] = {}  # what the session store holds (the group commit wrote it)
    asked: list[tuple[str, int, int]] = []
    failing: list[str] = []

    def fetch(text: str, first: int, last: int) -> list[bytes]:
        asked.append((text, first, last))
        if failing:
            raise ConnectionError(failing[0])
        return [held[seq] for seq in range(first, last + 1) if seq in held]

    acceptor, client, state = started_acceptor(
        sendpath.native.front(Recorder()), lambda qf: sendpath.native.committed_store(fix.FileStoreFactory(qf), fetch))
    files = state / "store"
    try:
        sid = fix.SessionID("FIX.4.4", "FIXGW", "CLIENT1")
        session = fix.Session.lookupSession(sid)
        stamp = sending_time()
        committed = [filled_body(REPORT, "FIX.4.4", "FIXGW", "CLIENT1", seq, stamp) for seq in (2, 3, 4)]
        held.update(zip((2, 3, 4), committed))
        assert sendpath.native.send_committed(sid, [REPORT] * 3, committed, [stamp] * 3, lambda i: None) == "mmm"
        assert [client.read(5) for _ in range(3)] == committed
        assert session.getExpectedSenderNum() == 5 and session.getExpectedTargetNum() == 2
        assert all(path.stat().st_size == 0 for path in files.glob("*.body")), "no message written to the files"
        assert all(path.stat().st_size == 0 for path in files.glob("*.header"))

        client.send("35=2\x017=2\x0116=0\x01")  # everything from 2 on
        resent = [client.read(5) for _ in range(3)]
        assert asked == [("FIX.4.4:FIXGW->CLIENT1", 2, 4)], "read up to the last number sent"
        for original, again in zip(committed, resent):
            assert again is not None and b"\x0143=Y\x01" in again
            assert body_without(again, RESEND_CHANGES) == body_without(original, RESEND_CHANGES)
        # QuickFIX counts the ResendRequest in once it has resent: the client may read the last
        # resend a moment before
        deadline = time.monotonic() + 5
        while session.getExpectedTargetNum() != 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert session.getExpectedSenderNum() == 5 and session.getExpectedTargetNum() == 3

        failing.append("the session store is unreachable")
        client.send("35=2\x017=2\x0116=0\x01")
        deadline = time.monotonic() + 5
        answer = client.read(5)
        while answer is not None and time.monotonic() < deadline:
            assert b"\x0135=4\x01" not in answer, "no gap fill for messages the store could not read"
            answer = client.read(5)
        assert answer is None, "the connection is closed: the client asks again once it is back"
    finally:
        client.close()
        acceptor.stop()


def test_an_inbound_message_with_bytes_that_are_not_utf8_reads_the_same_natively() -> None:
    """A request as it comes off the wire (through QuickFIX, its dictionary checks passed) with
    text that is not UTF-8: ``inbound_reader`` with the extension gives what ``inbound`` gives,
    the bytes kept as the bindings keep them (surrogates)."""
    assert sendpath.native is not None, sendpath.why_not
    read = inbound_reader(sendpath.native)
    seen: list[tuple[Inbound, Inbound]] = []

    class Both(Recorder):
        def fromApp(self, m: Any, s: Any) -> None:  # noqa: N802
            seen.append((read(m), inbound(m)))

    acceptor, client, _ = started_acceptor(sendpath.native.front(Both()))
    try:
        client.send(b"35=D\x0111=c-\xe9\xff\x0121=1\x0138=10\x0140=2\x0144=10.50\x0154=1\x0155=T16\x01"
                    b"58=caf\xc3\xa9 \xff=\x0160=20261201-00:00:00.000\x01")
        deadline = time.monotonic() + 5
        while not seen and time.monotonic() < deadline:
            time.sleep(0.01)
        assert seen, "the request reached fromApp"
        native, python = seen[0]
        assert native == python
        assert native.fields[11] == "c-\udce9\udcff" and native.fields[58] == "café \udcff=" and native.fields[44] == "10.50"
    finally:
        client.close()
        acceptor.stop()
