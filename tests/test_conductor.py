"""The conductor against real Valkey: reference equality, group commit, crashes, dedup, fencing."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from datastore.connection import new_connection, own_connection, standalone_pool
from datastore.embedded import ValkeyProcess
from datastore.settings import RedisEndpoint
from matching.conductor import BootRefused, Conductor, LeaseLost, PoisonCommand, SimulatedCrash
from matching.config import Durability
from matching.contracts import OrderPayload, OrderType, PlaceOrder, Side, parse_command
from matching.domain import StpMode
from matching.keys import PartitionKeys, book_member
from matching.storage import commit_commands, decode_order, order_fields, reconcile, trim_acknowledged
from tests.cell_helpers import (
    CRASH_LEASE_TTL_MS,
    cell_client,
    conductor,
    p0_flow,
    pipelined,
    projected,
    reference_events,
    run_until_idle,
    stream_events,
    submit_all,
    wait_lease_expired,
)
from tests.flows import TEST_INSTRUMENTS

pytestmark = pytest.mark.slow  # starts servers or processes: not in `make unit`

KEYS = PartitionKeys(0)


def book_state(client) -> dict:  # type: ignore[no-untyped-def]
    state = {}
    for pair in TEST_INSTRUMENTS:
        for side in (Side.BUY, Side.SELL):
            members = [m.decode() for m in client.zrange(KEYS.book(pair, side), 0, -1)]
            state[(pair, side)] = [(m, decode_order(client.hgetall(KEYS.order(m.split(":", 1)[1])))) for m in members]
    return state


@contextmanager
def primary_with_replica() -> Iterator[tuple[Any, ValkeyProcess]]:
    """aof-replicated's datastore: a primary and its replica, both appendfsync always; the
    primary's conductor client and the replica."""
    from datastore.embedded import _wait, standalone

    with standalone(aof=True, appendfsync="always") as primary:
        replica = standalone(aof=True, appendfsync="always", replicaof=f"127.0.0.1 {primary.port}").start()
        try:
            _wait(lambda: replica.client().info("replication").get("master_link_status") == "up", "replica")
            yield cell_client(RedisEndpoint(url=primary.url)), replica
        finally:
            replica.stop()


@pytest.mark.parametrize("seed", range(3))
def test_random_flows_through_valkey_match_the_reference(valkey: ValkeyProcess, seed: int) -> None:
    client = cell_client(RedisEndpoint(url=valkey.url))
    flow = p0_flow(seed, 1500)
    submit_all(client, flow)
    run_until_idle(conductor(client, batch_size=37))
    assert projected(stream_events(client)) == reference_events(flow)


def test_group_commit_gives_the_same_events_and_state_as_one_at_a_time() -> None:
    from datastore.embedded import standalone

    flow = p0_flow(11, 800)
    results = []
    for batch in (1, 100):
        with standalone() as server:
            client = cell_client(RedisEndpoint(url=server.url))
            submit_all(client, flow)
            run_until_idle(conductor(client, batch_size=batch))
            events = [(e.event_id, e.type, e.payload) for e in stream_events(client)]
            processed = {k: client.get(k) for k in client.scan_iter(KEYS.processed_command("*"))}
            results.append((events, book_state(client), processed))
    assert results[0] == results[1]


@pytest.mark.parametrize("run", [run_until_idle, pipelined], ids=["one-batch", "pipelined"])
@pytest.mark.parametrize("point", ["after-reads", "before-exec", "after-exec", "after-durability"])
def test_crash_at_any_point_then_redelivery_gives_no_double_fill_and_no_lost_order(valkey: ValkeyProcess,
                                                                                  point: str, run: Any) -> None:
    client = cell_client(RedisEndpoint(url=valkey.url))
    flow = p0_flow(5, 600)
    submit_all(client, flow)
    batches = {"n": 0}

    def crash(at: str) -> None:
        if at == point:
            batches["n"] += 1
            if batches["n"] == 4:  # (pipelined: by then a batch is in flight while the next is matched)
                raise SimulatedCrash(at)

    first = conductor(client, batch_size=40, fault=crash, lease_ttl_ms=CRASH_LEASE_TTL_MS)
    with pytest.raises(SimulatedCrash):
        run(first)
    # The first conductor is dead: its lease runs out, a successor takes over.
    wait_lease_expired(client)
    second = conductor(client, batch_size=40)
    run(second)
    assert projected(stream_events(client)) == reference_events(flow)
    assert client.xpending(KEYS.commands, "matching-conductor")["pending"] == 0
    # A batch that had committed was acknowledged in its own transaction: nothing of it is
    # redelivered, and a batch that had not is applied by the successor, once.
    assert second.metrics.duplicate_commands._value.get() == 0


def test_replayed_transaction_changes_nothing(valkey: ValkeyProcess) -> None:
    client = cell_client(RedisEndpoint(url=valkey.url))
    c = conductor(client, batch_size=50)
    flow = p0_flow(8, 200)
    submit_all(client, flow[:100])
    run_until_idle(c)
    # Stage the next batch by hand, commit it, then send the very same transaction again,
    # as a client library would after losing EXEC's reply.
    from matching.contracts import Event
    from matching.storage import StagedCommand, commit_fenced

    assert c.cell is not None
    staged = []
    for cmd in flow[100:130]:
        out = c.cell.apply(cmd)
        events = [(c.clock.next(), Event(f"{cmd.command_id}:{n}", 0, cmd.pair_id, cmd.command_id, p))
                  for n, p in enumerate(out.events)]
        staged.append(StagedCommand(cmd.command_id, out.result([e.event_id for _, e in events]),
                                    list(out.changes.values()), events))
    commands = commit_commands(KEYS, staged, c.cell.next_priority)
    commit_fenced(client, KEYS, c.token, commands, None)
    before = (book_state(client), client.xlen(KEYS.events), client.hgetall(KEYS.meta))
    with pytest.raises(Exception, match="failed inside EXEC"):
        commit_fenced(client, KEYS, c.token, commands, None)  # the XADDs refuse their used ids
    assert (book_state(client), client.xlen(KEYS.events), client.hgetall(KEYS.meta)) == before


def test_a_batch_writes_each_order_once_from_its_state_before_to_its_state_after() -> None:
    """Staging coalesces an order's changes over the batch: one HSET of what changed, one book
    move; an order that rested and was filled within the batch writes no order record at all."""
    from matching.domain import Cell
    from matching.storage import StagedCommand

    cell = Cell(TEST_INSTRUMENTS)
    resting = PlaceOrder("c1", 0, 0, OrderPayload("bid-old", Side.BUY, OrderType.LIMIT, 10, 200))
    cell.apply(resting)  # on the book before the batch
    batch = [PlaceOrder("c2", 0, 0, OrderPayload("ask-1", Side.SELL, OrderType.LIMIT, 3, 200)),  # fills bid-old 3
             PlaceOrder("c3", 0, 0, OrderPayload("ask-2", Side.SELL, OrderType.LIMIT, 2, 200)),  # fills it 2 more
             PlaceOrder("c4", 0, 0, OrderPayload("bid-new", Side.BUY, OrderType.LIMIT, 4, 190)),  # rests...
             PlaceOrder("c5", 0, 0, OrderPayload("ask-3", Side.SELL, OrderType.LIMIT, 9, 190))]  # ...and is filled
    staged = [StagedCommand(c.command_id, out.result([]), list(out.changes.values()))
              for c in batch for out in [cell.apply(c)]]
    # bid-old is filled 3, 2, then its last 5 by ask-3, which then fills bid-new (4): both gone.
    commands = commit_commands(KEYS, staged, cell.next_priority)
    writes = [c for c in commands if c[0] != "MSET" and c[1] != KEYS.meta]
    assert writes == [("ZREM", KEYS.book(0, Side.BUY), book_member(1, "bid-old")), ("DEL", KEYS.order("bid-old"))]
    # the same batch without its last command: one HSET for bid-old's two fills, bid-new rests
    commands = commit_commands(KEYS, staged[:3], cell.next_priority)
    writes = [c for c in commands if c[0] != "MSET" and c[1] != KEYS.meta]
    assert writes == [("HSET", KEYS.order("bid-old"), "remaining", "5", "filledNotional", "1000"),
                      ("HSET", KEYS.order("bid-new"), *order_fields(cell_order("bid-new", staged[2]))),
                      ("ZADD", KEYS.book(0, Side.BUY), 190, book_member(4, "bid-new"))]


def cell_order(order_id: str, staged) -> object:  # type: ignore[no-untyped-def]
    return next(c.after for c in staged.changes if c.after is not None and c.after.order_id == order_id)


def test_client_retry_with_new_command_id_and_same_order_id_is_skipped(valkey: ValkeyProcess) -> None:
    client = cell_client(RedisEndpoint(url=valkey.url))
    c = conductor(client)
    ask = PlaceOrder("cmd-a", 0, 0, OrderPayload("ask-1", Side.SELL, OrderType.LIMIT, 5, 200))
    bid = PlaceOrder("cmd-b", 0, 0, OrderPayload("bid-1", Side.BUY, OrderType.LIMIT, 5, 200))
    retry = PlaceOrder("cmd-b-retry", 0, 0, OrderPayload("bid-1", Side.BUY, OrderType.LIMIT, 5, 200))
    submit_all(client, [ask, bid])
    run_until_idle(c)
    submit_all(client, [PlaceOrder("cmd-a2", 0, 0, OrderPayload("ask-2", Side.SELL, OrderType.LIMIT, 5, 200)), retry,
                        bid])  # a client retry (new command id) and a broker redelivery (same id)
    run_until_idle(c)
    deals = [e for e in stream_events(client) if e.type == "deal.executed.v1"]
    assert len(deals) == 1
    assert c.metrics.duplicate_orders._value.get() == 1
    assert c.metrics.duplicate_commands._value.get() == 1
    assert json.loads(client.get(KEYS.processed_command("cmd-b-retry"))) == {"status": "duplicate-order"}
    assert client.zcard(KEYS.book(0, Side.SELL)) == 1  # ask-2 rests, untouched


def test_a_second_conductor_stays_idle_and_a_stalled_one_is_fenced(valkey: ValkeyProcess) -> None:
    client = cell_client(RedisEndpoint(url=valkey.url))
    a = conductor(client, lease_ttl_ms=400)
    b = conductor(cell_client(RedisEndpoint(url=valkey.url)), lease_ttl_ms=400)
    submit_all(client, p0_flow(2, 20))
    assert a.step(block_ms=10) > 0
    assert b.step(block_ms=10) == 0 and not b.has_lease
    # a stalls past its TTL; b takes over; a's next commit is refused by WATCH on the lease.
    time.sleep(0.45)
    assert b.try_lease()
    submit_all(client, p0_flow(3, 20))
    a.lease._valid_until = a.lease._renewed_at = time.monotonic()  # a still believes it holds the lease...
    a.lease._valid_until += 10  # ...and that no renewal is due
    with pytest.raises(LeaseLost):
        a.step(block_ms=10)
    assert not a.has_lease
    run_until_idle(b)


def test_a_takeover_while_a_batch_is_matched_fences_its_commit(valkey: ValkeyProcess) -> None:
    """The lease is checked (and WATCHed) with the batch's dedup reads, before matching: a
    successor taking the lease between that read and the commit makes the commit fail, and
    nothing of the batch is written."""
    client = cell_client(RedisEndpoint(url=valkey.url))
    other = cell_client(RedisEndpoint(url=valkey.url))  # (the conductor holds client's one connection)
    successor = conductor(other, lease_ttl_ms=400)

    def take_over(point: str) -> None:
        if point == "after-reads":
            other.delete(KEYS.conductor_lease)  # as if it expired while the batch was matched
            assert successor.try_lease()

    a = conductor(client, fault=take_over)
    submit_all(client, p0_flow(5, 10))
    with pytest.raises(LeaseLost):
        a.step(block_ms=10)
    assert not a.has_lease
    assert client.xlen(KEYS.events) == 0 and not client.keys(KEYS.processed_command("*"))
    assert run_until_idle(successor) > 0  # the successor processes the whole batch
    assert client.xlen(KEYS.events) > 0


def test_a_batch_without_a_commit_leaves_no_watch_behind(valkey: ValkeyProcess) -> None:
    """A batch of duplicates only commits nothing, so its WATCH on the lease is left on the
    connection; the holder's own renewal then touches the lease. The next batch must still
    commit (the fenced read starts with UNWATCH), not take the renewal for a takeover."""
    client = cell_client(RedisEndpoint(url=valkey.url))
    c = conductor(client)
    first = PlaceOrder("cmd-1", 0, 0, OrderPayload("o-1", Side.SELL, OrderType.LIMIT, 5, 200))
    submit_all(client, [first])
    assert run_until_idle(c) == 1
    submit_all(client, [first])  # redelivered: a duplicate, nothing to commit
    assert run_until_idle(c) == 1
    assert c.lease.renew()  # PEXPIRE on the lease key: a WATCH still set would now fail the EXEC
    submit_all(client, [PlaceOrder("cmd-2", 0, 0, OrderPayload("o-2", Side.SELL, OrderType.LIMIT, 5, 201))])
    assert run_until_idle(c) == 1
    assert c.has_lease
    assert client.get(KEYS.processed_command("cmd-2")) is not None


def test_orphan_index_member_is_logged_and_skipped(valkey: ValkeyProcess, caplog: pytest.LogCaptureFixture) -> None:
    client = cell_client(RedisEndpoint(url=valkey.url))
    c = conductor(client)
    submit_all(client, [PlaceOrder("c1", 0, 0, OrderPayload("a1", Side.SELL, OrderType.LIMIT, 5, 200)),
                        PlaceOrder("c2", 0, 0, OrderPayload("a2", Side.SELL, OrderType.LIMIT, 5, 201))])
    run_until_idle(c)
    client.delete(KEYS.order("a1"))  # the index now points at nothing
    c.cell = None  # force a rebuild, as a takeover would
    submit_all(client, [PlaceOrder("c3", 0, 0, OrderPayload("b1", Side.BUY, OrderType.LIMIT, 5, 201))])
    run_until_idle(c)
    assert "has no order record; skipped" in caplog.text
    deal = [e for e in stream_events(client) if e.type == "deal.executed.v1"][0]
    assert deal.payload.maker.order_id == "a2"
    report = reconcile(client, KEYS, 0)
    assert report["issues"] == ["ask:a1:missing-order"] and not report["healthy"]


def test_reconcile_reports_index_mismatch(valkey: ValkeyProcess) -> None:
    client = cell_client(RedisEndpoint(url=valkey.url))
    c = conductor(client)
    submit_all(client, [PlaceOrder("c1", 0, 0, OrderPayload("a1", Side.SELL, OrderType.LIMIT, 5, 200))])
    run_until_idle(c)
    assert reconcile(client, KEYS, 0)["healthy"]
    client.hset(KEYS.order("a1"), "side", "buy")
    report = reconcile(client, KEYS, 0)
    assert report["issues"] == ["ask:a1:index-mismatch"]
    assert (report["indexedOrders"], report["scannedOrders"], report["truncated"]) == (1, 1, False)


def test_command_for_another_partition_is_refused_and_changes_nothing(valkey: ValkeyProcess) -> None:
    client = cell_client(RedisEndpoint(url=valkey.url))
    c = conductor(client)
    good = '{"kind":"place","command_id":"x","pair_id":1,"partition":1,"order":{"order_id":"o","side":"buy",' \
           '"order_type":"limit","quantity":1,"price":200}}'
    lying = good.replace('"partition":1', '"partition":0')  # pair 1 belongs to partition 1
    client.xadd(KEYS.commands, {"command": good})
    client.xadd(KEYS.commands, {"command": lying})
    client.xadd(KEYS.commands, {"command": "not json"})
    run_until_idle(c)
    assert client.xlen(KEYS.events) == 0 and client.get(KEYS.processed_command("x")) is None
    failures = {s.labels["reason"]: s.value for m in c.metrics.registry.collect() if m.name == "matching_failures"
                for s in m.samples if s.name.endswith("_total")}
    assert failures == {"wrong-partition": 1.0, "invalid-command": 2.0}


def test_a_refused_command_with_an_owner_gets_a_command_refused_event_for_it(valkey: ValkeyProcess) -> None:
    client = cell_client(RedisEndpoint(url=valkey.url))
    c = conductor(client)
    owned = '{"kind":"place","command_id":"w","pair_id":1,"partition":1,"order":{"order_id":"o-w","side":"buy",' \
            '"order_type":"limit","quantity":1,"price":200,"owner":"t/fsg/C1","client_order_id":"W1"}}'
    client.xadd(KEYS.commands, {"command": owned})  # pair 1 is partition 1's: the wrong stream
    client.xadd(KEYS.commands, {"command": owned.replace('"quantity":1', '"quantity":"one"').replace('"w"', '"q"')})
    client.xadd(KEYS.commands, {"command": '{"kind":"cancel","command_id":"k","pair_id":0,"partition":0,'
                                           '"order_id":7,"owner":"t/fsg/C1","client_order_id":"K1"}'})
    client.xadd(KEYS.commands, {"command": '{"kind":"cancel","owner":"t/fsg/C1"'})  # unreadable: no owner to tell
    run_until_idle(c)
    events = stream_events(client)
    assert [str(e.type) for e in events] == ["command.refused"] * 3
    assert [(e.event_id, e.payload.response_to, e.payload.client_order_id, e.payload.owner) for e in events] == [
        ("w:refused", "place", "W1", "t/fsg/C1"), ("q:refused", "place", "W1", "t/fsg/C1"),
        ("k:refused", "cancel", "K1", "t/fsg/C1")]
    assert events[0].payload.reason.startswith("wrong-partition: command for partition 1")
    assert "Expected `int`, got `str` - at `$.order.quantity`" in events[1].payload.reason
    assert client.xlen(KEYS.commands_dead_letter) == 4 and client.get(KEYS.processed_command("w")) is None
    assert not client.keys("*order*o-w*"), "nothing about the order was written"


def test_acknowledged_commands_past_their_retention_are_trimmed_and_pending_ones_never(valkey: ValkeyProcess) -> None:
    client = cell_client(RedisEndpoint(url=valkey.url))
    c = conductor(client, command_retention_ms=0)
    submit_all(client, [place(f"t{i}", f"o-t{i}") for i in range(5)])
    run_until_idle(c)  # processed and acknowledged; the trim pass runs on the idle turn
    assert client.xlen(KEYS.commands) <= 1, "acknowledged entries are gone (the last delivered one may stay)"
    assert len(stream_events(client)) == 5
    # Delivered but not acknowledged (a conductor that died mid-batch): kept, whatever its age.
    submit_all(client, [place("t-pending", "o-pending")])
    client.xreadgroup("matching-conductor", "conductor", {KEYS.commands: ">"}, count=10)
    submit_all(client, [place("t-unread", "o-unread")])
    assert trim_acknowledged(client, KEYS.commands, keep_ms=0) == 0 or client.xlen(KEYS.commands) >= 2
    ids = [fields[b"command"] for _, fields in client.xrange(KEYS.commands)]
    assert any(b"t-pending" in f for f in ids) and any(b"t-unread" in f for f in ids)
    c._next_trim, c._own_pending = 0.0, True  # as after a restart: its own pending entries first
    run_until_idle(c)
    assert [e.payload.order_id for e in stream_events(client)][-2:] == ["o-pending", "o-unread"], "none lost"


def test_a_long_acknowledged_stretch_is_trimmed_in_bounded_steps(valkey: ValkeyProcess) -> None:
    """A minute of a busy stream is tens of thousands of entries: retention removes them a few
    nodes a call (Valkey serves other clients between the calls), and still exactly up to the
    bound — the last delivered entry stays."""
    from matching.storage import TRIM_STEP

    client = cell_client(RedisEndpoint(url=valkey.url))
    stream, count = "{trim-test}:stream", 5 * TRIM_STEP
    pipe = client.pipeline(transaction=False)
    for i in range(count):
        pipe.xadd(stream, {"n": i})
    ids = pipe.execute()
    client.xgroup_create(stream, "readers", id="0")
    client.xreadgroup("readers", "r", {stream: ">"}, count=count)
    client.xack(stream, "readers", *ids)
    before = client.info("commandstats").get("cmdstat_xtrim", {}).get("calls", 0)
    assert trim_acknowledged(client, stream, keep_ms=0) == count - 1
    assert [entry_id for entry_id, _ in client.xrange(stream)] == [ids[-1]]
    calls = client.info("commandstats")["cmdstat_xtrim"]["calls"] - before
    assert calls >= count // TRIM_STEP + 1, f"{calls} XTRIM calls for {count} entries"


def test_a_different_partition_count_refuses_to_boot(valkey: ValkeyProcess) -> None:
    client = cell_client(RedisEndpoint(url=valkey.url))
    conductor(client)
    with pytest.raises(BootRefused, match="partition count 4 differs from the 2 recorded"):
        Conductor(client, partition=0, partition_count=4, instruments=TEST_INSTRUMENTS,
                  durability=Durability.named("memory")).boot()


@pytest.mark.parametrize("env, message", [
    ({"MATCHING_PARTITION_COUNT": "2", "MATCHING_PARTITION": "2"}, "MATCHING_PARTITION=2 is outside 0..1"),
    ({"MATCHING_PARTITION_COUNT": "0"}, "MATCHING_PARTITION_COUNT=0 must be at least 1"),
    ({"MATCHING_PARTITION_COUNT": "two"}, "is not a whole number"),
])
def test_partition_settings_are_checked_at_import(env: dict, message: str) -> None:
    out = subprocess.run([sys.executable, "-c", "import matching.contracts; print('imported')"],
                         capture_output=True, text=True, env={**env, "PATH": "/usr/bin"})
    assert out.returncode == 2 and "imported" not in out.stdout
    assert message in out.stderr


def test_aof_replicated_refused_with_aof_off(valkey: ValkeyProcess) -> None:
    with pytest.raises(BootRefused, match="AOF is off"):
        conductor(cell_client(RedisEndpoint(url=valkey.url)), durability="aof-replicated")


def test_aof_replicated_refused_without_a_replica(valkey_aof: ValkeyProcess) -> None:
    with pytest.raises(BootRefused, match="confirmed only local=1 replicas=0"):
        Conductor(cell_client(RedisEndpoint(url=valkey_aof.url)), partition=0, partition_count=2,
                  instruments=TEST_INSTRUMENTS, durability=Durability(1, 1, 300)).boot()


def test_stp_mode_is_configurable(valkey: ValkeyProcess) -> None:
    client = cell_client(RedisEndpoint(url=valkey.url))
    flow = p0_flow(21, 400)
    submit_all(client, flow)
    run_until_idle(conductor(client, stp_mode=StpMode.CANCEL_MAKER))
    assert projected(stream_events(client)) == reference_events(flow, "cancel-maker")


# --- poison: one bad command never stops the partition (issue 16) ---------------------------

def place(command_id: str, order_id: str, side: Side = Side.BUY, price: int = 200) -> PlaceOrder:
    return PlaceOrder(command_id, 0, 0, OrderPayload(order_id, side, OrderType.LIMIT, 1, price, owner="t/fsg/C1",
                                                     client_order_id=order_id))


def run_like_the_loop(c: Conductor, max_steps: int = 100) -> None:
    """``Conductor.run`` without the thread: every failure is survived and the step retried."""
    for _ in range(max_steps):
        try:
            if not c.step(block_ms=20):
                return
        except Exception:  # noqa: BLE001 (what run() does with it)
            c.cell = None
    raise AssertionError("conductor never went idle")


def test_a_command_whose_text_cannot_be_stored_is_dead_lettered_and_the_partition_carries_on(
        valkey: ValkeyProcess) -> None:
    client = cell_client(RedisEndpoint(url=valkey.url))
    c = conductor(client)
    poisoned = ('{"kind":"place","command_id":"bad","pair_id":0,"partition":0,"order":{"order_id":"o-bad",'
                '"side":"buy","order_type":"limit","quantity":1,"price":200,"account":"\\udcff\\udcfeACC"}}')
    client.xadd(KEYS.commands, {"command": poisoned})
    submit_all(client, [place("good", "o-good")])
    run_like_the_loop(c)
    dead = client.xrange(KEYS.commands_dead_letter)
    assert len(dead) == 1 and b"invalid utf-16 surrogate pair" in dead[0][1][b"reason"]
    assert dead[0][1][b"command"] == poisoned.encode(), "kept as it came, for an operator to read"
    assert [e.payload.order_id for e in stream_events(client)] == ["o-good"]
    assert client.xpending(KEYS.commands, "matching-conductor")["pending"] == 0, "nothing left to loop on"
    assert client.get(KEYS.processed_command("bad")) is None and c.ready()


def the_cell_fails_on(monkeypatch: pytest.MonkeyPatch, command_id: str) -> list[str]:
    """``Cell.apply`` raises (a domain bug) for ``command_id``; returns every command id applied."""
    from matching.domain import Cell

    real_apply = Cell.apply
    calls: list[str] = []

    def apply(self: Cell, command):  # type: ignore[no-untyped-def]
        calls.append(command.command_id)
        if command.command_id == command_id:
            raise ZeroDivisionError("a domain bug")
        return real_apply(self, command)

    monkeypatch.setattr(Cell, "apply", apply)
    return calls


def staging_fails_on(monkeypatch: pytest.MonkeyPatch, command_id: str) -> None:
    """Staging any batch that holds ``command_id`` raises ValueError (in either commit loop)."""
    import matching.conductor as conductor_module
    import matching.pipeline as pipeline_module

    real = conductor_module.commit_commands

    def commit(keys, staged, *args):  # type: ignore[no-untyped-def]
        if any(s.command_id == command_id for s in staged):
            raise ValueError("cannot stage this one")
        return real(keys, staged, *args)

    monkeypatch.setattr(conductor_module, "commit_commands", commit)
    monkeypatch.setattr(pipeline_module, "commit_commands", commit)


def failures_read_ahead(c: Conductor, error: type[BaseException]) -> list[bool]:
    """For each batch ``c`` fails to stage with ``error``: whether it had been read ahead."""
    failed: list[bool] = []
    original = c._stage

    def stage(entries, lookup, in_flight, **kw):  # type: ignore[no-untyped-def]
        try:
            return original(entries, lookup, in_flight, **kw)
        except error:
            failed.append(kw.get("read_ahead", False))
            raise

    c._stage = stage  # type: ignore[method-assign]
    return failed


def test_a_command_the_cell_fails_on_is_rejected_to_its_owner_and_never_applied_again(
        valkey: ValkeyProcess, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = the_cell_fails_on(monkeypatch, "boom")
    client = cell_client(RedisEndpoint(url=valkey.url))
    c = conductor(client)
    submit_all(client, [place("first", "o-1"), place("boom", "o-boom"), place("last", "o-2", Side.SELL, 201)])
    run_like_the_loop(c)
    events = {(e.payload.order_id, str(e.type)): e.payload for e in stream_events(client)}
    assert events[("o-boom", "order.rejected")].reason == "cell-error"
    assert events[("o-boom", "order.rejected")].owner == "t/fsg/C1", "the owner hears about it"
    assert ("o-1", "order.accepted") in events and ("o-2", "order.accepted") in events
    assert calls.count("boom") == 1, "applied once, refused on the retry"
    assert json.loads(client.get(KEYS.processed_command("boom")))["status"] == "rejected"
    assert client.zcard(KEYS.book(0, Side.BUY)) == 1 and client.zcard(KEYS.book(0, Side.SELL)) == 1
    assert c.ready()


@pytest.mark.parametrize("durability", ["memory", "aof-replicated"])
def test_pipelined_a_command_the_cell_fails_on_in_a_read_ahead_batch_is_rejected_once(
        durability: str, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = the_cell_fails_on(monkeypatch, "boom")
    with primary_with_replica() as (client, _):
        good = [place(f"g{i}", f"o-g{i}") for i in range(9)]
        submit_all(client, [*good[:6], place("boom", "o-boom"), *good[6:]])  # in the third batch: read ahead
        c = conductor(client, durability=durability, batch_size=3)
        failed_ahead = failures_read_ahead(c, PoisonCommand)
        with own_connection(client):
            run_like_the_loop(c)
        assert failed_ahead[0], "the cell first failed on it in a batch read ahead"
        events = {(e.payload.order_id, str(e.type)): e.payload for e in stream_events(client)}
        assert events[("o-boom", "order.rejected")].reason == "cell-error"
        assert all((f"o-g{i}", "order.accepted") in events for i in range(9))
        assert calls.count("boom") == 1, "applied once, refused on the retry"
        assert len(stream_events(client)) == 10, "nothing twice"
        assert c.ready()


@pytest.mark.parametrize("durability", ["memory", "aof-replicated"])
def test_pipelined_a_read_ahead_batch_that_keeps_failing_is_narrowed_and_dead_lettered(
        durability: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch read ahead (XREAD, never delivered to the group) that fails is read again
    through the group and narrowed to the entry at fault as any other: the partition carries on."""
    staging_fails_on(monkeypatch, "stuck")
    with primary_with_replica() as (client, _):
        good = [place(f"g{i}", f"o-g{i}") for i in range(9)]
        submit_all(client, [*good[:6], place("stuck", "o-stuck"), *good[6:]])  # the stuck one: in the third batch
        c = conductor(client, durability=durability, batch_size=3)
        staged_ahead = failures_read_ahead(c, ValueError)
        with own_connection(client):  # as Conductor.run holds it: the pipelined loop
            run_like_the_loop(c)
        assert staged_ahead[0], "the stuck command first failed in a batch read ahead"
        dead = client.xrange(KEYS.commands_dead_letter)
        assert len(dead) == 1 and parse_command(dead[0][1][b"command"]).command_id == "stuck"
        events = stream_events(client)
        assert sorted((e.payload.order_id, str(e.type)) for e in events if str(e.type) != "command.refused") == \
            sorted((f"o-g{i}", "order.accepted") for i in range(9)), "every other command accepted, once"
        c.acknowledge_durable()
        info = client.xinfo_groups(KEYS.commands)[0]
        assert info["pending"] == 0 and info["lag"] == 0 and c.ready()


def test_a_batch_that_keeps_failing_is_narrowed_to_the_entry_at_fault_which_is_dead_lettered(
        valkey: ValkeyProcess, monkeypatch: pytest.MonkeyPatch) -> None:
    staging_fails_on(monkeypatch, "stuck")
    client = cell_client(RedisEndpoint(url=valkey.url))
    c = conductor(client)
    submit_all(client, [place("a", "o-a"), place("stuck", "o-stuck"), place("b", "o-b", Side.SELL, 201)])
    run_like_the_loop(c)
    dead = client.xrange(KEYS.commands_dead_letter)
    assert len(dead) == 1 and b"cannot stage this one" in dead[0][1][b"reason"]
    assert parse_command(dead[0][1][b"command"]).command_id == "stuck", "kept as it came"
    events = stream_events(client)
    assert sorted(e.payload.order_id for e in events if str(e.type) != "command.refused") == ["o-a", "o-b"]
    assert [(e.event_id, e.payload.owner) for e in events if str(e.type) == "command.refused"] == [
        ("stuck:refused", "t/fsg/C1")], "its owner is told"
    assert client.xpending(KEYS.commands, "matching-conductor")["pending"] == 0
    assert c.ready(), "serving again once the entry at fault is set aside"


def test_a_conductor_that_regains_the_lease_processes_what_its_predecessor_left_in_flight(
        valkey: ValkeyProcess) -> None:
    from matching.conductor import CONSUMER, GROUP

    endpoint = RedisEndpoint(url=valkey.url)
    first, second = cell_client(endpoint), cell_client(endpoint)
    b = conductor(second, lease_ttl_ms=300)
    assert b.step(block_ms=10) == 0 and b.has_lease  # b held the lease once, and found nothing pending
    time.sleep(0.4)  # ...then stalled past its lease
    a = conductor(first, lease_ttl_ms=300)
    assert a.step(block_ms=10) == 0 and a.has_lease
    submit_all(first, [place("in-flight", "o-flight")])
    # a reads the command (it is now pending in the group) and stalls before committing it
    assert first.xreadgroup(GROUP, CONSUMER, {KEYS.commands: ">"}, count=10)
    time.sleep(0.4)
    assert b.step(block_ms=10) == 1, "b, taking the lease again, processes the pending command first"
    assert [e.payload.order_id for e in stream_events(first)] == ["o-flight"]
    assert first.xpending(KEYS.commands, GROUP)["pending"] == 0


def test_after_a_failed_read_the_conductor_takes_its_own_pending_entries_first(valkey: ValkeyProcess) -> None:
    """A read of new entries whose reply is lost (a dropped connection, a failover) has moved
    them into the conductor's pending list; they must come before anything newer — never
    skipped by a read of the entries after them."""
    from redis.exceptions import RedisError

    from matching.conductor import CONSUMER, GROUP

    client = cell_client(RedisEndpoint(url=valkey.url))
    c = conductor(client, lease_ttl_ms=60_000)
    assert c.step(block_ms=10) == 0  # serving, nothing of its own pending
    submit_all(client, [place("lost-reply", "o-lost"), place("after-it", "o-after", side=Side.SELL, price=300)])
    # The delivery of the first entry to the conductor, whose reply never reached it:
    assert valkey.client().xreadgroup(GROUP, CONSUMER, {KEYS.commands: ">"}, count=1)
    valkey.pause()  # ...and the conductor's next read fails (socket timeout)
    try:
        with pytest.raises(RedisError):
            c.step(block_ms=10)
    finally:
        valkey.resume()
    run_until_idle(c)
    assert [e.payload.order_id for e in stream_events(client)] == ["o-lost", "o-after"]
    assert client.xpending(KEYS.commands, GROUP)["pending"] == 0


def test_ready_needs_the_lease_and_a_loop_that_turns(valkey: ValkeyProcess) -> None:
    c = conductor(cell_client(RedisEndpoint(url=valkey.url)))
    assert not c.ready(), "no lease yet"
    c.step(block_ms=10)
    assert c.ready()
    c.heartbeat = time.monotonic() - 60  # the loop stopped turning (stuck in a call, or dead)
    assert not c.ready()


def test_aof_replicated_acknowledges_each_batch_once_a_replica_confirmed_it() -> None:
    with primary_with_replica() as (client, replica):
        flow = p0_flow(23, 300)
        submit_all(client, flow)
        c = conductor(client, durability="aof-replicated", batch_size=40)
        run_until_idle(c)
        assert projected(stream_events(client)) == reference_events(flow)
        info = client.xinfo_groups(KEYS.commands)[0]
        assert (info["pending"], info["entries-read"]) == (0, len(flow)), "every batch acknowledged"
        assert projected(stream_events(replica.client())) == reference_events(flow), "and held by the replica"


def test_aof_replicated_acknowledges_a_durable_batch_with_the_next_read_or_on_stop() -> None:
    """With appendfsync always, every round trip that writes waits for an fsync: the batch's XACK
    rides with the next read instead of costing one of its own, and a clean stop sends it."""
    with primary_with_replica() as (client, replica):
        flow = p0_flow(29, 120)
        submit_all(client, flow[:40])
        c = conductor(client, durability="aof-replicated", batch_size=40)
        c.step(block_ms=10)
        pending = lambda: client.xinfo_groups(KEYS.commands)[0]["pending"]  # noqa: E731
        assert pending() == 40, "durable, acknowledged with the next read"
        submit_all(client, flow[40:])
        assert c.step(block_ms=10) == 40 and pending() == 40, "the first batch acknowledged, the second waits"
        c.acknowledge_durable()
        assert pending() == 0, "a clean stop acknowledges it"


# --- the pipelined loop (Conductor.run holds a connection of its own: batch k+1 is read and
# matched while batch k's transaction is on its way) ---------------------------------------


@pytest.mark.parametrize("durability", ["memory", "aof-replicated"])
def test_pipelined_random_flows_match_the_reference_with_batches_in_flight(durability: str) -> None:
    with primary_with_replica() as (client, replica):
        flow = p0_flow(31, 1500)
        submit_all(client, flow)
        c = conductor(client, durability=durability, batch_size=37)
        staged = []
        original = c._step_pipelined

        def step(*args):  # type: ignore[no-untyped-def]
            n = original(*args)
            staged.append(c._next_batch is not None)
            return n

        c._step_pipelined = step  # type: ignore[method-assign]
        pipelined(c)
        assert sum(staged) > 5, "batches were matched while the one before was committed"
        assert projected(stream_events(client)) == reference_events(flow)
        info = client.xinfo_groups(KEYS.commands)[0]
        assert (info["pending"], info["entries-read"], info["lag"]) == (0, len(flow), 0), \
            "every batch acknowledged or moved past, and the group's count exact for XINFO's lag"


def test_pipelined_gives_the_same_events_state_and_records_as_one_batch_at_a_time() -> None:
    from datastore.embedded import standalone

    flow = p0_flow(13, 800)
    results = []
    for run in (run_until_idle, pipelined):
        with standalone() as server:
            client = cell_client(RedisEndpoint(url=server.url))
            submit_all(client, flow)
            run(conductor(client, batch_size=50))
            events = [(e.event_id, e.type, e.payload) for e in stream_events(client)]
            processed = {k: client.get(k) for k in client.scan_iter(KEYS.processed_command("*"))}
            results.append((events, book_state(client), processed))
    assert results[0] == results[1]


def test_pipelined_a_command_repeated_in_the_next_batch_is_a_duplicate(valkey: ValkeyProcess) -> None:
    """Batch k+1's dedup reads may run before batch k's EXEC: k's commands count as processed."""
    client = cell_client(RedisEndpoint(url=valkey.url))
    flow = p0_flow(17, 120)[:40]
    submit_all(client, flow[:20])
    submit_all(client, flow[:20])  # the same commands again (a gateway resending): batch 2
    submit_all(client, flow[20:])
    c = conductor(client, batch_size=20)
    pipelined(c)
    assert projected(stream_events(client)) == reference_events(flow)
    assert c.metrics.duplicate_commands._value.get() == 20


@contextmanager
def a_staged_batch(client: Any, seed: int, **kw: Any) -> Iterator[tuple[Conductor, list]]:
    """A pipelined conductor with its third batch matched and staged, not yet committed."""
    flow = p0_flow(seed, 400)[:120]
    submit_all(client, flow)
    c = conductor(client, batch_size=40, **kw)
    with own_connection(client):
        c.step(block_ms=10)  # the first batch, one at a time (own pending was read first)
        assert c.step(block_ms=10) == 40 and c._next_batch is not None, "the second committed, the third staged"
        yield c, flow


def test_pipelined_a_batch_read_ahead_is_delivered_only_by_its_commit(valkey: ValkeyProcess) -> None:
    """The read-ahead is a plain XREAD past the batch in flight: nothing is delivered to the group
    (no pending entry, no fsync or replication of one) until the batch's own transaction moves
    the group's cursor; a conductor that dies with it staged leaves it to its successor."""
    client = cell_client(RedisEndpoint(url=valkey.url))
    with a_staged_batch(client, 23) as (c, flow):
        staged = c._next_batch
        assert staged is not None and staged.read_ahead
        info = client.xinfo_groups(KEYS.commands)[0]
        second = client.xrange(KEYS.commands, count=80)[-1][0]
        assert (info["pending"], info["last-delivered-id"], info["entries-read"]) == (0, second, 80), \
            "the staged third batch is not delivered"
        c.lease._valid_until = 0  # it dies with the batch staged; its lease runs out
        client.delete(KEYS.conductor_lease)
    successor = conductor(client, batch_size=40)
    run_until_idle(successor)
    assert projected(stream_events(client)) == reference_events(flow)
    info = client.xinfo_groups(KEYS.commands)[0]
    assert (info["pending"], info["entries-read"], info["lag"]) == (0, 120, 0)


def test_pipelined_a_transaction_that_failed_to_go_out_is_never_sent_again(valkey: ValkeyProcess) -> None:
    """Batch k's transaction leaves with k+1's dedup read; if sending it fails, the step fails
    with it instead of sending it again (redis-py would reconnect without the fencing WATCH), and
    the batches are read again and committed once."""
    from redis.exceptions import ConnectionError as RedisConnectionError

    client = cell_client(RedisEndpoint(url=valkey.url))
    flow = p0_flow(37, 600)[:200]
    submit_all(client, flow)
    c = conductor(client, batch_size=40)
    original = c._send_commit
    calls: list[int] = []

    def send_commit(conn, batch):  # type: ignore[no-untyped-def]
        calls.append(len(batch.entries))
        if len(calls) == 2:  # the second pipelined turn: k staged, k+1 read ahead
            conn.disconnect()
            raise RedisConnectionError("the socket broke while sending")
        return original(conn, batch)

    c._send_commit = send_commit  # type: ignore[method-assign]
    with own_connection(client):
        c.step(block_ms=10)  # own pending first: one batch at a time
        c.step(block_ms=10)  # commits the second batch, stages the third
        assert c._next_batch is not None
        with pytest.raises(RedisConnectionError):
            c.step(block_ms=10)
        assert len(calls) == 2, "not sent a second time"
        run_until_idle(c)
    assert projected(stream_events(client)) == reference_events(flow)
    assert c.metrics.duplicate_commands._value.get() == 0, "the failed transaction never landed"
    info = client.xinfo_groups(KEYS.commands)[0]
    assert (info["pending"], info["lag"]) == (0, 0)


def test_the_mirror_is_rebuilt_through_the_loops_own_connection(valkey: ValkeyProcess) -> None:
    """What the mirror is built from comes from the node the commits go to: in a failover a
    pooled connection can reach another node (a restarted old primary) than the loop's own."""
    client = cell_client(RedisEndpoint(url=valkey.url))
    flow = p0_flow(41, 300)[:100]
    submit_all(client, flow)
    first = conductor(client, batch_size=30)
    run_until_idle(first)
    first.release()
    c = conductor(client, batch_size=30)
    assert c.try_lease()
    with own_connection(client):
        pool = standalone_pool(client)

        def no_pool(*args, **kw):  # type: ignore[no-untyped-def]
            raise AssertionError("the rebuild took a pooled connection")

        original, pool.get_connection = pool.get_connection, no_pool
        try:
            c.rebuild()
        finally:
            pool.get_connection = original
    assert c.cell is not None
    stored = {o.order_id: o for entries in book_state(client).values() for _, o in entries}
    assert stored and {oid: o for b in c.cell.books.values() for oid, o in b.orders.items()} == stored


def test_pipelined_a_read_ahead_that_reached_another_node_is_not_used(valkey: ValkeyProcess) -> None:
    """If the second connection reached another node than the commits go to, its entries and
    dedup records are not used: the step fails, and the batches are read again on the right node."""
    from redis.exceptions import ConnectionError as RedisConnectionError

    from datastore.embedded import standalone

    client = cell_client(RedisEndpoint(url=valkey.url))
    flow = p0_flow(43, 600)[:200]
    submit_all(client, flow)
    c = conductor(client, batch_size=40)
    with standalone() as elsewhere, own_connection(client):
        stale = cell_client(RedisEndpoint(url=elsewhere.url))
        submit_all(stale, flow)  # the same stream, but none of the records
        c.step(block_ms=10)  # own pending first: one batch at a time
        c._reader = new_connection(stale)
        with pytest.raises(RedisConnectionError, match="the read-ahead reached"):
            c.step(block_ms=10)
        c._reader.disconnect()
        c._reader = None
        run_until_idle(c)
    assert projected(stream_events(client)) == reference_events(flow)
    assert c.metrics.duplicate_commands._value.get() == 0


def test_pipelined_a_takeover_while_a_batch_is_staged_fences_its_commit(valkey: ValkeyProcess) -> None:
    client = cell_client(RedisEndpoint(url=valkey.url))
    other = cell_client(RedisEndpoint(url=valkey.url))
    with a_staged_batch(client, 19, lease_ttl_ms=400) as (a, flow):
        other.delete(KEYS.conductor_lease)  # a's lease ran out while it was matched
        successor = conductor(other, batch_size=40)
        assert successor.try_lease()
        a.lease._valid_until += 10  # a still believes it holds the lease
        # and its renewal is not due (on a slow machine the set-up can outlast renew_s; the
        # renewal would then find the successor first and stand down without a commit)
        a.lease._renewed_at = time.monotonic()
        with pytest.raises(LeaseLost):
            a.step(block_ms=10)  # its WATCH, taken right after the first batch's EXEC, fails the second's
    assert not a.has_lease
    run_until_idle(successor)
    assert projected(stream_events(client)) == reference_events(flow)
    assert successor.metrics.duplicate_commands._value.get() == 0, "the staged batch was never written"


def test_pipelined_our_own_renewal_does_not_fence_the_staged_batch(valkey: ValkeyProcess) -> None:
    client = cell_client(RedisEndpoint(url=valkey.url))
    with a_staged_batch(client, 23) as (c, flow):
        c.lease._renewed_at -= c.lease.renew_s  # a renewal is due: PEXPIRE on the key the batch WATCHes
        assert c.step(block_ms=10) == 40 and c.has_lease
    assert projected(stream_events(client)) == reference_events(flow)


def test_pipelined_a_clean_stop_commits_the_staged_batch(valkey: ValkeyProcess) -> None:
    client = cell_client(RedisEndpoint(url=valkey.url))
    with a_staged_batch(client, 29) as (c, flow):
        c.finish()
    assert projected(stream_events(client)) == reference_events(flow)
    assert client.xpending(KEYS.commands, "matching-conductor")["pending"] == 0


def test_pipelined_dedup_counts_the_batch_in_flight_as_processed(valkey: ValkeyProcess) -> None:
    """The race the pipelined loop allows, forced: batch k+1's dedup reads ran before batch k's
    EXEC, so they found no records; k's command ids and accepted orders still make k+1's
    repeats duplicates, and nothing of them is applied twice."""
    from matching.conductor import Batch

    client = cell_client(RedisEndpoint(url=valkey.url))
    c = conductor(client)
    assert c.try_lease()
    c.rebuild()
    flow = [cmd for cmd in p0_flow(37, 200) if isinstance(cmd, PlaceOrder)][:6]
    # in flight: the first three commands, and (under another command id) the fourth's order
    in_flight = Batch([], flow[:3], [], {cmd.command_id for cmd in flow[:3]},
                       {flow[3].order.order_id: b"an-earlier-command"})
    staged = c._match(flow, [None] * (2 * len(flow)), in_flight)  # the reads saw none of it
    assert c.metrics.duplicate_commands._value.get() == 3
    assert [(s.command_id, s.result.status) for s in staged][0] == (flow[3].command_id, "duplicate-order")
    assert [s.command_id for s in staged[1:]] == [cmd.command_id for cmd in flow[4:]]
