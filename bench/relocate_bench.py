"""How long a relocation freezes a partition, by the size of its book.

A partition with N resting orders (a real conductor made them, delivering its events directly
to an inbox, as ``fixgw up`` runs it) is moved to a second Valkey by ``matching.relocation``
while its conductor runs, standing down when it sees the marker as a cell process does. Printed
per N: the partition's keys, how long orders to it were refused (the freeze: from the marker to
the switch), and the whole relocation; the ratio is the freeze against the time to copy the
partition's keys alone (DUMP + RESTORE, measured in the same run: the floor of any
stop-and-copy).

    .venv/bin/python bench/relocate_bench.py [--orders 1000 10000 100000]
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from datastore.embedded import standalone  # noqa: E402
from matching.conductor import Conductor  # noqa: E402
from matching.config import Durability  # noqa: E402
from matching.contracts import OrderPayload, OrderType, PlaceOrder, Side, TimeInForce, command_json  # noqa: E402
from matching.keys import PartitionKeys  # noqa: E402
from matching.outbox import owner_routes  # noqa: E402
from matching.partition_copy import partition_key_names  # noqa: E402
from matching.relocation import Relocation, cell_must_stand_down  # noqa: E402
from tests.flows import TEST_INSTRUMENTS  # noqa: E402

KEYS = PartitionKeys(0)  # pairs 0 and 2 of TEST_INSTRUMENTS: partition 0 of 2


def resting(n: int) -> list[PlaceOrder]:
    """``n`` orders that never cross: sells above the band's middle, buys below it."""
    out = []
    for i in range(n):
        sell = i % 2 == 0
        price = 205 + i % 4 if sell else 192 + i % 4
        order = OrderPayload(f"r{i}", Side.SELL if sell else Side.BUY, OrderType.LIMIT, 1, price, TimeInForce.GTC,
                             account="bench", owner="bench/fsg/B", client_order_id=f"r{i}")
        out.append(PlaceOrder(f"c{i}", (0, 2)[i % 2], 0, order))
    return out


def populate(client, commands: list[PlaceOrder]) -> Conductor:  # type: ignore[no-untyped-def]
    c = Conductor(client, partition=0, partition_count=2, instruments=TEST_INSTRUMENTS,
                  durability=Durability.named("memory"), inboxes=owner_routes(lambda owner: "bench-inbox"),
                  batch_size=500)
    c.boot()
    for i in range(0, len(commands), 1000):
        pipe = client.pipeline(transaction=False)
        for cmd in commands[i:i + 1000]:
            pipe.xadd(KEYS.commands, {"command": command_json(cmd)})
        pipe.execute()
    while c.step(block_ms=50):
        pass
    return c


def copy_floor(source, target, names: list[str]) -> float:  # type: ignore[no-untyped-def]
    """DUMP + RESTORE of every key, 200 a round trip: what a stop-and-copy cannot go below."""
    started = time.perf_counter()
    for i in range(0, len(names), 200):
        batch = names[i:i + 200]
        read = source.pipeline(transaction=False)
        for name in batch:
            read.dump(name)
        write = target.pipeline(transaction=False)
        for name, payload in zip(batch, read.execute()):
            if payload is not None:
                write.restore(name, 0, payload, replace=True)
        write.execute()
    elapsed = time.perf_counter() - started
    target.flushall()
    return elapsed


def one(n: int) -> tuple[int, float, float, float]:
    with standalone() as source, standalone() as target:
        client = source.client()
        c = populate(client, resting(n))
        names = partition_key_names(client, KEYS)
        floor = copy_floor(client, target.client(), names)
        stop = threading.Event()

        def stand_down_on_the_marker() -> None:
            while not stop.wait(0.05):
                if cell_must_stand_down(client, KEYS) is not None:
                    stop.set()

        cell = threading.Thread(target=c.run, args=(stop,), kwargs={"block_ms": 50})
        watch = threading.Thread(target=stand_down_on_the_marker)
        cell.start()
        watch.start()
        said: list[str] = []
        started = time.perf_counter()
        Relocation(0, client, target.client(), client, "bench", source.url, target.url, [0, 2], say=said.append,
                   timeout_s=300).run()
        total = time.perf_counter() - started
        stop.set()
        cell.join(30)
        watch.join(5)
        frozen = float(next(line for line in said if line.startswith("frozen for")).split()[2])
        return len(names), frozen, total, floor


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--orders", type=int, nargs="+", default=[1000, 10000, 100000])
    args = ap.parse_args()
    print(f"{'resting orders':>14} {'keys':>8} {'frozen s':>9} {'relocation s':>13} {'copy alone s':>13} "
          f"{'frozen / copy':>14}")
    for n in args.orders:
        keys, frozen, total, floor = one(n)
        print(f"{n:>14,} {keys:>8,} {frozen:>9.2f} {total:>13.1f} {floor:>13.2f} {frozen / floor:>13.2f}x",
              flush=True)


if __name__ == "__main__":
    main()
