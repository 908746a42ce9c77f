"""What a producer of commands (the gateway) may use of a matching partition, and nothing more:
where a command goes and how it is appended, the key whose existence refuses appends during a
relocation, and the partition count the partition's conductor recorded.

Appending is one script per partition (``APPEND_COMMANDS``): all of a batch or none, refused
while the partition's relocation marker exists. A producer colocated with the partition (the
gateway on the same datastore) instead claims and appends in one script of its own, guarded by
the same marker (``relocation_guard``).
"""

from __future__ import annotations

from redis.exceptions import ResponseError

from datastore.connection import RedisClient, round_trip, text

from .contracts import Command, ContractError, encode_command, partition_of
from .keys import PartitionKeys


class PartitionBeingMoved(Exception):
    """The partition is being relocated: nothing was appended; the same commands may be appended
    again once the partition map points to where it went."""


def relocation_guard(partition: int) -> str:
    """The key whose existence refuses every append of a command to ``partition`` there."""
    return PartitionKeys(partition).relocation


def recorded_partition_count(client: RedisClient, partition: int) -> int | None:
    """The partition count a conductor of ``partition`` recorded at boot (None: never booted)."""
    raw = client.hget(PartitionKeys(partition).meta, "partitionCount")
    return None if raw is None else int(raw)


def command_entry(command: Command, partition_count: int) -> tuple[str, dict[str, bytes]]:
    """Where a producer appends ``command`` and the entry's fields; the route is checked."""
    if command.partition != partition_of(command.pair_id, partition_count):
        raise ContractError(f"command {command.command_id} routed to partition {command.partition}, "
                            f"pair {command.pair_id} belongs to {partition_of(command.pair_id, partition_count)}")
    return PartitionKeys(command.partition).commands, {"command": encode_command(command)}


# One partition's commands, all or none, unless the partition's relocation marker exists (the
# stream and the marker share the partition's hash tag). KEYS: stream, marker. ARGV: each
# entry's encoded command. Returns the entry ids, or a RELOCATING error (nothing appended).
APPEND_COMMANDS = """
if redis.call('EXISTS', KEYS[2]) == 1 then
  return redis.error_reply('RELOCATING the partition is being moved to another datastore')
end
local ids = {}
for i = 1, #ARGV do ids[i] = redis.call('XADD', KEYS[1], '*', 'command', ARGV[i]) end
return ids
"""


def append_commands(client: RedisClient, commands: list[Command], partition_count: int) -> list[str]:
    """What the gateway does: one partition's commands appended in one round trip, all or none;
    refused (PartitionBeingMoved) while the partition is being relocated, so nothing lands on a
    datastore the partition is leaving."""
    keys = PartitionKeys(commands[0].partition)
    entries = []
    for c in commands:
        stream, fields = command_entry(c, partition_count)
        if stream != keys.commands:
            raise ContractError(f"commands of partitions {keys.partition} and {c.partition} in one append")
        entries.append(fields["command"])
    [reply] = round_trip(client, [("EVAL", APPEND_COMMANDS, 2, keys.commands, keys.relocation, *entries)])
    if isinstance(reply, ResponseError) and str(reply).startswith("RELOCATING"):
        raise PartitionBeingMoved(f"partition {keys.partition} is being moved to another datastore")
    if isinstance(reply, Exception):
        raise reply
    return [text(i) for i in reply]


def submit(client: RedisClient, command: Command, partition_count: int) -> str:
    """Append a command to its partition's stream (what a producer such as the gateway does)."""
    stream, fields = command_entry(command, partition_count)
    entry_id = client.xadd(stream, fields)  # type: ignore[arg-type]
    return entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)

