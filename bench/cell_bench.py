"""Matching-cell throughput: full matching in memory vs aof-replicated mode, and the outbox.

One partition, one conductor draining a pre-filled command stream of random limit/market/
IOC/FOK/cancel/replace flow. ``memory``: a plain Valkey. ``aof-replicated``: a primary and a
replica, both ``appendfsync always``, with WAITAOF 1 1 after each group commit. Baselines in
the same run: seed 000's write-shape microbenchmark (HSET + ZADD + XADD in one MULTI per
command, WAITAOF 1 1 after each in aof mode, no matching) and an unbatched outbox that
publishes and acknowledges one event at a time (the seed's first version, 517 events/s).

    .venv/bin/python bench/cell_bench.py [--commands 20000] [--batch 200] [--events 20000]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from datastore.connection import connect, own_connection, own_connections  # noqa: E402
from datastore.embedded import _wait, standalone  # noqa: E402
from datastore.settings import RedisEndpoint  # noqa: E402
from matching.amqp import AmqpCommandPublisher, AmqpCommandSource, AmqpEventPublisher, AmqpLink  # noqa: E402
from matching.conductor import Conductor  # noqa: E402
from matching.config import Durability, tune_gc  # noqa: E402
from matching.contracts import DealExecuted, Event, OrderState, OrderType, Side, TimeInForce  # noqa: E402
from matching.keys import PartitionKeys  # noqa: E402
from matching.outbox import GROUP, OutboxWorker, RedisStreamsPublisher  # noqa: E402
from matching.producer import submit  # noqa: E402
from tests.flows import TEST_INSTRUMENTS, random_flow  # noqa: E402
from tests.system_helpers import broker_missing, rabbitmq_vhost  # noqa: E402

KEYS = PartitionKeys(0)


def one_connection(url: str):  # type: ignore[no-untyped-def]
    return connect(RedisEndpoint(url=url, socketTimeout="10s", pool={"maxTotal": 1, "maxIdle": 1}))


def conductor_rate(url: str, durability: str, n: int, batch: int) -> float:
    client = one_connection(url)
    flow = [c for c in random_flow(42, n * 2) if c.partition == 0][:n]
    pipe = client.pipeline(transaction=False)
    for cmd in flow:
        submit(pipe, cmd, 2)
    pipe.execute()
    c = Conductor(client, partition=0, partition_count=2, instruments=TEST_INSTRUMENTS,
                  durability=Durability.named(durability), batch_size=batch)
    c.boot()
    c.try_lease()
    c.rebuild()
    started = time.perf_counter()
    done = 0
    with own_connection(client):  # as Conductor.run holds it
        while done < len(flow):
            done += c.step(block_ms=100)
        c.acknowledge_durable()  # aof-replicated: the last batch's acknowledgement, inside the clock
    return done / (time.perf_counter() - started)


def write_shape_rate(url: str, aof: bool, n: int) -> float:
    """Seed 000's redis-multicell-performance shape: one MULTI per command, optional WAITAOF."""
    client = one_connection(url)
    started = time.perf_counter()
    for i in range(n):
        tx = client.pipeline(transaction=True)
        tx.hset(f"{KEYS.prefix}:shape:order:{i}", mapping={"price": "100", "qty": "1"})
        tx.zadd(f"{KEYS.prefix}:shape:book", {f"{i:020d}:{i}": 100})
        tx.xadd(f"{KEYS.prefix}:shape:events", {"event": "x" * 200})
        tx.execute()
        if aof:
            client.execute_command("WAITAOF", 1, 1, 2000)
    return n / (time.perf_counter() - started)


def fill_events(client, n: int) -> None:  # type: ignore[no-untyped-def]
    """Deals, the largest event (two order states), each between two sessions of one gateway."""
    pipe = client.pipeline(transaction=False)
    for i in range(n):
        maker = OrderState(f"m{i}", 5, 3, 2, 60000, "fix/fsg/C1", f"M{i}", Side.SELL, "ACC1", 20000,
                           OrderType.LIMIT, TimeInForce.GTC)
        taker = OrderState(f"t{i}", 3, 3, 0, 60000, "fix/fsg/C2", f"T{i}", Side.BUY, "ACC2", 20100,
                           OrderType.LIMIT, TimeInForce.GTC)
        e = Event(f"c{i}:0", 0, 0, f"c{i}", DealExecuted(20000, 3, maker, taker, Side.BUY))
        pipe.xadd(KEYS.events, {"event": e.encode()})
    pipe.execute()


def outbox_rate(url: str, target_url: str, n: int, durability: str = "memory") -> float:
    cell, target = connect(RedisEndpoint(url=url)), connect(RedisEndpoint(url=target_url))
    cell.delete(KEYS.events)
    fill_events(cell, n)
    return drain_rate(OutboxWorker(cell, cell, 0, RedisStreamsPublisher(target, lambda e: ["{fix/fsg}/inbox"]),
                                   durability=Durability.named(durability)), n)


def drain_rate(w: OutboxWorker, n: int) -> float:
    """Events per second while ``w`` publishes the ``n`` events waiting in its stream."""
    w.ensure_group()
    started = time.perf_counter()
    done = 0
    with own_connections(w.datastores()):  # as OutboxWorker.run holds them
        while done < n:
            done += w.step(block_ms=100)
        w.acknowledge_published()  # the last batch's acknowledgement, inside the clock
    rate = n / (time.perf_counter() - started)
    w.release()  # its lease's renewal thread stops before the server does
    return rate


def unbatched_outbox_rate(url: str, target_url: str, n: int) -> float:
    cell, target = connect(RedisEndpoint(url=url)), connect(RedisEndpoint(url=target_url))
    cell.delete(KEYS.events)
    fill_events(cell, n)
    cell.xgroup_create(KEYS.events, GROUP, id="0", mkstream=True)
    started = time.perf_counter()
    for _ in range(n):
        (_, entries), = cell.xreadgroup(GROUP, "one", {KEYS.events: ">"}, count=1)
        sid, fields = entries[0]
        target.xadd("{fix/fsg}/inbox", {"messageId": "x", "event": fields[b"event"]})
        cell.xack(KEYS.events, GROUP, sid)
        cell.xdel(KEYS.events, sid)
    return n / (time.perf_counter() - started)


def conductor_rate_amqp(url: str, amqp_url: str, n: int, batch: int) -> float:
    """The conductor fed from the partition's quorum queue (acknowledged after each commit)."""
    flow = [c for c in random_flow(42, n * 2) if c.partition == 0][:n]
    publisher_link, source_link = AmqpLink(amqp_url, "bench-publisher"), AmqpLink(amqp_url, "bench-conductor")
    publisher_link.connect()
    source_link.connect()
    try:
        publisher = AmqpCommandPublisher(publisher_link, 2)
        for i in range(0, len(flow), 500):
            publisher.publish(flow[i:i + 500])
        c = Conductor(one_connection(url), partition=0, partition_count=2, instruments=TEST_INSTRUMENTS,
                      durability=Durability.named("memory"), batch_size=batch,
                      source=AmqpCommandSource(source_link, 0, prefetch=batch))
        c.boot()
        c.try_lease()
        c.rebuild()
        assert c.source is not None
        c.source.restart()
        started = time.perf_counter()
        done = 0
        while done < len(flow):
            done += c.step(block_ms=100)
        return done / (time.perf_counter() - started)
    finally:
        publisher_link.close()
        source_link.close()


def outbox_rate_amqp(url: str, amqp_url: str, n: int) -> float:
    """The outbox publishing to the topic exchange with confirms (a quorum queue bound to it)."""
    cell = connect(RedisEndpoint(url=url))
    cell.delete(KEYS.events)
    fill_events(cell, n)
    link = AmqpLink(amqp_url, "bench-outbox")
    link.connect()

    async def sink(channel, exchange) -> None:  # type: ignore[no-untyped-def]
        q = await channel.declare_queue("bench.events", durable=True, arguments={"x-queue-type": "quorum"})
        await q.bind(exchange, "#")

    try:
        return drain_rate(OutboxWorker(cell, cell, 0, AmqpEventPublisher(link, "bench.events", bind=sink)), n)
    finally:
        link.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--commands", type=int, default=20000)
    ap.add_argument("--batch", type=int, default=200)
    ap.add_argument("--events", type=int, default=20000)
    args = ap.parse_args()
    tune_gc()  # as a cell process does
    shape_n = min(args.commands, 3000)
    with standalone() as mem:
        memory = conductor_rate(mem.url, "memory", args.commands, args.batch)
        shape_mem = write_shape_rate(mem.url, False, shape_n)
    with standalone(aof=True, appendfsync="always") as primary:
        replica = standalone(aof=True, appendfsync="always", replicaof=f"127.0.0.1 {primary.port}").start()
        try:
            _wait(lambda: replica.client().info("replication").get("master_link_status") == "up", "replica")
            durable = conductor_rate(primary.url, "aof-replicated", args.commands, args.batch)
            shape_aof = write_shape_rate(primary.url, True, min(shape_n, 300))
            # (each published batch waits for its events to be on disk here and on the replica)
            outbox_durable = outbox_rate(primary.url, primary.url, min(args.events, 5000), "aof-replicated")
        finally:
            replica.stop()
    with standalone() as cell, standalone() as gw:
        outbox = outbox_rate(cell.url, gw.url, args.events)
        unbatched = unbatched_outbox_rate(cell.url, gw.url, min(args.events, 3000))
    amqp_url = None
    if broker_missing() is None:
        with rabbitmq_vhost("fixgw-bench") as broker:
            amqp_url = broker.full_url
            with standalone() as mem:
                memory_amqp = conductor_rate_amqp(mem.url, amqp_url, args.commands, args.batch)
            with standalone() as cell:
                outbox_amqp = outbox_rate_amqp(cell.url, amqp_url, args.events)

    print(f"one partition, {args.commands} commands, group commit up to {args.batch} per MULTI/EXEC\n")
    print(f"{'':46} {'ours/s':>10} {'baseline/s':>11} {'ratio':>7}")
    print(f"{'matching, memory (vs seed write-shape, memory)':46} {memory:10.0f} {shape_mem:11.0f} "
          f"{memory / shape_mem:6.2f}x")
    print(f"{'matching, aof-replicated (vs write-shape + WAITAOF)':46} {durable:10.0f} {shape_aof:11.0f} "
          f"{durable / shape_aof:6.2f}x")
    print(f"{'outbox events (vs one-at-a-time publish + ack)':46} {outbox:10.0f} {unbatched:11.0f} "
          f"{outbox / unbatched:6.2f}x")
    print(f"{'outbox events, aof-replicated (vs memory)':46} {outbox_durable:10.0f} {outbox:11.0f} "
          f"{outbox_durable / outbox:6.2f}x")
    if amqp_url is not None:
        print(f"{'matching, memory, commands from RabbitMQ':46} {memory_amqp:10.0f} {memory:11.0f} "
              f"{memory_amqp / memory:6.2f}x  (baseline: the same from the Redis stream)")
        print(f"{'outbox events to RabbitMQ (confirms)':46} {outbox_amqp:10.0f} {outbox:11.0f} "
              f"{outbox_amqp / outbox:6.2f}x  (baseline: the same to Redis streams)")
    else:
        print("RabbitMQ rows skipped: no broker at 127.0.0.1:5672 or no rabbitmqctl")
    print(f"\naof-replicated / memory = {durable / memory:.2f}   (seed 000: 3,254 / 25,621 = 0.13)")
    print("seed 000's figures: 25,621 tx/s memory, 3,254 tx/s aof-replicated (write shape, no matching), "
          "517 events/s unbatched outbox")


if __name__ == "__main__":
    main()
