"""One lease, used by every single-writer role: the gateway's dispatcher lock, a partition's
conductor and its outbox worker (seed 004's lock and seed 000's leases are the same thing).

Take: SET NX PX (plus INCR of an epoch counter when the holder fences its writes with one,
confirmed on a replica where the datastore has one).
Renew: compare-and-expire, either inline by the holder's own loop (``renew_if_due``: the
conductor, whose commits also check the token) or on a daemon thread (``start_renewing``: the
gateway, the outbox). Release: compare-and-delete. The lease is judged locally too: it counts
as lost once its TTL has passed since the last renewal that was *sent* and confirmed, so a
holder cut off from Redis stops before anyone else can have taken over.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from redis.exceptions import RedisError

from .connection import RedisClient, is_cluster, text_or_none

log = logging.getLogger("fixgw.lease")

EPOCH_CONFIRM_MS = 1000  # how long a new epoch waits for a replica's acknowledgement


# A lease: taken with a new epoch. KEYS: lease, epoch counter. ARGV: token, ttl ms.
ACQUIRE_LOCK = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('INCR', KEYS[2])
end
return 0
"""

# KEYS: lock. ARGV: token, ttl ms. Compare-and-expire.
RENEW_LOCK = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""

# KEYS: lock. ARGV: token. Compare-and-delete.
RELEASE_LOCK = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""


class Lease:
    def __init__(self, client: RedisClient, key: str, token: str, *, ttl_ms: int, renew_s: float,
                 epoch_key: str | None = None, name: str = "", on_lost: Callable[[str], None] | None = None) -> None:
        if renew_s * 1000 >= ttl_ms:
            raise ValueError("a lease's renewal interval must be shorter than its TTL")
        self.client = client
        self.key = key
        self.token = token
        self.ttl_ms = ttl_ms
        self.renew_s = renew_s
        self.epoch_key = epoch_key
        self.name = name or key
        self.on_lost = on_lost
        self.epoch = 0  # from the epoch counter when there is one, else 1 while taken
        self.lost_reason: str | None = None
        self.renewals = 0  # confirmed renewals since start (a metric's source: the long-run bench's timeline)
        self._valid_until = 0.0  # monotonic deadline as last confirmed
        self._renewed_at = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._acquire = client.register_script(ACQUIRE_LOCK)
        self._renew = client.register_script(RENEW_LOCK)
        self._release = client.register_script(RELEASE_LOCK)

    @property
    def held(self) -> bool:
        return self.lost_reason is None and time.monotonic() < self._valid_until

    def try_take(self) -> bool:
        """Take the lease if nobody holds it. Raises RedisError when Redis cannot be asked."""
        sent = time.monotonic()
        if self.epoch_key is not None:
            epoch = self._take_with_epoch(self.epoch_key)
            if not epoch:
                return False
        elif self.client.set(self.key, self.token, nx=True, px=self.ttl_ms):
            epoch = 1
        else:
            return False
        self.epoch, self.lost_reason = epoch, None
        self._renewed_at = sent
        self._valid_until = sent + self.ttl_ms / 1000
        self._stop.clear()
        return True

    def _take_with_epoch(self, epoch_key: str) -> int:
        """SET NX PX and INCR of the epoch (one script); 0 when someone holds the lease. Where the
        datastore has replicas, the new epoch must reach one (WAIT on the same connection) before
        it is used: a replica promoted without the increment would hand the next holder an epoch
        already used, and two holders' writes would pass the same fence."""
        keys: list[str] = [self.key, epoch_key]
        args: list[str | int] = [self.token, self.ttl_ms]
        if is_cluster(self.client) or not int(self.client.info("replication").get("connected_slaves", 0)):
            return int(self._acquire(keys=keys, args=args))
        pipe = self.client.pipeline(transaction=False)
        self._acquire(keys=keys, args=args, client=pipe)
        pipe.execute_command("WAIT", 1, max(1, min(self.ttl_ms // 2, EPOCH_CONFIRM_MS)))
        epoch, acked = pipe.execute()
        if int(epoch) and int(acked) < 1:
            log.warning("%s: epoch %s taken but no replica confirmed it: given back, taken again later", self.name,
                        epoch)
            self._release(keys=[self.key], args=[self.token])
            return 0
        return int(epoch)

    def renew(self) -> bool:
        """Renew now. False once the lease is lost (another holder, or the TTL ran out while
        Redis could not be reached); a failed attempt within the TTL is logged and True."""
        if self.lost_reason is not None:
            return False
        sent = time.monotonic()
        try:
            still_ours = int(self._renew(keys=[self.key], args=[self.token, self.ttl_ms]))
        except RedisError as exc:
            if time.monotonic() >= self._valid_until:
                self.lose(f"could not renew before the lease ran out: {exc}")
                return False
            log.warning("%s: lease renewal failed, valid %.1fs more: %s", self.name,
                        self._valid_until - time.monotonic(), exc)
            return True
        if not still_ours:
            self.lose("another holder has the lease")
            return False
        self._valid_until = sent + self.ttl_ms / 1000
        self._renewed_at = sent
        self.renewals += 1
        return True

    @property
    def renewed_at(self) -> float:
        """Monotonic time of the last renewal (or take): a renewal touches the key, which
        fails a transaction WATCHing it."""
        return self._renewed_at

    def renew_if_due(self) -> bool:
        """For a holder that renews from its own loop: renew when renew_s has passed."""
        if time.monotonic() - self._renewed_at < self.renew_s:
            return self.held
        return self.renew() and self.held

    def start_renewing(self, thread_name: str) -> None:
        """Renew every renew_s on a daemon thread until the lease is lost or released."""
        self._thread = threading.Thread(target=self._renew_loop, name=thread_name, daemon=True)
        self._thread.start()

    def _renew_loop(self) -> None:
        while not self._stop.wait(self.renew_s):
            if not self.renew():
                return

    def lose(self, reason: str) -> None:
        """The lease is gone (found, or judged, lost): stop renewing, tell the holder once."""
        if self.lost_reason is not None:
            return
        self.lost_reason = reason
        self._valid_until = 0.0
        self._stop.set()
        if self.epoch:
            log.error("%s: lease LOST (epoch %d): %s", self.name, self.epoch, reason)
        if self.on_lost is not None:
            self.on_lost(reason)

    def stop_renewing(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=2)

    def release(self) -> bool:
        """Give the lease up now, so a standby need not wait for the TTL."""
        self.stop_renewing()
        if not self.epoch or self.lost_reason is not None:
            return False
        self.lost_reason = "released"
        self._valid_until = 0.0
        try:
            return bool(self._release(keys=[self.key], args=[self.token]))
        except RedisError as exc:
            log.warning("%s: lease release failed (a standby waits for the TTL): %s", self.name, exc)
            return False

    def holder(self) -> str | None:
        return text_or_none(self.client.get(self.key))
