"""Direct delivery (MATCHING_INBOX_DELIVERY=direct) against real Valkey: the conductor appends
each event to its inboxes in the batch's own transaction, the outbox relay skipped; what
reaches the inboxes is what the outbox would have published, and nothing committed before it
(outbox delivery) is overtaken."""

from __future__ import annotations

from typing import Any

import pytest

from datastore.embedded import ValkeyProcess
from datastore.settings import RedisEndpoint
from matching.__main__ import direct_inboxes
from matching.conductor import BootRefused, SimulatedCrash
from matching.config import CellSettings, ConfigError, load_cell_settings
from matching.contracts import Event, parse_event
from matching.keys import PartitionKeys
from matching.outbox import OutboxWorker, RedisStreamsPublisher, owner_routes
from tests.cell_helpers import (
    CRASH_LEASE_TTL_MS,
    cell_client,
    conductor,
    p0_flow,
    pipelined,
    projected,
    reference_events,
    run_until_idle,
    submit_all,
    wait_lease_expired,
)

pytestmark = pytest.mark.slow  # starts servers or processes: not in `make unit`

KEYS = PartitionKeys(0)
DROP_COPY = "test-inbox:dc"


def inbox_of(owner: str) -> str:
    return f"test-inbox:{owner}"


ROUTES = owner_routes(inbox_of, [DROP_COPY])


def inbox(client: Any, stream: str) -> list[tuple[Event, str]]:
    """An inbox's events in arrival order, with the partition offset each carries."""
    return [(parse_event(f[b"event"]), f[b"x-partition-offset"].decode()) for _, f in client.xrange(stream)]


def offset(raw: str) -> tuple[int, int]:
    ms, _, seq = raw.partition("-")
    return int(ms), int(seq)


@pytest.mark.parametrize("run", [run_until_idle, pipelined], ids=["one-batch", "pipelined"])
def test_each_event_reaches_its_owners_inboxes_in_partition_order_and_the_event_stream_stays_empty(
        valkey: ValkeyProcess, run: Any) -> None:
    client = cell_client(RedisEndpoint(url=valkey.url))
    flow = p0_flow(11, 1200)
    submit_all(client, flow)
    run(conductor(client, batch_size=37, inboxes=ROUTES))
    copies = inbox(client, DROP_COPY)  # every event, as the outbox's --also stream gets them
    assert projected([e for e, _ in copies]) == reference_events(flow)
    offsets = [offset(o) for _, o in copies]
    assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets), "partition order, each offset once"
    owners = {o for e, _ in copies for o in e.owners()}
    for owner in owners:
        mine = [e.event_id for e, _ in copies if owner in e.owners()]
        assert [e.event_id for e, _ in inbox(client, inbox_of(owner))] == mine, f"{owner}: its events, once, in order"
    fields = client.xrange(DROP_COPY, count=1)[0][1]
    assert set(fields) == {b"messageId", b"causationId", b"partition", b"x-partition-offset", b"event"}, \
        "the outbox's fields (PUBLISH_FENCED): consumers cannot tell the two apart"
    assert client.xlen(KEYS.events) == 0
    last = client.xinfo_stream(KEYS.events)["last-generated-id"].decode()
    assert last == copies[-1][1], "the event stream keeps the last offset: a rebuilt cell's clock goes on from it"


def test_a_crash_at_any_point_loses_no_event_and_delivers_none_twice(valkey: ValkeyProcess) -> None:
    client = cell_client(RedisEndpoint(url=valkey.url))
    flow = p0_flow(12, 600)
    submit_all(client, flow)
    for point in ("after-reads", "before-exec", "after-exec", "after-durability"):
        calls = {"n": 0}

        def crash(at: str, point: str = point) -> None:
            if at == point:
                calls["n"] += 1
                if calls["n"] == 3:
                    raise SimulatedCrash(at)

        with pytest.raises(SimulatedCrash):
            run_until_idle(conductor(client, batch_size=20, fault=crash, lease_ttl_ms=CRASH_LEASE_TTL_MS,
                                     inboxes=ROUTES))
        wait_lease_expired(client)  # the crashed conductor's lease runs out
    run_until_idle(conductor(client, batch_size=20, inboxes=ROUTES))
    events = [e for e, _ in inbox(client, DROP_COPY)]
    assert projected(events) == reference_events(flow), "each command applied once: its events once, in order"


def test_events_committed_for_the_outbox_reach_the_inboxes_before_any_direct_one(valkey: ValkeyProcess) -> None:
    client = cell_client(RedisEndpoint(url=valkey.url))
    flow = p0_flow(13, 600)
    half = len(flow) // 2
    submit_all(client, flow[:half])
    run_until_idle(conductor(client, batch_size=25, lease_ttl_ms=CRASH_LEASE_TTL_MS))  # outbox delivery: into the event stream
    left = client.xlen(KEYS.events)
    assert left > 0
    wait_lease_expired(client)
    submit_all(client, flow[half:])
    direct = conductor(client, batch_size=25, inboxes=ROUTES)
    for _ in range(5):
        assert direct.step(block_ms=10) == 0, "nothing committed while the event stream holds events"
    assert client.xlen(KEYS.events) == left and not client.exists(DROP_COPY)
    assert direct.has_lease and not direct.ready(), "/ready says it is not serving yet"
    relay = OutboxWorker(valkey.client(), valkey.client(), 0, RedisStreamsPublisher(valkey.client(), ROUTES))
    relay.ensure_group()
    while client.xlen(KEYS.events):
        relay.step(block_ms=10)
        relay.acknowledge_published()
    relay.release()
    run_until_idle(direct)
    assert direct.ready()
    events = [e for e, _ in inbox(client, DROP_COPY)]
    assert projected(events) == reference_events(flow), "the relayed events first, then the direct ones, in order"


def test_direct_delivery_is_refused_where_it_cannot_keep_the_guarantees(valkey: ValkeyProcess) -> None:
    with pytest.raises(ConfigError, match="MATCHING_INBOX_DELIVERY=direct needs .* MATCHING_DURABILITY=memory"):
        load_cell_settings(inbox_delivery="direct", durability="aof-replicated")
    client = cell_client(RedisEndpoint(url=valkey.url))
    with pytest.raises(BootRefused, match="direct inbox delivery needs"):
        conductor(client, durability="aof-replicated", inboxes=ROUTES)


def test_a_conductor_whose_inboxes_live_elsewhere_falls_back_to_the_outbox(valkey: ValkeyProcess) -> None:
    settings = CellSettings(redis_url=valkey.url, partition=0, inbox_delivery="direct")  # type: ignore[call-arg]
    assert direct_inboxes(settings, None, []) is not None, "inboxes on its own datastore: direct"
    assert direct_inboxes(settings, valkey.url, []) is not None
    assert direct_inboxes(settings, "redis://127.0.0.1:1/0", []) is None, "--target-url elsewhere: the outbox relays"
    relocated = CellSettings(redis_url="redis://127.0.0.1:1/0", partition=0, inbox_delivery="direct")  # type: ignore[call-arg]
    assert direct_inboxes(relocated, None, [], configured=settings) is None, "a partition moved away from its inboxes"
    assert direct_inboxes(settings.model_copy(update={"inbox_delivery": "outbox"}), None, []) is None
