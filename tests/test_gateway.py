"""The QuickFIX acceptor on the Redis store: takeover, restart, fail-fast, fencing, bad input."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from datastore.connection import connect
from datastore.embedded import ValkeyProcess, free_port, standalone
from datastore.settings import RedisEndpoint
from sessionstore import SessionKey, SessionStore
from sessionstore.store import FixedEpoch
from tests.gateway_helpers import (
    ROOT,
    FixClient,
    GatewayProc,
    RawFixClient,
    body_without,
    fields,
    http_json,
    http_status,
    http_text,
    wait_until,
)
from tests.store_helpers import store_history

pytestmark = pytest.mark.slow  # starts servers or processes: not in `make unit`

CLIENT1 = SessionKey("t", "fsg", "CLIENT1")
ADMIN = {b"0", b"1", b"2", b"3", b"4", b"5", b"A"}  # resent as a gap fill, not as themselves
VOLATILE = {"43", "122", "52", "9", "10"}  # what a resend may change (PossDup, times, length, checksum)


def stored_state(url: str, key: SessionKey = CLIENT1):  # type: ignore[no-untyped-def]
    return SessionStore(connect(RedisEndpoint(url=url)), FixedEpoch(0)).load(key)


def resend_all(port: int, next_seq: int, last: int) -> dict[int, bytes]:
    """Log on by hand and ask for everything from 1; return the resent application messages."""
    raw = RawFixClient(port, seq=next_seq)
    try:
        raw.send("35=A\x0198=0\x01108=30")
        logon = raw.read()
        assert logon is not None and dict(fields(logon))["35"] == "A", logon
        raw.send("35=2\x017=1\x0116=0")
        resent: dict[int, bytes] = {}
        while True:
            msg = raw.read()
            assert msg is not None, "gateway closed the connection during the resend"
            f = dict(fields(msg))
            seq = int(f["34"])
            if f["35"] == "4" and int(f["36"]) > last:
                break
            if f.get("43") == "Y" and f["35"] not in ("4",):
                resent[seq] = msg
                if seq >= last:
                    break
        return resent
    finally:
        raw.close()


def orders_round_trip(client: FixClient, n: int, prefix: str) -> None:
    before = len(client.app_messages)
    for i in range(n):
        assert client.send_order(f"{prefix}{i}")
    client.wait_for(lambda: len(client.app_messages) >= before + n, f"{n} echoes")


def check_takeover(tmp_path: Path, valkey: ValkeyProcess, successor: GatewayProc, first: GatewayProc) -> None:
    client = FixClient(tmp_path, first.fix_port).start()
    try:
        client.wait_for(lambda: client.logons == 1, "logon")
        orders_round_trip(client, 20, "A")
        first.kill()  # SIGKILL: no logout, no lock release
        if not successor.alive:
            successor.start()
        successor.wait_active()
        client.wait_for(lambda: client.logons == 2, "logon after takeover", timeout=30)
        logon_seqs = [int(dict(fields(m))["34"]) for m in client.admin_in if dict(fields(m))["35"] == "A"]
        assert logon_seqs[1] == logon_seqs[0] + 21, "the new logon continues the old numbering"
        orders_round_trip(client, 5, "B")
        seqs = sorted(client.app_messages)
        assert seqs[:20] == list(range(2, 22))
        # After the new Logon the gateway may first ask the client to fill a gap (its own
        # in-flight message the dead gateway never saw), so only "strictly after" is fixed.
        assert len(seqs) == 25 and all(s > logon_seqs[1] for s in seqs[20:])
    finally:
        client.stop()
    state = stored_state(valkey.url).state  # the client's next number is what the gateway expects
    resent = resend_all(first.fix_port, state.target_seq_num, state.last_sent_seq_num)
    for seq, original in client.app_messages.items():
        assert seq in resent, f"seq {seq} not resent"
        assert body_without(resent[seq], VOLATILE) == body_without(original, VOLATILE)


def test_standby_takes_over_after_sigkill_and_resends_the_originals(tmp_path: Path, valkey: ValkeyProcess) -> None:
    port = free_port()
    active = GatewayProc(tmp_path, valkey.url, name="a", fix_port=port).start().wait_active()
    standby = GatewayProc(tmp_path, valkey.url, name="b", fix_port=port).start()
    standby.wait_http()
    assert standby.ready() == 503, "a standby is visibly not ready"
    try:
        check_takeover(tmp_path, valkey, standby, active)
    finally:
        active.kill()
        standby.stop()


def logged_on_by_hand(port: int, next_seq: int, within_s: float = 15.0) -> RawFixClient:
    """A raw connection logged on at ``next_seq``. Closed unanswered, it connects again, as a FIX
    client does: QuickFIX closes a session's connection before it has finished with it (``onLogout``
    runs after), and refuses a new one for the session until then, so a client reconnecting at
    once after its logout can find the door shut for a moment."""
    deadline = time.monotonic() + within_s
    while True:
        raw = RawFixClient(port, seq=next_seq)
        raw.send("35=A\x0198=0\x01108=30")
        logon = raw.read()
        if logon is not None:
            assert dict(fields(logon))["35"] == "A", logon
            return raw
        raw.close()
        assert time.monotonic() < deadline, f"no Logon answered within {within_s:g}s"
        time.sleep(0.2)


def test_a_client_that_logs_on_again_as_its_logout_is_answered_is_answered(tmp_path: Path, valkey: ValkeyProcess) -> None:
    """QuickFIX's thread of a connection it has closed polls the closed descriptor's number once
    more after ``onLogout`` (held back here 0.3 s, as other threads holding the GIL can hold it).
    The client's new connection, accepted meanwhile, must not take that number: the old thread
    would keep the session registered to it, and the new Logon would go unanswered."""
    port = free_port()
    gw = GatewayProc(tmp_path, valkey.url, fix_port=port, env={"FIXGW_TEST_LOGOUT_DELAY_S": "0.3"}).start().wait_active()
    try:
        next_seq = 1
        for _ in range(3):
            raw = logged_on_by_hand(port, next_seq)
            raw.send("35=5")
            answers = []
            while (msg := raw.read()) is not None:  # the Logout's answer, then the gateway closes
                answers.append(dict(fields(msg))["35"])
            raw.close()
            assert answers == ["5"], answers
            next_seq = raw.seq
    finally:
        gw.stop()


def resend_one(port: int, next_seq: int, seq: int) -> tuple[bytes, int]:
    """Log on by hand at ``next_seq`` (the number the gateway expects) and ask for ``seq`` alone;
    the resent message, and the number to log on with next time (the session's inbound numbers
    are recorded behind its messages: the store may not show them yet)."""
    raw = logged_on_by_hand(port, next_seq)
    try:
        raw.send(f"35=2\x017={seq}\x0116={seq}")
        while True:
            msg = raw.read()
            assert msg is not None, f"no resend of {seq}"
            if dict(fields(msg))["34"] == str(seq):
                return msg, raw.seq + 1
    finally:
        raw.send("35=5")
        with contextlib.suppress(TimeoutError):
            while raw.read(timeout=5) is not None:  # until the gateway closes it: the session is free again
                pass
        raw.close()


def standby_copy_holds(standby: GatewayProc) -> int:
    """How many stored messages the standby's /ready says its local copy holds (-1: not yet up)."""
    try:
        problem = http_json(standby.http_port)[1]["problems"][0]
    except OSError:
        return -1
    assert problem.startswith("not active: standing by, local copy holds "), problem
    return int(problem.split("holds ")[1].split(" ")[0])


@pytest.mark.parametrize("order_path", ["native", "python"])
def test_a_warm_standby_takes_over_and_resends_old_and_recent_messages_byte_for_byte(
        tmp_path: Path, valkey: ValkeyProcess, order_path: str) -> None:
    """3,000 reports stored before the gateways start, more sent by the active one: the standby
    keeps its copy in step while it waits, so at takeover it copies only the last moments (its
    log says how many), and then resends the oldest report and the most recent message as
    Redis holds them (PossDupFlag=Y; only the resend's own header fields differ). The most recent
    application message: the active one's last echo before it died. QuickFIX is given the last
    1,000 at takeover (``takeover_preload``): through the bindings (QuickFIX's FileStore) the
    ResendRequest for the oldest has the rest loaded first; the native store reads every resend
    from Redis."""
    client = connect(RedisEndpoint(url=valkey.url))
    store_history(client, CLIENT1, 3000)
    port = free_port()
    preload = f'takeover_preload = 1000\norder_path = "{order_path}"'
    active = GatewayProc(tmp_path, valkey.url, name="a", fix_port=port, gateway_lines=preload).start().wait_active()
    standby = GatewayProc(tmp_path, valkey.url, name="b", fix_port=port, gateway_lines=preload).start()
    standby.wait_http()
    trader = FixClient(tmp_path, port).start()
    try:
        trader.wait_for(lambda: trader.logons == 1 and len(trader.app_messages) >= 3000, "logon and the history")
        orders_round_trip(trader, 20, "W")
        trader.stop()
        stored_count = len(stored_state(valkey.url).messages)
        wait_until(lambda: standby_copy_holds(standby) >= stored_count, "the standby's copy to hold everything")
        recent = max(r.seq_num for r in stored_state(valkey.url).messages if r.msg_type not in ADMIN)
        active.kill()
        standby.wait_active()
        copied_at_takeover = [int(line.split("(")[1].split(" of them")[0]) for line in standby.output().splitlines()
                              if "t/fsg/CLIENT1 materialised" in line]
        assert copied_at_takeover and copied_at_takeover[0] < 100, standby.output()
        stored = {r.seq_num: r.body for r in stored_state(valkey.url).messages}
        next_seq = stored_state(valkey.url).state.target_seq_num
        for seq in (recent, 1):
            resent, next_seq = resend_one(port, next_seq, seq)
            assert dict(fields(resent)).get("43") == "Y"
            assert body_without(resent, VOLATILE) == body_without(stored[seq], VOLATILE), seq
        if order_path == "python":
            assert "the older messages were loaded" in standby.output()
        else:
            assert "t/fsg/CLIENT1: a ResendRequest for 1..1 answered from the session store (1 stored messages)" \
                in standby.output()
    finally:
        trader.stop()
        active.kill()
        standby.stop()


def test_a_restarted_gateway_continues_the_sequence(tmp_path: Path, valkey: ValkeyProcess) -> None:
    port = free_port()
    first = GatewayProc(tmp_path, valkey.url, name="a", fix_port=port).start().wait_active()
    restarted = GatewayProc(tmp_path, valkey.url, name="a2", fix_port=port)
    try:
        check_takeover(tmp_path, valkey, restarted, first)
    finally:
        first.kill()
        restarted.stop()


def test_sigterm_logs_out_and_releases_the_lock_at_once(tmp_path: Path, valkey: ValkeyProcess) -> None:
    port = free_port()
    active = GatewayProc(tmp_path, valkey.url, name="a", fix_port=port, lock_ttl="60s", renewal="10s").start()
    active.wait_active()
    standby = GatewayProc(tmp_path, valkey.url, name="b", fix_port=port, lock_ttl="60s", renewal="10s").start()
    client = FixClient(tmp_path, port).start()
    try:
        client.wait_for(lambda: client.logons == 1, "logon")
        started = time.monotonic()
        active.signal(signal.SIGTERM)
        assert active.wait(15) == 0
        client.wait_for(lambda: client.logouts >= 1, "logout from the gateway")
        assert any(dict(fields(m))["35"] == "5" for m in client.admin_in), "a Logout was sent, not just a close"
        standby.wait_active(timeout=10)
        assert time.monotonic() - started < 30, "took over long before the 60 s TTL"
        assert "lock released" in active.output()
    finally:
        client.stop()
        active.kill()
        standby.stop()


def test_redis_down_while_sending_puts_nothing_unstored_on_the_wire(tmp_path: Path) -> None:
    with standalone(aof=True, appendfsync="always") as server:
        port = free_port()
        gw = GatewayProc(tmp_path, server.url, name="a", fix_port=port).start().wait_active()
        client = FixClient(tmp_path, port).start()
        try:
            client.wait_for(lambda: client.logons == 1, "logon")
            orders_round_trip(client, 10, "A")
            server.kill()
            for i in range(10):
                client.send_order(f"B{i}")
            # Held while the lock lasts (failoverWait; lockTtl 1s here), then the process ends:
            # the lock could not be renewed (status 3), and a standby takes over once Redis is back.
            assert gw.wait(30) == 3, "fail fast: a store that stays away ends the process within lockTtl"
        finally:
            client.stop()
            gw.kill()
        server.start()  # same port and data directory: the AOF is reloaded
        stored = {m.seq_num: m.body for m in stored_state(server.url).messages}
        for seq, received in client.app_messages.items():
            assert seq in stored, f"seq {seq} reached the client but is not stored"
            assert body_without(stored[seq], {"10", "9"}) == body_without(received, {"10", "9"})
        assert "Redis unreachable" in gw.output(), "the log says why"


def test_a_stalled_former_owner_cannot_write(tmp_path: Path, valkey: ValkeyProcess) -> None:
    old = GatewayProc(tmp_path, valkey.url, name="old", fix_port=free_port()).start().wait_active()
    client = FixClient(tmp_path, old.fix_port).start()
    new = None
    try:
        client.wait_for(lambda: client.logons == 1, "logon")
        orders_round_trip(client, 3, "A")
        before = stored_state(valkey.url).state
        old.signal(signal.SIGSTOP)  # a GC pause, a frozen VM: no renewals, no writes
        new = GatewayProc(tmp_path, valkey.url, name="new", fix_port=free_port()).start().wait_active()
        owner_after_takeover = valkey.client().get(CLIENT1.owner)
        old.signal(signal.SIGCONT)
        assert old.wait(15) == 3, "the former owner notices it lost the lock and exits non-zero"
        assert "lock LOST" in old.output()
        after = stored_state(valkey.url).state
        assert valkey.client().get(CLIENT1.owner) == owner_after_takeover
        assert after.last_sent_seq_num == before.last_sent_seq_num, "nothing was written by the old owner"
    finally:
        client.stop()
        old.kill()
        if new:
            new.stop()


def test_bad_input_is_refused_and_other_sessions_carry_on(tmp_path: Path, valkey: ValkeyProcess) -> None:
    port = free_port()
    gw = GatewayProc(tmp_path, valkey.url, name="a", fix_port=port).start().wait_active()
    good = FixClient(tmp_path, port, sender="CLIENT2").start()
    try:
        good.wait_for(lambda: good.logons == 1, "CLIENT2 logon")
        # garbage bytes: no session can be named, so nothing is answered: the front closes it
        garbage = RawFixClient(port)
        garbage.conn.send(b"\x00\xffthis is not FIX at all\r\n" * 20)
        assert garbage.read(timeout=5) is None
        garbage.close()
        # a FIX-framed first message that is not a Logon: disconnected
        not_logon = RawFixClient(port)
        not_logon.send("35=0")
        assert not_logon.read(timeout=15) is None
        not_logon.close()
        # a logon for a session nobody configured
        stranger = RawFixClient(port, sender="NOBODY")
        stranger.send("35=A\x0198=0\x01108=30")
        assert stranger.read(timeout=15) is None
        stranger.close()
        # a wrong TargetCompID
        wrong = RawFixClient(port, target="SOMEONE_ELSE")
        wrong.send("35=A\x0198=0\x01108=30")
        assert wrong.read(timeout=15) is None
        wrong.close()
        orders_round_trip(good, 3, "G")
        assert gw.alive
        metrics = http_text(gw.http_port, "/metrics")
        assert 'fixgw_session_next_sender_seq_num{session="t/fsg/CLIENT2"}' in metrics
        assert 'fixgw_lock_held{gateway="fsg"} 1.0' in metrics
        assert "fixgw_store_write_seconds_bucket" in metrics
    finally:
        good.stop()
        gw.stop()


def test_the_gateway_refuses_a_partition_count_the_cells_did_not_boot_with(tmp_path: Path,
                                                                          valkey: ValkeyProcess) -> None:
    valkey.client().hset("matching:{matching-p0}:meta", "partitionCount", 3)  # a cell booted with 3
    gw = GatewayProc(tmp_path, valkey.url, fix_port=free_port(), mode="gateway",
                     extra="").start()
    assert gw.wait(30) == 2
    assert "partition_count = 2, but partition 0 was booted with MATCHING_PARTITION_COUNT=3" in gw.output()


def cpus_allowed(pid: int) -> dict[str, str]:
    """Each thread of ``pid`` (by its id) and the CPUs it may run on (Linux's Cpus_allowed_list)."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            status = (task / "status").read_text()
        except FileNotFoundError:  # a thread that ended meanwhile
            continue
        out[task.name] = next(line.split()[1] for line in status.splitlines() if line.startswith("Cpus_allowed_list"))
    return out


def test_cpu_affinity_auto_keeps_every_gateway_thread_on_one_cpu(tmp_path: Path, valkey: ValkeyProcess) -> None:
    """``cpu_affinity = "auto"``: every thread of the gateway — the ones it had at start and the
    ones made later (QuickFIX's for a connection, the intake's, the dispatcher's) — runs on the
    first CPU this process may use."""
    first = min(os.sched_getaffinity(0))
    gw = GatewayProc(tmp_path, valkey.url, fix_port=free_port(), gateway_lines='cpu_affinity = "auto"').start()
    client = FixClient(tmp_path, gw.fix_port)
    try:
        gw.wait_active()
        client.start()
        client.wait_for(lambda: client.logons == 1, "logon")
        orders_round_trip(client, 3, "P")  # the connection's thread and the intake's are running now
        assert gw.proc is not None
        threads = cpus_allowed(gw.proc.pid)
        assert len(threads) > 3, threads
        assert set(threads.values()) == {str(first)}, threads
        assert "gateway threads pinned to CPU" in gw.output()
    finally:
        client.stop()
        gw.stop()


def test_a_cpu_affinity_the_process_may_not_use_stops_the_gateway_with_the_reason(tmp_path: Path,
                                                                                  valkey: ValkeyProcess) -> None:
    allowed = sorted(os.sched_getaffinity(0))
    gw = GatewayProc(tmp_path, valkey.url, fix_port=free_port(), gateway_lines="cpu_affinity = [4095]").start()
    assert gw.wait(30) == 2
    assert f"[gateway] cpu_affinity [4095]: this process may only run on CPUs {allowed}" in gw.output()


def test_a_second_gateway_on_the_same_state_dir_is_refused_with_the_reason(tmp_path: Path,
                                                                          valkey: ValkeyProcess) -> None:
    """A standby started beside the active one with the same state_dir would empty the active
    one's local copy under QuickFIX: it is refused at start, saying how to give it its own; with
    ``--state-dir`` (and its own ``--http-port``) it stands by and says what its copy holds."""
    port = free_port()
    active = GatewayProc(tmp_path, valkey.url, name="a", fix_port=port).start().wait_active()
    try:
        same = subprocess.run([sys.executable, "-m", "fixgw.cli", "gateway", "--config", str(active.config),
                               "--http-port", str(free_port())], cwd=active.dir, capture_output=True, text=True,
                              timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert same.returncode == 2, same.stderr
        assert "is in use by gateway pid" in same.stderr and "--state-dir" in same.stderr, same.stderr
        http = free_port()
        own = subprocess.Popen([sys.executable, "-m", "fixgw.cli", "gateway", "--config", str(active.config),
                                "--http-port", str(http), "--state-dir", str(tmp_path / "own")], cwd=active.dir,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               env={**os.environ, "PYTHONPATH": str(ROOT)})
        try:
            wait_until(lambda: http_status(http) == 503, "the second gateway standing by")
            assert http_json(http)[1]["problems"][0].startswith("not active: standing by, local copy holds ")
        finally:
            own.kill()
            own.wait(10)
    finally:
        active.stop()
