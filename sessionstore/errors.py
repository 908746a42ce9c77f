"""The session store's errors, distinct so callers can react to each (fail fast, fence, alert)."""

from __future__ import annotations

from .codec import StoreCorruption


class StoreError(Exception):
    """Base of every session-store failure."""


class FencedWrite(StoreError):
    """This writer no longer owns the session: the lock was lost or a newer holder stamped it."""


class SequenceReuse(StoreError):
    """A different message was offered for a sequence number already sent."""


class NotReplicated(StoreError):
    """Stored on the primary but not acknowledged by enough replicas in time (replicaAcks)."""


class PartitionRelocating(StoreError):
    """A claim-and-append refused because the order's partition is being moved to another
    datastore (its relocation marker exists): nothing was claimed or appended."""


class StoreUnavailable(StoreError):
    """Redis could not be reached (after maxAttempts); nothing was acknowledged."""


class StoreRefusingWrites(StoreUnavailable):
    """The datastore answers but refuses writes: its memory is full (``OOM``, maxmemory with
    noeviction) or it cannot write its AOF (``MISCONF``, a full disk). Held like a failover: the
    write is retried until the datastore takes it again or ``failoverWait`` has passed. Safe to
    retry: a refused command did nothing (a script is refused before its first write, a MULTI
    at EXEC), and what ran before it in the round trip is recognised when replayed."""


def refuses_writes(reply: Exception) -> bool:
    """Whether an error reply says the datastore takes no writes for now: memory full (redis-py
    raises ``OutOfMemoryError`` for ``-OOM``, its prefix taken off) or the AOF not writable."""
    text = str(reply).split("caused error: ", 1)[-1]
    return type(reply).__name__ == "OutOfMemoryError" or text.startswith(("OOM ", "MISCONF "))


__all__ = ["StoreError", "FencedWrite", "NotReplicated", "PartitionRelocating", "SequenceReuse", "StoreUnavailable",
           "StoreRefusingWrites", "StoreCorruption", "refuses_writes"]
