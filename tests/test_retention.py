"""Bounded growth over TCP (issue 10): an open order's ClOrdID outlives the idempotency
window; closed orders' views, delivered-event records and acknowledged inbox entries go after
their retention. Short windows so the test sees them pass."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.gateway_helpers import http_text, wait_until
from tests.system_helpers import System, system_on_one_server, wait_reports

pytestmark = pytest.mark.slow  # starts servers or processes: not in `make unit`

WINDOWS = """
idempotency_window = "5s"  # long enough for an order to be acknowledged on a loaded machine
delivery_retention = "5s"
inbox_retention = "0s"
retention_interval = "300ms"
"""


@pytest.fixture(scope="module")
def system(tmp_path_factory: pytest.TempPathFactory) -> Iterator[System]:
    with system_on_one_server(tmp_path_factory.mktemp("retention"), matching=WINDOWS) as s:
        yield s


@pytest.fixture(scope="module")
def clients(system: System):  # type: ignore[no-untyped-def]
    return system.client("CLIENT1"), system.client("CLIENT2")


def test_a_gtc_order_older_than_the_idempotency_window_can_still_be_canceled(system: System, clients) -> None:  # type: ignore[no-untyped-def]
    c1, _ = clients
    client = system.store.client()
    c1.order("gtc-1", "1", "2", "20.00", symbol="T7")
    new = wait_reports(c1, "gtc-1", 1)[0]
    assert (new[150], new[39]) == ("0", "0")
    record = "{e2e/fsg/CLIENT1}/clordid:gtc-1"
    wait_until(lambda: client.pttl(record) == -1, "the open order's ClOrdID record to lose its expiry", 5)
    time.sleep(5.5)  # past the 5 s window
    c1.cancel("gtc-1c", "gtc-1", "1", symbol="T7")
    canceled = wait_reports(c1, "gtc-1c", 1)[0]
    assert (canceled[35], canceled[150], canceled[39]) == ("8", "4", "4"), canceled
    wait_until(lambda: 0 < client.pttl(record) <= 5000, "the closed order's record to expire after the window", 5)


def test_closed_orders_views_and_delivered_records_go_after_their_retention(system: System, clients) -> None:  # type: ignore[no-untyped-def]
    c1, c2 = clients
    client = system.store.client()
    c1.order("ret-s", "2", "1", "30.00", symbol="T8")
    wait_reports(c1, "ret-s", 1)
    c2.order("ret-b", "1", "1", "30.00", symbol="T8")
    filled = wait_reports(c1, "ret-s", 2)[1]
    assert filled[39] == "2"
    c1.order("ret-open", "1", "1", "5.00", symbol="T8")
    open_id = wait_reports(c1, "ret-open", 1)[0][37]
    views, inbox, closed = ("{e2e/fsg/CLIENT1}/orders", "{e2e/fsg/CLIENT1}/inbox", "{e2e/fsg/CLIENT1}/closed")
    assert client.hexists(views, filled[37]) and client.zscore(closed, filled[37]) is not None
    wait_until(lambda: not client.hexists(views, filled[37]), "the filled order's view to go", 15)
    assert client.hexists(views, open_id) and client.zscore(closed, open_id) is None, "an open order's view stays"
    cutoff_ms = int(time.time() * 1000) - 4000
    wait_until(lambda: client.zcount(inbox, "-inf", cutoff_ms) == 0, "delivered-event records past retention", 10)
    wait_until(lambda: client.xlen("{e2e/fsg}/inbox") <= 1, "acknowledged inbox stream entries to go", 10)
    metrics = http_text(system.gateway.http_port, "/metrics")
    removed = {line.split('"')[1]: float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines()
               if line.startswith("fixgw_retention_removed_total{")}
    assert removed.get("closed views", 0) >= 1 and removed.get("inbox stream entries", 0) >= 1, removed
    assert "fixgw_retention_passes_total " in metrics
