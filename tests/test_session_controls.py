"""Per-session controls over TCP (issue 12): throttles and cancel-on-disconnect."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from matching.contracts import PlaceOrder, parse_command
from matching.keys import PartitionKeys
from tests.gateway_helpers import http_text
from tests.system_helpers import System, reports, system_on_one_server, wait_reports

pytestmark = pytest.mark.slow  # starts servers or processes: not in `make unit`

SESSIONS = """
[[gateway.session]]
name = "CLIENT1"
cancel_on_disconnect = true
cancel_on_disconnect_grace = "2s"

[[gateway.session]]
name = "CLIENT2"
max_messages_per_second = 0.001  # a burst of one message, then one every 1,000 s: none within the test

[[gateway.session]]
name = "DROPCOPY"
kind = "dc"
"""


@pytest.fixture(scope="module")
def system(tmp_path_factory: pytest.TempPathFactory) -> Iterator[System]:
    with system_on_one_server(tmp_path_factory.mktemp("controls"), sessions=SESSIONS) as s:
        yield s


@pytest.fixture(scope="module")
def dc(system: System):  # type: ignore[no-untyped-def]
    return system.client("DROPCOPY")


def test_orders_over_the_throttle_get_a_reject_and_never_reach_a_cell(system: System) -> None:
    c2 = system.client("CLIENT2")
    for i in range(12):  # the bucket holds one message; the next token is 1,000 s away
        c2.order(f"thr-{i}", "1", "1", "5.00", symbol="T9")
    assert c2.wait(lambda: len(reports(c2)) >= 12, 20)
    got = reports(c2)
    throttled = [r for r in got if r[35] == "j"]
    accepted = [r for r in got if r[35] == "8" and r[39] == "0"]
    assert [r[11] for r in accepted] == ["thr-0"] and len(throttled) == 11, [(r[35], r.get(58)) for r in got]
    assert all(r[372] == "D" and r[58].startswith("throttled: over 0.001") for r in throttled)
    assert sorted(r[379] for r in throttled) == sorted(f"thr-{i}" for i in range(1, 12)), "each reject names its ClOrdID"
    assert 'reason="throttled"' in http_text(system.gateway.http_port, "/metrics")
    # Never reached a cell: of this burst, only the accepted order was appended as a command.
    appended = {cmd.order.client_order_id for p, server in enumerate(system.partitions)
                for _, f in server.client().xrange(PartitionKeys(p).commands)
                if isinstance(cmd := parse_command(f[b"command"]), PlaceOrder)}
    assert {c for c in appended if c.startswith("thr-")} == {"thr-0"}
    c2.close()


def test_a_disconnect_cancels_the_sessions_open_orders_through_the_cell(system: System, dc) -> None:  # type: ignore[no-untyped-def]
    c1 = system.client("CLIENT1")
    c1.order("cod-1", "1", "2", "6.00", symbol="T10")
    c1.order("cod-2", "2", "3", "900.00", symbol="T10")
    c1.order("cod-3", "1", "1", "7.00", symbol="T10")
    for clordid in ("cod-1", "cod-2", "cod-3"):
        assert wait_reports(c1, clordid, 1)[0][39] == "0"
    c1.cancel("cod-3c", "cod-3", "1", symbol="T10")
    assert wait_reports(c1, "cod-3c", 1)[0][39] == "4"
    c1.close()  # logs out: cancel-on-disconnect
    again = system.client("CLIENT1")  # the cancels' reports arrive after the next logon
    for clordid in ("cod-1", "cod-2"):
        canceled = [r for r in wait_reports(again, clordid, 1, timeout=20) if r[39] == "4"]
        assert canceled and canceled[0][150] == "4" and canceled[0][58] == "cancel-on-disconnect", canceled
        assert dc.wait(lambda: any(r.get(39) == "4" for r in reports(dc, clordid)), 10), "the drop copy sees it"
    time.sleep(0.5)
    assert not [r for r in reports(again, "cod-3") if r[39] == "4" and r.get(11) == "cod-3"], \
        "an order already closed is not canceled again"
    assert "fixgw_canceled_on_disconnect_total" in http_text(system.gateway.http_port, "/metrics")
    again.close()


def test_a_client_gone_with_a_crashed_gateway_has_its_orders_canceled_after_the_grace(system: System, dc) -> None:  # type: ignore[no-untyped-def]
    c1 = system.client("CLIENT1")
    c1.order("codk-1", "1", "2", "6.00", symbol="T11")
    assert wait_reports(c1, "codk-1", 1)[0][39] == "0"
    system.gateway.kill()  # no logout: the connection dies with the gateway
    c1.close()  # and the client does not come back
    system.gateway.start().wait_active(60)
    assert dc.wait(lambda: any(r.get(39) == "4" and r.get(58) == "cancel-on-disconnect"
                               for r in reports(dc, "codk-1")), 30), "canceled once the grace ran out"
