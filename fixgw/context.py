"""What the gateway gives the parts it starts: ``GatewayContext`` (a behaviour's whole view of the
active gateway), the ``Behaviour`` a mode implements, the ``SessionMessage`` a behaviour hands
to the session layer to commit and send, and the watch over QuickFIX's callbacks."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import quickfix as fix

from datastore.connection import RedisClient
from sessionstore import SessionStore, StoreError
from sessionstore.settings import SessionStoreSettings

from .config import GatewaySettings, MatchingLink, SessionConfig
from .fixmsg import Inbound, SessionMessage
from .intake import Intake
from .message_log import write_before_exit
from .metrics import GatewayMetrics

log = logging.getLogger("fixgw.session")


@dataclass(frozen=True)
class GatewayContext:
    """What a behaviour, and the parts it starts (the dispatcher), may use of the active gateway:
    its settings, its datastore and session stores, its metrics, and the three ways into the
    session layer — the intake (inbound requests' writes), ``deliver_many`` (group commit, then
    send) and ``answer`` (an answer committed with the inbound number it covers). Not the
    gateway itself: its locks, acceptor and HTTP endpoint are none of a behaviour's business."""

    namespace: str
    settings: GatewaySettings
    store_settings: SessionStoreSettings
    matching: MatchingLink
    client: RedisClient  # the session store's datastore
    stores: dict[str, SessionStore]  # by kind (fsg / dc)
    metrics: GatewayMetrics
    intake: Intake
    deliver_many: Callable[[list[tuple[fix.SessionID, list[SessionMessage]]]], list[list[SessionMessage] | StoreError]]
    answer: Callable[..., None]  # (session id, message, inbound number | None, then=None): GroupCommit.answer
    serving: Callable[[], bool]  # active with every lock held: events may be delivered
    session_id: Callable[[SessionConfig], fix.SessionID]  # one the gateway keeps: GatewayApplication.session_id
    memory_problem: Callable[[], str | None] = lambda: None  # why new orders are refused (datastore/memory.py)
    # Sessions listed but served by another group (moved away, or not moved here yet): key texts
    away: set[str] = field(default_factory=set)


class Behaviour(Protocol):
    """What the gateway does with application messages (AT echo, order entry, ...)."""

    def start(self, context: GatewayContext) -> None:
        """Once the gateway holds its locks, before its acceptor takes the first connection: a
        request never finds the behaviour unstarted."""
        ...

    def stop(self) -> None:
        """Before the acceptor stops (the gateway is stopping)."""
        ...

    def problems(self) -> list[str]:
        """For /ready: why the behaviour is not serving (a part of it that stopped); empty if it is."""
        ...

    def on_app_message(self, message: Inbound, session_id: fix.SessionID, session: SessionConfig) -> None:
        """``message`` read once (``fixmsg.inbound``); called on QuickFIX's thread."""
        ...

    def on_logon(self, session_id: fix.SessionID, session: SessionConfig) -> None: ...

    def on_logout(self, session_id: fix.SessionID, session: SessionConfig) -> None: ...


def die(reason: str, code: int = 4) -> None:
    """The fail-fast exit: log why, then leave without running QuickFIX's teardown (which
    hangs after a callback raised). Sockets close with the process; a standby takes over."""
    log.critical("exiting: %s", reason)
    write_before_exit()  # the message log's queued lines (fixgw/message_log.py)
    logging.shutdown()
    os._exit(code)


class CallbackWatch:
    """Which QuickFIX callbacks are running, since when: a callback stuck for longer than
    the stall limit means a session thread no longer serves its session (``/ready``)."""

    def __init__(self) -> None:
        self._running: dict[int, tuple[float, str, str]] = {}

    def running(self, what: str, session: str) -> _Running:
        """``with watch.running("toApp", name):`` around a callback (a class, not a generator:
        it wraps every callback, and contextlib's machinery showed in the profile)."""
        return _Running(self._running, what, session)

    def stalled(self, limit_s: float) -> list[str]:
        now = time.monotonic()
        return [f"{what} {session} for {now - since:.1f}s" for since, what, session in list(self._running.values())
                if now - since > limit_s]


class _Running:
    __slots__ = ("_running", "_what", "_session", "_me")

    def __init__(self, running: dict[int, tuple[float, str, str]], what: str, session: str) -> None:
        self._running, self._what, self._session = running, what, session
        self._me = 0

    def __enter__(self) -> None:
        self._me = threading.get_ident()
        self._running[self._me] = (time.monotonic(), self._what, self._session)

    def __exit__(self, *exc: object) -> None:
        self._running.pop(self._me, None)


