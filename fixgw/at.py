"""AT mode: the application behaviour QuickFIX's acceptance suite expects (its at_application).

NewOrderSingle is echoed back to the same session, unless it carries PossResend=Y and its
ClOrdID was already seen on that session since logon; SecurityDefinition is echoed;
anything else is an unsupported message type (BusinessMessageReject).

Echoes are answers through the intake stage (``intake.Intake.answer``): committed in groups
and sent off QuickFIX's thread, before the inbound number they answer is recorded.
"""

from __future__ import annotations

import threading
from typing import Any

import quickfix as fix

from .application import Delivery
from .config import SessionConfig

POSS_RESEND, CL_ORD_ID, MSG_TYPE = 97, 11, 35


class AcceptanceBehaviour:
    def __init__(self) -> None:
        self._seen: dict[str, set[str]] = {}
        self._lock = threading.Lock()
        self.gateway: Any = None

    def start(self, gateway: Any) -> None:
        self.gateway = gateway

    def _echo(self, message: fix.Message, sid: fix.SessionID) -> None:
        echo = fix.Message(message)
        msg_type = echo.getHeader().getField(MSG_TYPE)
        self.gateway.application.intake.answer(sid, Delivery(echo, msg_type, inbox_id=""))

    def on_app_message(self, message: fix.Message, sid: fix.SessionID, session: SessionConfig) -> None:
        header = message.getHeader()
        msg_type = header.getField(MSG_TYPE)
        if msg_type == "D":
            poss_resend = header.isSetField(POSS_RESEND) and header.getField(POSS_RESEND) == "Y"
            clordid = message.getField(CL_ORD_ID)
            with self._lock:
                seen = self._seen.setdefault(sid.toString(), set())
                if poss_resend and clordid in seen:
                    return
                seen.add(clordid)
            self._echo(message, sid)
        elif msg_type == "d":
            self._echo(message, sid)
        else:
            raise fix.UnsupportedMessageType()

    def on_logon(self, sid: fix.SessionID, session: SessionConfig) -> None:
        return None

    def on_logout(self, sid: fix.SessionID, session: SessionConfig) -> None:
        with self._lock:
            self._seen.pop(sid.toString(), None)
