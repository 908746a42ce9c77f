"""How a conductor stops: the exceptions its loop tells apart (``matching/conductor.py``)."""

from __future__ import annotations


class BootRefused(Exception):
    """The conductor cannot honour its configuration on this datastore; it must not start."""


class LeaseLost(Exception):
    """Another conductor holds the partition now; this one must stop writing."""


class DurabilityFailed(Exception):
    """WAITAOF did not confirm the policy in time; the batch stays unacknowledged."""


class PoisonCommand(Exception):
    """The cell failed applying a command: the batch is retried with that command refused."""


class SimulatedCrash(BaseException):
    """Raised by a test's fault hook to stop a conductor dead at a named point."""
