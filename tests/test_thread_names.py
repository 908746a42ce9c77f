"""The gateway's threads as the OS shows them (``fixgw.affinity.show_thread_names``): each
stage's CPU can be read per thread from outside (``top -H``, ``ps -L``, the long-run bench)."""

from __future__ import annotations

import _thread
import os
import threading
import time
from pathlib import Path

from fixgw.affinity import ENGINE_THREAD, cpu_by_thread, show_thread_names


def os_name(tid: int) -> str:
    return Path(f"/proc/self/task/{tid}/comm").read_text().strip()


def test_each_thread_gets_its_name_and_an_engine_thread_the_engine_s() -> None:
    stop = threading.Event()
    ours = threading.Thread(target=stop.wait, name="a-long-stage-name", daemon=True)
    ours.start()
    # A thread Python did not start (as QuickFIX's are) becomes a dummy when it calls into Python.
    foreign: list[int] = []
    started = threading.Event()

    def engine_thread() -> None:
        foreign.append(threading.current_thread().native_id or 0)
        started.set()
        stop.wait()

    _thread.start_new_thread(engine_thread, ())
    started.wait(5)
    try:
        named: set[int] = set()
        show_thread_names(named)
        assert os_name(ours.native_id or 0) == "a-long-stage-na"  # the kernel keeps 15 bytes
        assert os_name(foreign[0]) == ENGINE_THREAD
        assert {ours.native_id, foreign[0]} <= named
        # a name given once is not written again: an operator's (or a tool's) rename stays
        Path(f"/proc/self/task/{ours.native_id}/comm").write_text("renamed")
        show_thread_names(named)
        assert os_name(ours.native_id or 0) == "renamed"
    finally:
        stop.set()
        ours.join(5)


def test_threads_that_ended_leave_the_set() -> None:
    done = threading.Thread(target=lambda: None, name="short-lived")
    done.start()
    done.join()
    named = {123456789}  # a native id no thread of this process has
    show_thread_names(named)
    assert 123456789 not in named
    assert threading.current_thread().native_id in named


def test_a_thread_s_cpu_is_counted_under_its_name() -> None:
    spent: list[float] = []

    def busy() -> None:
        while time.thread_time() < 0.05:  # this thread's own CPU time, however busy the machine
            pass
        spent.append(time.thread_time())
        stop.wait()

    stop = threading.Event()
    worker = threading.Thread(target=busy, name="busy-stage", daemon=True)
    worker.start()
    try:
        while not spent:
            time.sleep(0.01)
        show_thread_names(set())
        by_name = cpu_by_thread(os.getpid())
        assert by_name["busy-stage"] >= 0.04  # (counted in clock ticks of 10 ms)
        assert by_name["busy-stage"] <= spent[0] + 0.02
    finally:
        stop.set()
        worker.join(5)
