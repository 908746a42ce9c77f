"""Keeping the system's CPUs awake (``fixgw/awake.py``): a spinner per CPU, at the lowest
priority, that never outlives the process that started it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from datastore.settings import ConfigError
from fixgw.awake import KeepAwake
from fixgw.cli import _embedded_settings

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow  # starts processes: not in `make unit`


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_a_spinner_runs_on_its_cpu_at_the_lowest_priority_and_stops_when_asked() -> None:
    cpu = min(os.sched_getaffinity(0))
    awake = KeepAwake([cpu, cpu]).start()  # (one per CPU, however often it is named)
    try:
        [proc] = awake.procs
        deadline = time.monotonic() + 10
        while os.sched_getscheduler(proc.pid) != os.SCHED_IDLE:  # (it sets both itself, at start)
            assert time.monotonic() < deadline, "the spinner did not take SCHED_IDLE"
            time.sleep(0.05)
        assert os.sched_getaffinity(proc.pid) == {cpu}
        assert awake.describe() == f"CPU {cpu} kept awake (keep_cpus_awake)"
    finally:
        awake.stop()
    assert not alive(proc.pid)


def test_a_spinner_ends_when_the_process_that_started_it_is_killed() -> None:
    starter = subprocess.Popen(
        [sys.executable, "-c", "import os, sys, time\n"
         "from fixgw.awake import KeepAwake\n"
         "a = KeepAwake([min(os.sched_getaffinity(0))]).start()\n"
         "print(a.procs[0].pid, flush=True)\n"
         "time.sleep(60)\n"],
        stdout=subprocess.PIPE, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert starter.stdout is not None
    spinner = int(starter.stdout.readline())
    try:
        time.sleep(0.5)
        assert alive(spinner)
        starter.send_signal(signal.SIGKILL)  # no clean-up of its own
        starter.wait(10)
        deadline = time.monotonic() + 10
        while alive(spinner):
            assert time.monotonic() < deadline, "the spinner outlived the process that started it"
            time.sleep(0.05)
    finally:
        if alive(spinner):
            os.kill(spinner, signal.SIGKILL)


def test_keep_cpus_awake_is_true_or_false() -> None:
    assert _embedded_settings({"embedded": {"keep_cpus_awake": True}})["keep_cpus_awake"] is True
    with pytest.raises(ConfigError, match=r"keep_cpus_awake 'yes': true or false"):
        _embedded_settings({"embedded": {"keep_cpus_awake": "yes"}})
