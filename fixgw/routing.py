"""Where order entry's commands go: to each partition's datastore (``CommandRouter``: where it is
configured, or where the partition map says it moved; colocated partitions take their commands
in the claim's own script), or to the broker (``AmqpCommandRouter``); and the commands a
datastore or the broker did not take, held and republished in order (``HeldCommands``)."""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable

from redis.exceptions import RedisError

from datastore.connection import RedisClient
from matching.amqp import AmqpCommandPublisher
from matching.contracts import Command
from matching.producer import PartitionBeingMoved, append_commands
from sessionstore import StoreError

from .placement import PartitionClients

log = logging.getLogger("fixgw.orders")


class CommandRouter:
    """Publishes each command to its partition's datastore (``placement``: configured, or where
    the partition map says it moved). A partition ``colocated`` with the session store (same
    datastore, not a Cluster) takes its commands in the same script as the ClOrdID claim."""

    def __init__(self, routes: PartitionClients, partition_count: int) -> None:
        self.routes = routes
        self.partition_count = partition_count

    @property
    def colocated(self) -> frozenset[int]:
        return self.routes.colocated

    @property
    def clients(self) -> dict[int, RedisClient]:
        return self.routes.clients

    def publish_command(self, command: Command) -> None:
        self.publish_commands([command])

    def publish_commands(self, commands: list[Command]) -> None:
        """One partition's commands in one round trip (they share its datastore), all or none:
        a failure holds them all, in order. Refused while the partition is being relocated."""
        append_commands(self.clients[commands[0].partition], commands, self.partition_count)


class AppendFailed(Exception):
    """A command the transport did not confirm (the broker unreachable, a nack, a return)."""


class AmqpCommandRouter:
    """``transport = "rabbitmq"``: each command to its partition's quorum queue, confirmed by
    the broker. Nothing is colocated with the session store: the claim is written first and a
    command the broker does not confirm is held (``HeldCommands``), as for a remote datastore."""

    colocated: frozenset[int] = frozenset()

    def __init__(self, publisher: AmqpCommandPublisher, partition_count: int) -> None:
        self.publisher = publisher
        self.partition_count = partition_count

    def publish_command(self, command: Command) -> None:
        self.publish_commands([command])

    def publish_commands(self, commands: list[Command]) -> None:
        """One window of confirms for them all; any failure: none counts as appended."""
        try:
            self.publisher.publish(commands)
        except Exception as exc:  # noqa: BLE001 (whatever the broker did, the commands are not appended)
            raise AppendFailed(f"{type(exc).__name__}: {exc}") from exc


# What a failed append raises: nothing of it was appended, and appending it again is safe.
NOT_APPENDED = (StoreError, RedisError, AppendFailed, PartitionBeingMoved)


class HeldCommands:
    """Commands whose append to a partition failed, or whose outcome is unknown (a timeout
    after the write): republished in order until the datastore takes them. Safe because a
    command id is deterministic and the cell records every processed command: an append that
    did land the first time is skipped as a duplicate. Never answered "Rejected" — the order
    may be live — and not "Pending New" either: the cell's report for a command that did land
    can arrive first, and an OrdStatus going back from New to Pending confuses every client.
    The cell's report is the answer, once the command is appended.

    While a partition has held commands, later ones for it queue behind them (a cancel must
    never overtake its order). A gateway that dies while holding commands loses them; they
    are the claimed-but-unanswered orders the client sees as pending (docs/architecture.md, order path).
    """

    def __init__(self, router: CommandRouter | AmqpCommandRouter, retry_s: float = 0.2, max_retry_s: float = 2.0,
                 on_held: Callable[[int, int], None] | None = None) -> None:
        self._router = router
        self._on_held = on_held or (lambda partition, n: None)  # (partition, how many) → counted
        self._held: dict[int, deque[Command]] = {}
        self._cond = threading.Condition()
        self._retry = (retry_s, max_retry_s)
        self._stopped = False
        self._deferred: list[Command] = []  # the intake's cycle: published together at its end
        self._thread = threading.Thread(target=self._run, name="held-commands", daemon=True)
        self._thread.start()

    def defer(self, command: Command) -> None:
        """Publish at the end of the intake's cycle (``publish_deferred``), with the cycle's other
        commands: one round trip per partition instead of one per command. Only the intake's
        thread defers; the cycle's inbound MsgSeqNums are written after ``publish_deferred``."""
        self._deferred.append(command)

    def publish_deferred(self) -> None:
        commands, self._deferred = self._deferred, []
        by_partition: dict[int, list[Command]] = {}
        for c in commands:
            by_partition.setdefault(c.partition, []).append(c)
        for partition, batch in by_partition.items():
            with self._cond:
                if self._held.get(partition):
                    self._held[partition].extend(batch)
                    continue
            try:
                self._router.publish_commands(batch)
            except NOT_APPENDED as exc:
                log.error("%d commands to partition %d not appended (%s): held, republished until they are",
                          len(batch), partition, exc)
                self._on_held(partition, len(batch))
                with self._cond:
                    self._held.setdefault(partition, deque()).extend(batch)
                    self._cond.notify()

    def publish(self, command: Command) -> bool:
        """Publish now (True), or hold it behind the partition's held commands (False)."""
        with self._cond:
            if self._held.get(command.partition):
                self._held[command.partition].append(command)
                return False
        try:
            self._router.publish_command(command)
            return True
        except NOT_APPENDED as exc:
            log.error("command %s to partition %d not appended (%s): held, republished until it is",
                      command.command_id, command.partition, exc)
            self._on_held(command.partition, 1)
            with self._cond:
                self._held.setdefault(command.partition, deque()).append(command)
                self._cond.notify()
            return False

    def wake(self) -> None:
        """Try the held commands now (a partition was routed elsewhere)."""
        with self._cond:
            self._cond.notify()

    def problems(self) -> list[str]:
        with self._cond:
            return [f"{len(q)} commands held for partition {p} (its datastore does not take them)"
                    for p, q in sorted(self._held.items()) if q]

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()

    def _run(self) -> None:
        wait = self._retry[0]
        while True:
            with self._cond:
                while not self._stopped and not any(self._held.values()):
                    self._cond.wait()
                if self._stopped:
                    return
                heads = [(p, q[0]) for p, q in self._held.items() if q]
            progress = False
            for partition, command in heads:
                try:
                    self._router.publish_command(command)
                except NOT_APPENDED as exc:
                    log.warning("held command %s for partition %d: still not appended: %s",
                                command.command_id, partition, exc)
                    continue
                progress = True
                with self._cond:
                    self._held[partition].popleft()
                    if not self._held[partition]:
                        log.info("partition %d: every held command appended", partition)
            if progress:
                wait = self._retry[0]
            else:
                with self._cond:
                    self._cond.wait(wait)  # or until ``wake``
                wait = min(wait * 2, self._retry[1])


