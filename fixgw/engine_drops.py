"""Connections QuickFIX was told to close from another thread than their own.

``Session.disconnect`` and ``Session.reset`` close the connection's socket on the calling
thread (a reset, an operator's disconnect, the end of a period, the logon watch) while the
connection's own thread may be between its poll and its read (``ThreadedSocketConnection``).
A connection accepted in that moment, of any session, can get the closed descriptor's number;
the old thread then reads its Logon for a session with nowhere to answer, and the client waits
unanswered until its Logon timeout. The old thread lets go of its session (QuickFIX's session
registry) as it ends: the front passes no new connection to QuickFIX while any such thread is
left (``Front._engine_let_go``).
"""

from __future__ import annotations

from typing import Any

import quickfix as fix


class EngineDrops:
    """The sessions told to close from another thread, until each connection's thread has ended."""

    def __init__(self) -> None:
        self._sessions: dict[str, Any] = {}  # SessionID text → fix.SessionID

    def note(self, sid: Any) -> None:
        """Said before telling QuickFIX to close ``sid``'s connection from another thread."""
        self._sessions[sid.toString()] = sid

    def letting_go(self) -> bool:
        """Some connection told to close from another thread still has its thread."""
        for text, sid in list(self._sessions.items()):  # (noted from other threads meanwhile)
            if fix.Session.isSessionRegistered(sid):
                return True
            self._sessions.pop(text, None)
        return False
