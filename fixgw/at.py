"""AT mode: the application behaviour QuickFIX's acceptance suite expects (its at_application).

NewOrderSingle is echoed back to the same session, unless it carries PossResend=Y and its
ClOrdID was already seen on that session since logon; SecurityDefinition is echoed;
anything else is an unsupported message type (BusinessMessageReject).

Echoes are answers through the intake stage (``intake.Intake.answer``): committed in groups,
each session's with the inbound number its echoes answer, and sent off QuickFIX's thread.
"""

from __future__ import annotations

import threading

import quickfix as fix

from .config import SessionConfig
from .context import GatewayContext
from .fixmsg import Inbound, SessionMessage


class AcceptanceBehaviour:
    def __init__(self) -> None:
        self._seen: dict[str, set[str]] = {}
        self._lock = threading.Lock()
        self.context: GatewayContext | None = None

    def start(self, context: GatewayContext) -> None:
        self.context = context

    def stop(self) -> None:
        return None

    def problems(self) -> list[str]:
        return []

    def _echo(self, message: Inbound, sid: fix.SessionID) -> None:
        # The echo is the message as it came (its text: QuickFIX fills the header when it sends),
        # stored with the inbound number it answers.
        assert self.context is not None, "started before the acceptor accepts"
        self.context.answer(sid, SessionMessage(message.text, message.msg_type, inbox_id=""),
                            int(message.seq) if message.seq else None)

    def on_app_message(self, message: Inbound, sid: fix.SessionID, session: SessionConfig) -> None:
        if message.msg_type == "D":
            clordid = message.fields.get(11, "")
            with self._lock:
                seen = self._seen.setdefault(sid.toString(), set())
                if message.poss_resend and clordid in seen:
                    return
                seen.add(clordid)
            self._echo(message, sid)
        elif message.msg_type == "d":
            self._echo(message, sid)
        else:
            raise fix.UnsupportedMessageType()

    def on_logon(self, sid: fix.SessionID, session: SessionConfig) -> None:
        return None

    def on_logout(self, sid: fix.SessionID, session: SessionConfig) -> None:
        with self._lock:
            self._seen.pop(sid.toString(), None)
