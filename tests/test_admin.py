"""The operators' control plane (fixgw/admin.py, fixgw-admin) and the order-entry messages a
venue's members expect beside D/F/G/H (OrderMassCancelRequest, OrderMassStatusRequest, Logon
NewPassword), against a running system: real gateway, cells and QuickFIX clients."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import quickfix as fix

from datastore.embedded import ValkeyProcess, free_port
from fixgw.credentials import hash_password
from sessionstore import FixedEpoch, SessionKey, SessionStore
from sessionstore.reader import audit_entries
from tests.gateway_helpers import ROOT, GatewayProc, RawFixClient, RawTrader, parse, wait_until
from tests.system_helpers import SESSIONS, System, reports, system_on_one_server, wait_reports
from tests.venue import check_partition_trades_as_the_reference

pytestmark = pytest.mark.slow  # starts servers and processes

TOKEN = "operator-token-for-the-tests"
OPERATOR = f'\n[[gateway.operator]]\nname = "alice"\ntoken_hash = "{hash_password(TOKEN, salt=b"0123456789abcdef")}"\n'
CLIENT1 = SessionKey("e2e", "fsg", "CLIENT1")


def admin(system: System | GatewayProc, method: str, path: str, body: dict[str, Any] | None = None,
          token: str | None = TOKEN) -> tuple[int, dict[str, Any]]:
    port = system.gateway.http_port if isinstance(system, System) else system.http_port
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method,
                                     data=json.dumps(body or {}).encode() if method == "POST" else None,
                                     headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def session_row(system: System, name: str) -> dict[str, Any]:
    status, body = admin(system, "GET", "/admin/sessions")
    assert status == 200, body
    return next(s for s in body["sessions"] if s["name"] == name)


def stored_state(system: System, key: SessionKey = CLIENT1):  # type: ignore[no-untyped-def]
    return SessionStore(system.store.client(), FixedEpoch(0)).load_state(key)


def audit(system: System) -> list[dict[str, str]]:
    return audit_entries(system.store.client(), "e2e", 1000)


@pytest.fixture
def system(tmp_path: Path) -> Iterator[System]:
    with system_on_one_server(tmp_path, sessions=SESSIONS + OPERATOR) as s:
        yield s


def test_an_admin_request_needs_an_operators_token(system: System) -> None:
    """No token, a wrong one: refused, nothing done, nothing audited; a standby answers that it
    is not active and names the active gateway."""
    assert admin(system, "GET", "/admin/sessions", token=None)[0] == 401
    assert admin(system, "POST", "/admin/sessions/CLIENT1/reset", token="guess")[0] == 401
    assert audit(system) == []
    standby = GatewayProc(system.tmp, system.store.url, name="standby", fix_port=system.fix_port, mode="gateway",
                          namespace="e2e", sessions=SESSIONS + OPERATOR, lock_ttl="2s", renewal="500ms",
                          extra=system.gateway_extra).start()
    try:
        standby.wait_http()
        status, body = admin(standby, "GET", "/admin/sessions")
        assert status == 503 and "standing by" in body["error"], body
        holder = system.store.client().get("{e2e/fsg}/lock").decode()
        assert holder in body["error"], body
    finally:
        standby.stop()


def test_the_session_list_shows_what_the_engine_and_the_store_hold(system: System) -> None:
    c1 = system.client("CLIENT1")
    c1.order("L1", "1", "5", "9.00", symbol="T1")
    wait_reports(c1, "L1", 1)
    row = session_row(system, "CLIENT1")
    assert row["logged_on"] and row["peer"] == "127.0.0.1" and row["kind"] == "fsg"
    assert row["next_sender"] == row["stored"]["next_sender"] == stored_state(system).sender_seq_num
    assert row["next_target"] == fix.Session.lookupSession(c1.sid).getExpectedSenderNum()
    assert row["owner_epoch"] == 1 and row["open_orders"] == 1 and row["parked"] is False
    assert row["last_in"] and row["last_out"]
    assert session_row(system, "CLIENT2")["logged_on"] is False


def test_setting_the_next_sender_number(system: System) -> None:
    """Below or at a number already sent: refused with the reason, nothing changes. Above: the
    client's next message from the gateway carries it (its engine asks for the gap and gets a
    gap fill)."""
    c1 = system.client("CLIENT1")
    last = stored_state(system).last_sent_seq_num
    status, body = admin(system, "POST", "/admin/sessions/CLIENT1/next-sender", {"seq": last})
    assert status == 409 and "never sent twice" in body["error"], body
    assert stored_state(system).sender_seq_num == last + 1, "a refused action changes nothing"
    status, body = admin(system, "POST", "/admin/sessions/CLIENT1/next-sender", {"seq": last + 100})
    assert status == 200 and body["after"]["next_sender"] == last + 100, body
    c1.order("N1", "1", "5", "9.00", symbol="T1")
    first = wait_reports(c1, "N1", 1)[0]
    assert int(first[34]) == last + 100, first
    assert [a["outcome"].split(":")[0] for a in audit(system)] == ["refused", "done"]
    assert admin(system, "POST", "/admin/sessions/CLIENT1/next-sender", {"seq": "x"})[0] == 400


def test_setting_the_next_target_number(system: System) -> None:
    """With the client away, the next number expected from it set to 1: a Logon numbered 1 (no
    reset asked) is taken — without it, such a Logon is refused as too low."""
    c1 = system.client("CLIENT1")
    c1.order("T1", "1", "5", "9.00", symbol="T1")
    wait_reports(c1, "T1", 1)
    c1.close()
    system.clients.remove(c1)
    status, body = admin(system, "POST", "/admin/sessions/CLIENT1/next-target", {"seq": 1})
    assert status == 200 and body["after"]["next_target"] == 1, body
    assert stored_state(system).target_seq_num == 1
    raw = RawFixClient(system.fix_port, sender="CLIENT1", seq=1)
    try:
        raw.send("35=A\x0198=0\x01108=30")
        answer = raw.read(timeout=15)
        assert answer is not None and parse(answer)[35] == b"A", answer
    finally:
        raw.close()


def test_a_reset_starts_a_new_fix_session(system: System) -> None:
    """The logged-on client gets a Logout; both numbers are 1 in the engine and in Redis; it logs
    on with 1 and is answered with 1. (A raw session: an engine that reconnects at once would
    move the numbers on before they are read.)"""
    trader = RawTrader(system.fix_port, "CLIENT1")
    try:
        trader.logon()
        seq = trader.send("35=D\x0111=R1\x0155=T1\x0154=1\x0140=2\x0144=9.00\x0138=5\x0159=1\x011=CLIENT1"
                          "\x0160=20261203-10:00:00")
        trader.wait_answer(seq, b"R1")
        status, body = admin(system, "POST", "/admin/sessions/CLIENT1/reset")
        assert status == 200, body
        assert body["after"]["next_sender"] == 1 and body["after"]["next_target"] == 1, body
        trader.wait_for(lambda m: m.get(35) == b"5", "the Logout")
    finally:
        trader.close()
    state = stored_state(system)
    assert (state.sender_seq_num, state.target_seq_num, state.last_sent_seq_num) == (1, 1, 0)
    raw = RawFixClient(system.fix_port, sender="CLIENT1", seq=1)
    try:
        raw.send("35=A\x0198=0\x01108=30")
        answer = raw.read(timeout=15)
        assert answer is not None and parse(answer)[35] == b"A" and parse(answer)[34] == b"1", answer
    finally:
        raw.close()


def test_a_logout_with_a_text_and_a_disconnect(system: System) -> None:
    """The client gets the Logout with the operator's text; a disconnect closes the connection
    without one. (QuickFIX's own initiator, this test's client, does not reconnect by itself
    after a Logout it answered: a new one logs on for the disconnect.)"""
    c1 = system.client("CLIENT1")
    status, _ = admin(system, "POST", "/admin/sessions/CLIENT1/logout", {"text": "end of day"})
    assert status == 200
    assert c1.wait(lambda: "end of day" in c1.logout_texts, 15), c1.logout_texts
    wait_until(lambda: not session_row(system, "CLIENT1")["logged_on"], "logged out", 10)
    c1.close()
    system.clients.remove(c1)
    time.sleep(2.5)  # (the gateway takes Logons for the session again 2 s after a Logout it sent)
    c1 = system.client("CLIENT1")
    status, _ = admin(system, "POST", "/admin/sessions/CLIENT1/disconnect")
    assert status == 200
    wait_until(lambda: not session_row(system, "CLIENT1")["logged_on"], "disconnected", 10)
    assert not c1.logout_texts, "a disconnect sends no Logout"
    assert admin(system, "POST", "/admin/sessions/CLIENT2/logout")[0] == 409, "CLIENT2 is not logged on"
    assert [a["action"] for a in audit(system)] == ["logout", "disconnect", "logout"]


def test_cancel_every_open_order_of_a_session_and_of_an_account(system: System) -> None:
    """Through the cells: each order's cancel report reaches its session and the drop copy, with
    the reason; each partition trades as the reference matcher."""
    c1, c2, dc = system.client("CLIENT1"), system.client("CLIENT2"), system.client("DROPCOPY")
    for i, symbol in enumerate(("T1", "T2", "T3")):
        c1.order(f"A{i}", "1", "5", "9.00", symbol=symbol)
        c2.order(f"B{i}", "2", "5", "11.00", symbol=symbol)
    for i in range(3):
        wait_reports(c1, f"A{i}", 1)
        wait_reports(c2, f"B{i}", 1)
    status, body = admin(system, "POST", "/admin/sessions/CLIENT1/cancel-orders")
    assert status == 200 and len(body["after"]["canceled"]) == 3, body
    for i in range(3):
        canceled = wait_reports(c1, f"A{i}", 2)[-1]
        assert canceled[150] == "4" and "operator-cancel" in canceled.get(58, ""), canceled
    status, body = admin(system, "POST", "/admin/accounts/CLIENT2/cancel-orders")
    assert status == 200 and len(body["after"]["canceled"]["CLIENT2"]) == 3, body
    for i in range(3):
        assert wait_reports(c2, f"B{i}", 2)[-1][150] == "4"
    assert dc.wait(lambda: sum(1 for r in reports(dc) if r.get(150) == "4") == 6, 20), reports(dc)
    assert session_row(system, "CLIENT1")["open_orders"] == 0
    for p in (0, 1):
        check_partition_trades_as_the_reference(system.store.client(), system.store.client(), p,
                                                str(system.instruments))
    actions = audit(system)
    assert [(a["operator"], a["action"], a["outcome"]) for a in actions] == [
        ("alice", "cancel-orders", "done"), ("alice", "cancel-orders", "done")]
    assert actions[1]["session"] == "account CLIENT2"


def test_fixgw_admin_runs_the_actions_from_the_command_line(system: System, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    run = [sys.executable, "-m", "fixgw.admin_cli", "--url", f"http://127.0.0.1:{system.gateway.http_port}",
           "--token-file", str(token)]
    env = {k: v for k, v in os.environ.items() if k != "FIXGW_ADMIN_TOKEN"} | {"PYTHONPATH": str(ROOT)}
    listed = subprocess.run([*run, "sessions"], capture_output=True, text=True, env=env, timeout=60)
    assert listed.returncode == 0 and "e2e/fsg/CLIENT1" in listed.stdout, listed
    refused = subprocess.run([*run, "next-sender", "CLIENT1", "0"], capture_output=True, text=True, env=env, timeout=60)
    assert refused.returncode == 1 and "seq must be" in refused.stderr, refused
    inspect = subprocess.run([sys.executable, "-m", "sessionstore.inspect_cli", "--url", system.store.url,
                              "admin-log", "--namespace", "e2e"], capture_output=True, text=True, env=env, timeout=60)
    assert "next-sender" in inspect.stdout and "refused" in inspect.stdout, inspect


def test_mass_cancel_and_mass_status(system: System) -> None:
    """OrderMassCancelRequest by symbol and side, then all: an OrderMassCancelReport first
    (TotalAffectedOrders), then a canceled ExecutionReport per order, also on the drop copy;
    OrderMassStatusRequest: a status report per open order (TotNumReports, the last one
    LastRptRequested=Y), or one saying there is none; a scope not supported is refused with the
    reason; each partition trades as the reference matcher."""
    c1, dc = system.client("CLIENT1"), system.client("DROPCOPY")
    placed = [("M0", "1", "T1"), ("M1", "2", "T1"), ("M2", "1", "T1"), ("M3", "1", "T2")]
    for clordid, side, symbol in placed:
        c1.order(clordid, side, "5", "9.00" if side == "1" else "11.00", symbol=symbol)
    for clordid, _, _ in placed:
        wait_reports(c1, clordid, 1)
    c1.send("q", [(11, "MC1"), (530, "1"), (55, "T1"), (54, "1"), (60, "20261203-10:00:00")])
    report = wait_reports(c1, "MC1", 1)[0]
    assert report[35] == "r" and report[531] == "1" and report[533] == "2", report
    for clordid in ("M0", "M2"):
        canceled = wait_reports(c1, clordid, 2)[-1]
        assert canceled[150] == "4" and "mass-cancel" in canceled.get(58, "")
        assert int(canceled[34]) > int(report[34]), "the OrderMassCancelReport comes first"
    c1.send("AF", [(584, "MS1"), (585, "7")])
    assert c1.wait(lambda: len([r for r in reports(c1) if r.get(584) == "MS1"]) == 2, 20)
    status = [r for r in reports(c1) if r.get(584) == "MS1"]
    assert sorted(r[11] for r in status) == ["M1", "M3"] and all(r[150] == "I" and r[911] == "2" for r in status)
    assert [r[912] for r in status] == ["N", "Y"]
    c1.send("q", [(11, "MC2"), (530, "3"), (60, "20261203-10:00:00")])
    refused = wait_reports(c1, "MC2", 1)[0]
    assert refused[531] == "0" and refused[532] == "0" and "not supported" in refused[58], refused
    c1.send("q", [(11, "MC3"), (530, "7"), (60, "20261203-10:00:00")])
    assert wait_reports(c1, "MC3", 1)[0][533] == "2"
    for clordid in ("M1", "M3"):
        assert c1.wait(lambda c=clordid: any(r.get(150) == "4" for r in reports(c1, c)), 20), reports(c1, clordid)
    c1.send("AF", [(584, "MS2"), (585, "7")])
    assert c1.wait(lambda: any(r.get(584) == "MS2" for r in reports(c1)), 20)
    none = next(r for r in reports(c1) if r.get(584) == "MS2")
    assert none[911] == "0" and none[37] == "NONE" and none[912] == "Y", none
    assert dc.wait(lambda: sum(1 for r in reports(dc) if r.get(150) == "4") == 4, 20), "the drop copy sees the cancels"
    for p in (0, 1):
        check_partition_trades_as_the_reference(system.store.client(), system.store.client(), p,
                                                str(system.instruments))


PASSWORD_HASH = hash_password("first-password", salt=b"0123456789abcdef")
NO_LOCKOUT = "logon_lockout_after = 0"  # (each refusal is answered at once)
PASSWORD_SESSIONS = f'[[gateway.session]]\nname = "CLIENT1"\nusername = "alice"\npassword_hash = "{PASSWORD_HASH}"\n'


def logon(port: int, fields: str, seq: int = 1) -> dict[int, bytes]:
    """A Logon's answer. A connection that gets none is tried again, as a client's engine
    reconnects: right after a refused Logon the gateway turns connections for the session away
    while it puts its local copy back (``_refused_logon_cleanup``)."""
    for _ in range(5):
        c = RawFixClient(port, sender="CLIENT1", seq=seq)
        try:
            c.send("35=A\x0198=0\x01108=30\x01141=Y" + fields)
            try:
                raw = c.read(timeout=5)
            except TimeoutError:
                raw = None
            if raw is None:
                time.sleep(0.5)
                continue
            answer = parse(raw)
            if answer[35] == b"A":
                c.send("35=5")
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline:  # until the gateway closes it: the session is free again
                    try:
                        if c.read(timeout=1) is None:
                            break
                    except TimeoutError:
                        continue
            return answer
        finally:
            c.close()
    raise AssertionError("no answer to a Logon in five connections")


def test_a_password_change_at_logon(tmp_path: Path, valkey: ValkeyProcess) -> None:
    """Logon with NewPassword (925) and the right password: logged on, the new hash stored; from
    then on the old password is refused and the new one taken — by a successor gateway too. A
    new password the policy refuses refuses the Logon with the reason, and changes nothing."""
    port = free_port()
    gw = GatewayProc(tmp_path, valkey.url, fix_port=port, sessions=PASSWORD_SESSIONS, mode="gateway",
                     extra=NO_LOCKOUT).start().wait_active()
    try:
        short = logon(port, "\x01553=alice\x01554=first-password\x01925=short")
        assert short[35] == b"5" and b"NewPassword (925) refused" in short[58], short
        assert logon(port, "\x01553=alice\x01554=first-password")[35] == b"A", "nothing changed"
        changed = logon(port, "\x01553=alice\x01554=first-password\x01925=second-password")
        assert changed[35] == b"A", changed
        old = logon(port, "\x01553=alice\x01554=first-password")
        assert old[35] == b"5" and b"bad credentials" in old[58], old
        assert logon(port, "\x01553=alice\x01554=second-password")[35] == b"A"
        stored = valkey.client().get("{t/fsg/CLIENT1}/password")
        assert stored is not None and b"second-password" not in stored and stored.startswith(b"scrypt$")
        assert b"second-password" not in gw.output().encode(), "the password is never logged"
    finally:
        gw.stop()
    secrets = (b"first-password", b"second-password", b"925=short")
    logged = [p for p in gw.dir.rglob("*") if p.is_file() and any(s in p.read_bytes() for s in secrets)]
    assert not logged, f"the message log and every other file of the gateway hold no password: {logged}"
    messages = (gw.dir / "state" / "log" / "FIX.4.4-FIXGW-CLIENT1.messages.current.log").read_bytes()
    assert b"\x01554=***\x01925=***\x01" in messages, "the change is logged, its passwords not"
    successor = GatewayProc(tmp_path, valkey.url, name="successor", fix_port=port, sessions=PASSWORD_SESSIONS,
                            mode="gateway", extra=NO_LOCKOUT).start().wait_active()
    try:
        assert logon(port, "\x01553=alice\x01554=second-password")[35] == b"A"
        assert logon(port, "\x01553=alice\x01554=first-password")[35] == b"5"
    finally:
        successor.stop()


def test_a_new_password_on_a_session_without_one_is_refused(tmp_path: Path, valkey: ValkeyProcess) -> None:
    port = free_port()
    gw = GatewayProc(tmp_path, valkey.url, fix_port=port, mode="gateway").start().wait_active()
    try:
        answer = logon(port, "\x01925=second-password")
        assert answer[35] == b"5" and b"no password to change" in answer[58], answer
    finally:
        gw.stop()


def test_an_admin_request_still_running_after_its_limit_is_logged_with_where_it_waits(
        caplog: pytest.LogCaptureFixture) -> None:
    """A request that hangs (on QuickFIX's session lock, on the session store) says where while
    it hangs; one that ends in time logs nothing."""
    import logging

    from fixgw.admin import reported_if_slow

    with caplog.at_level(logging.WARNING, logger="fixgw.admin"):
        with reported_if_slow("admin request GET /admin/sessions", 0.1):
            time.sleep(0.4)  # (the request's wait)
        with reported_if_slow("admin request GET /admin/fast", 0.3):
            pass
        time.sleep(0.4)
    assert "admin request GET /admin/sessions: still running after 0." in caplog.text
    assert "time.sleep(0.4)  # (the request's wait)" in caplog.text, "the waiting line of its stack"
    assert "/admin/fast" not in caplog.text
