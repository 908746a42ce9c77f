"""Session groups: order entry spread over gateway processes, each group with its own lock,
fencing epoch, inbox and standby (docs/architecture.md, session groups).

Two groups, ``a`` (CLIENT1) and ``b`` (CLIENT2), each an active gateway process and a standby on
the same FIX port, the drop copy on a gateway of its own, under the steady flow of
``tests/venue.py`` (the two traders trade with each other: each deal concerns both groups). The
active gateway of each group is killed in turn (SIGKILL); its standby takes over. Checked from
outside the processes: every request answered once, no sequence number reaching a client twice,
the drop copy holding every fill once, each partition's events as the reference matcher's, and
each group's inbox holding only events that concern its own sessions."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import redis

from datastore.embedded import free_port, standalone
from matching.contracts import DealExecuted, parse_event
from sessionstore.keys import GatewayKey, SessionKey
from tests.gateway_helpers import GatewayProc
from tests.system_helpers import DROP_COPY_SESSIONS, System
from tests.venue import (
    Flow,
    check_drop_copy_has_every_fill,
    check_every_request_answered_once,
    check_no_sequence_number_twice,
    check_partition_trades_as_the_reference,
)

pytestmark = pytest.mark.slow

GROUP_A = """
[[gateway.session]]
name = "CLIENT1"
group = "a"
"""
GROUP_B = """
[[gateway.session]]
name = "CLIENT2"
group = "b"
"""


def owners(event_raw: bytes) -> set[str]:
    p = parse_event(event_raw).payload
    return {p.maker.owner, p.taker.owner} if isinstance(p, DealExecuted) else {p.owner}


def test_two_groups_on_their_own_processes_each_survive_a_sigkill_of_their_active_gateway(tmp_path: Path) -> None:
    with standalone() as server:
        system = System(tmp_path, server, [server, server], sessions=GROUP_A, drop_copy_sessions=DROP_COPY_SESSIONS)
        b_port = free_port()

        def gateway(name: str, port: int, sessions: str) -> GatewayProc:
            return GatewayProc(tmp_path, server.url, name=name, fix_port=port, mode="gateway", namespace="e2e",
                               sessions=sessions, lock_ttl="2s", renewal="500ms", extra=system.gateway_extra)

        group_b = gateway("gateway-b", b_port, GROUP_B)
        # the standbys on their group's FIX port: it is bound only by the active
        standby_a, standby_b = gateway("gateway-a-standby", system.fix_port, GROUP_A), \
            gateway("gateway-b-standby", b_port, GROUP_B)
        system.ports["CLIENT2"] = b_port
        gateways = [group_b, standby_a, standby_b]
        try:
            group_b.start().wait_active(60)
            system.start()
            for standby in (standby_a, standby_b):
                standby.start().wait_http(30)  # standing by: the lock is the active's
            store = redis.Redis.from_url(server.url)
            locks = {group: store.get(GatewayKey("e2e", group).lock) for group in ("a", "b")}
            assert all(locks.values()) and locks["a"] != locks["b"], f"a lock per group, held apart: {locks}"

            c1, c2, dc = system.client("CLIENT1"), system.client("CLIENT2"), system.client("DROPCOPY")
            flow = Flow(c1, c2)
            flow.thread.start()
            time.sleep(2.0)
            system.gateway.kill()  # group a's active: its standby takes over, group b trades on
            standby_a.wait_active(60)
            time.sleep(3.0)
            group_b.kill()
            standby_b.wait_active(60)
            time.sleep(3.0)
            flow.stop.set()
            flow.thread.join(5)

            sent = check_every_request_answered_once(flow, [c1, c2])
            check_no_sequence_number_twice([c1, c2, dc])
            filled = check_drop_copy_has_every_fill([c1, c2], dc)
            compared = sum(check_partition_trades_as_the_reference(store, store, p, str(system.instruments),
                                                                   groups=("a", "b")) for p in (0, 1))
            for group, session in (("a", "CLIENT1"), ("b", "CLIENT2")):
                mine = str(SessionKey("e2e", group, session))
                inbox = [fields[b"event"] for _, fields in store.xrange(GatewayKey("e2e", group).inbox_stream)]
                assert inbox, f"group {group} received events"
                assert all(mine in owners(raw) for raw in inbox), f"group {group}'s inbox holds only its sessions' events"
                assert store.exists(SessionKey("e2e", group, session).state), "the session's keys carry its group"
            assert not store.exists(GatewayKey("e2e", "fsg").inbox_stream), "no shared order-entry inbox"
            assert store.get(GatewayKey("e2e", "a").epoch) == b"2" and store.get(GatewayKey("e2e", "b").epoch) == b"2", \
                "each group's epoch moved once, at its own takeover"
            print(f"{sent} requests answered once each, {filled} fills on the drop copy once each, {compared} commands "
                  "matched as the reference")
        finally:
            for gw in gateways:
                gw.stop()
            system.stop()
