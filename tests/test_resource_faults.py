"""Faults of the resources under the processes: a datastore whose memory is full, a disk that
fills under an AOF datastore, and the host's clock stepping. Under the steady flow of
``tests/venue.py``, from outside the processes: every request answered exactly once, no
sequence number twice, every fill on the drop copy once, each partition trading as the reference
matcher, and service back once the resource is, without anyone touching the processes."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from datastore.embedded import standalone
from tests.gateway_helpers import http_json, wait_until
from tests.system_helpers import System
from tests.venue import (
    AnswerClock,
    Flow,
    Seen,
    check_drop_copy_has_every_fill,
    check_every_request_answered_once,
    check_no_sequence_number_twice,
    check_partition_trades_as_the_reference,
    first_answered_after,
    seen_between,
    watch_ready,
)

# Run one at a time after the rest (`make faults`): each times what a client sees of a fault,
# and the processes of three other tests beside it on two cores blur that.
pytestmark = [pytest.mark.slow, pytest.mark.faults]


def test_a_full_datastore_refuses_new_orders_clearly_keeps_sessions_and_recovers_by_itself(tmp_path: Path) -> None:
    """``fixgw up``'s layout (the session store and both partitions on one Valkey, events
    delivered by the conductors' own commits) with ``maxmemory`` lowered under what it holds
    (``noeviction``): writes that would grow memory are refused by the server."""
    with standalone(**{"maxmemory-policy": "noeviction"}) as server:
        system = System(tmp_path, server, [server, server], store_lines="memoryHighWater = 0.5").start()
        stop_watch = threading.Event()
        try:
            c1, c2, dc = system.client("CLIENT1"), system.client("CLIENT2"), system.client("DROPCOPY")
            flow = Flow(c1, c2)
            clock = AnswerClock([c1, c2])
            ready: list[tuple[float, bool, str]] = []
            threading.Thread(target=watch_ready, args=(system.gateway.http_port, ready, stop_watch), daemon=True).start()
            flow.thread.start()
            time.sleep(1.5)
            admin = server.client()
            used = int(admin.info("memory")["used_memory"])
            start = time.monotonic()
            # Above the gateway's high-water mark (memoryHighWater: 50 % here, for room to spare on
            # a small datastore), under maxmemory: new orders refused with the reason, the rest served.
            admin.config_set("maxmemory", str(int(used * 1.6)))

            def noticed() -> bool:
                return any("datastore memory at" in why for _, ok, why in list(ready) if not ok)

            wait_until(noticed, "/ready to say the datastore's memory is above the high-water mark", 30)
            marked = time.monotonic()  # (the gateway reads INFO memory every second)

            def refused_for_memory() -> bool:
                return any(why.startswith("datastore-full") for why in
                           seen_between(flow, clock, marked, time.monotonic()).refused)

            wait_until(refused_for_memory, "a new order refused for memory", 30)
            time.sleep(1)
            high_water = time.monotonic()
            # At maxmemory: the server refuses writes; the gateway and the cells hold theirs.
            used = int(admin.info("memory")["used_memory"])
            admin.config_set("maxmemory", str(used - 1024 * 1024))
            time.sleep(5)
            admin.config_set("maxmemory", "0")
            freed = time.monotonic()
            recovered = first_answered_after(flow, clock, freed)
            time.sleep(1)
            flow.stop.set()
            flow.thread.join(5)
            sent = check_every_request_answered_once(flow, [c1, c2])
            check_no_sequence_number_twice([c1, c2, dc])
            check_drop_copy_has_every_fill([c1, c2], dc)
            for p in (0, 1):
                check_partition_trades_as_the_reference(server.client(), server.client(), p, str(system.instruments))
            above = seen_between(flow, clock, marked, high_water)
            full = seen_between(flow, clock, high_water, freed)
            reasons = sorted({re.sub(r"[\d.]+", "N", why.split(" (")[0]) for at, ok, why in ready
                              if at >= start and not ok})
            print(f"memory above the high-water mark for {high_water - start:.0f} s: {above.describe()}")
            print(f"memory full (maxmemory reached) for 5 s: {full.describe()}; a new order sent after memory was "
                  f"freed answered {recovered:.1f} s after; /ready meanwhile: {reasons}; {sent} requests in all")
            refused_orders = [why for why in above.refused if why.startswith("datastore-full")]
            assert refused_orders, f"new orders above the high-water mark are refused, saying why: {above.refused}"
            # Cancels and replaces are served: refused only as what they name was (an order refused
            # above the mark is unknown to its cancel), never for memory.
            others = [why for why in above.refused if why.split(":")[0] not in ("datastore-full", "unknown-order",
                                                                                "stale-clordid")]
            assert not others, others
            assert not (c1.logout_texts or c2.logout_texts or dc.logout_texts), "the sessions stayed logged on"
            assert any("datastore memory at" in why for why in reasons), reasons
            assert any("refuses writes" in why or "not taking writes" in why for why in reasons), reasons
            status, body = http_json(system.gateway.http_port)
            assert status == 200, body
        finally:
            stop_watch.set()
            system.stop()


def test_the_memory_high_water_mark_is_read_from_info_memory() -> None:
    from datastore.memory import memory_problem

    assert memory_problem({"used_memory": 95, "maxmemory": 100}, 0.9) is not None
    assert "95 % of its maxmemory" in str(memory_problem({"used_memory": 95, "maxmemory": 100}, 0.9))
    assert memory_problem({"used_memory": 89, "maxmemory": 100}, 0.9) is None
    assert memory_problem({"used_memory": 10**9, "maxmemory": 0}, 0.9) is None  # no limit: never full
    assert memory_problem({"used_memory": 99, "maxmemory": 100}, 0.0) is None  # the mark switched off


def run_flow_through(system: System, fault: Callable[[], None], heal: Callable[[], None], seconds: float,
                     what: str) -> tuple[Seen, float, list[str]]:
    """The flow under ``system``; ``fault`` for ``seconds``, then ``heal``; every guarantee
    checked. Returns what the clients saw of the requests sent meanwhile, the seconds from the
    heal until a new order sent after it was answered, and what /ready said meanwhile."""
    stop_watch = threading.Event()
    try:
        c1, c2, dc = system.client("CLIENT1"), system.client("CLIENT2"), system.client("DROPCOPY")
        flow = Flow(c1, c2)
        clock = AnswerClock([c1, c2])
        ready: list[tuple[float, bool, str]] = []
        threading.Thread(target=watch_ready, args=(system.gateway.http_port, ready, stop_watch), daemon=True).start()
        flow.thread.start()
        time.sleep(1.5)
        start = time.monotonic()
        fault()
        time.sleep(seconds)
        heal()
        healed = time.monotonic()
        recovered = first_answered_after(flow, clock, healed)
        time.sleep(1)
        flow.stop.set()
        flow.thread.join(5)
        sent = check_every_request_answered_once(flow, [c1, c2])
        check_no_sequence_number_twice([c1, c2, dc])
        check_drop_copy_has_every_fill([c1, c2], dc)
        server = system.store
        for p in (0, 1):
            check_partition_trades_as_the_reference(server.client(), server.client(), p, str(system.instruments))
        seen = seen_between(flow, clock, start, healed)
        reasons = sorted({re.sub(r"[\d.]+", "N", why.split(" (")[0]) for at, ok, why in ready if at >= start and not ok})
        print(f"{what} for {seconds:.0f} s: {seen.describe()}; a new order sent after it answered {recovered:.1f} s "
              f"after; /ready meanwhile: {reasons}; {sent} requests in all, violations: 0")
        status, body = http_json(system.gateway.http_port)
        assert status == 200, body
        return seen, recovered, reasons
    finally:
        stop_watch.set()


def test_a_full_disk_under_an_aof_datastore_holds_writes_loses_nothing_and_resumes(tmp_path: Path) -> None:
    """The datastore's AOF on a 64 MiB tmpfs of the test's own; a file fills what is left of it
    under the flow, then is deleted. Valkey refuses writes while it cannot write its AOF
    (``MISCONF``): the gateway holds its writes as in a failover, nothing acknowledged is lost
    (every request answered once, the partitions as the reference), and it serves again by itself
    once there is room."""
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "fixgw-test-disk", str(disk)], check=True)
    try:
        with standalone(aof=True, data_dir=disk / "valkey") as server:
            # MISCONF refuses every write, lease renewals too: a lease outlives a disk full for
            # less than lockTtl (30 s, the default), longer and the gateway stops.
            system = System(tmp_path, server, [server, server], lock_ttl="30s").start()
            filler = disk / "filler"

            def fill() -> None:
                # Every byte left, at once (tmpfs allocates without writing), then whatever a
                # rounding left: the next AOF write fails with ENOSPC. Unbuffered: nothing is
                # left to flush (and fail) when the file is closed.
                with open(filler, "wb", buffering=0) as f:
                    try:
                        os.posix_fallocate(f.fileno(), 0, shutil.disk_usage(disk).free)
                    except OSError:
                        pass
                    f.seek(0, os.SEEK_END)
                    try:
                        while True:
                            f.write(b"\0" * 4096)
                    except OSError:  # ENOSPC: the disk is full
                        pass

            try:
                seen, _, reasons = run_flow_through(system, fill, filler.unlink, 5, "disk full under the AOF")
            finally:
                system.stop()
            assert any("not taking writes" in why for why in reasons), f"/ready said the datastore was refusing: {reasons}"
            assert "Errors writing to the AOF file" in server.log_tail(200) or \
                "AOF" in server.log_tail(200), server.log_tail(20)
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)
