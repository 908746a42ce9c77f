"""The dispatcher's read and the acknowledgement of its last cycle share one round trip, the read
first (``read_and_acknowledge``): while the read blocks, the acknowledgements wait behind it, and
every reply comes back together, so a cycle waits for one reply, not two."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

from datastore.connection import connect
from datastore.settings import RedisEndpoint
from fixgw.dispatcher import CONSUMER, GROUP, read_and_acknowledge
from matching.storage import read_group_command


def _pending(client: Any, stream: str) -> list[bytes]:
    return [p["message_id"] for p in client.xpending_range(stream, GROUP, "-", "+", 10)]


def test_the_last_cycles_entries_are_acknowledged_behind_the_blocking_read_in_one_reply(
        endpoint: RedisEndpoint) -> None:
    client, watcher = connect(endpoint), connect(endpoint)
    stream = f"{{dispatch-read-{uuid.uuid4().hex[:8]}}}/inbox"
    try:
        client.xgroup_create(stream, GROUP, id="0", mkstream=True)
        committed = client.xadd(stream, {"event": "1"})
        client.xreadgroup(GROUP, CONSUMER, {stream: ">"})  # read by the last cycle: pending until acknowledged
        out: dict[str, Any] = {}

        def cycle() -> None:
            out["entries"] = read_and_acknowledge(
                client, read_group_command(GROUP, CONSUMER, stream, ">", 10, 1500), [(stream, [committed])])

        reader = threading.Thread(target=cycle)
        reader.start()
        time.sleep(0.3)
        assert reader.is_alive(), "the read blocks: nothing new in the stream"
        assert _pending(watcher, stream) == [committed], "its acknowledgement waits behind the blocked read"
        new = watcher.xadd(stream, {"event": "2"})
        reader.join(5)
        assert not reader.is_alive()
        assert [entry_id for _, entries in out["entries"] for entry_id, _ in entries] == [new]
        assert _pending(watcher, stream) == [new], "acknowledged once the read returned; the new entry now pending"
    finally:
        watcher.delete(stream)
        client.close()
        watcher.close()


def test_a_read_with_nothing_new_still_acknowledges_when_its_block_ends(endpoint: RedisEndpoint) -> None:
    """A quiet inbox: the last cycle's entries are acknowledged when the read's block runs out
    (the dispatcher blocks 200 ms at most), not left pending."""
    client = connect(endpoint)
    stream = f"{{dispatch-read-{uuid.uuid4().hex[:8]}}}/inbox"
    try:
        client.xgroup_create(stream, GROUP, id="0", mkstream=True)
        committed = client.xadd(stream, {"event": "1"})
        client.xreadgroup(GROUP, CONSUMER, {stream: ">"})
        assert read_and_acknowledge(client, read_group_command(GROUP, CONSUMER, stream, ">", 10, 100),
                                     [(stream, [committed])]) == []
        assert _pending(client, stream) == []
    finally:
        client.delete(stream)
        client.close()


def test_a_read_of_own_pending_entries_comes_after_the_acknowledgements(endpoint: RedisEndpoint) -> None:
    """After a failed cycle the dispatcher reads its pending entries from the start: the ones its
    last cycle committed are acknowledged first, so they are not dispatched a second time."""
    client = connect(endpoint)
    stream = f"{{dispatch-read-{uuid.uuid4().hex[:8]}}}/inbox"
    try:
        client.xgroup_create(stream, GROUP, id="0", mkstream=True)
        committed = client.xadd(stream, {"event": "1"})
        waiting = client.xadd(stream, {"event": "2"})
        client.xreadgroup(GROUP, CONSUMER, {stream: ">"})  # both pending; the first one's cycle committed
        own_pending = ("XREADGROUP", "GROUP", GROUP, CONSUMER, "COUNT", 10, "STREAMS", stream, "0")
        entries = read_and_acknowledge(client, own_pending, [(stream, [committed])])
        assert [entry_id for _, read in entries for entry_id, _ in read] == [waiting]
        assert _pending(client, stream) == [waiting]
    finally:
        client.delete(stream)
        client.close()
