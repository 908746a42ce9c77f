"""The single-dispatcher lock of seed 004, with fencing epochs it does not have.

Owns ``{namespace/gateway}/lock`` and ``{namespace/gateway}/epoch``. Acquire is SET NX PX
plus INCR of the epoch (one script); renewal is compare-and-expire every
lockRenewalInterval on a daemon thread; release is compare-and-delete. The lease is
judged locally too: it counts as lost once ``lockTtl`` has passed since the last renewal
that was *sent* and confirmed, so a holder cut off from Redis stops before anyone else
can have taken over.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable

from redis.exceptions import RedisError

from . import scripts
from .connection import RedisClient, text_or_none
from .errors import FencedWrite
from .keys import GatewayKey

log = logging.getLogger("fixgw.lock")


class DispatcherLock:
    """Lease on one ``namespace/gateway``; doubles as the session store's ``Fence``."""

    def __init__(self, client: RedisClient, gateway: GatewayKey, *, ttl: float, renewal: float,
                 on_lost: Callable[[str], None] | None = None, holder: str | None = None) -> None:
        if renewal >= ttl:
            raise ValueError("lock renewal interval must be shorter than its TTL")
        self.client = client
        self.gateway = gateway
        self.ttl_ms = int(ttl * 1000)
        self.renewal = renewal
        self.on_lost = on_lost
        self.token = f"{holder or socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"
        self._epoch = 0
        self._valid_until = 0.0  # monotonic deadline of the lease as last confirmed
        self._lost_reason: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._acquire = client.register_script(scripts.ACQUIRE_LOCK)
        self._renew = client.register_script(scripts.RENEW_LOCK)
        self._release = client.register_script(scripts.RELEASE_LOCK)

    # --- Fence ------------------------------------------------------------------------

    @property
    def epoch(self) -> int:
        return self._epoch

    @property
    def held(self) -> bool:
        return self._epoch > 0 and self._lost_reason is None and time.monotonic() < self._valid_until

    def check(self) -> None:
        if self.held:
            return
        if self._epoch and self._lost_reason is None:
            self._lose("lease expired before it could be renewed")
        raise FencedWrite(f"{self.gateway.tag} lock not held: {self._lost_reason or 'never acquired'}")

    # --- lifecycle --------------------------------------------------------------------

    def try_acquire(self) -> bool:
        sent = time.monotonic()
        epoch = int(self._acquire(keys=[self.gateway.lock, self.gateway.epoch], args=[self.token, self.ttl_ms]))
        if not epoch:
            return False
        self._epoch = epoch
        self._valid_until = sent + self.ttl_ms / 1000
        self._lost_reason = None
        self._stop.clear()
        self._thread = threading.Thread(target=self._renew_loop, name=f"lock-renew {self.gateway.tag}", daemon=True)
        self._thread.start()
        log.info("%s lock acquired, epoch %d, holder %s", self.gateway.tag, epoch, self.token)
        return True

    def acquire(self, timeout: float | None = None, poll: float = 0.1,
                stop: threading.Event | None = None) -> bool:
        """Wait (as a standby) until the lock is ours; False on timeout or ``stop``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            try:
                if self.try_acquire():
                    return True
            except RedisError as exc:
                log.warning("%s lock: Redis unreachable while waiting: %s", self.gateway.tag, exc)
            if deadline is not None and time.monotonic() >= deadline:
                return False
            if stop is not None and stop.wait(poll):
                return False
            if stop is None:
                time.sleep(poll)

    def holder(self) -> str | None:
        return text_or_none(self.client.get(self.gateway.lock))

    def _renew_loop(self) -> None:
        while not self._stop.wait(self.renewal):
            sent = time.monotonic()
            try:
                still_ours = int(self._renew(keys=[self.gateway.lock], args=[self.token, self.ttl_ms]))
            except RedisError as exc:
                if time.monotonic() >= self._valid_until:
                    self._lose(f"could not renew before the lease ran out: {exc}")
                    return
                log.warning("%s lock renewal failed, lease valid %.1fs more: %s", self.gateway.tag,
                            self._valid_until - time.monotonic(), exc)
                continue
            if not still_ours:
                self._lose("another holder has the lock")
                return
            self._valid_until = sent + self.ttl_ms / 1000

    def _lose(self, reason: str) -> None:
        if self._lost_reason is not None:
            return
        self._lost_reason = reason
        self._stop.set()
        log.error("%s lock LOST (epoch %d): %s; writes stop now", self.gateway.tag, self._epoch, reason)
        if self.on_lost is not None:
            self.on_lost(reason)

    def release(self) -> bool:
        """Give the lock up now so a standby need not wait for the TTL."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=2)
        if not self._epoch or self._lost_reason is not None:
            return False
        self._lost_reason = "released"
        try:
            released = bool(self._release(keys=[self.gateway.lock], args=[self.token]))
        except RedisError as exc:
            log.warning("%s lock release failed (standby will wait for the TTL): %s", self.gateway.tag, exc)
            return False
        log.info("%s lock released (epoch %d)", self.gateway.tag, self._epoch)
        return released

    def __enter__(self) -> DispatcherLock:
        if not self.acquire():
            raise FencedWrite(f"{self.gateway.tag}: lock not acquired")
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
