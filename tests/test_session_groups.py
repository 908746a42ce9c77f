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

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis

from datastore.embedded import free_port, standalone
from fixgw.credentials import hash_password
from fixgw.demo import DemoClient
from fixgw.fixat import RawSession
from matching.contracts import DealExecuted, parse_event
from sessionstore.keys import GatewayKey, SessionKey, admin_audit, session_groups
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


def stop_and_check(flow: Flow, drop_copy: DemoClient, store: redis.Redis, instruments: Path) -> tuple[int, int, int]:
    """Stop the flow; then every request answered once, no sequence number twice, the drop copy
    complete, both partitions as the reference matcher (events from both groups' inboxes).
    Returns (requests, fills, commands compared)."""
    flow.stop.set()
    flow.thread.join(5)
    traders = [flow.c1, flow.c2]
    sent = check_every_request_answered_once(flow, traders)
    check_no_sequence_number_twice([*traders, drop_copy])
    filled = check_drop_copy_has_every_fill(traders, drop_copy)
    compared = sum(check_partition_trades_as_the_reference(store, store, p, str(instruments), groups=("a", "b"))
                   for p in (0, 1))
    return sent, filled, compared


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
            sent, filled, compared = stop_and_check(flow, dc, store, system.instruments)
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


TOKEN = "operator-token-for-the-move"
OPERATOR = f'\n[[gateway.operator]]\nname = "alice"\ntoken_hash = "{hash_password(TOKEN, salt=b"0123456789abcdef")}"\n'
CLIENT1_MAY_MOVE_TO_B = """
[[gateway.session]]
name = "CLIENT1"
group = "b"
move_target = true
"""


def test_a_session_moves_to_another_group_under_flow_with_the_installed_command(tmp_path: Path) -> None:
    """CLIENT1 (group a) is moved to group b with ``fixgw-admin move-session`` while both traders
    keep sending: drained (logged out, its Logons refused, its open orders canceled, every command
    matched, every event delivered), fenced, its keys handed to b, adopted by b's gateway; the client
    logs on again at b's address and resends what it sent meanwhile. Then b's active gateway is
    killed: its standby, taking over, serves the moved session too. The checks as under a kill."""
    with standalone() as server:
        system = System(tmp_path, server, [server, server], sessions=GROUP_A + OPERATOR,
                        drop_copy_sessions=DROP_COPY_SESSIONS)
        b_port = free_port()
        group_b, standby_b = (GatewayProc(tmp_path, server.url, name=name, fix_port=b_port, mode="gateway",
                                          namespace="e2e", sessions=GROUP_B + CLIENT1_MAY_MOVE_TO_B + OPERATOR,
                                          lock_ttl="2s", renewal="500ms", extra=system.gateway_extra)
                              for name in ("gateway-b", "gateway-b-standby"))
        system.ports["CLIENT2"] = b_port
        try:
            group_b.start().wait_active(60)
            standby_b.start().wait_http(30)
            system.start()
            assert "served by another gateway" in refused_logon(b_port, "CLIENT1"), "b does not serve it before the move"
            (tmp_path / "clients").mkdir(exist_ok=True)
            c1 = DemoClient(tmp_path / "clients", "127.0.0.1", system.fix_port, "CLIENT1", "FIXGW",
                            reset_on_logon=False)
            c1.initiator.start()
            assert c1.wait(lambda: c1.logged_on, 20)
            system.clients.append(c1)
            c2, dc = system.client("CLIENT2"), system.client("DROPCOPY")
            flow = Flow(c1, c2)
            flow.thread.start()
            time.sleep(2.0)
            move = [str(Path(sys.executable).parent / "fixgw-admin"), "--url", f"http://127.0.0.1:{system.gateway.http_port}",
                    "move-session", "CLIENT1", "--to", "b", "--to-url", f"http://127.0.0.1:{group_b.http_port}"]
            env = {**os.environ, "FIXGW_ADMIN_TOKEN": TOKEN}
            moved = subprocess.run(move, env=env, capture_output=True, text=True, timeout=120)
            assert moved.returncode == 0, f"move-session failed: {moved.stderr}"
            print(moved.stdout.strip())
            # Told why (the Logout's text), the member connects to group b's address: the venue says
            # where each group listens. The orders it sent meanwhile are resent from its own store.
            assert any("moving to another gateway" in t for t in c1.logout_texts), c1.logout_texts
            c1.reconnect_to(b_port)
            assert c1.wait(lambda: c1.logged_on, 30), "CLIENT1 logged on again, at b"
            time.sleep(3.0)
            # b's active dies: its standby takes over and serves the moved session too (the
            # directory, read at takeover, gives it to b), from the keys the move handed over
            group_b.kill()
            standby_b.wait_active(60)
            assert c1.wait(lambda: c1.logged_on, 30), "CLIENT1 logged on at b's standby"
            time.sleep(3.0)
            store = redis.Redis.from_url(server.url)
            sent, filled, compared = stop_and_check(flow, dc, store, system.instruments)
            old, new = SessionKey("e2e", "a", "CLIENT1"), SessionKey("e2e", "b", "CLIENT1")
            assert store.hget(session_groups("e2e"), "CLIENT1") == b"b", "the directory names the new group"
            assert store.get(old.owner) == b"moved to b", "the old keys fenced"
            assert not store.exists(old.state) and store.exists(new.state), "the session's keys under b's tag"
            assert "(group b)" in refused_logon(system.fix_port, "CLIENT1"), "a refuses it after, naming b"
            move[-1] = f"http://127.0.0.1:{standby_b.http_port}"  # b's active now
            again = subprocess.run(move, env=env, capture_output=True, text=True, timeout=60)
            assert again.returncode == 0 and c1.logged_on, f"the same command again changes nothing: {again.stderr}"
            assert system.gateway.alive and standby_b.alive, "a Logon refused for a session served elsewhere harms nothing"
            audit = [(e[b"action"], e[b"outcome"]) for _, e in store.xrange(admin_audit("e2e"))]
            assert (b"release", b"done") in audit and (b"adopt", b"done") in audit, audit
            print(f"{sent} requests answered once each, {filled} fills on the drop copy once each, {compared} "
                  "commands matched as the reference")
        finally:
            group_b.stop()
            standby_b.stop()
            system.stop()


def refused_logon(port: int, sender: str) -> str:
    """The Text of the Logout answering a Logon of ``sender`` at ``port`` (raw FIX; a number high
    enough that the engine's own check of it, which comes first, passes)."""
    session = RawSession(port, sender=sender, seq=10_000)
    try:
        session.send("35=A\x0198=0\x01108=30")
        answer = session.read(10) or b""
    finally:
        session.close()
    assert b"\x0135=5\x01" in answer, f"a Logout answers the Logon: {answer!r}"
    return answer.split(b"\x0158=", 1)[1].split(b"\x01", 1)[0].decode()


def test_a_move_that_cannot_be_done_is_refused_with_the_reason_and_changes_nothing(tmp_path: Path) -> None:
    """Bad moves get a clear refusal and leave the directory, the keys and the serving as they
    were: to the session's own group, to a malformed group, of a drop copy; an adoption of a
    session not moved; a release on a gateway that does not serve the session."""
    from tests.test_admin import admin

    with standalone() as server:
        sessions = GROUP_A + CLIENT2_MAY_MOVE_TO_A + DROP_COPY_SESSIONS + OPERATOR
        system = System(tmp_path, server, [server, server], sessions=sessions).start()
        try:
            store = redis.Redis.from_url(server.url)
            state_before = store.hgetall(SessionKey("e2e", "a", "CLIENT1").state)
            for path, body, status, reason in [
                ("/admin/sessions/CLIENT1/release", {"to": "a"}, 409, "in group a already"),
                ("/admin/sessions/CLIENT1/release", {"to": "b/c"}, 400, "must name a session group"),
                ("/admin/sessions/CLIENT1/release", {"to": "b", "timeout": 0}, 400, "timeout"),
                ("/admin/sessions/DROPCOPY/release", {"to": "b"}, 409, "drop copy"),
                ("/admin/sessions/CLIENT2/release", {"to": "b"}, 409, "not served by this gateway"),
                ("/admin/sessions/CLIENT2/adopt", {}, 409, "release it on the gateway serving it first"),
            ]:
                got, answer = admin(system, "POST", path, body, token=TOKEN)
                assert (got, reason in answer.get("error", "")) == (status, True), (path, body, got, answer)
            nowhere = subprocess.run(  # a receiving gateway that does not list it there: checked first
                [str(Path(sys.executable).parent / "fixgw-admin"), "--url", f"http://127.0.0.1:{system.gateway.http_port}",
                 "move-session", "CLIENT1", "--to", "b", "--to-url", f"http://127.0.0.1:{system.gateway.http_port}"],
                env={**os.environ, "FIXGW_ADMIN_TOKEN": TOKEN}, capture_output=True, text=True, timeout=60)
            assert nowhere.returncode == 1 and "does not list CLIENT1 in group b" in nowhere.stderr, nowhere.stderr
            assert store.hgetall(session_groups("e2e")) == {}, "the directory untouched"
            assert store.hgetall(SessionKey("e2e", "a", "CLIENT1").state) == state_before
            assert "served by another gateway" in refused_logon(system.fix_port, "CLIENT2"), "still a move target only"
            client = system.client("CLIENT1")
            client.order("still-here", "1", "1", "1.00", symbol="T3")
            assert client.wait(lambda: any(r.get(11) == "still-here" for r in client.reports), 20), "CLIENT1 served"
        finally:
            system.stop()


CLIENT2_MAY_MOVE_TO_A = """
[[gateway.session]]
name = "CLIENT2"
group = "a"
move_target = true
"""
