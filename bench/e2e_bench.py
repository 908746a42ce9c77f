"""End to end: NewOrderSingle → first ExecutionReport, through gateway, Redis, cell and back.

Next to it, in the same run, a raw QuickFIX acceptor that echoes each NewOrderSingle on
QuickFIX's MemoryStore (no Redis, no matching). The client is a separate process speaking
FIX over a socket. Two measurements each:
- throughput: ``--orders`` sent as fast as the socket takes them, until every one has its
  first report back;
- latency: orders paced at ``--rate`` per second for ``--seconds``; p50/p99 of send → first report;
  for fixgw also at half the throughput it reached (below saturation), and for both at ``--low-rate``
  (the raw echo's figure there is the machine's floor for an order that wakes each process).
Then, for the orders paced at ``--rate``, where their time went: the client's send and first
report against the ids of each order's command entry and inbox event (``stages``).

The gateway runs as ``fixgw up`` runs it, every thread on one CPU (``cpu_affinity = "auto"``)
and the lingers as ``config/fixgw.toml`` sets them (``--linger``: all three at one value), its
Valkey as ``fixgw up`` starts it (``[embedded]`` of ``config/fixgw.toml``: AOF everysec, on the
CPUs the gateway leaves, and the cells beside it), and the raw echo's threads are on one CPU too
(``gateway_bench.py``'s baseline acceptor); one more row shows the gateway with the code's
defaults (its threads left to the OS).

Idle CPUs spin through the whole run, the raw echo's included, when config/fixgw.toml keeps
them awake as ``fixgw up`` does (``[embedded] keep_cpus_awake``; ``--cpus-sleep``: they halt).
The load generator is a process of its own: ``bench/loadclient.cpp``, compiled on first use
(g++), or ``bench/loadclient.py`` where it cannot be or with ``--python-load`` (the same orders
and figures; the C++ one spends a fraction of the CPU, which counts in the whole system's).

    .venv/bin/python bench/e2e_bench.py [--orders 2000] [--rate 2000] [--seconds 5] [--linger 2ms] [--cpus-sleep] [--python-load]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from datastore.embedded import free_port, jemalloc_library  # noqa: E402
from datastore.settings import parse_duration, read_toml  # noqa: E402
from fixgw import sendpath  # noqa: E402
from fixgw.affinity import cpu_by_thread, cpus_for, datastore_cpus  # noqa: E402
from fixgw.awake import KeepAwake  # noqa: E402
from fixgw.cli import DEFAULT_CONFIG, embedded_server  # noqa: E402
from matching.contracts import PlaceOrder, parse_command, parse_event  # noqa: E402
from matching.keys import PartitionKeys  # noqa: E402
from sessionstore.keys import GatewayKey  # noqa: E402
from tests.system_helpers import (  # noqa: E402
    DROP_COPY_SESSIONS,
    ORDER_ENTRY_SESSIONS,
    System,
    broker_missing,
    rabbitmq_vhost,
)

STAGES = ("fix-front", "intake", "dispatcher")  # the gateway's threads that live as long as it does
REST = "QuickFIX's session threads and the rest"
PIPELINE = 50  # orders a write in the throughput run (bench/loadclient.py)
LOAD_CLIENT = ROOT / "bench" / "loadclient.py"  # the load generator, a process of its own
NATIVE_LOAD_CLIENT = ROOT / "bench" / "loadclient.cpp"  # the same in C++, at a fraction of its CPU
NATIVE_LOAD_BUILT = ROOT / "build" / "loadclient"  # (compiled on first use: ``load_client``)


def shipped_lingers() -> dict[str, str]:
    """The pauses after a small batch that config/fixgw.toml gives `fixgw up`'s loops: the
    intake's and the dispatcher's (``[gateway]``) and the cells' (``[matching]``); one not set
    there is the code's default."""
    shipped = read_toml(DEFAULT_CONFIG)
    gateway, matching = shipped.get("gateway", {}), shipped.get("matching", {})
    return {"intake": gateway.get("batch_linger", "1ms"), "dispatcher": gateway.get("dispatch_linger", "1ms"),
            "cells": matching.get("batch_linger", "1ms")}


def gateway_lines(lingers: dict[str, str], cpus: str = '"auto"') -> str:
    """A gateway as `fixgw up` runs it: every thread on one CPU (fixgw/affinity.py), with the lingers."""
    return (f'cpu_affinity = {cpus}\nbatch_linger = "{lingers["intake"]}"\n'
            f'dispatch_linger = "{lingers["dispatcher"]}"')


def cells_linger(lingers: dict[str, str]) -> None:
    """The cells every system of this run starts take the linger from their environment."""
    os.environ["MATCHING_BATCH_LINGER_MS"] = f"{parse_duration(lingers['cells']) * 1000:g}"


def load_client(python_only: bool = False) -> tuple[list[str], str]:
    """The load generator's command and its name: ``bench/loadclient.cpp``, compiled here when it
    is newer than its build (g++, as ``make`` installs it), else ``bench/loadclient.py``. Both
    run the same orders and print the same figures; the C++ one spends a fraction of the CPU, and
    the load generator's CPU is part of the whole system's an order."""
    python = ([sys.executable, str(LOAD_CLIENT)], "Python (bench/loadclient.py)")
    if python_only:
        return python
    built = NATIVE_LOAD_BUILT
    if not built.exists() or built.stat().st_mtime < NATIVE_LOAD_CLIENT.stat().st_mtime:
        built.parent.mkdir(exist_ok=True)
        try:
            subprocess.run(["g++", "-std=c++17", "-O2", "-o", str(built), str(NATIVE_LOAD_CLIENT)], check=True,
                           capture_output=True, text=True)
        except (OSError, subprocess.CalledProcessError) as exc:
            why = exc.stderr.strip().splitlines()[-1] if isinstance(exc, subprocess.CalledProcessError) else exc
            return python[0], f"{python[1]}: bench/loadclient.cpp not built ({why})"
    return [str(built)], "C++ (bench/loadclient.cpp)"


def measure(port: int, args: argparse.Namespace, rate: float | None = None, orders: int | None = None,
            seconds: float | None = None) -> dict[str, Any]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run([*args.load, str(port), "--orders", str(orders or args.orders),
                          "--rate", str(rate or args.rate), "--seconds", str(seconds or args.seconds)],
                         capture_output=True, text=True, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    # The load generator shares the two cores with what it measures: its CPU is shown too.
    result["client_cpu_s"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return result


def stages(store: Any, namespace: str, wall: dict[str, list[float]]) -> dict[str, list[float]]:
    """Where a paced order's time went, from the streams it crossed: the client's send and first
    report (wall clock) against the ids of its command entry (appended by the gateway's intake)
    and of its event in the order-entry inbox (appended by the outbox). Stream ids have
    millisecond resolution, so each stage is known to ±1 ms. Milliseconds per stage, per order."""
    appended: dict[str, tuple[str, float]] = {}  # command id → (ClOrdID, appended at)
    for p in range(2):
        for entry_id, fields in store.xrange(PartitionKeys(p).commands):
            cmd = parse_command(fields[b"command"])
            if isinstance(cmd, PlaceOrder) and cmd.order.client_order_id in wall:
                appended[cmd.command_id] = (cmd.order.client_order_id, stream_ms(entry_id))
    published: dict[str, float] = {}
    for entry_id, fields in store.xrange(GatewayKey(namespace, "fsg").inbox_stream):
        event = parse_event(fields[b"event"])
        if event.command_id in appended:
            published.setdefault(event.command_id, stream_ms(entry_id))
    out: dict[str, list[float]] = {"gateway in": [], "cell and outbox": [], "gateway out": [], "total": []}
    for command_id, (cl, at) in appended.items():
        if command_id in published:
            sent_at, got_at = wall[cl]
            out["gateway in"].append(1000 * (at - sent_at))
            out["cell and outbox"].append(1000 * (published[command_id] - at))
            out["gateway out"].append(1000 * (got_at - published[command_id]))
            out["total"].append(1000 * (got_at - sent_at))
    return out


def stream_ms(entry_id: bytes) -> float:
    """A stream entry id's time, in seconds (ids are ``<ms>-<seq>``)."""
    return int(entry_id.split(b"-", 1)[0]) / 1000


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def context_switches(pid: int) -> int:
    """Context switches so far (voluntary and not) of the live threads of a process: each a
    thread that blocked for a reply or a wake-up, or was preempted. Below saturation an order
    pays a cycle of every stage, and the switches an order count those cycles' wake-ups
    (docs/decisions/2026-12-06-where-an-order-s-cpu-goes.md). A thread that ended is not
    counted: QuickFIX's session threads end with their connections, before the second reading."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            status = (task / "status").read_text()
        except OSError:  # ended between the listing and the read
            continue
        total += sum(int(line.split()[1]) for line in status.splitlines() if "ctxt_switches:" in line)
    return total


def switches_per_order(procs: dict[str, int], before: dict[str, int], orders: int) -> dict[str, float]:
    return {name: (context_switches(pid) - before[name]) / orders for name, pid in procs.items()}


def wait_idle(pids: list[int], timeout_s: float = 60) -> None:
    """Until the processes together use under 5% of a core for half a second."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        before = sum(cpu_seconds(pid) for pid in pids)
        time.sleep(0.5)
        if sum(cpu_seconds(pid) for pid in pids) - before < 0.025:
            return


@contextmanager
def running_system(prefix: str, gateway_cpus: Collection[int] = (), **options: Any) -> Iterator[tuple[System, Any]]:
    """The whole system (``System(**options)``) on a Valkey of its own, started as ``fixgw up``
    starts its embedded one beside gateways on ``gateway_cpus``, with the shipped instruments;
    started, and stopped after the block."""
    with embedded_server(read_toml(DEFAULT_CONFIG), set(gateway_cpus)) as server:
        system = System(Path(tempfile.mkdtemp(prefix=prefix)), server, [server, server], **options)
        system.instruments.write_text((ROOT / "config" / "instruments.toml").read_text())
        system.start()  # (stops what it started if it fails)
        try:
            yield system, server
        finally:
            system.stop()


def aof_state(server: Any) -> tuple[int, int]:
    """Valkey's AOF rewrites so far, and its AOF's size in bytes."""
    persistence = server.client().info("persistence")
    return int(persistence["aof_rewrites"]), int(persistence["aof_current_size"])


def valkey_counts(server: Any) -> tuple[int, int, int]:
    """Valkey's commands so far (those its scripts ran included), its script calls, and its read
    events: each is one client's request arriving, a pipeline in one piece — a round trip. (Each
    call here is one read and one command, too few to matter.)"""
    client = server.client()
    stats = client.info("stats")
    scripts = sum(int(v["calls"]) for k, v in client.info("commandstats").items()
                  if k in ("cmdstat_evalsha", "cmdstat_eval", "cmdstat_fcall"))
    return int(stats["total_commands_processed"]), scripts, int(stats["total_reads_processed"])


def per_order(before: tuple[int, int, int], after: tuple[int, int, int], orders: int) -> dict[str, float]:
    commands, scripts, reads = (b - a for a, b in zip(before, after))
    return {"commands": commands / orders, "scripts": scripts / orders, "round_trips": reads / orders}


def command_calls(server: Any) -> dict[str, int]:
    """Valkey's calls so far per command (INFO commandstats; those inside scripts included)."""
    return {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in server.client().info("commandstats").items()}


def calls_per_order(before: dict[str, int], after: dict[str, int], orders: int) -> list[tuple[str, float]]:
    """The commands an order cost, most first."""
    return sorted(((name, (n - before.get(name, 0)) / orders) for name, n in after.items()
                   if n > before.get(name, 0)), key=lambda x: -x[1])


HOPS = (("gateway in", "client send → its claim script in Valkey (front, QuickFIX, fromApp, intake)"),
        ("cell wakes", "→ the conductor's first read of it (blocking read returns, dedup read sent)"),
        ("cell", "→ the conductor's commit (matched, staged, report into the gateway's inbox)"),
        ("dispatcher", "→ the gateway's group commit of the report (woken, built)"),
        ("gateway out", "→ the report at the client (QuickFIX, front, client)"))


@contextmanager
def monitored(server: Any) -> Iterator[list[tuple[float, str, str]]]:
    """Every command Valkey runs while the block runs, as MONITOR shows it: (its time, µs
    resolution; the connection, or ``lua`` for a script's own command; the command's text)."""
    lines: list[tuple[float, str, str]] = []
    done = threading.Event()

    def watch() -> None:
        with server.client().monitor() as feed:
            for cmd in feed.listen():
                lines.append((float(cmd["time"]), f"{cmd['client_address']}:{cmd['client_port']}", cmd["command"]))
                if done.is_set():
                    return

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    time.sleep(0.3)
    try:
        yield lines
    finally:
        done.set()
        server.client().ping()  # (the watcher's last line)
        watcher.join(5)


def hops(lines: list[tuple[float, str, str]], wall: dict[str, list[float]]) -> dict[str, list[float]]:
    """Where an unloaded order's time went, from MONITOR's lines that name its ClOrdID: the
    intake's claim script, the conductor's first read and its commit (one connection), then the
    first command of the gateway's group commit; the client's send and receipt around them."""
    out: dict[str, list[float]] = {name: [] for name, _ in HOPS}
    for cl, (sent_at, got_at) in wall.items():
        mine = [(t, who) for t, who, text in lines if cl in text and sent_at - 0.001 <= t <= got_at + 0.001]
        if not mine:
            continue
        claimed, claimer = mine[0]
        cell = [(t, who) for t, who in mine if who not in (claimer, "lua:") and t > claimed]
        if not cell:
            continue
        conductor = cell[0][1]
        cell_in = cell[0][0]
        cell_out = max(t for t, who in mine if who == conductor)
        after = [t for t, who in mine if t > cell_out and who != conductor]
        if not after:
            continue
        marks = [sent_at, claimed, cell_in, cell_out, after[0], got_at]
        for (name, _), start, end in zip(HOPS, marks, marks[1:]):
            out[name].append(1000 * (end - start))
    return out


def all_cpu_seconds(procs: dict[str, int]) -> float:
    return sum(cpu_seconds(pid) for pid in procs.values())


def gateway_threads(pid: int, before: dict[str, float] | None = None) -> dict[str, float]:
    """The gateway's CPU seconds so far by stage (``fixgw.affinity.show_thread_names``), or since
    ``before``. QuickFIX's session threads end with their connections, before the second
    reading: they are the process's total less the named stages ("sessions and the rest")."""
    named = cpu_by_thread(pid)
    now = {stage: named.get(stage, 0.0) for stage in STAGES}
    now[REST] = cpu_seconds(pid) - sum(now.values())
    return now if before is None else {stage: now[stage] - before[stage] for stage in now}


def system_processes(system: System, server: object) -> dict[str, int]:
    procs = {"gateway": system.gateway.proc.pid, "valkey": server.proc.pid}  # type: ignore[attr-defined,union-attr]
    if system.drop_copy_gateway is not None:
        procs["gateway (dc)"] = system.drop_copy_gateway.proc.pid  # type: ignore[union-attr]
    for (role, p), cell in system.cells.items():
        assert cell.proc is not None
        procs[f"{role} p{p}"] = cell.proc.pid
    return procs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--orders", type=int, default=2000)
    ap.add_argument("--rate", type=float, default=2000)
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--low-rate", type=float, default=100, help="also measure latency at this sustainable rate")
    ap.add_argument("--trace-rate", type=float, default=50, help="one order at a time, each traced through Valkey")
    ap.add_argument("--cells-anywhere", action="store_true",
                    help="leave the cells to the OS instead of on the CPUs the gateway leaves (fixgw up's placement)")
    ap.add_argument("--python-load", action="store_true",
                    help="the load generator in Python (bench/loadclient.py) even where the C++ one builds")
    ap.add_argument("--cpus-sleep", action="store_true",
                    help="let idle CPUs halt, whatever config/fixgw.toml's [embedded] keep_cpus_awake says")
    ap.add_argument("--linger", default=None,
                    help="the intake's, the dispatcher's and the cells' pause after a small batch, all three (e.g. "
                         "2ms; default: config/fixgw.toml's): what an order costs against how long it waits")
    args = ap.parse_args()
    args.lingers = shipped_lingers() if args.linger is None else dict.fromkeys(("intake", "dispatcher", "cells"),
                                                                                args.linger)
    cells_linger(args.lingers)
    args.load, args.load_name = load_client(args.python_load)  # (``measure`` runs it)
    # As `fixgw up` runs: idle CPUs spin (fixgw/awake.py), for the raw echo as for fixgw.
    awake = None
    if read_toml(DEFAULT_CONFIG).get("embedded", {}).get("keep_cpus_awake") and not args.cpus_sleep:
        awake = KeepAwake(os.sched_getaffinity(0)).start()
    try:
        run(args)
    finally:
        if awake is not None:
            awake.stop()
    print("idle CPUs " + ("kept awake (config/fixgw.toml: keep_cpus_awake), for the raw echo too" if awake is not None
                          else "left to halt"))


def run(args: argparse.Namespace) -> None:

    echo_port = free_port()
    echo = subprocess.Popen([sys.executable, str(ROOT / "bench" / "gateway_bench.py"), "--serve-memory",
                             str(echo_port)], stdout=subprocess.PIPE, text=True)
    assert echo.stdout is not None and echo.stdout.readline().strip() == "ready"
    try:
        raw = measure(echo_port, args)
        # The same unloaded rate as fixgw's latency-only row: the machine's floor for one order
        # that wakes each process it crosses (rtt_bench.py measures the wake-up itself).
        raw_low = measure(echo_port, args, rate=args.low_rate, orders=200)
    finally:
        echo.terminate()
    pinned = cpus_for("auto")
    with running_system("fixgw-e2e-", pinned, gateway_lines=gateway_lines(args.lingers)) as (system, server):
        procs = system_processes(system, server)
        if not args.cells_anywhere:  # as ``fixgw up`` places them: beside Valkey
            for cell in system.cells.values():
                os.sched_setaffinity(cell.proc.pid, datastore_cpus(pinned) or os.sched_getaffinity(0))  # type: ignore[union-attr]
        wait_idle(list(procs.values()))  # (the cells' start-up work is not an order's)
        low_before, low_counts, low_calls = all_cpu_seconds(procs), valkey_counts(server), command_calls(server)
        low_threads = gateway_threads(procs["gateway"])
        low_switches = {name: context_switches(pid) for name, pid in procs.items()}
        low = measure(system.fix_port, args, rate=args.low_rate, orders=200)  # before any backlog
        low["cpu_ms"] = 1000 * (all_cpu_seconds(procs) - low_before) / (200 + low["paced"])
        low_threads = gateway_threads(procs["gateway"], low_threads)
        low_switches = switches_per_order(procs, low_switches, 200 + int(low["paced"]))
        low_valkey = per_order(low_counts, valkey_counts(server), 200 + int(low["paced"]))
        low_by_command = calls_per_order(low_calls, command_calls(server), 200 + int(low["paced"]))
        # One order at a time, every command Valkey runs watched (MONITOR slows Valkey: its own
        # run, for where the time goes, not for the latency rows).
        wait_idle(list(procs.values()))
        with monitored(server) as lines:
            traced = measure(system.fix_port, args, rate=args.trace_rate, orders=PIPELINE, seconds=2)
        hop_ms = hops(lines, traced["wall"])
        wait_idle(list(procs.values()))
        cpu_before, counts_before = {name: cpu_seconds(pid) for name, pid in procs.items()}, valkey_counts(server)
        calls_before = command_calls(server)
        rewrites_before, aof_before = aof_state(server)
        ours_threads = gateway_threads(procs["gateway"])
        ours_switches = {name: context_switches(pid) for name, pid in procs.items()}
        ours = measure(system.fix_port, args)
        ours_switches = switches_per_order(procs, ours_switches, args.orders + int(ours["paced"]))
        cpu_used = {name: cpu_seconds(pid) - cpu_before[name] for name, pid in procs.items()}
        ours_threads = gateway_threads(procs["gateway"], ours_threads)
        ours_valkey = per_order(counts_before, valkey_counts(server), args.orders + int(ours["paced"]))
        ours_by_command = calls_per_order(calls_before, command_calls(server), args.orders + int(ours["paced"]))
        rewrites_after, aof_after = aof_state(server)
        rewrites = rewrites_after - rewrites_before
        aof_per_order = (aof_after - aof_before) / (args.orders + ours["paced"]) if not rewrites else None
        split = stages(server.client(), "e2e", ours["wall"])
        # Latency below saturation: paced at half the throughput just measured, once the
        # backlog of the saturated run is worked off.
        wait_idle(list(procs.values()))
        mid_rate = max(args.low_rate, round(ours["throughput"] / 2, -1))
        mid_before = all_cpu_seconds(procs)
        mid = measure(system.fix_port, args, rate=mid_rate, orders=200)
        mid["cpu_ms"] = 1000 * (all_cpu_seconds(procs) - mid_before) / (200 + mid["paced"])
        # Valkey compacts its AOF in a forked child (every few seconds at this rate with Valkey's
        # default threshold; cli.AOF_REWRITE_MIN_SIZE): the same paced run with one started halfway.
        wait_idle(list(procs.values()))
        compaction = threading.Timer(1.5 + args.seconds / 2, lambda: server.client().bgrewriteaof())
        compaction.start()
        rewriting = measure(system.fix_port, args)
        compaction.join()
    # The same system with the gateway's defaults: its threads wherever the OS puts them, a linger.
    with running_system("fixgw-e2e-floating-") as (system, server):
        floating = measure(system.fix_port, args)
    # The same system with the drop copy on a gateway process of its own (docs/architecture.md: the order
    # path): the order-entry gateway's dispatcher no longer builds and sends the copies. The two
    # gateways pinned apart: the order entry's to the first CPU, the drop copy's to the last.
    both = {min(pinned), max(os.sched_getaffinity(0))}
    with running_system("fixgw-e2e-split-", both, sessions=ORDER_ENTRY_SESSIONS, drop_copy_sessions=DROP_COPY_SESSIONS,
                        gateway_lines=gateway_lines(args.lingers),
                        drop_copy_gateway_lines=gateway_lines(args.lingers, f"[{max(both)}]")
                        ) as (system, server):
        split_procs = system_processes(system, server)
        split_before = all_cpu_seconds(split_procs)
        split_run = measure(system.fix_port, args)
        split_run["cpu_ms"] = 1000 * (all_cpu_seconds(split_procs) - split_before) / (args.orders + split_run["paced"])
    amqp: dict[str, float] | None = None
    amqp_rate = 0.0
    if broker_missing() is None:  # the same system with commands and events through RabbitMQ
        with rabbitmq_vhost("fixgw-bench") as broker, running_system("fixgw-e2e-amqp-", broker=broker) as (system,
                                                                                                            server):
            # Its throughput, then its latency paced at half of it: at --rate it only queues
            # (and a backlog of thousands of commands outlives the run in the broker).
            burst = measure(system.fix_port, args, rate=args.low_rate)
            wait_idle(list(system_processes(system, server).values()))
            amqp_rate = max(args.low_rate, round(burst["throughput"] / 2, -1))
            amqp = {**measure(system.fix_port, args, rate=amqp_rate, orders=200), "throughput": burst["throughput"]}
    print(f"\nNewOrderSingle → first ExecutionReport; client in a separate process; "
          f"{args.orders} orders for throughput, {args.rate:.0f}/s for {args.seconds:.0f}s for latency; "
          f"the gateway's send path {sendpath.described(sendpath.chosen('auto'))}, Valkey's allocator "
          f"{'jemalloc' if jemalloc_library() else 'the C library’s'}, the load generator {args.load_name}; "
          f"the lingers: the intake {args.lingers['intake']}, the dispatcher {args.lingers['dispatcher']}, "
          f"the cells {args.lingers['cells']}\n")
    print(f"{'':44} {'orders/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'answered':>9}")
    print(f"{'raw QuickFIX echo (MemoryStore, no matching)':44} {raw['throughput']:9.0f} {raw['p50_ms']:8.2f} "
          f"{raw['p99_ms']:8.2f} {raw['answered']:>5}/{raw['paced']}")
    print(f"{'fixgw: gateway (pinned) + Redis + cell':44} {ours['throughput']:9.0f} {ours['p50_ms']:8.2f} "
          f"{ours['p99_ms']:8.2f} {ours['answered']:>5}/{ours['paced']}")
    print(f"{'fixgw, gateway not pinned (code defaults)':44} {floating['throughput']:9.0f} {floating['p50_ms']:8.2f} "
          f"{floating['p99_ms']:8.2f} {floating['answered']:>5}/{floating['paced']}")
    print(f"{'fixgw, drop copy on a gateway of its own':44} {split_run['throughput']:9.0f} {split_run['p50_ms']:8.2f} "
          f"{split_run['p99_ms']:8.2f} {split_run['answered']:>5}/{split_run['paced']}")
    if amqp is not None:
        print(f"{'fixgw via RabbitMQ (paced at ' + format(amqp_rate, '.0f') + '/s, half)':44} "
              f"{amqp['throughput']:9.0f} {amqp['p50_ms']:8.2f} {amqp['p99_ms']:8.2f} {amqp['answered']:>5}/{amqp['paced']}")
    else:
        print("(RabbitMQ row skipped: no broker at 127.0.0.1:5672 or no rabbitmqctl)")
    print(f"{'fixgw at ' + format(mid_rate, '.0f') + '/s (half its throughput)':44} {'':>9} "
          f"{mid['p50_ms']:8.2f} {mid['p99_ms']:8.2f} {mid['answered']:>5}/{mid['paced']}")
    print(f"{'fixgw, an AOF rewrite halfway (latency)':44} {'':>9} {rewriting['p50_ms']:8.2f} "
          f"{rewriting['p99_ms']:8.2f} {rewriting['answered']:>5}/{rewriting['paced']}")
    print(f"{'fixgw at ' + format(args.low_rate, '.0f') + '/s (latency only)':44} {'':>9} {low['p50_ms']:8.2f} "
          f"{low['p99_ms']:8.2f} {low['answered']:>5}/{low['paced']}")
    print(f"{'raw echo at ' + format(args.low_rate, '.0f') + '/s (latency only)':44} {'':>9} {raw_low['p50_ms']:8.2f} "
          f"{raw_low['p99_ms']:8.2f} {raw_low['answered']:>5}/{raw_low['paced']}")
    print(f"\nthroughput ratio fixgw / raw echo = {ours['throughput'] / raw['throughput']:.2f}  (goal ≥ 0.15)")
    print(f"paced rate achieved: {ours['achieved_rate']:.0f}/s; p99 {ours['p99_ms']:.2f} ms (goal < 5 ms at 2,000/s); "
          f"AOF rewrites during it: {rewrites}" + (f" (AOF written: {aof_per_order:,.0f} bytes an order)"
                                                  if aof_per_order is not None else ""))
    print(f"unloaded ({args.low_rate:.0f}/s): p50 {low['p50_ms']:.2f} ms (goal < 1 ms); the raw echo's own p50 at that "
          f"rate: {raw_low['p50_ms']:.2f} ms")
    orders_total = args.orders + int(args.rate * args.seconds)
    print(f"\nWhere a paced order's time goes at {args.rate:.0f}/s ({len(split['total'])} orders matched "
          f"by ClOrdID; stream ids: ±1 ms):")
    print(f"  {'stage':50} {'p50 ms':>7} {'p99 ms':>7}")
    for name, what in (("gateway in", "client send → command appended (QuickFIX, intake)"),
                       ("cell and outbox", "→ its event in the gateway's inbox"),
                       ("gateway out", "→ first report read (dispatcher, send)"), ("total", "send → first report")):
        values = sorted(split[name])
        if values:
            print(f"  {what:50} {statistics.median(values):7.1f} {values[int(len(values) * 0.99) - 1]:7.1f}")
    print(f"\nCPU per order during the throughput and paced runs ({orders_total} orders):")
    cpu_used["client (load)"] = ours["client_cpu_s"]
    for name, used in cpu_used.items():
        print(f"  {name:14} {used:7.2f} s   {1000 * used / orders_total:6.2f} ms/order")
    total = sum(cpu_used.values())
    print(f"  {'all':14} {total:7.2f} s   {1000 * total / orders_total:6.2f} ms/order "
          f"(2 cores: at most {2 * orders_total / total:,.0f} orders/s if nothing else ran)")
    # Paced below saturation, batches are small and each order pays whole cycles (round trips,
    # wake-ups): the CPU an order costs there, without the load generator, shows how far.
    print(f"  with the drop copy on a gateway of its own: {split_run['cpu_ms']:.2f} ms/order, every process but the "
          "load generator")
    print(f"  paced at {mid_rate:.0f}/s: {mid['cpu_ms']:.2f} ms/order; at {args.low_rate:.0f}/s: "
          f"{low['cpu_ms']:.2f} ms/order (gateway, Valkey and cells; each run's 200-order burst included)")
    for what, threads, count in (("throughput and paced runs", ours_threads, orders_total),
                                 (f"at {args.low_rate:.0f}/s", low_threads, 200 + int(low["paced"]))):
        print(f"  the gateway by thread, {what}: " + ", ".join(
            f"{name} {1000 * used / count:.3f}" for name, used in threads.items()) + " ms/order")
    print("  context switches an order (a thread blocking for a reply or woken, or preempted; live threads only):")
    for what, per in (("throughput and paced runs", ours_switches), (f"at {args.low_rate:.0f}/s", low_switches)):
        print(f"    {what:28} " + ", ".join(f"{name} {n:.1f}" for name, n in per.items())
              + f"; all {sum(per.values()):.1f}")
    print("\nValkey's work per order (INFO: commands, those inside scripts counted; script calls; read events,")
    print("each a client's request arriving: round trips):")
    for name, counts in (("throughput and paced runs", ours_valkey), (f"at {args.low_rate:.0f}/s", low_valkey)):
        print(f"  {name:28} {counts['commands']:6.1f} commands  {counts['scripts']:5.1f} scripts  "
              f"{counts['round_trips']:5.1f} round trips")
    for name, by_command in (("saturated, by command", ours_by_command), (f"at {args.low_rate:.0f}/s", low_by_command)):
        print(f"  {name:28} " + ", ".join(f"{command} {n:.2f}" for command, n in by_command if n >= 0.05))
    traced_n = len(hop_ms["gateway in"])
    print(f"\nWhere an unloaded order's time goes: one at a time at {args.trace_rate:.0f}/s, {traced_n} orders, every "
          "command Valkey ran\nwatched (MONITOR, µs timestamps; it slows Valkey a little):")
    print(f"  {'hop':86} {'p50 ms':>7} {'p90 ms':>7}")
    for name, what in HOPS:
        values = sorted(hop_ms[name])
        if values:
            print(f"  {what:86} {statistics.median(values):7.2f} {values[int(len(values) * 0.9)]:7.2f}")
    totals = sorted(sum(parts) for parts in zip(*hop_ms.values()))
    if totals:
        print(f"  {'send → report':86} {statistics.median(totals):7.2f} {totals[int(len(totals) * 0.9)]:7.2f}")
    gateway_ms = 1000 * cpu_used["gateway"] / orders_total
    print("\nThe goals beside this run (a raw QuickFIX echo on the same machine: "
          f"{raw['throughput']:,.0f} orders/s, p50 {raw_low['p50_ms']:.2f} ms at {args.low_rate:.0f}/s):")
    for goal, value, met in (
            ("CPU per order, every process (load generator included) ≤ 0.40 ms", f"{1000 * total / orders_total:.2f} ms",
             1000 * total / orders_total <= 0.40),
            ("CPU per order, the gateway ≤ 0.20 ms", f"{gateway_ms:.2f} ms", gateway_ms <= 0.20),
            (f"p99 at {args.rate:.0f}/s < 5 ms", f"{ours['p99_ms']:.2f} ms (raw echo {raw['p99_ms']:.2f})",
             ours["p99_ms"] < 5),
            (f"unloaded p50 ({args.low_rate:.0f}/s) < 1 ms", f"{low['p50_ms']:.2f} ms (raw echo {raw_low['p50_ms']:.2f})",
             low["p50_ms"] < 1)):
        print(f"  {goal:66} {value:32} {'met' if met else 'not met'}")


if __name__ == "__main__":
    main()
