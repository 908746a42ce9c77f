"""Every Redis key of a matching partition is built here, and nowhere else (seed 000's layout).

All carry the partition tag ``{matching-pN}``: under Sentinel a naming convention, under
Cluster what keeps one command's MULTI/EXEC on one primary.
"""

from __future__ import annotations

from dataclasses import dataclass

from .contracts import Side


@dataclass(frozen=True, slots=True)
class PartitionKeys:
    partition: int

    @property
    def group(self) -> str:
        """The Sentinel group name of this partition's datastore, by convention."""
        return f"matching-p{self.partition}"

    @property
    def prefix(self) -> str:
        return f"matching:{{matching-p{self.partition}}}"

    def order(self, order_id: str) -> str:
        return f"{self.prefix}:order:{order_id}"

    def book(self, pair_id: int, side: Side) -> str:
        return f"{self.prefix}:book:{pair_id}:{'ask' if side is Side.SELL else 'bid'}:rates"

    def processed_command(self, command_id: str) -> str:
        return f"{self.prefix}:processed-command:{command_id}"

    def accepted_order(self, order_id: str) -> str:
        return f"{self.prefix}:accepted-order:{order_id}"

    @property
    def commands(self) -> str:
        return f"{self.prefix}:commands"

    @property
    def commands_dead_letter(self) -> str:
        """Command entries the conductor could not read or apply, with the reason."""
        return f"{self.prefix}:commands:dead-letter"

    @property
    def events(self) -> str:
        return f"{self.prefix}:events"

    @property
    def dead_letter(self) -> str:
        return f"{self.prefix}:events:dead-letter"

    @property
    def outbox_lease(self) -> str:
        return f"{self.prefix}:outbox-lease"

    @property
    def outbox_sync(self) -> str:
        """Written by the outbox before its WAITAOF: the barrier that covers what it read."""
        return f"{self.prefix}:outbox-sync"

    @property
    def outbox_attempts(self) -> str:
        return f"{self.prefix}:outbox-attempts"

    @property
    def conductor_lease(self) -> str:
        return f"{self.prefix}:conductor-lease"

    @property
    def meta(self) -> str:
        return f"{self.prefix}:meta"

    @property
    def relocation(self) -> str:
        """A relocation's marker (hash: state, to/from, at). While it exists on a datastore,
        nothing appends commands to the partition there (``relocation.py``)."""
        return f"{self.prefix}:relocation"


def publisher_fence(stream: str) -> str:
    """Beside each stream the outbox publishes to (same hash tag): partition → the epoch of the
    only outbox worker that may publish that partition's events there."""
    return f"{stream}:publishers"


def book_member(priority: int, order_id: str) -> str:
    """``priority:id``, priority zero-padded so members sort in time order within a price."""
    return f"{priority:020d}:{order_id}"


def parse_member(member: str) -> tuple[int, str]:
    priority, _, order_id = member.partition(":")
    return int(priority), order_id


# On the datastore of the gateways' inboxes: incremented by an outbox worker just before each
# WAIT that confirms a publish on that datastore's replicas (MATCHING_TARGET_REPLICA_ACKS).
TARGET_REPLICATION_MARK = "{matching}/outbox-replication-mark"
