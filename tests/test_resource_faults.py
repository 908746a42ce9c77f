"""Faults of the resources under the processes: a datastore whose memory is full, a disk that
fills under an AOF datastore, and the host's clock stepping. Under the steady flow of
``tests/venue.py``, from outside the processes: every request answered exactly once, no
sequence number twice, every fill on the drop copy once, each partition trading as the reference
matcher, and service back once the resource is, without anyone touching the processes."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from datastore.embedded import standalone
from tests.gateway_helpers import http_json
from tests.system_helpers import System
from tests.venue import (
    AnswerClock,
    Flow,
    check_drop_copy_has_every_fill,
    check_every_request_answered_once,
    check_no_sequence_number_twice,
    check_partition_trades_as_the_reference,
    first_answered_after,
    seen_between,
    watch_ready,
)

pytestmark = pytest.mark.slow


def test_a_full_datastore_refuses_new_orders_clearly_keeps_sessions_and_recovers_by_itself(tmp_path: Path) -> None:
    """``fixgw up``'s layout (the session store and both partitions on one Valkey, events
    delivered by the conductors' own commits) with ``maxmemory`` lowered under what it holds
    (``noeviction``): writes that would grow memory are refused by the server."""
    with standalone(**{"maxmemory-policy": "noeviction"}) as server:
        system = System(tmp_path, server, [server, server]).start()
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
            seen = seen_between(flow, clock, start, freed)
            reasons = sorted({why for at, ok, why in ready if at >= start and not ok})
            print(f"memory full for 5 s: {seen.describe()}; recovered {recovered:.1f} s after memory was freed; "
                  f"/ready: {reasons}; {sent} requests")
            status, body = http_json(system.gateway.http_port)
            assert status == 200, body
        finally:
            stop_watch.set()
            system.stop()
