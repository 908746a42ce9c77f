"""Keep every thread of the gateway on the CPUs its ``cpu_affinity`` names.

The gateway's threads — QuickFIX's (one per connection, calling ``fromApp`` and ``toApp``), the
intake's and the dispatcher's — share one GIL, and hand it over at every call into the
bindings and every socket call. Spread over two CPUs, each hand-over wakes a thread on the
other CPU, and the one that gave the GIL up waits there, its caches cooling. Measured on this
project's 2-core machine at 2,000 orders/s (docs/benchmarks.md, 2026-12-02 · af21216): pinned to one CPU, the order
path's p50 went from 7.3–7.8 to 5.3–5.5 ms and its p99 from 13–23 to 8.0–9.3 ms, for 5% less
CPU an order, and the AT echo from 7.8–9.1k to 13.4–15.9k echoes/s. The OS scheduler cannot
know this; a deployment can, so it is a setting.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from pathlib import Path
from typing import Literal

from datastore.settings import ConfigError

log = logging.getLogger("fixgw.affinity")


def cpus_for(setting: Literal["auto"] | list[int]) -> set[int]:
    """The CPUs ``setting`` names, checked against those this process may use (empty: none
    asked). "auto": the first of those. A CPU the process may not use is a ConfigError that
    says which ones it may."""
    allowed = os.sched_getaffinity(0)
    if setting == "auto":
        return {min(allowed)}
    wanted = set(setting)
    if not wanted <= allowed:
        raise ConfigError(f"[gateway] cpu_affinity {sorted(setting)}: this process may only run on CPUs "
                          f"{sorted(allowed)}")
    return wanted


def datastore_cpus(gateway: set[int]) -> set[int]:
    """The CPUs for a Valkey started beside a gateway pinned to ``gateway`` (``fixgw up``'s
    embedded one): those this process may use that the gateway does not. Empty (leave it to the
    OS) when the gateway is not pinned or takes every CPU.

    Why: left to the OS, Valkey often runs on the gateway's CPU, and every round trip of the
    gateway then waits for the gateway's own thread to give that CPU up. Measured on this
    project's 2-core machine (docs/benchmarks.md, 2026-12-02 · 296e3af), unloaded (100 orders/s) p50
    0.91–1.09 → 0.84–0.89 ms (3 alternating pairs), and less CPU an order: the gateway's 0.41–0.44 →
    0.39–0.41 ms, Valkey's 0.21–0.29 → 0.19–0.21."""
    rest = os.sched_getaffinity(0) - gateway
    return rest if gateway and rest else set()


def valkey_cpu_settings(cpus: set[int]) -> dict[str, str]:
    """Valkey's own settings that keep its main thread and its background I/O threads on
    ``cpus`` (none: empty). Its forked children (the AOF rewrite, an RDB save) may run on any
    CPU this process may: they would inherit the main thread's CPUs otherwise, and a rewrite
    then competed with the thread every order waits for (with a rewrite forced mid-run at
    2,000 orders/s, p99 4.6–5.7 ms either way: no placement of the child did better)."""
    if not cpus:
        return {}
    listed, anywhere = _cpulist(cpus), _cpulist(os.sched_getaffinity(0))
    return {"server-cpulist": listed, "bio-cpulist": listed, "aof-rewrite-cpulist": anywhere,
            "bgsave-cpulist": anywhere}


def _cpulist(cpus: set[int]) -> str:
    return ",".join(map(str, sorted(cpus)))


def pin_threads(cpus: set[int]) -> None:
    """Every thread of this process on ``cpus``, and every thread made later too (a new thread
    inherits the affinity of the thread that makes it)."""
    for task in Path("/proc/self/task").iterdir():
        try:
            os.sched_setaffinity(int(task.name), cpus)
        except ProcessLookupError:  # a thread that ended meanwhile
            pass
    log.info("gateway threads pinned to CPU %s", ",".join(map(str, sorted(cpus))))


NICE = -10  # `fixgw up`'s default: the system ahead of the machine's other work (``raise_priority``); 0 is the OS's


def raise_priority(nice: int) -> str:
    """Run this process, every thread it has and every thread and child it makes later, at
    ``nice`` (-20 … 19): a system's own processes ahead of whatever else the machine runs.
    Linux keeps a nice value per thread and a new thread or child inherits its maker's, so each
    thread of now is set and the rest follow. A scheduler trace of the order path at 400
    requests/s caught another service's short-lived processes (a broker's VM starting up) on
    Valkey's CPU for 40–74 ms while Valkey, runnable, waited (docs/decisions). Lowering the nice
    value needs root or CAP_SYS_NICE (systemd: ``Nice=``, or ``LimitNICE=``); without it the
    process keeps the value it was started with. Returns what was done, for the start-up line."""
    if not isinstance(nice, int) or isinstance(nice, bool) or not -20 <= nice <= 19:
        raise ConfigError(f"nice {nice!r}: a whole number from -20 (first) to 19 (last); 0 is the OS's default")
    before = os.getpriority(os.PRIO_PROCESS, 0)
    if nice != before:
        try:
            for task in Path("/proc/self/task").iterdir():
                with contextlib.suppress(ProcessLookupError):  # a thread that ended meanwhile
                    os.setpriority(os.PRIO_PROCESS, int(task.name), nice)
        except PermissionError:
            return (f"nice {before} (nice {nice} not permitted: it needs root or CAP_SYS_NICE; "
                    "the order path then shares the CPUs evenly with the machine's other work)")
    if nice == 0:
        return "nice 0"
    if os.getsid(0) != os.getpid():
        return f"nice {nice} (within the session it shares: docs/configuration.md, [embedded] nice)"
    return f"nice {nice}, its session's too" if group_nice(os.getpid(), nice) else f"nice {nice}"


def group_nice(pid: int, nice: int) -> bool:
    """Give the session ``pid`` leads the CPU share of ``nice`` against other sessions. Where
    the kernel groups each session's processes (autogroup: processes in no cgroup but the root,
    as without systemd) a thread's nice value ranks it only within its session's group, and the
    groups share a CPU by their own weight, nice 0 unless set: at nice -10 every thread, the
    system still got no more of a CPU than another session's busy process (one client at 400
    orders/s beside a CPU-bound process of another session on each CPU: p99 7.6–8.5 ms, against
    5.2–5.3 with the groups at -10 too; 3.5–4.3 without it). Only for a process that leads its
    own session: the group is the session's, and another's would be changed with it. Returns
    whether the group now has that weight (False: no autogroups here, or not permitted)."""
    if os.getsid(pid) != pid:
        return False
    try:
        Path(f"/proc/{pid}/autogroup").write_text(str(nice))
    except OSError:  # no autogroups (a cgroup decides: systemd's CPUWeight=), or not permitted
        return False
    return True


def _realtime_priority(priority: int) -> int:
    if not isinstance(priority, int) or isinstance(priority, bool) or not 0 <= priority <= 99:
        raise ConfigError(f"realtime_priority {priority!r}: a whole number from 1 (lowest real-time) to 99; "
                          "0 leaves the system to the OS's normal scheduling")
    return priority


def run_realtime(pid: int, priority: int) -> bool:
    """Run thread ``pid`` (the embedded Valkey's main thread: its pid) under ``SCHED_FIFO`` at
    ``priority`` (1 … 99; 0 leaves it as it is), with ``SCHED_RESET_ON_FORK``: what it forks (an
    AOF rewrite, an RDB save, which may run on the gateway's CPU) and the threads it makes later
    run as normal ones. Returns whether it was done: it needs root or ``CAP_SYS_NICE``."""
    if _realtime_priority(priority) == 0:
        return False
    try:
        os.sched_setscheduler(pid, os.SCHED_FIFO | os.SCHED_RESET_ON_FORK, os.sched_param(priority))
    except PermissionError:
        return False
    return True


def realtime_here(priority: int) -> bool:
    """Every thread of this process under ``SCHED_FIFO`` at ``priority``, and every thread and
    child it makes later (they inherit it): the gateway's threads and the cells ``fixgw up``
    starts. A child that wants less (a spinner: ``SCHED_IDLE``) sets its own. Returns whether it
    was done (0: nothing asked; else root or ``CAP_SYS_NICE`` needed)."""
    if _realtime_priority(priority) == 0:
        return False
    try:
        for task in Path("/proc/self/task").iterdir():
            with contextlib.suppress(ProcessLookupError):  # a thread that ended meanwhile
                os.sched_setscheduler(int(task.name), os.SCHED_FIFO, os.sched_param(priority))
    except PermissionError:
        return False
    return True


def realtime_described(priority: int, done: bool) -> str:
    """The start-up line's part for ``[embedded] realtime_priority``."""
    if priority == 0:
        return "scheduled as normal processes"
    if not done:
        return (f"scheduled as normal processes (real-time priority {priority} not permitted: it needs root or "
                "CAP_SYS_NICE)")
    return f"real-time (SCHED_FIFO {priority}: the gateway, the cells and Valkey's main thread)"


OS_NAME_MAX = 15  # bytes of a thread's name the kernel keeps (TASK_COMM_LEN - 1)
ENGINE_THREAD = "fix-session"  # QuickFIX's own threads (one per connection), as the OS shows them


def show_thread_names(named: set[int]) -> None:
    """Give each thread of this process its name where the OS shows it (``top -H``, ``ps -L``,
    ``/proc/PID/task/TID/comm``), so each stage's CPU (the dispatcher's, the intake's, the front's,
    QuickFIX's session threads') can be read from outside without a profiler. ``named``: the
    native ids done already (kept by the caller, so a call names only the new ones; those of
    threads that ended leave it)."""
    threads = threading.enumerate()
    named.intersection_update(t.native_id for t in threads)
    for thread in threads:
        tid = thread.native_id
        if tid is None or tid in named:
            continue
        # QuickFIX's C++ threads appear in Python as dummies when they first call back into it.
        name = ENGINE_THREAD if isinstance(thread, threading._DummyThread) else thread.name  # noqa: SLF001
        try:
            Path(f"/proc/self/task/{tid}/comm").write_bytes(name.encode()[:OS_NAME_MAX])
        except OSError:  # ended meanwhile, or no procfs: a name is a convenience
            pass
        named.add(tid)


def cpu_by_thread(pid: int) -> dict[str, float]:
    """CPU seconds used so far by the live threads of process ``pid``, by the name the OS shows
    (``show_thread_names``; threads of one name together). A thread that ended is no longer
    counted here, only in the process's total."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            stat = (task / "stat").read_text()
            name = (task / "comm").read_text().strip()
        except OSError:  # ended between the listing and the read
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return out
