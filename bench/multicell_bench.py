"""Multi-cell scaling (seed 000's own pass bar): one cell vs two, the same total command stream.

A cell is a partition's Valkey plus its conductor, pinned together to one core
(``os.sched_setaffinity``): its CPU budget. One cell (``MATCHING_PARTITION_COUNT=1``) takes the
whole stream on core 0; two cells (count 2) take half each, on cores 0 and 1. The stream is
random limit/market/IOC/FOK/cancel/replace flow over four pairs, pre-filled before the
conductors start; throughput is commands / wall time until every command is processed.

Afterwards, per partition: the events equal the reference matcher's, event for event (so no
order matched twice and no fill lost), and ``reconcile`` finds every book clean.

Then the two-cell run again in ``aof-replicated`` mode, each partition a Sentinel group
(primary + replica with ``appendfsync always``, three Sentinels), and partition 0's primary
SIGKILLed once a third of its commands are processed: Sentinel promotes the replica, the
conductor reconnects through Sentinel and carries on, the old primary returns as a replica.
The same invariants are checked afterwards, and every command has exactly one
processed-command record.

    .venv/bin/python bench/multicell_bench.py [--commands 20000] [--batch 100] [--failover-commands 6000]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sys
import threading
import time
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import msgspec  # noqa: E402

from datastore.connection import connect, own_connection  # noqa: E402
from datastore.embedded import SentinelGroup, standalone  # noqa: E402
from datastore.settings import RedisEndpoint  # noqa: E402
from matching.conductor import Conductor  # noqa: E402
from matching.config import Durability, tune_gc  # noqa: E402
from matching.contracts import CancelOrder, Command, PlaceOrder, ReplaceOrder, partition_of  # noqa: E402
from matching.instruments import Instrument  # noqa: E402
from matching.keys import PartitionKeys  # noqa: E402
from matching.producer import submit  # noqa: E402
from matching.storage import reconcile  # noqa: E402
from tests.cell_helpers import projected, stream_events  # noqa: E402
from tests.flows import random_flow  # noqa: E402
from tests.reference_matcher import ReferenceMatcher  # noqa: E402

PAIRS = (0, 1, 2, 3)  # with two partitions: 0, 2 → p0; 1, 3 → p1
INSTRUMENTS = {p: Instrument(f"P{p}", p, Decimal("0.5"), Decimal("1"), Decimal("1"), Decimal("50"),
                             Decimal("90"), Decimal("110")) for p in PAIRS}


def renamed(cmd: Command, prefix: str, pair_shift: int, partition_count: int) -> Command:
    """``cmd`` on pair + ``pair_shift`` with ids of its own, routed for ``partition_count``."""
    pair = cmd.pair_id + pair_shift
    route = {"command_id": f"{prefix}{cmd.command_id}", "pair_id": pair, "partition": partition_of(pair, partition_count)}
    if isinstance(cmd, PlaceOrder):
        order = msgspec.structs.replace(cmd.order, order_id=f"{prefix}{cmd.order.order_id}")
        return msgspec.structs.replace(cmd, order=order, **route)
    assert isinstance(cmd, CancelOrder | ReplaceOrder)
    return msgspec.structs.replace(cmd, order_id=f"{prefix}{cmd.order_id}", **route)


def stream(n: int, partition_count: int) -> list[Command]:
    """The same total flow for any partition count: two random flows on pairs {0, 2} and {1, 3}, interleaved."""
    a = [renamed(c, "a", 0, partition_count) for c in random_flow(7, n // 2)]
    b = [renamed(c, "b", 1, partition_count) for c in random_flow(8, n // 2)]
    return [c for pair in zip(a, b, strict=True) for c in pair]


def pin(pid: int, core: int) -> None:
    if hasattr(os, "sched_setaffinity") and core < (os.cpu_count() or 1):
        os.sched_setaffinity(pid, {core})


def run_conductor(url: str, partition: int, partition_count: int, expected: int, batch: int, core: int,
                  out: mp.Queue) -> None:  # type: ignore[type-arg]
    pin(0, core)
    tune_gc()  # as a cell process does
    client = connect(RedisEndpoint(url=url, socketTimeout="10s", pool={"maxTotal": 1, "maxIdle": 1}))
    c = Conductor(client, partition=partition, partition_count=partition_count, instruments=INSTRUMENTS,
                  durability=Durability.named("memory"), batch_size=batch)
    c.boot()
    c.try_lease()
    c.rebuild()
    started = time.perf_counter()
    done = 0
    with own_connection(client):  # as Conductor.run holds it
        while done < expected:
            done += c.step(block_ms=100)
    out.put((partition, started, time.perf_counter(), done))


def split(commands: list[Command], cells: int) -> dict[int, list[Command]]:
    per_partition: dict[int, list[Command]] = {p: [] for p in range(cells)}
    for cmd in commands:
        per_partition[cmd.partition].append(cmd)
    return per_partition


def fill(client, cmds: list[Command], cells: int) -> None:  # type: ignore[no-untyped-def]
    pipe = client.pipeline(transaction=False)
    for cmd in cmds:
        submit(pipe, cmd, cells)
    pipe.execute()


def check(clients: dict, per_partition: dict[int, list[Command]], cells: int) -> tuple[list[str], int]:  # type: ignore[type-arg]
    """Invariant violations per partition: events ≠ reference matcher, an unclean book, a command
    without (or with more than) one processed-command record."""
    problems: list[str] = []
    checked = 0
    for p, cmds in per_partition.items():
        client = clients[p]
        ref = ReferenceMatcher({k: v for k, v in INSTRUMENTS.items() if partition_of(k, cells) == p}, "cancel-taker")
        expected = [e for cmd in cmds for e in ref.apply(cmd)]
        if projected(stream_events(client, p)) != expected:
            problems.append(f"partition {p}: events differ from the reference matcher")
        checked += len(expected)
        keys = PartitionKeys(p)
        records = sum(1 for _ in client.scan_iter(keys.processed_command("*"), count=1000))
        if records != len({c.command_id for c in cmds}):
            problems.append(f"partition {p}: {records} processed-command records for {len(cmds)} commands")
        for pair in INSTRUMENTS:
            if partition_of(pair, cells) == p:
                issues = reconcile(client, keys, pair)["issues"]
                problems += [f"partition {p} pair {pair}: {i}" for i in issues]
    return problems, checked


def run(cells: int, n: int, batch: int) -> tuple[float, list[str]]:
    """Throughput of ``cells`` cells over the same stream, and the invariant violations found."""
    commands = stream(n, cells)
    servers = [standalone(name=f"cell{p}").start() for p in range(cells)]
    try:
        for core, server in enumerate(servers):
            pin(server.proc.pid, core)  # type: ignore[union-attr]
        per_partition = split(commands, cells)
        for p, cmds in per_partition.items():
            fill(servers[p].client(), cmds, cells)
        results: mp.Queue = mp.Queue()  # type: ignore[type-arg]
        procs = [mp.Process(target=run_conductor, args=(servers[p].url, p, cells, len(per_partition[p]), batch, p,
                                                          results)) for p in range(cells)]
        for proc in procs:
            proc.start()
        done = [results.get(timeout=600) for _ in procs]
        for proc in procs:
            proc.join()
        wall = max(end for _, _, end, _ in done) - min(start for _, start, _, _ in done)
        problems, checked = check({p: servers[p].client() for p in range(cells)}, per_partition, cells)
        return sum(d for *_, d in done) / wall, problems or [f"clean ({checked} events = reference)"]
    finally:
        for server in servers:
            server.stop()


def sentinel_endpoint(group: SentinelGroup, **more: object) -> RedisEndpoint:
    return RedisEndpoint(sentinels=group.sentinel_addresses, sentinelGroup=group.group, maxAttempts=40,
                         connectionTimeout="500ms", **more)  # type: ignore[arg-type]


def drained(client, keys: PartitionKeys) -> bool:  # type: ignore[no-untyped-def]
    """Every command of the partition's stream delivered to the conductor and acknowledged."""
    try:
        info = client.xinfo_groups(keys.commands)[0]
        return bool(info["pending"] == 0
                    and info["last-delivered-id"] == client.xinfo_stream(keys.commands)["last-generated-id"])
    except Exception:  # noqa: BLE001 (mid-failover: not yet)
        return False


def run_conductor_loop(sentinels: list[str], group: str, partition: int, partition_count: int, batch: int,
                       core: int, out: mp.Queue) -> None:  # type: ignore[type-arg]
    """The conductor's own loop (it rides out the failover), until its stream is drained."""
    pin(0, core)
    tune_gc()
    endpoint = RedisEndpoint(sentinels=sentinels, sentinelGroup=group, maxAttempts=40, connectionTimeout="500ms",
                             socketTimeout="10s", pool={"maxTotal": 1, "maxIdle": 1})  # type: ignore[arg-type]
    c = Conductor(connect(endpoint), partition=partition, partition_count=partition_count, instruments=INSTRUMENTS,
                  durability=Durability.named("aof-replicated"), batch_size=batch)
    c.boot()
    observer = connect(endpoint.model_copy(update={"pool": endpoint.pool.model_copy(update={"maxTotal": 4})}))
    stop = threading.Event()
    loop = threading.Thread(target=c.run, args=(stop,), kwargs={"block_ms": 50})
    started = time.perf_counter()
    loop.start()
    while not drained(observer, PartitionKeys(partition)):
        time.sleep(0.01)
    out.put((partition, started, time.perf_counter(), 0))
    stop.set()
    loop.join(30)


def run_failover(n: int, batch: int) -> tuple[float, float, list[str]]:
    """Two cells in aof-replicated mode; partition 0's primary is killed a third of the way in.
    Returns throughput, seconds from the kill to the promoted primary, and the violations found."""
    cells = 2
    commands = stream(n, cells)
    per_partition = split(commands, cells)
    groups = [SentinelGroup(f"mc-p{p}", aof=True, appendfsync="always") for p in range(cells)]
    try:
        for core, group in enumerate(groups):
            group.start()
            for server in (group.primary, group.replica):
                pin(server.proc.pid, core)  # type: ignore[union-attr]
            client = connect(sentinel_endpoint(group))
            fill(client, per_partition[core], cells)
            client.execute_command("WAIT", 1, 5000)
        results: mp.Queue = mp.Queue()  # type: ignore[type-arg]
        procs = [mp.Process(target=run_conductor_loop, args=(g.sentinel_addresses, g.group, p, cells, batch, p,
                                                               results)) for p, g in enumerate(groups)]
        for proc in procs:
            proc.start()
        watch = connect(sentinel_endpoint(groups[0]))
        target = len(per_partition[0]) // 3
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            try:
                if int(watch.xinfo_groups(PartitionKeys(0).commands)[0].get("entries-read") or 0) >= target:
                    break
            except Exception:  # noqa: BLE001
                pass
            time.sleep(0.005)
        old = groups[0].primary if groups[0].current_primary()[1] == groups[0].primary.port else groups[0].replica
        killed = time.perf_counter()
        groups[0].kill_primary_and_wait_failover(timeout=60)
        promoted = time.perf_counter() - killed
        old.restart()  # back as a replica of the new primary (Sentinel reconfigures it)
        done = [results.get(timeout=600) for _ in procs]
        for proc in procs:
            proc.join(60)
        wall = max(end for _, _, end, _ in done) - min(start for _, start, _, _ in done)
        problems, checked = check({p: connect(sentinel_endpoint(g)) for p, g in enumerate(groups)}, per_partition,
                                  cells)
        return len(commands) / wall, promoted, problems or [f"clean ({checked} events = reference)"]
    finally:
        for group in groups:
            group.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--commands", type=int, default=20000)
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--failover-commands", type=int, default=6000, help="commands in the failover run (0: skip it)")
    args = ap.parse_args()
    one, problems_one = run(1, args.commands, args.batch)
    two, problems_two = run(2, args.commands, args.batch)
    print(f"\n{args.commands} commands over 4 pairs; a cell = a partition's Valkey + conductor pinned to one core "
          f"({os.cpu_count()} cores here); memory durability\n")
    print(f"{'cells':28} {'commands/s':>11} {'vs one cell':>12}  invariants")
    print(f"{'1 cell  (partition count 1)':28} {one:11.0f} {'1.00x':>12}  {'; '.join(problems_one)}")
    print(f"{'2 cells (partition count 2)':28} {two:11.0f} {two / one:11.2f}x  {'; '.join(problems_two)}")
    if args.failover_commands:
        rate, promoted, problems = run_failover(args.failover_commands, args.batch)
        print(f"\n2 cells, aof-replicated (Sentinel groups, appendfsync always, WAITAOF 1 1), partition 0's primary "
              f"SIGKILLed a third of the way in; promoted after {promoted:.1f} s:")
        print(f"{'2 cells with failover':28} {rate:11.0f} {'':>12}  {'; '.join(problems)}")
    print("\nseed 000's pass bar: 2 cells ≥ 1.5× one cell, zero invariant violations (failover run included).")


if __name__ == "__main__":
    main()
