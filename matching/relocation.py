"""Moving a partition to another datastore: seed 000's relocation procedure as one command
(``fixgw-cell relocate``, ``fixgw/relocate_cli.py``).

The steps, each recorded in the partition's relocation marker on the datastore it leaves
(``PartitionKeys.relocation``, a hash: state, to, at), so that an interrupted run can be run
again (it goes on from the recorded state) or rolled back (until the switch):

0. **pre-copy** (no marker yet, the partition serving): every key copied to the target and
   checked against the source, while keyspace notifications record which keys are written
   meanwhile; only those are copied and checked again while frozen (step 4), so the freeze
   lasts about as long as the drain and that difference, not a copy of the whole partition.
   Where notifications cannot be had (a Cluster, CONFIG refused) everything is copied frozen;
1. **freeze** (state ``frozen``): the marker's existence refuses every append of a command to
   the partition there (the gateway's claim-and-append script and its append script check it):
   a colocated order is answered with a temporary reject (OrdRejReason 2, "partition N is being
   moved ... send the request again shortly"), nothing claimed; an order already claimed on a
   gateway whose partition lives elsewhere is held and republished after the switch. With
   ``transport = "rabbitmq"`` nothing can refuse a publish to the broker: the conductor stands
   down at the freeze instead, and commands wait in the partition's queue (none refused);
2. **drain**: wait until the conductor has processed and acknowledged every command, and the
   outbox has published every event;
3. **stop the cells** (state ``stopping``): conductor and outbox watch the marker, release their
   leases and exit; wait until both leases are gone;
4. **copy** (state ``copied``): every key of the partition (DUMP, then RESTORE with its TTL on
   the target), except the marker and the leases. The target carries a marker of its own
   (``incoming``) until the switch, so nothing appends there early either;
5. **verify**: the same keys with the same content on both sides (a digest of each key's logical
   content: books, orders, processed-command and accepted-order records, the streams with their
   consumer groups) — after a pre-copy, only the keys written since (the pre-copy checked the
   rest, and the notifications say nothing else changed);
6. **switch** (state ``moved``): the partition map (``sessionstore.keys.partition_map``) points
   the gateway at the target; the target's marker goes; the source's says where it went;
7. **start the cells on the target**: a cell started against the old datastore finds the
   ``moved`` marker and follows it (a supervisor's restart is enough); ``--wait-cells`` waits
   until the target's conductor holds its lease;
8. **resume routing**: the gateway reads the map within half a second and sends there, the
   held commands first. Then, outside the freeze, seed 000's reconcile of every pair on the
   target is reported.

The source keeps its copy (frozen, with the forwarding marker) until an operator deletes it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from redis.exceptions import ResponseError

from datastore.connection import RedisClient, text, text_or_none
from sessionstore.keys import partition_map

from .amqp import command_queue
from .conductor import GROUP as CONDUCTOR_GROUP
from .keys import PartitionKeys
from .outbox import GROUP as OUTBOX_GROUP
from .partition_copy import COPY_BATCH, ChangeTracker, RelocationError, key_digests, partition_key_names, server_version, summary
from .storage import reconcile

# Source states, in order; the target's marker says ``incoming`` until the switch.
FROZEN, STOPPING, COPIED, MOVED, INCOMING = "frozen", "stopping", "copied", "moved", "incoming"
ORDER = [None, FROZEN, STOPPING, COPIED, MOVED]
STAND_DOWN = frozenset({STOPPING, COPIED, MOVED, INCOMING})  # a cell must not run on a datastore in these


def marker(client: RedisClient, keys: PartitionKeys) -> dict[str, str]:
    raw: dict[Any, Any] = client.hgetall(keys.relocation)
    return {text(k): text(v) for k, v in raw.items()}


def stand_down_states(commands_from_broker: bool) -> frozenset[str]:
    """The marker states a cell does not run in. A conductor fed by the broker stands down at
    the freeze already: no marker stops the broker from delivering, so the freeze is the
    conductor taking no more (what it holds unacknowledged goes back to the queue)."""
    return STAND_DOWN | {FROZEN} if commands_from_broker else STAND_DOWN


def cell_location(client: RedisClient, keys: PartitionKeys, commands_from_broker: bool = False
                  ) -> tuple[str, str | None]:
    """Where a cell of this partition belongs, read on the datastore it was configured with:
    ('here', None), ('wait', state) while a relocation is under way, or ('moved', address)."""
    m = marker(client, keys)
    state = m.get("state")
    if state == MOVED:
        return "moved", m.get("to")
    if state in stand_down_states(commands_from_broker):
        return "wait", state
    return "here", None


def cell_must_stand_down(client: RedisClient, keys: PartitionKeys, commands_from_broker: bool = False) -> str | None:
    """The reason a running cell stops (the relocation reached a state it does not run in), or None."""
    state = text_or_none(client.hget(keys.relocation, "state"))
    if state in stand_down_states(commands_from_broker):
        return f"partition {keys.partition} is being relocated (state {state})"
    return None


def _group_drained(client: RedisClient, stream: str, group: str) -> tuple[bool, str]:
    """Every entry of ``stream`` delivered to ``group`` and acknowledged."""
    if not client.exists(stream):
        return True, "no stream"
    length = int(client.xlen(stream))
    try:
        groups: list[dict[str, Any]] = client.xinfo_groups(stream)
    except ResponseError:
        groups = []
    info = next((g for g in groups if text(g["name"]) == group), None)
    if info is None:
        return length == 0, f"{length} entries, no consumer group {group}"
    delivered = text(info["last-delivered-id"])
    pending = int(info["pending"])
    # Entries after the last delivered one, not the stream's last id: with direct delivery the
    # conductor writes no events there, and the outbox deletes what it published, so the last id
    # can stand ahead of a group that has nothing left to read.
    unread = client.xrange(stream, f"({delivered}", "+", count=1)
    first_unread = text_or_none(unread[0][0]) if unread else None
    return pending == 0 and not unread, (f"{pending} pending, last delivered {delivered}"
                                         + (f", {first_unread} not read yet" if first_unread else ""))


@dataclass
class Relocation:
    """One partition from ``source`` to ``target``; ``control`` holds the gateway's partition map."""

    partition: int
    source: RedisClient
    target: RedisClient
    control: RedisClient
    namespace: str
    source_address: str
    target_address: str
    pairs: list[int]  # the instrument pairs of this partition (reconciled after the copy)
    say: Callable[[str], None] = print
    timeout_s: float = 60.0
    # ``transport = "rabbitmq"``: the commands wait in the broker's queue, which does not move;
    # the freeze stops the conductor instead of refusing appends, and nothing is refused.
    commands_in_broker: bool = False
    keys: PartitionKeys = field(init=False)
    _frozen_ms: int | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.keys = PartitionKeys(self.partition)

    # --- what is there ---------------------------------------------------------------

    def state(self) -> str | None:
        return marker(self.source, self.keys).get("state")

    def plan(self) -> list[str]:
        """The dry run: what would happen, and whether it can; nothing is written."""
        m = marker(self.source, self.keys)
        names = partition_key_names(self.source, self.keys)
        counts = summary(self.source, names, self.keys)
        lines = [f"partition {self.partition}: {self.source_address} → {self.target_address}",
                 f"  state: {m.get('state') or 'not relocating'}" + (f" (to {m['to']})" if m.get("to") else ""),
                 "  holds: " + ", ".join(f"{v} {k}" for k, v in counts.items())]
        if self.commands_in_broker:
            lines.append(f"  commands: the broker's queue {command_queue(self.partition)} (stays where it is)")
        for stream, group in ((self.keys.commands, CONDUCTOR_GROUP), (self.keys.events, OUTBOX_GROUP)):
            if stream == self.keys.commands and self.commands_in_broker:
                continue
            _, how = _group_drained(self.source, stream, group)
            lines.append(f"  {stream}: {how}")
        leases = self._leases_held(self.source)
        lines.append(f"  cells running (leases held): {', '.join(leases) or 'none'}")
        problem = self._target_problem()
        lines.append(f"  target: {problem or 'reachable, holds nothing of this partition'}")
        versions = [server_version(c) for c in (self.source, self.target)]
        lines.append(f"  server versions: source {versions[0]}, target {versions[1]} (DUMP/RESTORE needs the "
                     "target's version to be the same or newer)")
        steps = ["pre-copy", "freeze", "drain", "stop the cells", "copy", "verify", "switch the partition map",
                 "cells follow to the target", "routing resumes"]
        done = ORDER.index(m.get("state")) + 1 if m.get("state") in ORDER[1:] else 0  # (pre-copy leaves no state)
        lines.append("  steps: " + " → ".join(f"[{s}]" if i < done else s for i, s in enumerate(steps)))
        return lines

    def _leases_held(self, client: RedisClient) -> list[str]:
        """The cell leases (conductor, outbox) of the partition held on ``client``'s datastore."""
        return [k for k in (self.keys.conductor_lease, self.keys.outbox_lease) if client.exists(k)]

    def _target_problem(self) -> str | None:
        if self.target_address == self.source_address:
            return "the target is the source"
        there = partition_key_names(self.target, self.keys)
        incoming = marker(self.target, self.keys)
        if incoming.get("state") == INCOMING and incoming.get("from") == self.source_address:
            return None  # our own copy, from an interrupted run: replaced
        if there or incoming:
            return (f"already holds {len(there)} keys of partition {self.partition}"
                    + (f" and a relocation marker ({incoming.get('state')})" if incoming else "")
                    + ": refused (delete them first, or choose another datastore)")
        return None

    # --- the procedure ----------------------------------------------------------------

    def run(self, wait_cells_s: float = 0.0) -> None:
        m = marker(self.source, self.keys)
        state = m.get("state")
        if state == MOVED:
            if m.get("to") != self.target_address:
                raise RelocationError(f"partition {self.partition} already moved from here to {m.get('to')}")
            self.say(f"partition {self.partition}: already moved to {self.target_address}")
            self._switch()  # idempotent: the map, the markers
            return
        if state not in ORDER:
            raise RelocationError(f"partition {self.partition}: unknown relocation state {state!r} on the source")
        if state is not None and m.get("to") != self.target_address:
            raise RelocationError(f"partition {self.partition} is being relocated to {m.get('to')} (state {state}): "
                                  "run that again, or roll it back first (--rollback)")
        problem = self._target_problem()
        if problem is not None:
            raise RelocationError(f"target {self.target_address}: {problem}")
        tracker: ChangeTracker | None = None
        try:
            if state is None:
                tracker = self._precopy()
                self._mark(FROZEN)
                if self.commands_in_broker:
                    self.say(f"freeze: the conductor takes no more commands; they wait in the broker's queue "
                             f"{command_queue(self.partition)} from now on")
                else:
                    self.say("freeze: commands to this partition are refused on the source from now on")
            if ORDER.index(self.state()) <= ORDER.index(FROZEN):
                self._drain()
                self._mark(STOPPING)
            if ORDER.index(self.state()) <= ORDER.index(STOPPING):
                self._stop_cells()
                if tracker is not None:
                    self._copy(tracker.settled())
                else:
                    self._copy()
                self._mark(COPIED)
            self._verify(tracker.changed if tracker is not None else None)
        finally:
            if tracker is not None:
                tracker.close()
        self._switch()
        if wait_cells_s > 0:
            self._wait_cells(wait_cells_s)
        self._report_health()

    def rollback(self) -> None:
        """Undo a relocation that has not switched: the target's copy goes, the source serves again."""
        m = marker(self.source, self.keys)
        if m.get("state") == MOVED:
            raise RelocationError(f"partition {self.partition} has switched to {m.get('to')}: relocate it back "
                                  "instead")
        incoming = marker(self.target, self.keys)
        if incoming.get("state") == INCOMING and incoming.get("from") == self.source_address:
            names = partition_key_names(self.target, self.keys)
            for i in range(0, len(names), COPY_BATCH):
                self.target.unlink(*names[i:i + COPY_BATCH])
            self.target.delete(self.keys.relocation)
            self.say(f"rollback: {len(names)} copied keys removed from the target")
        self.source.delete(self.keys.relocation)
        self.say(f"rollback: partition {self.partition} serves from {self.source_address} again (restart its cells there)")

    def _mark(self, state: str) -> None:
        now = str(int(time.time() * 1000))
        self.source.hset(self.keys.relocation, mapping={"state": state, "to": self.target_address, "at": now,
                                                        **({"frozen": now} if state == FROZEN else {})})

    def _wait(self, what: str, done: Callable[[], tuple[bool, str]]) -> None:
        deadline = time.monotonic() + self.timeout_s
        while True:
            ok, how = done()
            if ok:
                return
            if time.monotonic() > deadline:
                raise RelocationError(f"{what}: not done after {self.timeout_s:.0f} s ({how}); the partition stays "
                                      "frozen: run the command again, or roll back (--rollback)")
            time.sleep(0.1)

    def _drain(self) -> None:
        if self.commands_in_broker:
            def conductor_gone() -> tuple[bool, str]:
                return not self.source.exists(self.keys.conductor_lease), "its lease is still held"

            # It stands down at the freeze after committing its batch; what it held unacknowledged
            # goes back to the queue for the conductor on the target.
            self._wait("stop the conductor (it stands down when it sees the marker)", conductor_gone)
        drains = [(self.keys.events, OUTBOX_GROUP, "the outbox")]
        if not self.commands_in_broker:
            drains.insert(0, (self.keys.commands, CONDUCTOR_GROUP, "the conductor"))
        for stream, group, who in drains:
            def drained(s: str = stream, g: str = group) -> tuple[bool, str]:
                return _group_drained(self.source, s, g)

            self._wait(f"drain {stream} ({who} must be running)", drained)
        self.say("drain: every command processed, every event published")

    def _stop_cells(self) -> None:
        def gone() -> tuple[bool, str]:
            held = self._leases_held(self.source)
            return not held, f"still held: {', '.join(held)}"

        self._wait("stop the cells (they stand down when they see the marker)", gone)
        self.say("stop: conductor and outbox stood down")

    def _precopy(self) -> ChangeTracker | None:
        """Before the freeze, with the cells running: copy every key, watching which are written
        meanwhile (keyspace notifications), and check the copy against the source, so the
        freeze only has to copy and check what changed. None where the datastore will not send
        notifications (a Cluster, or CONFIG refused): the freeze then copies everything."""
        tracker = ChangeTracker.start(self.source, self.keys)
        if tracker is None:
            self.say("pre-copy: keyspace notifications not available here: everything is copied while frozen")
            return None
        try:
            copied = self._copy(announce=False)
            names = partition_key_names(self.source, self.keys)
            on_source, on_target = key_digests(self.source, names), key_digests(self.target, names)
            extra = set(partition_key_names(self.target, self.keys)) - set(names)
            tracker.sync()
            unexplained = [n for n in names if on_source[n] != on_target.get(n) and n not in tracker.changed]
            unexplained += sorted(extra - tracker.changed)
            if unexplained:
                raise RelocationError(f"pre-copy: {len(unexplained)} keys differ on the target without having been "
                                      f"written since, e.g. {unexplained[:5]}")
        except BaseException:
            tracker.close()
            raise
        self.say(f"pre-copy: {copied} keys copied and checked while the partition served; "
                 f"{len(tracker.changed)} written meanwhile")
        return tracker

    def _copy(self, only: set[str] | None = None, announce: bool = True) -> int:
        """Every key of the partition to the target (DUMP, RESTORE with its TTL), or ``only``
        these (a key gone from the source goes from the target). Returns how many."""
        names = sorted(only - self._not_moved()) if only is not None else partition_key_names(self.source, self.keys)
        self.target.hset(self.keys.relocation, mapping={"state": INCOMING, "from": self.source_address,
                                                        "at": str(int(time.time() * 1000))})
        for i in range(0, len(names), COPY_BATCH):
            batch = names[i:i + COPY_BATCH]
            read = self.source.pipeline(transaction=False)
            for name in batch:
                read.dump(name)
                read.pttl(name)
            replies = read.execute()
            write = self.target.pipeline(transaction=False)
            for name, payload, ttl in zip(batch, replies[0::2], replies[1::2]):
                if payload is None:  # gone from the source (deleted, or expired since the scan)
                    write.unlink(name)
                    continue
                write.restore(name, max(int(ttl), 0), payload, replace=True)
            try:
                write.execute()
            except ResponseError as exc:
                raise RelocationError(f"copy: the target refused a key ({exc}); a target older than the source "
                                      "cannot read its DUMP format") from None
        if announce:
            self.say(f"copy: {len(names)} keys" if only is None else
                     f"copy: the {len(names)} keys written since the pre-copy")
        return len(names)

    def _not_moved(self) -> set[str]:
        return {self.keys.relocation, self.keys.conductor_lease, self.keys.outbox_lease}

    def _verify(self, changed: set[str] | None = None) -> None:
        """The same keys with the same content on both sides (a digest of each key's logical
        content: books, orders, processed-command and accepted-order records, the streams with
        their consumer groups). ``changed``: only those keys — the pre-copy checked every other
        name and content, and the notifications say nothing else was written since — so the
        check inside the freeze grows with what changed, not with the partition."""
        if changed is None:
            source_names = partition_key_names(self.source, self.keys)
            target_names = partition_key_names(self.target, self.keys)
            if source_names != target_names:
                missing = sorted(set(source_names) - set(target_names))[:5]
                extra = sorted(set(target_names) - set(source_names))[:5]
                raise RelocationError(f"verify: key names differ (missing on the target {missing}, extra {extra})")
            checked = source_names
        else:
            checked = sorted(changed - self._not_moved())
        # (A key on one side only has a different digest from the absent key on the other.)
        on_source, on_target = key_digests(self.source, checked), key_digests(self.target, checked)
        differ = [n for n in checked if on_source[n] != on_target[n]]
        if differ:
            raise RelocationError(f"verify: {len(differ)} keys differ, e.g. {differ[:5]}")
        self.say(f"verify: the {len(checked)} keys " + ("of the partition" if changed is None else "written since the "
                 "pre-copy") + " are the same on the target")

    def _report_health(self) -> None:
        """After the switch, outside the freeze: what the target holds, and seed 000's reconcile
        of every pair there. The copy is exact (``_verify``), so an unhealthy pair was unhealthy on
        the source too: reported for the operator, not a reason to keep the partition frozen."""
        names = partition_key_names(self.target, self.keys)
        counts = summary(self.target, names, self.keys)
        unhealthy = [r for r in (reconcile(self.target, self.keys, pair) for pair in self.pairs) if not r["healthy"]]
        self.say("target holds " + ", ".join(f"{v} {k}" for k, v in counts.items())
                 + (f"; reconcile healthy for {len(self.pairs)} pairs" if not unhealthy else ""))
        for result in unhealthy:
            self.say(f"WARNING: reconcile of pair {result['pairId']} on the target (as on the source): "
                     f"{result['issues'][:5]}")

    def _switch(self) -> None:
        # The map first: were this interrupted before the markers change, the gateway would send
        # to the target, whose ``incoming`` marker still refuses appends until the run is repeated.
        frozen = marker(self.source, self.keys).get("frozen")
        self._frozen_ms = int(frozen) if frozen is not None else None
        self.control.hset(partition_map(self.namespace), str(self.partition), self.target_address)
        self._mark(MOVED)
        self.target.delete(self.keys.relocation)
        self.say(f"switch: the partition map sends partition {self.partition} to {self.target_address}; cells started "
                 "against the source follow it there")
        if frozen is not None and self.commands_in_broker:
            self.say(f"frozen for {time.time() - int(frozen) / 1000:.2f} s: orders for partition {self.partition} "
                     "waited in the broker's queue meanwhile (none refused); they are matched once the conductor "
                     "runs on the target")
        elif frozen is not None:
            self.say(f"frozen for {time.time() - int(frozen) / 1000:.2f} s: orders for partition {self.partition} "
                     "were refused meanwhile where it shares the gateway's datastore (a temporary reject), held "
                     "where it does not")

    def _wait_cells(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if len(self._leases_held(self.target)) == 2:
                since = (f" ({time.time() - self._frozen_ms / 1000:.2f} s after the freeze)"
                         if self._frozen_ms is not None else "")
                self.say(f"cells: conductor and outbox run on the target{since}")
                return
            time.sleep(0.1)
        raise RelocationError(f"cells: no conductor and outbox on the target after {seconds:.0f} s (the partition "
                              "is switched; start them with REDIS_URL of the target, or against the source: they "
                              "follow its marker)")
