"""``fixgw demo``: a QuickFIX initiator that trades against a running gateway and prints what it hears.

CLIENT1 rests a sell, CLIENT2 buys part of it (both get fills, the drop copy gets every
report), CLIENT1 cancels the rest, CLIENT2 rests a bid and replaces it. Every
ExecutionReport and OrderCancelReject received is printed as a table.
"""

from __future__ import annotations

import gc
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import quickfix as fix

from .inputs import split_fields

COLUMNS = [("session", None), ("type", 35), ("ExecType", 150), ("OrdStatus", 39), ("ClOrdID", 11),
           ("OrigClOrdID", 41), ("Side", 54), ("Symbol", 55), ("LastQty", 32), ("LastPx", 31), ("CumQty", 14),
           ("LeavesQty", 151), ("AvgPx", 6), ("ExecID", 17), ("Text", 58)]


def initiator_settings(path: Path, host: str, port: int, sid: fix.SessionID, store: Path,
                       reset_on_logon: bool = False) -> fix.SessionSettings:
    """QuickFIX settings for one initiator session (written to ``path``, where QuickFIX reads
    them): the demo's clients and the tests' clients connect the same way. The session never
    starts a new period by itself (``NonStopSession``), as the gateway's sessions without a
    schedule: with QuickFIX's default day (00:00 to 00:00 UTC) a client running over midnight
    logged on again from number 1, and the gateway refused it as too low."""
    path.write_text(f"""[DEFAULT]
ConnectionType=initiator
SocketConnectHost={host}
SocketConnectPort={port}
FileStorePath={store}
NonStopSession=Y
HeartBtInt=30
ReconnectInterval=1
ResetOnLogon={'Y' if reset_on_logon else 'N'}
UseDataDictionary=N
[SESSION]
BeginString={sid.getBeginString().getValue()}
SenderCompID={sid.getSenderCompID().getValue()}
TargetCompID={sid.getTargetCompID().getValue()}
""")
    return fix.SessionSettings(str(path))


class DemoClient(fix.Application):
    """One initiator session that records the ExecutionReports it receives."""

    def __init__(self, directory: Path, host: str, port: int, sender: str, target: str,
                 begin: str = "FIX.4.4", reset_on_logon: bool = True) -> None:
        super().__init__()
        self.name = sender
        self.sid = fix.SessionID(begin, sender, target)
        self.reports: list[dict[int, str]] = []
        self.logout_texts: list[str] = []  # the Text (58) of every Logout received: why a session ended
        self.sent_seq: dict[int, str] = {}  # MsgSeqNum → ClOrdID of each order message sent
        # Session-level Rejects (35=3) of order messages: {35, 45 RefSeqNum, 58 Text, 11 ClOrdID}
        self.session_rejects: list[dict[int, str]] = []
        self.cond = threading.Condition()
        self.logged_on = False
        directory.mkdir(parents=True, exist_ok=True)
        self._where = (directory, host, reset_on_logon)
        self._swapping = threading.Lock()
        self.initiator = self._initiator(port)

    def _initiator(self, port: int) -> Any:
        directory, host, reset_on_logon = self._where
        settings = initiator_settings(directory / f"{self.name}.cfg", host, port, self.sid, directory / self.name,
                                      reset_on_logon)
        # QuickFIX keeps one process-wide registry of sessions by SessionID, and a session being
        # destroyed erases its SessionID's entry, whoever holds it now. An earlier client of the
        # same SessionID that nobody closed (an initiator and its application refer to each
        # other, so only the cycle collector frees them) would erase this one's entry at some
        # later collection, and sends would fail with SessionNotFound: collected here instead.
        gc.collect()
        # Refused before an initiator is made: a second session of this SessionID, even one
        # never started, would erase the live one's entry whenever it is freed.
        if fix.Session.lookupSession(self.sid) is not None:
            raise RuntimeError(f"a client of {self.sid} is still alive in this process: close it first")
        return fix.SocketInitiator(self, fix.FileStoreFactory(settings), settings)

    def reconnect_to(self, port: int) -> None:
        """Connect to another gateway of the venue (a session moved to another group), going on
        from the numbers and messages this client stored: what it sent meanwhile is resent."""
        with self._swapping:
            self.initiator.stop()
            # The old initiator's session leaves QuickFIX's registry only when it is destroyed:
            # the new one, by the same SessionID, may be made only then.
            self.initiator = None
            self.initiator = self._initiator(port)
            self.initiator.start()

    def onCreate(self, sid: Any) -> None:  # noqa: N802
        return None

    def onLogon(self, sid: Any) -> None:  # noqa: N802
        with self.cond:
            self.logged_on = True
            self.cond.notify_all()

    def onLogout(self, sid: Any) -> None:  # noqa: N802
        with self.cond:
            self.logged_on = False
            self.cond.notify_all()

    def toAdmin(self, m: Any, sid: Any) -> None:  # noqa: N802
        return None

    def toApp(self, m: Any, sid: Any) -> None:  # noqa: N802
        if m.isSetField(11):
            header = m.getHeader()
            if not (header.isSetField(43) and header.getField(43) == "Y"):
                with self.cond:
                    self.sent_seq[int(header.getField(34))] = m.getField(11)

    def fromAdmin(self, m: Any, sid: Any) -> None:  # noqa: N802
        if m.getHeader().getField(35) == "3" and m.isSetField(45):
            ref = int(m.getField(45))
            with self.cond:
                if ref in self.sent_seq:
                    self.session_rejects.append({35: "3", 45: str(ref), 11: self.sent_seq[ref],
                                                 58: m.getField(58) if m.isSetField(58) else ""})
                    self.cond.notify_all()
        if m.getHeader().getField(35) == "5":
            with self.cond:
                self.logout_texts.append(m.getField(58) if m.isSetField(58) else "")

    def fromApp(self, m: Any, sid: Any) -> None:  # noqa: N802
        fields = {35: m.getHeader().getField(35)}
        for tag, value in split_fields(m.toString()):
            fields.setdefault(tag, value)
        with self.cond:
            self.reports.append(fields)
            self.cond.notify_all()

    def close(self) -> None:
        """Log out and destroy the initiator: QuickFIX keeps a process-wide registry of
        sessions, and a stopped-but-alive one would swallow the next client's sends."""
        if self.initiator is not None:
            # Logged out and disabled first (no reconnect), and stopped once QuickFIX has torn
            # the session down, so that no callback runs while ``stop`` joins QuickFIX's thread.
            session = fix.Session.lookupSession(self.sid)
            if session is not None:
                session.logout("client closing")
                deadline = time.monotonic() + 5.0  # (QuickFIX's LogoutTimeout is 2 s)
                while (session.sentLogon() or session.receivedLogon()) and time.monotonic() < deadline:
                    time.sleep(0.02)
                time.sleep(0.05)
            self.initiator.stop(True)
            self.initiator = None
            gc.collect()

    def wait(self, condition: Any, timeout: float = 15.0) -> bool:
        deadline = time.monotonic() + timeout
        with self.cond:
            while not condition():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.cond.wait(left)
        return True

    def send(self, msg_type: str, fields: list[tuple[int, str]], header: list[tuple[int, str]] | None = None) -> None:
        m = fix.Message()
        m.getHeader().setField(fix.MsgType(msg_type))
        for tag, value in header or []:
            m.getHeader().setField(fix.StringField(tag, value))
        for tag, value in fields:
            m.setField(fix.StringField(tag, value))
        if msg_type in ("D", "F", "G"):
            m.setField(fix.TransactTime())
        with self._swapping:  # (no session while ``reconnect_to`` makes a new initiator)
            fix.Session.sendToTarget(m, self.sid)

    def order(self, clordid: str, side: str, qty: str, price: str | None, symbol: str = "ACME", tif: str = "1",
              extra: list[tuple[int, str]] | None = None) -> None:
        """A NewOrderSingle; ``price`` None makes it a market order."""
        fields = [(11, clordid), (55, symbol), (54, side), (40, "1" if price is None else "2")]
        fields += [] if price is None else [(44, price)]
        self.send("D", fields + [(38, qty), (59, tif), (1, self.name)] + (extra or []))

    def cancel(self, clordid: str, orig: str, side: str, symbol: str = "ACME") -> None:
        self.send("F", [(11, clordid), (41, orig), (55, symbol), (54, side)])

    def replace(self, clordid: str, orig: str, side: str, qty: str, price: str, symbol: str = "ACME") -> None:
        self.send("G", [(11, clordid), (41, orig), (55, symbol), (54, side), (40, "2"), (44, price), (38, qty)])


def table(rows: list[tuple[str, dict[int, str]]]) -> str:
    head = [name for name, _ in COLUMNS]
    cells = [[session if tag is None else r.get(tag, "") for _, tag in COLUMNS] for session, r in rows]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *cells)]

    def line(values: list[str]) -> str:
        return "  ".join(str(v).ljust(w) for v, w in zip(values, widths)).rstrip()

    return "\n".join([line(head), line(["-" * w for w in widths])] + [line(c) for c in cells])


def run(host: str, port: int, target: str = "FIXGW", drop_copy: str | None = "DROPCOPY") -> int:
    directory = Path(tempfile.mkdtemp(prefix="fixgw-demo-"))
    tag = time.strftime("%H%M%S")
    c1 = DemoClient(directory, host, port, "CLIENT1", target)
    c2 = DemoClient(directory, host, port, "CLIENT2", target)
    clients = [c1, c2]
    dc = DemoClient(directory, host, port, drop_copy, target) if drop_copy else None
    if dc:
        clients.append(dc)
    for c in clients:
        c.initiator.start()
    try:
        for c in clients:
            if not c.wait(lambda c=c: c.logged_on):
                print(f"demo: {c.name} could not log on to {host}:{port} (is `fixgw up` running?)")
                return 1
        c1.order(f"S-{tag}", "2", "5", "10.00")
        c1.wait(lambda: len(c1.reports) >= 1)
        c2.order(f"B-{tag}", "1", "3", "10.00")
        c2.wait(lambda: len(c2.reports) >= 2)
        c1.wait(lambda: len(c1.reports) >= 2)
        c1.cancel(f"C-{tag}", f"S-{tag}", "2")
        c1.wait(lambda: len(c1.reports) >= 3)
        c2.order(f"R1-{tag}", "1", "2", "9.50")
        c2.wait(lambda: len(c2.reports) >= 3)
        c2.replace(f"R2-{tag}", f"R1-{tag}", "1", "2", "9.75")
        c2.wait(lambda: len(c2.reports) >= 4)
        if dc:
            dc.wait(lambda: len(dc.reports) >= 7, timeout=5)
        rows = [(c.name, r) for c in clients for r in c.reports]
        print(table(rows))
        return 0
    finally:
        for c in clients:
            c.close()
