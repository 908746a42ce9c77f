"""Tail latency over minutes: per window (30 s), the percentiles of every request's time to its
first answer, at a steady rate on `fixgw up`'s default system, and on the same timeline what
happened in each window that can stall the order path. First, what this machine does at this
hour: a raw QuickFIX echo's orders/s and p50 (``bench/e2e_bench.py``'s baseline), printed at the
start and beside the verdict, since hosts of one kind differ by 2–3× from hour to hour.

Two client processes (CLIENT1, CLIENT2; their garbage collectors off, so their own pauses are not
counted), each sending half the rate: new orders resting far from the market, and for 30 % of
them a cancel a moment later. A request's latency: from its send to its first answer (the New,
the Canceled report or a reject). Percentiles are exact (every latency of the window kept and
sorted: at these rates a window holds tens of thousands; an HDR histogram's bucketing is not
needed to afford them). Beside each window, from a sample a second:

- Valkey: AOF rewrites (with the fork's time and the rewrite's duration), delayed fsyncs (INFO
  persistence), its own latency events of 5 ms or more (``LATENCY HISTORY``: fork, command, aof-*),
  its used memory; at the end, which commands took 5 ms or more (``SLOWLOG``);
- the gateway's group-commit misses; retention passes and the records they removed;
- lease renewals (the gateway's dispatcher locks, the cells' conductor and outbox leases);
- the CPU each part of the system spent per request (gateway, Valkey, the cells; from ``/proc``);
- the collector's passes in the gateway and the cells, their pauses (together and each part's) and how many took
  5 ms or more (``python_gc_pause_seconds_total``, ``python_gc_long_pauses_total``);
- the machine's speed on each CPU: the CPU time of a fixed unit of Python work, run once a second
  at the idle priority, against the first window's. A virtual machine's CPUs change speed under
  it (on this project's 2-core VM, idle, the unit took 1.2 or 2.2 ms, switching every few tens of
  seconds): a window whose requests cost more CPU on a slower machine has not found a cause in
  the system.

    .venv/bin/python bench/longrun_bench.py [--rate 400] [--minutes 10] [--window 30]
        [--rewrite-every SECONDS]   force an AOF rewrite this often: what one costs the order path
        [--memory]                  at the end, Valkey's memory by kind of key, per request
        [--nice N]                  the system at nice N, not config/fixgw.toml's [embedded] nice
        [--prefill ORDERS]          first rest this many orders (and deliver their reports): the rate's
                                    cost on a system that holds a large book, not only on a new one

Goal (docs/benchmarks.md): every window p99 < 5 ms, p99.9 < 20 ms, max < 100 ms at 400/s; the
limits doubled at 1,000/s.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import gc
import json
import math
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.loadclient import LoadSession, field, msg_type  # noqa: E402
from datastore.embedded import free_port  # noqa: E402
from datastore.settings import read_toml  # noqa: E402
from fixgw.affinity import ENGINE_THREAD  # noqa: E402
from fixgw.awake import KeepAwake  # noqa: E402
from matching.contracts import PlaceOrder, parse_command, parse_event  # noqa: E402
from matching.keys import PartitionKeys  # noqa: E402
from sessionstore.keys import GatewayKey  # noqa: E402

GOALS = {400: (5.0, 20.0, 100.0), 1000: (10.0, 40.0, 200.0)}  # rate → p99, p99.9, max (ms)
# The gateway's threads that carry a request (their OS names: fixgw.affinity.show_thread_names):
# the front relays its bytes, QuickFIX's session thread parses it, the intake commits it, the
# dispatcher turns the cell's events into reports and sends them.
STAGES = ("fix-front", ENGINE_THREAD, "intake", "dispatcher")


_SECONDS: dict[bytes, float] = {}  # SendingTime to the second → epoch seconds (one parse a second)


def stamped(msg: bytes) -> float:
    """The answer's SendingTime (52), as wall-clock seconds: when the gateway numbered and stored
    it, so a slow request's time splits into before the gateway's send stage and after."""
    raw = field(msg, b"52") or b""
    second, _, fraction = raw.partition(b".")
    at = _SECONDS.get(second)
    if at is None:
        parsed = datetime.datetime.strptime(second.decode(), "%Y%m%d-%H:%M:%S")
        at = _SECONDS[second] = parsed.replace(tzinfo=datetime.timezone.utc).timestamp()
    return at + (int(fraction) / 10 ** len(fraction) if fraction else 0.0)


def client(port: int, name: str, rate: float, seconds: float, out: str, start_at: float) -> None:
    """One session's load, paced from ``start_at`` (wall clock); writes ``[sent wall time, latency
    ms, kind]`` per answered request. The client is ``bench/loadclient.py``'s: it costs the machine
    it shares little."""
    gc.disable()
    with contextlib.suppress(PermissionError):  # the peer no further behind than the system it talks to
        os.setpriority(os.PRIO_PROCESS, 0, int(os.environ.get("LONGRUN_NICE", SYSTEM_NICE)))
    session = LoadSession(port, name)
    session.send(b"A", b"98=0\x01108=30\x01141=Y\x01")
    deadline = time.perf_counter() + 10
    while not session.receive(0.5):
        if time.perf_counter() > deadline:
            raise SystemExit(f"{name}: no Logon answer within 10 s")
    # The load starts once every load generator and meter has started and logged on: their own
    # start-up (an interpreter and its imports each) competed for the CPUs with the first requests
    # (45 ms answers 0.1 s in, the load generators waiting 690 ms a second for a CPU then). Each
    # at a phase of its own, as independent clients are: two paced in step would collide at
    # every request.
    start_at += random.uniform(0, 1.0 / rate)
    while time.time() < start_at:
        session.receive(start_at - time.time())
    sent: dict[str, tuple[float, float, str]] = {}  # ClOrdID → (perf counter, wall, kind)
    done: list[tuple[float, float, str, float, str]] = []
    cancels: list[tuple[float, str, str]] = []  # (due, cancel's ClOrdID, order's ClOrdID)
    answers = (b"8", b"9", b"j")

    def drain(until: float) -> None:
        while True:
            try:
                messages = session.receive(max(0.0, until - time.perf_counter()))
            except ConnectionError:
                raise SystemExit(f"{name}: the gateway closed the connection") from None
            now = time.perf_counter()
            for msg in messages:
                kind = msg_type(msg)
                if kind == b"1":  # TestRequest: answer it
                    session.send(b"0", b"112=%s\x01" % (field(msg, b"112") or b""))
                cl_raw = field(msg, b"11")
                if cl_raw is not None and kind in answers:
                    started = sent.pop(cl_raw.decode(), None)
                    if started is not None:
                        done.append((started[1], (now - started[0]) * 1000, started[2],
                                     (stamped(msg) - started[1]) * 1000, cl_raw.decode()))
            if now >= until:
                return

    interval = 1.0 / rate
    t0 = time.perf_counter()
    i = 0
    while time.perf_counter() - t0 < seconds:
        due = t0 + i * interval
        drain(due)
        now = time.perf_counter()
        stamp = session.sending_time()
        if cancels and cancels[0][0] <= now:
            _, cl, orig = cancels.pop(0)
            sent[cl] = (now, time.time(), "F")
            session.send(b"F", b"11=%s\x0141=%s\x0155=ACME\x0154=1\x0160=%s\x01" % (cl.encode(), orig.encode(), stamp))
        else:
            cl = f"{name}-{i}"
            sent[cl] = (now, time.time(), "D")
            session.send(b"D", b"11=%s\x0155=ACME\x0154=1\x0140=2\x0144=1.00\x0138=1\x0159=1\x0160=%s\x01"
                         % (cl.encode(), stamp))
            if i % 10 < 3:  # 30 % of the orders are canceled 50 ms later
                cancels.append((now + 0.05, f"{cl}-x", cl))
        i += 1
    drain(time.perf_counter() + 3)
    Path(out).write_text(json.dumps({"done": done, "unanswered": len(sent)}))


DEFAULT_SYSTEM = read_toml(ROOT / "config" / "fixgw.toml")  # what `fixgw up` runs, as the bench runs it
MATCHING_PARTITIONS = int(DEFAULT_SYSTEM["matching"]["partition_count"])
NAMESPACE = str(DEFAULT_SYSTEM["session_store"]["namespace"])
SYSTEM_NICE = int(DEFAULT_SYSTEM.get("embedded", {}).get("nice", 0))  # `fixgw up` runs its processes at it
LOAD_STARTS_AFTER_S = 3.0  # from the load generators' start to their first request (``client``)
SLOWEST = 5  # the slowest requests shown with what happened around them


def stages_of(valkey: Any, requests: list[tuple[str, float, float]]) -> dict[str, tuple[float, float | None]]:
    """Where each request's time went, from the streams it crossed (ids are Valkey's clock, to
    the millisecond): (ClOrdID, sent, answered) → (its command appended by the gateway's intake,
    its event appended to the gateway's inbox by its cell, or None once retention took it)."""
    found: dict[str, tuple[float, float | None]] = {}
    for cl, sent, answered in requests:  # each in its own span of the streams: a few hundred entries
        lo, hi = int(1000 * sent) - 1000, int(1000 * answered) + 1000
        command_id = None
        for partition in range(MATCHING_PARTITIONS):
            for entry_id, fields in valkey.xrange(PartitionKeys(partition).commands, lo, hi):
                command = parse_command(fields[b"command"])
                if (command.order.client_order_id if isinstance(command, PlaceOrder)
                        else command.client_order_id) == cl:
                    command_id, found[cl] = command.command_id, (int(entry_id.split(b"-")[0]) / 1000, None)
        if command_id is None:
            continue
        for entry_id, fields in valkey.xrange(GatewayKey(NAMESPACE, "fsg").inbox_stream, lo, hi):
            if parse_event(fields[b"event"]).command_id == command_id:
                found[cl] = (found[cl][0], int(entry_id.split(b"-")[0]) / 1000)
                break
    return found


LOG_TIME = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")


def logged_between(lines: list[str], lo: float, hi: float) -> list[str]:
    """The lines of ``fixgw up``'s log (its gateway's and its cells', stamped by ``logging``'s
    local-time asctime) written between two wall-clock times: what else happened around a
    slow request."""
    found = []
    for line in lines:
        stamp = LOG_TIME.match(line)
        if stamp is not None:
            at = datetime.datetime.strptime(stamp.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
            if lo <= at <= hi:
                found.append(line)
    return found


SAMPLED = ("python_gc_collections_total", "python_gc_pause_seconds_total", "python_gc_long_pauses_total",
           "fixgw_group_commit_misses_total", "fixgw_retention_passes_total",
           "fixgw_retention_removed_total", "fixgw_lock_renewals_total", "matching_lease_renewals_total")


def scrape(url: str) -> dict[str, float]:
    with urllib.request.urlopen(url, timeout=5) as r:
        text = r.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            base = name.split("{")[0]
            if base in SAMPLED:
                out[base] = out.get(base, 0.0) + float(value)
    return out


_WAITS: dict[int, dict[int, int]] = {}  # pid → its threads' run-queue waits when last read (ns)
_WAITS_ENDED: dict[int, int] = {}  # pid → the waits of its threads that have ended since (ns)


def run_queue_wait(pid: int) -> float:
    """Seconds the process's threads have spent runnable but waiting for a CPU (the scheduler's
    ``schedstat``): what a busy machine adds to a request's latency. A thread that ends (a
    session's, as it logs out) keeps counting with its last reading, so the total never falls."""
    now: dict[int, int] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError, IndexError, ValueError):
            now[int(task.name)] = int((task / "schedstat").read_text().split()[1])
    before = _WAITS.get(pid, {})
    _WAITS_ENDED[pid] = _WAITS_ENDED.get(pid, 0) + sum(ns for tid, ns in before.items() if tid not in now)
    _WAITS[pid] = now
    return (sum(now.values()) + _WAITS_ENDED[pid]) / 1e9


def steal_s() -> float:
    """CPU time the hypervisor gave to others while this machine's CPUs wanted it, so far."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()
    return int(fields[8]) / os.sysconf("SC_CLK_TCK")


HICCUP_TICK_S = 0.002  # the hiccup meter's sleep
HICCUP_MS = 5.0  # a wake-up this much later than asked is a hiccup of the machine


def hiccups(cpu: int, seconds: float, out: str) -> None:
    """jHiccup's idea, for the machine itself: on one CPU, at the real-time priority nothing of
    the system under test has, sleep ``HICCUP_TICK_S`` again and again and record each wake-up
    ``HICCUP_MS`` or more late. Such a hiccup is not the system's doing (no thread of it could
    have kept the meter off its CPU): the host paused this VM, or the kernel did not schedule."""
    gc.disable()
    os.sched_setaffinity(0, {cpu})
    with contextlib.suppress(PermissionError, OSError):  # (without root: an ordinary thread's view)
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
    found: list[tuple[float, float]] = []
    end = time.monotonic() + seconds
    while (now := time.monotonic()) < end:
        time.sleep(HICCUP_TICK_S)
        late = (time.monotonic() - now - HICCUP_TICK_S) * 1000
        if late >= HICCUP_MS:
            found.append((time.time() - late / 1000, late))
    Path(out).write_text(json.dumps(found))


SPEED_EVERY_S = 1.0  # how often the speed meter runs its unit of work
FAST_MACHINE = 1.25  # a window's unit within this of the run's least: the machine at its fast speed


def reference_unit() -> None:
    """A fixed piece of interpreter work of the kind the system's Python does (dict lookups,
    string building, small objects): 1.2–2.2 ms on this project's 2-core VM, by the host's speed."""
    table = {f"key-{i}": i for i in range(2000)}
    total = 0
    for n in range(5):
        for i in range(0, 2000, 3):
            total += table[f"key-{i}"] + len(f"{n}:{i}")
    if total < 0:
        raise AssertionError  # (keeps the loop's result alive)


def speed_meter(cpu: int, seconds: float, out: str) -> None:
    """The machine's speed on one CPU over the run: every ``SPEED_EVERY_S`` the CPU time one
    ``reference_unit`` takes, at the idle priority (it runs only when nothing of the system
    wants that CPU, so it never delays a request). The host's speed can change by 1.8× within a
    minute; a part of the system whose CPU a request rises with it has not changed."""
    gc.disable()
    os.sched_setaffinity(0, {cpu})
    with contextlib.suppress(PermissionError, OSError, AttributeError):
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    found: list[tuple[float, float]] = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        t0 = time.thread_time()
        reference_unit()
        found.append((time.time(), (time.thread_time() - t0) * 1e6))
        time.sleep(SPEED_EVERY_S)
    Path(out).write_text(json.dumps(found))


def retention_note(s0: dict[str, float], s1: dict[str, float]) -> str:
    """A retention pass between two samples of the gateway's metrics, and what it removed."""
    passes = s1.get("fixgw_retention_passes_total", 0.0) - s0.get("fixgw_retention_passes_total", 0.0)
    removed = s1.get("fixgw_retention_removed_total", 0.0) - s0.get("fixgw_retention_removed_total", 0.0)
    return f"; a retention pass ({removed:.0f} records removed)" if passes else ""


def stalled_s() -> dict[str, float]:
    """Seconds so far in which some task of this machine waited for I/O or for memory (the
    kernel's pressure stall information; empty where the kernel keeps none)."""
    out = {}
    for resource_name in ("io", "memory"):
        try:
            some = Path(f"/proc/pressure/{resource_name}").read_text().splitlines()[0]
        except OSError:
            continue
        out[f"stall_{resource_name}"] = int(some.rsplit("total=", 1)[1]) / 1e6
    return out


def process_cpu(root: int, clients: list[int]) -> dict[str, float]:
    """CPU seconds used so far by the system's processes, by part: the gateway (``fixgw up``
    itself), Valkey and the cells (its children); and the seconds each part, and the load
    generators, waited for a CPU (``wait_<part>``)."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {"gateway": 0.0, "valkey": 0.0, "cells": 0.0}
    out |= {f"wait_{part}": 0.0 for part in (*out, "clients")}
    for pid in clients:
        with contextlib.suppress(OSError):
            out["wait_clients"] += run_queue_wait(pid)
    pids = [root]
    for task in Path(f"/proc/{root}/task").iterdir():
        with contextlib.suppress(OSError):
            pids += [int(c) for c in (task / "children").read_text().split()]
    for pid in pids:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue  # (ended between the listing and the read)
        if b"fixgw.awake" in cmdline:
            continue  # a CPU's idle time spent spinning (fixgw/awake.py), not the system's work
        fields = stat[stat.rindex(")") + 2:].split()
        part = "gateway" if pid == root else "valkey" if b"valkey-server" in cmdline else "cells"
        out[part] += (int(fields[11]) + int(fields[12])) / tick
        with contextlib.suppress(OSError):
            out[f"wait_{part}"] += run_queue_wait(pid)
    return out


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds used so far by each of the gateway's threads, as "name/tid", by the name the
    gateway gives each (``affinity.show_thread_names``: the dispatcher, the intake, the front,
    QuickFIX's session threads; the rest of its threads named "other")."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            stat = (task / "stat").read_text()
            name = (task / "comm").read_text().strip()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        part = name if name in STAGES else "other"
        out[f"{part}/{task.name}"] = (int(fields[11]) + int(fields[12])) / tick
    return out


def threads_spent(first: dict[str, Any], samples: list[dict[str, Any]]) -> dict[str, float]:
    """CPU seconds each stage's threads used between ``first`` and the samples after it, each
    thread to its last sample (QuickFIX's session threads end with their connections, before
    the last sample)."""
    last: dict[str, float] = {}
    for sample in samples:
        last |= {k: v for k, v in sample.items() if k.startswith("thread_")}
    out = dict.fromkeys((*STAGES, "other"), 0.0)
    for key, value in last.items():
        part = key.removeprefix("thread_").split("/")[0]
        out[part] += value - (first.get(key) or 0.0)
    return out


def machine_now() -> dict[str, float]:
    """What this machine does at this hour, as ``bench/e2e_bench.py`` measures it beside fixgw: a
    raw QuickFIX acceptor echoing each order (``bench/gateway_bench.py --serve-memory``), a burst
    of 2,000 (orders/s) and 3 s at 100/s (p50). Hosts of one kind differ by 2–3× from hour to
    hour; a window's figures mean little without it. Idle CPUs spin as under ``fixgw up``."""
    awake = KeepAwake(os.sched_getaffinity(0)).start() if DEFAULT_SYSTEM.get("embedded", {}).get("keep_cpus_awake") \
        else None
    port = free_port()
    echo = subprocess.Popen([sys.executable, str(ROOT / "bench" / "gateway_bench.py"), "--serve-memory", str(port)],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert echo.stdout is not None and echo.stdout.readline().strip() == "ready"
        out = subprocess.run([sys.executable, str(ROOT / "bench" / "loadclient.py"), str(port), "--orders", "2000",
                              "--rate", "100", "--seconds", "3"], capture_output=True, text=True, check=True)
        result = json.loads(out.stdout.strip().splitlines()[-1])
        return {"orders_s": result["throughput"], "p50_ms": result["p50_ms"]}
    finally:
        echo.terminate()
        echo.wait()
        if awake is not None:
            awake.stop()


def percentile(sorted_ms: list[float], q: float) -> float:
    return sorted_ms[min(len(sorted_ms) - 1, int(len(sorted_ms) * q))] if sorted_ms else float("nan")


def memory_by_kind(valkey: Any, done_requests: int) -> None:
    """Valkey's memory by kind of key (ids and numbers folded), per request answered: what the
    dataset, and so each AOF rewrite, is made of."""
    size: dict[str, int] = {}
    keys: dict[str, int] = {}
    names = list(valkey.scan_iter(count=1000))
    pipe = valkey.pipeline(transaction=False)
    for name in names:
        pipe.memory_usage(name, samples=0)
    for name, used in zip(names, pipe.execute()):
        kind = re.sub(r"\d+", "N", re.sub(r"[0-9a-f]{12,}", "<id>", re.sub(r"CLIENT\d+", "<session>", name.decode())))
        size[kind] = size.get(kind, 0) + (used or 0)
        keys[kind] = keys.get(kind, 0) + 1
    print(f"Valkey used_memory {valkey.info('memory')['used_memory'] / 2**20:.1f} MB after {done_requests} requests; "
          "by kind of key (bytes per request):")
    for kind, used in sorted(size.items(), key=lambda kv: -kv[1])[:20]:
        print(f"  {used / 2**20:8.2f} MB {keys[kind]:>8} keys {used / max(1, done_requests):>8.0f}  {kind}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rate", type=float, default=400, help="requests per second, both sessions together")
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--window", type=float, default=30, help="seconds per window")
    ap.add_argument("--rewrite-every", type=float, default=0,
                    help="also force an AOF rewrite (BGREWRITEAOF) every this many seconds: how much one stalls the order path")
    ap.add_argument("--memory", action="store_true", help="at the end, Valkey's memory by kind of key")
    ap.add_argument("--nice", type=int, help="run the system at this nice value instead of [embedded] nice")
    ap.add_argument("--prefill", type=int, default=0, metavar="ORDERS",
                    help="first rest this many orders in the book, as fast as the system takes them: the same "
                         "rate's cost on a system that already holds them, not only on a new one")
    ap.add_argument("--client", nargs=6, help=argparse.SUPPRESS)
    ap.add_argument("--hiccups", nargs=3, help=argparse.SUPPRESS)
    ap.add_argument("--speed", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.hiccups:
        cpu, seconds_text, out = args.hiccups
        hiccups(int(cpu), float(seconds_text), out)
        return
    if args.speed:
        cpu, seconds_text, out = args.speed
        speed_meter(int(cpu), float(seconds_text), out)
        return
    if args.client:
        port, name, rate, seconds, out, start_at = args.client
        client(int(port), name, float(rate), float(seconds), out, float(start_at))
        return
    seconds = args.minutes * 60
    speed = machine_now()
    print(f"this machine now: a raw QuickFIX echo did {speed['orders_s']:,.0f} orders/s, p50 "
          f"{speed['p50_ms']:.2f} ms at 100/s (bench/e2e_bench.py's baseline)", flush=True)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        shutil.copytree(ROOT / "config", tmp / "config")
        vport, fport, hport = free_port(), free_port(), free_port()
        config = tmp / "config" / "fixgw.toml"
        text = config.read_text().replace("6479", str(vport))
        if args.nice is not None:
            text = re.sub(r"(?m)^nice = .*$", f"nice = {args.nice}", text)
        config.write_text(text)
        env = {**os.environ, "PYTHONPATH": str(ROOT),
               "LONGRUN_NICE": str(SYSTEM_NICE if args.nice is None else args.nice)}  # (the load generators')
        log = tmp / "up.log"
        up = subprocess.Popen([sys.executable, "-m", "fixgw.cli", "up", "--config", "config/fixgw.toml",
                               "--fix-port", str(fport), "--http-port", str(hport)], cwd=tmp, stdout=open(log, "wb"),
                              stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            deadline = time.monotonic() + 60
            cells = re.compile(r"(http://127\.0\.0\.1:\d+/metrics)")
            while time.monotonic() < deadline:
                try:
                    if urllib.request.urlopen(f"http://127.0.0.1:{hport}/ready", timeout=2).status == 200 \
                            and len(cells.findall(log.read_text())) >= 4:
                        break
                except OSError:
                    pass
                time.sleep(0.2)
            urls = [f"http://127.0.0.1:{hport}/metrics", *cells.findall(log.read_text())]
            password = (tmp / "var" / "valkey" / "password").read_text().strip()
            valkey = __import__("redis").Redis(port=vport, password=password)
            valkey.config_set("latency-monitor-threshold", 5)  # Valkey's own stalls of 5 ms or more, by event
            valkey.config_set("slowlog-log-slower-than", 5000)  # and which commands they were (µs)
            valkey.config_set("slowlog-max-len", 1000)
            valkey.slowlog_reset()
            if args.prefill:
                filled = subprocess.run([sys.executable, str(ROOT / "bench" / "loadclient.py"), str(fport), "--orders",
                                         str(args.prefill), "--rate", "100", "--seconds", "0.05"], env=env,
                                        capture_output=True, text=True)
                if filled.returncode:
                    raise SystemExit(f"prefill failed: {filled.stderr[-500:]}")
                # The burst's drop copies are worked off before the measured load starts: they
                # are the burst's cost, not the steady rate's.
                inboxes = [GatewayKey(NAMESPACE, kind).inbox_stream for kind in ("fsg", "dc")]
                while any(g.get("lag") or g.get("pending") for inbox in inboxes for g in valkey.xinfo_groups(inbox)):
                    time.sleep(0.5)
                print(f"prefilled {args.prefill:,} resting orders at "
                      f"{json.loads(filled.stdout)['throughput']:,.0f} orders/s, their reports all delivered; "
                      f"Valkey {valkey.info('memory')['used_memory'] / 2**20:.0f} MB", flush=True)
            print(f"fixgw up (default config), {args.rate:.0f} requests/s (30 % cancels) for {args.minutes:g} min, "
                  f"windows of {args.window:g} s", flush=True)
            start_at = time.time() + LOAD_STARTS_AFTER_S
            clients = [subprocess.Popen([sys.executable, __file__, "--client", str(fport), name,
                                         str(args.rate / 2), str(seconds), str(tmp / f"{name}.json"), str(start_at)],
                                        env=env)
                       for name in ("CLIENT1", "CLIENT2")]
            meters = [subprocess.Popen([sys.executable, __file__, "--hiccups", str(cpu), str(seconds + 5 + LOAD_STARTS_AFTER_S),
                                        str(tmp / f"hiccups-{cpu}.json")], env=env) for cpu in sorted(os.sched_getaffinity(0))]
            meters += [subprocess.Popen([sys.executable, __file__, "--speed", str(cpu), str(seconds + LOAD_STARTS_AFTER_S),
                                         str(tmp / f"speed-{cpu}.json")], env=env) for cpu in sorted(os.sched_getaffinity(0))]
            started = time.time()
            timeline: list[tuple[float, dict[str, float], dict[str, Any]]] = []
            next_rewrite = started + args.rewrite_every if args.rewrite_every else float("inf")
            while any(c.poll() is None for c in clients):
                if time.time() >= next_rewrite:
                    valkey.bgrewriteaof()
                    next_rewrite += args.rewrite_every
                sample: dict[str, float] = {}
                for n, url in enumerate(urls):
                    try:
                        for k, v in scrape(url).items():
                            sample[k] = sample.get(k, 0.0) + v
                            if k == "python_gc_pause_seconds_total":  # whose pauses: the gateway's or the cells'
                                part = f"{k}:{'gateway' if n == 0 else 'cells'}"
                                sample[part] = sample.get(part, 0.0) + v
                    except OSError:
                        pass
                info = valkey.info("persistence")
                timeline.append((time.time(), sample, {"at": time.time()} | {k: info.get(k) for k in (
                    "aof_rewrites", "aof_delayed_fsync", "aof_rewrite_in_progress", "rdb_bgsave_in_progress",
                    "aof_last_rewrite_time_sec")} | {"latest_fork_usec": valkey.info("stats").get("latest_fork_usec"),
                                                      "used_memory": valkey.info("memory").get("used_memory"),
                                                      "keys": valkey.dbsize(),
                                                      "commands": {k.removeprefix("cmdstat_"): (v["calls"], v["usec"])
                                                                   for k, v in valkey.info("commandstats").items()}}
                                 | {f"cpu_{part}": v for part, v in process_cpu(up.pid, [c.pid for c in clients]).items()}
                                 | {f"thread_{part}": v for part, v in thread_cpu(up.pid).items()}
                                 | {"steal": steal_s()} | stalled_s()))
                time.sleep(1.0)
            results = [json.loads((tmp / f"{n}.json").read_text()) for n in ("CLIENT1", "CLIENT2")]
            for meter in meters:
                meter.wait(30)
            machine = sorted((at, ms, cpu) for cpu in sorted(os.sched_getaffinity(0))
                             for at, ms in json.loads((tmp / f"hiccups-{cpu}.json").read_text()))
            speeds = {cpu: json.loads((tmp / f"speed-{cpu}.json").read_text()) for cpu in sorted(os.sched_getaffinity(0))}
            stalls = valkey.execute_command("LATENCY", "LATEST")
            stall_history = {event.decode() if isinstance(event, bytes) else event:
                             valkey.execute_command("LATENCY", "HISTORY", event) for event, *_ in stalls}
            slow: dict[str, list[float]] = {}
            for entry in valkey.slowlog_get(1000):
                words = entry["command"].split()
                name = (words[0] if words else b"?").decode(errors="replace").upper()
                if name in ("EVALSHA", "EVAL", "FCALL") and len(words) > 1:
                    name += " " + words[1][:8].decode(errors="replace")
                slow.setdefault(name, []).append(entry["duration"] / 1000)
            slowest = sorted((d for r in results for d in r["done"]), key=lambda d: -d[1])[:SLOWEST]
            crossed = stages_of(valkey, [(cl, at, at + ms / 1000) for at, ms, _, _, cl in slowest])  # (after SLOWLOG)
            log_lines = log.read_text().splitlines()
            misses_log = [line for line in log_lines if "group commit not possible" in line]
            if args.memory:
                memory_by_kind(valkey, done_requests=sum(len(json.loads((tmp / f"{n}.json").read_text())["done"])
                                                         for n in ("CLIENT1", "CLIENT2")))
        finally:
            os.killpg(up.pid, signal.SIGTERM)
            up.wait(30)
    done = sorted(d for r in results for d in r["done"])
    unanswered = sum(r["unanswered"] for r in results)
    # Windows from the first request sent; the last one takes the few requests the two clients
    # send after it ends (they start a moment apart), so no window is a sliver of a second.
    origin = done[0][0] if done else started
    windows = max(1, math.ceil(seconds / args.window))
    print(f"{'window':>8} {'requests':>8} {'p50 ms':>7} {'p99 ms':>7} {'p99.9 ms':>8} {'max ms':>7}  "
          "AOF rewrites, delayed fsyncs, group-commit misses, "
          "GC collections (gateway+cells: their pauses together and each part's, how many of 5 ms or more), "
          "retention passes, lease renewals")
    p99s, p999s, maxes = [], [], []
    first_unit: dict[int, float] = {}  # the speed meters' unit in the first window
    gateway_units: list[float] = []  # each window's unit on the gateway's CPU (the first: cpu_affinity "auto")
    by_thread: list[tuple[float, int, dict[str, float]]] = []  # each window's start, requests, CPU s by thread
    commands_w: list[tuple[float, int, dict[str, Any], dict[str, Any]]] = []  # … Valkey's commandstats at its ends
    for w in range(windows):
        lo = origin + w * args.window
        hi = origin + (w + 1) * args.window if w < windows - 1 else float("inf")
        lat = sorted(ms for at, ms, *_ in done if lo <= at < hi)
        if not lat:
            continue
        # a window's counters: from the last sample before it to its own last one
        in_w = [(s, i) for t, s, i in timeline if t < lo][-1:] + [(s, i) for t, s, i in timeline if lo <= t < hi]

        def delta(get: Any, in_w: list[Any] = in_w) -> float:
            return (get(in_w[-1]) - get(in_w[0])) if len(in_w) > 1 else 0.0

        rewrites = delta(lambda x: int(x[1].get("aof_rewrites") or 0))
        fsyncs = delta(lambda x: int(x[1].get("aof_delayed_fsync") or 0))
        misses = delta(lambda x: x[0].get("fixgw_group_commit_misses_total", 0.0))
        gcs = delta(lambda x: x[0].get("python_gc_collections_total", 0.0))
        gc_ms = 1000 * delta(lambda x: x[0].get("python_gc_pause_seconds_total", 0.0))
        gc_long = delta(lambda x: x[0].get("python_gc_long_pauses_total", 0.0))
        gc_parts = {part: 1000 * delta(lambda x, part=part: x[0].get(f"python_gc_pause_seconds_total:{part}", 0.0))
                    for part in ("gateway", "cells")}
        trims = delta(lambda x: x[0].get("fixgw_retention_passes_total", 0.0))
        trimmed = delta(lambda x: x[0].get("fixgw_retention_removed_total", 0.0))
        renewals = delta(lambda x: x[0].get("fixgw_lock_renewals_total", 0.0)
                         + x[0].get("matching_lease_renewals_total", 0.0))
        fork_ms = (in_w[-1][1].get("latest_fork_usec") or 0) / 1000 if rewrites else 0.0
        took = max((int(i.get("aof_last_rewrite_time_sec") or 0) for _, i in in_w), default=0)
        memory_mb = (in_w[-1][1].get("used_memory") or 0) / 2**20 if in_w else 0.0
        keys = (in_w[-1][1].get("keys") or 0) if in_w else 0
        cpu = {part: 1000 * delta(lambda x, part=part: x[1].get(f"cpu_{part}") or 0.0) / len(lat)
               for part in ("gateway", "valkey", "cells")}
        span = max(1e-9, in_w[-1][1].get("at", hi) - in_w[0][1].get("at", lo)) if len(in_w) > 1 else 1.0
        waits = {part: 1000 * delta(lambda x, part=part: x[1].get(f"cpu_wait_{part}") or 0.0) / span
                 for part in ("gateway", "valkey", "cells", "clients")}
        steal = 100 * delta(lambda x: x[1].get("steal") or 0.0) / span / (os.cpu_count() or 1)
        valkey_stalls = ", ".join(f"{event} {max(ms for at, ms in hist if lo <= at < hi)} ms"
                                  for event, hist in sorted(stall_history.items())
                                  if any(lo <= at < hi for at, _ in hist))
        bumps = [late for t, late, _ in machine if lo <= t < hi]
        unit = {cpu: statistics.median(us for t, us in runs if lo <= t < hi) if any(lo <= t < hi for t, _ in runs)
                else float("nan") for cpu, runs in speeds.items()}
        first_unit = first_unit or unit
        if len(in_w) > 1:
            commands_w.append((w * args.window, len(lat), in_w[0][1]["commands"], in_w[-1][1]["commands"]))
            by_thread.append((w * args.window, len(lat), threads_spent(in_w[0][1], [i for _, i in in_w[1:]])))
        p99, p999, mx = percentile(lat, 0.99), percentile(lat, 0.999), lat[-1]
        max_at = max((ms, at) for at, ms, *_ in done if lo <= at < hi)[1]  # when (to find it in other records)
        p99s.append(p99)
        p999s.append(p999)
        maxes.append(mx)
        gateway_units.append(unit.get(min(unit), float("nan")) if unit else float("nan"))
        print(f"{w * args.window:>6.0f} s {len(lat):>8} {percentile(lat, 0.5):>7.2f} {p99:>7.2f} {p999:>8.2f} "
              f"{mx:>7.1f}  {rewrites:.0f}{f' (fork {fork_ms:.1f} ms, {took} s)' if rewrites else ''}, {fsyncs:.0f}, "
              f"{misses:.0f}, {gcs:.0f} ({gc_ms:.0f} ms: gateway {gc_parts['gateway']:.0f}, "
              f"cells {gc_parts['cells']:.0f}; {gc_long:.0f} ≥ 5 ms), {trims:.0f} ({trimmed:.0f} records), "
              f"{renewals:.0f}; Valkey {memory_mb:.0f} MB, {keys} keys; CPU ms/request: gateway {cpu['gateway']:.2f}, "
              f"Valkey {cpu['valkey']:.2f}, cells {cpu['cells']:.2f}; waiting for a CPU, ms/s: "
              + ", ".join(f"{part} {ms:.0f}" for part, ms in waits.items()) + f"; steal {steal:.1f} %"
              + (f"; Valkey's own stalls: {valkey_stalls}" if valkey_stalls else "")
              + (f"; the machine's hiccups: {len(bumps)}, max {max(bumps):.0f} ms" if bumps else "")
              + "; the machine's speed (a fixed unit of Python, µs, and against the first window): "
              + ", ".join(f"CPU {cpu} {us:.0f} (×{us / first_unit[cpu]:.2f})" for cpu, us in unit.items())
              + f"; its max sent at +{max_at - origin:.1f} s ({datetime.datetime.fromtimestamp(max_at, datetime.UTC):%H:%M:%S.%f})",
              flush=True)
    print("the slowest requests, and what the second around each held (GC pauses, waits for a CPU in ms, steal, "
          "the machine's waits for I/O and memory), where their time went (the streams they crossed), what was logged:")
    for at, ms, kind, to_stamp, cl in slowest:
        before = [(t, s, i) for t, s, i in timeline if t <= at][-1:] or timeline[:1]
        after = [(t, s, i) for t, s, i in timeline if t >= at + ms / 1000][:1] or timeline[-1:]
        (t0, s0, i0), (t1, s1, i1) = before[0], after[0]
        gc_of = {part: 1000 * (s1.get(f"python_gc_pause_seconds_total:{part}", 0.0)
                               - s0.get(f"python_gc_pause_seconds_total:{part}", 0.0)) for part in ("gateway", "cells")}
        waited = {part: 1000 * ((i1.get(f"cpu_wait_{part}") or 0.0) - (i0.get(f"cpu_wait_{part}") or 0.0))
                  for part in ("gateway", "valkey", "cells", "clients")}
        print(f"  {kind} at +{at - origin:6.1f} s ({datetime.datetime.fromtimestamp(at, datetime.UTC):%H:%M:%S.%f} UTC): "
              f"{ms:6.1f} ms, its answer stamped (SendingTime) {to_stamp:.0f} ms "
              f"after the send; over {t1 - t0:.1f} s: GC gateway {gc_of['gateway']:.0f}, "
              f"cells {gc_of['cells']:.0f}; waits " + ", ".join(f"{p} {w:.0f}" for p, w in waited.items())
              + f"; steal {1000 * ((i1.get('steal') or 0.0) - (i0.get('steal') or 0.0)):.0f} ms"
              + "".join(f"; some task waiting for {kind} {1000 * (i1[f'stall_{kind}'] - i0[f'stall_{kind}']):.0f} ms"
                        for kind in ("io", "memory") if f"stall_{kind}" in i0 and f"stall_{kind}" in i1)
              + retention_note(s0, s1))
        held = [f"{late:.0f} ms on CPU {cpu}" for t, late, cpu in machine if at - 1.0 <= t <= at + ms / 1000 + 0.1]
        if held:
            print("      the machine's own hiccups around it (the meter's wake-ups late): " + ", ".join(held))
        if cl in crossed:
            appended, published = crossed[cl]
            print(f"      its stages: gateway in {1000 * (appended - at):.0f} ms (to its command appended), "
                  + (f"cell {1000 * (published - appended):.0f} ms (to its event in the inbox), gateway out "
                     f"{1000 * (at + ms / 1000 - published):.0f} ms (to its answer read)" if published else
                     "its event no longer in the inbox (retention)"))
        for line in logged_between(log_lines, at - 1.0, at + ms / 1000 + 1.0)[:8]:
            print(f"      log: {line[:200]}")
    late = [(ms, to_stamp) for _, ms, _, to_stamp, _ in done if ms >= 10]
    if late:
        before = sorted(min(1.0, max(0.0, to_stamp / ms)) for ms, to_stamp in late)
        print(f"{len(late)} requests took 10 ms or more; the share of their time before their answer was stamped "
              f"(the order path up to the gateway's send stage): median {100 * before[len(before) // 2]:.0f} %, "
              f"p10 {100 * before[len(before) // 10]:.0f} %, p90 {100 * before[9 * len(before) // 10]:.0f} %")
    goal = GOALS.get(int(args.rate))
    spent = {part: (timeline[-1][2].get(f"cpu_{part}") or 0.0) - (timeline[0][2].get(f"cpu_{part}") or 0.0)
             for part in ("gateway", "valkey", "cells")}
    busy = sum(spent.values()) / max(1e-9, timeline[-1][0] - timeline[0][0])
    print(f"CPU per request over the run: {1000 * sum(spent.values()) / max(1, len(done)):.2f} ms ("
          + ", ".join(f"{part} {1000 * v / max(1, len(done)):.2f}" for part, v in spent.items())
          + f"); at {args.rate:.0f}/s the system kept {busy:.2f} of the machine's {os.cpu_count()} CPUs busy "
          f"({100 * busy / (os.cpu_count() or 1):.0f} %), its load generators not counted")
    threads = threads_spent(timeline[0][2], [i for _, _, i in timeline])
    print("the gateway's CPU per request by thread, ms: " + ", ".join(
        f"{part} {1000 * v / max(1, len(done)):.3f}" for part, v in threads.items()))
    if len(by_thread) > 1:  # whether a stage's cost per request drifts through the run
        print("the same by window, first and last: " + "; ".join(
            f"{start:.0f} s: " + ", ".join(f"{part} {1000 * v / max(1, n):.3f}" for part, v in spent_w.items())
            for start, n, spent_w in (by_thread[0], by_thread[-1])))
    if len(commands_w) > 1:  # whether a command's cost drifts as Valkey's dataset grows
        (start0, n0, a0, b0), (start1, n1, a1, b1) = commands_w[0], commands_w[-1]

        def per_request(a: dict[str, Any], b: dict[str, Any], n: int, name: str) -> tuple[float, float]:
            calls = b.get(name, (0, 0))[0] - a.get(name, (0, 0))[0]
            usec = b.get(name, (0, 0))[1] - a.get(name, (0, 0))[1]
            return usec / max(1, n), usec / max(1, calls)

        top = sorted(b1, key=lambda name: -per_request(a1, b1, n1, name)[0])[:8]
        print(f"Valkey's time per request by command, µs, windows at {start0:.0f} s → {start1:.0f} s "
              "(µs a call): " + ", ".join(
                  f"{name} {per_request(a0, b0, n0, name)[0]:.1f} → {per_request(a1, b1, n1, name)[0]:.1f} "
                  f"({per_request(a0, b0, n0, name)[1]:.2f} → {per_request(a1, b1, n1, name)[1]:.2f})" for name in top))
    if slow:
        print("Valkey's commands of 5 ms or more (SLOWLOG): " + ", ".join(
            f"{name} ×{len(ms)} (max {max(ms):.1f} ms)" for name, ms in sorted(slow.items(), key=lambda kv: -len(kv[1]))))
    print(f"answered {len(done)}, unanswered {unanswered}; group commit fell back to one by one "
          f"{len(misses_log)} times (gateway log)")
    fastest = min((u for u in gateway_units if u == u), default=float("nan"))
    fast = [w for w, u in enumerate(gateway_units) if u <= FAST_MACHINE * fastest]
    if fast and len(fast) < len(gateway_units):
        print(f"windows with the gateway's CPU at its fastest (the speed meter's unit within "
              f"{100 * (FAST_MACHINE - 1):.0f} % of the run's least, {fastest:.0f} µs): {len(fast)} of {len(gateway_units)}; "
              f"their worst p99 {max(p99s[w] for w in fast):.2f} ms, p99.9 {max(p999s[w] for w in fast):.2f} ms, "
              f"max {max(maxes[w] for w in fast):.1f} ms; the others' {max(p99s[w] for w in range(len(p99s)) if w not in fast):.2f}"
              f" / {max(p999s[w] for w in range(len(p999s)) if w not in fast):.2f}"
              f" / {max(maxes[w] for w in range(len(maxes)) if w not in fast):.1f} ms")
    print(f"worst window: p99 {max(p99s):.2f} ms, p99.9 {max(p999s):.2f} ms, max {max(maxes):.1f} ms"
          + (f"; goal p99 < {goal[0]:g}, p99.9 < {goal[1]:g}, max < {goal[2]:g} ms: "
             f"{'met' if max(p99s) < goal[0] and max(p999s) < goal[1] and max(maxes) < goal[2] else 'NOT met'}"
             if goal else "")
          + f" (this machine's raw echo: {speed['orders_s']:,.0f} orders/s, p50 {speed['p50_ms']:.2f} ms at 100/s)")


if __name__ == "__main__":
    main()
