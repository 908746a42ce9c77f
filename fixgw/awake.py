"""Keep the system's CPUs awake: on each CPU the system runs on, a process that spins at the
lowest priority there is (``SCHED_IDLE``), so the CPU never halts while the system is idle.

Why: every request crosses a dozen wake-ups (the front, QuickFIX's session thread, the intake,
Valkey, the cell, the dispatcher, and back). A halted CPU wakes slowly; a virtual machine's
halted CPU goes through the hypervisor to be woken, tens to hundreds of microseconds each time,
and the thread that wakes it pays part of that in CPU. A CPU running a ``SCHED_IDLE`` task is
not halted: the scheduler switches to the woken thread at once, and the spinner gets the CPU
back when nothing else wants it (a contended CPU gives it about 1 %: the least weight there
is, 15 against a normal task's 1,024, so it takes next to no time from work, ours or the
machine's). Aeron and
Artio spin their idle threads for the same reason; here the OS's idle time does it, so the
system's own threads still block and wake as before.

What it costs: each CPU shows 100 % busy whatever the load (``top``, the hypervisor's bill,
a laptop's fan). ``[embedded] keep_cpus_awake = false`` lets the CPUs sleep.

A spinner stops when the process that started it goes (it checks every few milliseconds), so a
killed ``fixgw up`` leaves none behind.

    python -m fixgw.awake CPU PARENT_PID      (what ``KeepAwake`` starts, one per CPU)

Under systemd (``deploy/systemd/fixgw-awake@.service``, one instance per CPU) the parent is
PID 1 and the spinner runs until its unit stops; there units share a CPU by their cgroups'
weights, so the unit's ``CPUWeight=idle`` does what the session's weight does here.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

CHECK_EVERY = 1 << 18  # loop turns between looks at the parent (a few milliseconds)


def spin(cpu: int, parent: int) -> None:
    """Spin on ``cpu`` at ``SCHED_IDLE`` until ``parent`` is gone."""
    os.sched_setaffinity(0, {cpu})
    os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    # Where the kernel groups a session's processes (autogroup: processes outside any cgroup
    # but the root, as on a machine without systemd), SCHED_IDLE ranks a task only within its
    # group; groups share a CPU by their own weight. The spinner is a session of its own
    # (``KeepAwake.start``), and that group's weight is set to the least there is.
    with contextlib.suppress(OSError):
        Path("/proc/self/autogroup").write_text("19")
    while os.getppid() == parent:
        for _ in range(CHECK_EVERY):
            pass


class KeepAwake:
    """The spinners of a set of CPUs, one process each, children of this process."""

    def __init__(self, cpus: Iterable[int]) -> None:
        self.cpus = sorted(set(cpus))
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self) -> KeepAwake:
        me = str(os.getpid())
        self.procs = [subprocess.Popen([sys.executable, "-m", "fixgw.awake", str(cpu), me], start_new_session=True)
                      for cpu in self.cpus]
        return self

    def stop(self) -> None:
        for proc in self.procs:
            proc.kill()
        for proc in self.procs:
            proc.wait(10)
        self.procs = []

    def describe(self) -> str:
        """For the start-up line."""
        shown = ", ".join(str(c) for c in self.cpus)
        return f"CPU{'s' if len(self.cpus) > 1 else ''} {shown} kept awake (keep_cpus_awake)"


if __name__ == "__main__":
    spin(int(sys.argv[1]), int(sys.argv[2]))
