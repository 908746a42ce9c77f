"""Write-behind of inbound sequence numbers: off QuickFIX's threads, coalesced per session.

Why it is safe to write late: the stored targetSeqNum only says from where a successor asks
the counterparty to resend. A number written late (or lost in a crash) makes the successor
ask for messages that were already handled, and handling them again is idempotent (the
ClOrdID window, deterministic command ids). A number written *early* would lose a message;
so callers record a number only once its message is handled, and this module never writes
a number ahead of what it was given. The flusher sends the newest number of every session
that changed since its last round trip, in one pipeline per datastore.

Resets: a session's reset must not be overtaken by an older number still on its way, so
``resetting`` holds the flusher off while the reset is written.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from sessionstore import SessionKey, SessionStore, StoreError

log = logging.getLogger("fixgw.session")


class TargetRecorder:
    def __init__(self, fatal: Callable[[str], None], on_written: Callable[[SessionKey, int], None]) -> None:
        self._fatal = fatal
        self._on_written = on_written
        self._pending: dict[SessionKey, tuple[SessionStore, int]] = {}
        self._cond = threading.Condition()
        self._io = threading.Lock()  # held by a flush's round trip and by a reset
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="target-recorder", daemon=True)
        self._thread.start()

    def record(self, session: SessionKey, store: SessionStore, target: int) -> None:
        """``target`` is the next number expected from ``session``'s counterparty."""
        with self._cond:
            self._pending[session] = (store, target)
            self._cond.notify()

    @contextmanager
    def resetting(self, session: SessionKey) -> Iterator[None]:
        """Around a session reset: drop its unwritten number; no flush runs meanwhile."""
        with self._io:
            with self._cond:
                self._pending.pop(session, None)
            yield

    def flush(self) -> None:
        """Write every pending number now (also called on a clean stop)."""
        with self._io:
            with self._cond:
                batch, self._pending = self._pending, {}
            by_store: dict[int, tuple[SessionStore, dict[SessionKey, int]]] = {}
            for session, (store, target) in batch.items():
                by_store.setdefault(id(store), (store, {}))[1][session] = target
            for store, targets in by_store.values():
                try:
                    store.set_next_target_seq_nums(targets)
                except StoreError as exc:
                    self._fatal(f"inbound MsgSeqNums of {sorted(map(str, targets))} not recorded: {exc}")
                    return
                for session, target in targets.items():
                    self._on_written(session, target)

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()
        self._thread.join(5)
        self.flush()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._stopped:
                    self._cond.wait()
                if self._stopped:
                    return
            try:
                self.flush()
            except Exception:  # noqa: BLE001 (a bug here must not stop recording for good)
                log.exception("target recorder: flush failed")
