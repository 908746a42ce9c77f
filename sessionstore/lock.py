"""The single-dispatcher lock of seed 004, with fencing epochs it does not have.

Owns ``{namespace/gateway}/lock`` and ``{namespace/gateway}/epoch``: a ``lease.Lease`` with
an epoch counter (acquire is SET NX PX plus INCR of the epoch, one script), renewed every
lockRenewalInterval on a daemon thread, judged lost locally once ``lockTtl`` has passed
since the last confirmed renewal.
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

from datastore.connection import RedisClient
from datastore.lease import Lease

from .errors import FencedWrite
from .keys import GatewayKey

log = logging.getLogger("fixgw.lock")


class DispatcherLock:
    """Lease on one ``namespace/gateway`` (``lease.Lease`` with an epoch counter); doubles as
    the session store's ``Fence``."""

    def __init__(self, client: RedisClient, gateway: GatewayKey, *, ttl: float, renewal: float,
                 on_lost: Callable[[str], None] | None = None, holder: str | None = None) -> None:
        if renewal >= ttl:
            raise ValueError("lock renewal interval must be shorter than its TTL")
        self.client = client
        self.gateway = gateway
        self.on_lost = on_lost
        self.token = f"{holder or socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"
        self.lease = Lease(client, gateway.lock, self.token, ttl_ms=int(ttl * 1000), renew_s=renewal,
                           epoch_key=gateway.epoch, name=f"{gateway.tag} lock", on_lost=self._lost)

    def _lost(self, reason: str) -> None:
        log.error("%s lock LOST (epoch %d): %s; writes stop now", self.gateway.tag, self.lease.epoch, reason)
        if self.on_lost is not None:
            self.on_lost(reason)

    # --- Fence ------------------------------------------------------------------------

    @property
    def epoch(self) -> int:
        return self.lease.epoch

    @property
    def held(self) -> bool:
        return self.lease.epoch > 0 and self.lease.held

    def check(self) -> None:
        if self.held:
            return
        if self.lease.epoch and self.lease.lost_reason is None:
            self.lease.lose("lease expired before it could be renewed")
        raise FencedWrite(f"{self.gateway.tag} lock not held: {self.lease.lost_reason or 'never acquired'}")

    # --- lifecycle --------------------------------------------------------------------

    def try_acquire(self) -> bool:
        if not self.lease.try_take():
            return False
        self.lease.start_renewing(f"lock-renew {self.gateway.tag}")
        log.info("%s lock acquired, epoch %d, holder %s", self.gateway.tag, self.lease.epoch, self.token)
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
        return self.lease.holder()

    def release(self) -> bool:
        """Give the lock up now so a standby need not wait for the TTL."""
        released = self.lease.release()
        if released:
            log.info("%s lock released (epoch %d)", self.gateway.tag, self.lease.epoch)
        return released

    def __enter__(self) -> DispatcherLock:
        if not self.acquire():
            raise FencedWrite(f"{self.gateway.tag}: lock not acquired")
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
