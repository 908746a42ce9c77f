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


__all__ = ["StoreError", "FencedWrite", "NotReplicated", "PartitionRelocating", "SequenceReuse", "StoreUnavailable",
           "StoreCorruption"]
