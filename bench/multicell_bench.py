"""Multi-cell scaling (seed 000's own pass bar): one cell vs two, the same total command stream.

A cell is a partition's Valkey plus its conductor, pinned together to one core
(``os.sched_setaffinity``): its CPU budget. One cell (``MATCHING_PARTITION_COUNT=1``) takes the
whole stream on core 0; two cells (count 2) take half each, on cores 0 and 1. The stream is
random limit/market/IOC/FOK/cancel/replace flow over four pairs, pre-filled before the
conductors start; throughput is commands / wall time until every command is processed.

Afterwards, per partition: the events equal the reference matcher's, event for event (so no
order matched twice and no fill lost), and ``reconcile`` finds every book clean.

    .venv/bin/python bench/multicell_bench.py [--commands 20000] [--batch 100]

Not done here (see the README): the same run with a forced Sentinel failover of one
partition's primary in aof-replicated mode.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sys
import time
from dataclasses import replace
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from matching.conductor import Conductor, submit  # noqa: E402
from matching.config import Durability  # noqa: E402
from matching.contracts import CancelOrder, Command, PlaceOrder, ReplaceOrder, partition_of  # noqa: E402
from matching.instruments import Instrument  # noqa: E402
from matching.keys import PartitionKeys  # noqa: E402
from matching.storage import reconcile  # noqa: E402
from sessionstore.connection import connect  # noqa: E402
from sessionstore.embedded import standalone  # noqa: E402
from sessionstore.settings import RedisEndpoint  # noqa: E402
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
        order = replace(cmd.order, order_id=f"{prefix}{cmd.order.order_id}")
        return replace(cmd, order=order, **route)
    assert isinstance(cmd, CancelOrder | ReplaceOrder)
    return replace(cmd, order_id=f"{prefix}{cmd.order_id}", **route)


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
    client = connect(RedisEndpoint(url=url, socketTimeout="10s", pool={"maxTotal": 1, "maxIdle": 1}))
    c = Conductor(client, partition=partition, partition_count=partition_count, instruments=INSTRUMENTS,
                  durability=Durability.named("memory"), batch_size=batch)
    c.boot()
    c.try_lease()
    c.rebuild()
    started = time.perf_counter()
    done = 0
    while done < expected:
        done += c.step(block_ms=100)
    out.put((partition, started, time.perf_counter(), done))


def run(cells: int, n: int, batch: int) -> tuple[float, list[str]]:
    """Throughput of ``cells`` cells over the same stream, and the invariant violations found."""
    commands = stream(n, cells)
    servers = [standalone(name=f"cell{p}").start() for p in range(cells)]
    try:
        for core, server in enumerate(servers):
            pin(server.proc.pid, core)  # type: ignore[union-attr]
        per_partition: dict[int, list[Command]] = {p: [] for p in range(cells)}
        for cmd in commands:
            per_partition[cmd.partition].append(cmd)
        for p, cmds in per_partition.items():
            client = servers[p].client()
            pipe = client.pipeline(transaction=False)
            for cmd in cmds:
                submit(pipe, cmd, cells)  # type: ignore[arg-type]
            pipe.execute()
        results: mp.Queue = mp.Queue()  # type: ignore[type-arg]
        procs = [mp.Process(target=run_conductor, args=(servers[p].url, p, cells, len(per_partition[p]), batch, p,
                                                          results)) for p in range(cells)]
        for proc in procs:
            proc.start()
        done = [results.get(timeout=600) for _ in procs]
        for proc in procs:
            proc.join()
        wall = max(end for _, _, end, _ in done) - min(start for _, start, _, _ in done)
        problems = []
        checked = 0
        for p, cmds in per_partition.items():
            client = servers[p].client()
            ref = ReferenceMatcher({k: v for k, v in INSTRUMENTS.items() if partition_of(k, cells) == p},
                                   "cancel-taker")
            expected = [e for cmd in cmds for e in ref.apply(cmd)]
            if projected(stream_events(client, p)) != expected:
                problems.append(f"partition {p}: events differ from the reference matcher")
            checked += len(expected)
            for pair in INSTRUMENTS:
                if partition_of(pair, cells) == p:
                    issues = reconcile(client, PartitionKeys(p), pair)["issues"]
                    problems += [f"partition {p} pair {pair}: {i}" for i in issues]
        return sum(d for *_, d in done) / wall, problems or [f"clean ({checked} events = reference)"]
    finally:
        for server in servers:
            server.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--commands", type=int, default=20000)
    ap.add_argument("--batch", type=int, default=100)
    args = ap.parse_args()
    one, problems_one = run(1, args.commands, args.batch)
    two, problems_two = run(2, args.commands, args.batch)
    print(f"\n{args.commands} commands over 4 pairs; a cell = a partition's Valkey + conductor pinned to one core "
          f"({os.cpu_count()} cores here); memory durability\n")
    print(f"{'cells':28} {'commands/s':>11} {'vs one cell':>12}  invariants")
    print(f"{'1 cell  (partition count 1)':28} {one:11.0f} {'1.00x':>12}  {'; '.join(problems_one)}")
    print(f"{'2 cells (partition count 2)':28} {two:11.0f} {two / one:11.2f}x  {'; '.join(problems_two)}")
    print("\nseed 000's pass bar: 2 cells ≥ 1.5× one cell, zero invariant violations.")


if __name__ == "__main__":
    main()
