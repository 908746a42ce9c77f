"""Hostile peers on the FIX port, over real sockets against real gateway processes: nothing a
connection, a Logon or a certificate carries may take a session or the gateway down, or get in.
Each attack is refused with the reason logged, and then the session still logs on, the other
sessions keep trading, and ``/ready`` tells the truth."""

from __future__ import annotations

import fcntl
import os
import re
import socket
import ssl
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from datastore.embedded import ValkeyProcess, free_port, standalone
from datastore.settings import ConfigError
from fixgw.config import GatewaySettings
from fixgw.credentials import LogonLockout, credentials_problem, hash_password, scrypt_memory, verify_password
from fixgw.engine_port import confine_to_loopback
from fixgw.fixat import Connection, RawSession, frame
from fixgw.front import InboundCheck, first_message, without_field
from tests.gateway_helpers import FixClient, GatewayProc, RawFixClient, http_json, http_text, parse, wait_until
from tests.netfault import Net
from tests.test_gateway import orders_round_trip
from tests.test_network_faults import hosts
from tests.test_tls import certs, make_ca, make_cert  # noqa: F401 (the module's certificates fixture)

pytestmark = pytest.mark.slow  # starts servers or processes: not in `make unit`

HASH = hash_password("s3cret-pass", salt=b"0123456789abcdef")
PROTECTED = f'[[gateway.session]]\nname = "CLIENT1"\nusername = "alice"\npassword_hash = "{HASH}"\n' \
            '[[gateway.session]]\nname = "CLIENT2"\n'


def logon_answer(port: int, fields: str | bytes, sender: str = "CLIENT1") -> dict[int, bytes] | None:
    c = RawFixClient(port, sender=sender, seq=1)
    try:
        c.send((b"35=A\x0198=0\x01108=30" + (fields.encode() if isinstance(fields, str) else fields)))
        raw = c.read(timeout=15)
        return None if raw is None else parse(raw)
    finally:
        c.close()


def rss_kib(pid: int) -> int:
    return int(re.search(r"VmRSS:\s+(\d+)", Path(f"/proc/{pid}/status").read_text()).group(1))  # type: ignore[union-attr]


def threads(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


# --- 1. a Logon cannot disable a session; no callback raises into the bindings ----------------

def test_a_logon_with_undecodable_credentials_is_refused_and_the_session_logs_on_after(
        tmp_path: Path, valkey: ValkeyProcess) -> None:
    port = free_port()
    gw = GatewayProc(tmp_path, valkey.url, fix_port=port, sessions=PROTECTED, extra="message_log = false").start()
    gw.wait_active()
    try:
        for bad in (b"\x01553=alice\x01554=\xff\xfe", b"\x01553=\xff\xfe\x01554=s3cret-pass"):
            answer = logon_answer(port, bad)
            assert answer is not None and answer[35] == b"5" and b"bad credentials" in answer[58], answer
        answer = logon_answer(port, "\x01553=alice\x01554=s3cret-pass")
        assert answer is not None and answer[35] == b"A", "the right password still logs on"
        assert http_json(gw.http_port)[0] == 200 and gw.alive
        assert "Traceback" not in gw.output()
    finally:
        gw.stop()
    assert gw.proc is not None and gw.proc.returncode == 0, "SIGTERM still ends it cleanly"


GUARDED = ["onCreate", "onLogon", "onLogout", "fromAdmin", "fromApp"]


def test_an_exception_in_each_callback_leaves_the_session_and_the_gateway_serving(
        tmp_path: Path, valkey: ValkeyProcess) -> None:
    """Each fault fires once, inside its callback's guard (``FIXGW_TEST_FAIL_IN_CALLBACK``), the
    first time the callback runs after a logon; the session trades, logs out and on again."""
    port = free_port()
    gw = GatewayProc(tmp_path, valkey.url, fix_port=port, env={"FIXGW_TEST_FAIL_IN_CALLBACK": ",".join(GUARDED)})
    gw.start().wait_active()
    client = FixClient(tmp_path, port).start()
    try:
        client.wait_for(lambda: client.logons >= 1, "logon")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # (the fromApp fault refuses one order: sent again)
            before = len(client.app_messages)
            for i in range(3):
                client.send_order(f"F{before}-{i}")
            if client.wait(lambda: len(client.app_messages) >= before + 3, 5):
                break
        orders_round_trip(client, 3, "after")
        client.stop()
        client = FixClient(tmp_path, port).start()
        client.wait_for(lambda: client.logons >= 1, "a second logon (a Logon the fromAdmin fault refused is retried)",
                        30)
        orders_round_trip(client, 3, "again")
        assert gw.alive and http_json(gw.http_port)[0] == 200
        metrics = http_text(gw.http_port, "/metrics")
        for callback in GUARDED:
            assert f"injected fault in {callback}" in gw.output(), f"the {callback} fault did fire"
            assert f'callback="{callback}"' in metrics, f"and was counted ({callback})"
    finally:
        client.stop()
        gw.stop()


def test_an_exception_in_to_app_vetoes_that_report_which_arrives_after_the_reconnect(tmp_path: Path) -> None:
    """Order entry: the first ExecutionReport's toApp raises; the report is not sent (nothing
    unstored goes out), the session is disconnected, and after the client's reconnect every
    report arrives once and the session trades on."""
    from tests.system_helpers import system_on_one_server, wait_reports

    with system_on_one_server(tmp_path, gateway_env={"FIXGW_TEST_FAIL_IN_CALLBACK": "toApp"}) as system:
        c1, c2 = system.client("CLIENT1"), system.client("CLIENT2")
        c1.order("V1", "2", "1", "10.00", symbol="T1")
        assert wait_reports(c1, "V1", 1, 30)[0].get(150) == "0", "the vetoed New arrives after the reconnect"
        c2.order("V2", "1", "1", "10.00", symbol="T1")
        assert [r.get(150) for r in wait_reports(c2, "V2", 2)] == ["0", "F"]
        assert [r.get(150) for r in wait_reports(c1, "V1", 2)] == ["0", "F"]
        # (the veto hit the order entry's report, which goes out before its drop copy)
        assert "e2e/fsg/CLIENT1: message not stored, so not sent" in system.gateway.output()
        assert system.gateway.alive and http_json(system.gateway.http_port)[0] == 200


def test_a_vetoed_report_holds_back_the_rest_of_its_batch_which_arrive_after_it_in_order(tmp_path: Path) -> None:
    """An IOC with nothing to meet: its New and its Canceled reach the dispatcher together, one
    batch for the session. The New's toApp raises: the Canceled is not sent either (it would
    reach the client before the New), and after the reconnect both arrive, New first, once."""
    from tests.system_helpers import summary, system_on_one_server, wait_reports

    with system_on_one_server(tmp_path, gateway_env={"FIXGW_TEST_FAIL_IN_CALLBACK": "toApp"}) as system:
        c1 = system.client("CLIENT1")
        c1.order("IOC1", "1", "1", "10.00", symbol="T2", tif="3")
        assert summary(wait_reports(c1, "IOC1", 2, 30)) == [("8", "0", "0"), ("8", "4", "4")]
        assert "e2e/fsg/CLIENT1: message not stored, so not sent" in system.gateway.output()
        c1.order("IOC2", "1", "1", "10.00", symbol="T2", tif="3")
        assert summary(wait_reports(c1, "IOC2", 2)) == [("8", "0", "0"), ("8", "4", "4")]
        assert len(wait_reports(c1, "IOC1", 2)) == 2, "each report once"


def test_an_exception_in_to_admin_ends_the_process_and_the_standby_serves(tmp_path: Path,
                                                                          valkey: ValkeyProcess) -> None:
    """An admin message cannot be vetoed through the bindings: not stored, it must not be sent,
    so the process ends (status 4) and the standby, with the stored session, serves."""
    port = free_port()
    active = GatewayProc(tmp_path, valkey.url, name="a", fix_port=port,
                         env={"FIXGW_TEST_FAIL_IN_CALLBACK": "toAdmin"}).start()
    active.wait_active()
    standby = GatewayProc(tmp_path, valkey.url, name="b", fix_port=port).start()
    client = FixClient(tmp_path, port).start()
    try:
        client.wait_for(lambda: client.logons >= 1, "logon")
        client.send("1", [(112, "PROBE")])  # a TestRequest: its Heartbeat answer is an admin message
        assert active.wait(15) == 4
        standby.wait_active(20)
        client.wait_for(lambda: client.logons >= 2, "logon at the standby", 30)
        orders_round_trip(client, 3, "S")
    finally:
        client.stop()
        active.kill()
        standby.stop()


def test_a_hash_at_owasp_cost_verifies_and_one_beyond_the_memory_bound_is_refused_at_start() -> None:
    salt = b"fedcba9876543210"
    import base64
    import hashlib

    digest = hashlib.scrypt(b"pw", salt=salt, n=2**17, r=8, p=1, dklen=32, maxmem=scrypt_memory(17, 8, 1))
    owasp = f"scrypt$17$8$1${base64.b64encode(salt).decode()}${base64.b64encode(digest).decode()}"
    GatewaySettings(session=[{"name": "C", "password_hash": owasp}], message_log=False)
    assert verify_password("pw", owasp) and not verify_password("px", owasp)
    with pytest.raises(ValueError, match="MiB per Logon check"):
        GatewaySettings(session=[{"name": "C", "password_hash": owasp.replace("$17$8$", "$20$32$")}],
                        message_log=False)


# --- 2. connections that never log on; oversized messages ------------------------------------

def test_a_thousand_idle_connections_leave_threads_and_memory_bounded(tmp_path: Path, valkey: ValkeyProcess) -> None:
    port = free_port()
    gw = GatewayProc(tmp_path, valkey.url, fix_port=port, extra='logon_timeout = "3s"').start().wait_active()
    assert gw.proc is not None
    good = FixClient(tmp_path, port, sender="CLIENT2").start()
    idle: list[socket.socket] = []
    try:
        good.wait_for(lambda: good.logons == 1, "CLIENT2 logon")
        threads_before, rss_before = threads(gw.proc.pid), rss_kib(gw.proc.pid)
        for i in range(1000):  # from other loopback addresses than the real client's
            s = socket.socket()
            s.bind((f"127.0.{1 + i // 200}.{2 + i % 200}", 0))
            try:
                s.connect(("127.0.0.1", port))
            except OSError:
                s.close()
                continue
            idle.append(s)
        time.sleep(0.5)
        threads_during, rss_during = threads(gw.proc.pid), rss_kib(gw.proc.pid)
        orders_round_trip(good, 5, "I")  # the real client trades meanwhile
        pending = float(re.search(r"\nfixgw_front_pending_logons (\S+)", http_text(gw.http_port, "/metrics")).group(1))  # type: ignore[union-attr]
        print(f"1,000 idle connections: threads {threads_before} → {threads_during}, RSS {rss_before} → "
              f"{rss_during} KiB, held waiting to log on: {pending:.0f}")
        assert threads_during == threads_before, "no thread per connection"
        assert rss_during - rss_before < 16 * 1024, "a few KiB per connection at most"
        assert pending <= 256, "at most max_pending_logons held; the rest closed at once"
        wait_until(lambda: "fixgw_front_pending_logons 0.0" in http_text(gw.http_port, "/metrics"),
                   "every idle connection dropped after logon_timeout", 10)
        assert gw.alive and http_json(gw.http_port)[0] == 200
    finally:
        for s in idle:
            s.close()
        good.stop()
        gw.stop()


def test_an_oversized_message_is_dropped_with_its_connection_before_it_is_buffered(
        tmp_path: Path, valkey: ValkeyProcess) -> None:
    port = free_port()
    limit = 1 << 20
    gw = GatewayProc(tmp_path, valkey.url, fix_port=port, extra=f"max_message_size = {limit}").start().wait_active()
    assert gw.proc is not None
    try:
        rss_before = rss_kib(gw.proc.pid)
        attacker = Connection("127.0.0.1", port)  # before any Logon
        attacker.send(b"8=FIX.4.4\x019=1000000000\x0135=A\x01")
        sent = 0
        try:
            while sent < 64 << 20:
                attacker.send(b"x" * (1 << 20))
                sent += 1 << 20
        except OSError:
            pass
        assert attacker.read_message(5) is None, "closed"
        grown = rss_kib(gw.proc.pid) - rss_before
        print(f"oversized message: {sent >> 20} MiB sent before the close; RSS grew {grown} KiB (limit {limit >> 10} KiB)")
        assert grown < 2 * limit // 1024
        # ...and after a Logon: the session is dropped, then logs on again
        client = FixClient(tmp_path, port).start()
        client.wait_for(lambda: client.logons == 1, "logon")
        raw = RawFixClient(port, sender="CLIENT2")
        raw.send("35=A\x0198=0\x01108=30")
        assert parse(raw.read(timeout=10) or b"")[35] == b"A"
        try:
            raw.conn.send(b"8=FIX.4.4\x019=5000000\x0135=D\x01" + b"y" * (2 << 20))
        except OSError:
            pass  # closed while the rest was still being written
        assert raw.read(timeout=10) is None, "a logged-on session is dropped too"
        orders_round_trip(client, 3, "O")  # the other session never noticed
        assert logon_answer(port, "", sender="CLIENT2") is not None, "and CLIENT2 logs on again"
        assert 'fixgw_front_refused_total{reason="message-size"} 2.0' in http_text(gw.http_port, "/metrics")
        client.stop()
    finally:
        gw.stop()


def test_the_stream_check_bounds_what_the_engine_may_buffer() -> None:
    check = InboundCheck(1000)
    assert check.feed(b"8=FIX.4.4\x019=900\x0135=D\x01" + b"a" * 880) is None
    assert check.feed(b"\x0110=123\x01" + b"8=FIX.4.4\x019=") is None
    assert "over max_message_size" in (check.feed(b"12345678901\x01") or ""), "a header cut between reads"
    garbage = InboundCheck(1000)
    assert garbage.feed(b"z" * 1000) is None
    assert "without a message header" in (garbage.feed(b"z" * 100) or "")
    assert first_message(b"8=FIX.4.4\x019=5\x0135=A\x0110=000\x01rest", 100) == (
        b"8=FIX.4.4\x019=5\x0135=A\x0110=000\x01", None)
    stripped = without_field(frame("35=A\x0198=0\x01108=30\x01554=pw", 1, "C", "G"), 554)
    assert b"554=" not in stripped and first_message(stripped, 1000)[0] == stripped
    assert int(stripped.split(b"\x0110=")[1][:3]) == sum(stripped.split(b"10=")[0]) % 256, "checksum made again"


# --- 3. TLS: only the configured CA, certificates bound to sessions, strong ciphers ----------

BOUND = ('[[gateway.session]]\nname = "CLIENT1"\nallowed_subjects = ["client"]\n'
         '[[gateway.session]]\nname = "CLIENT2"\nallowed_subjects = ["client2"]\n')


def tls_logon(port: int, cert: tuple[Path, Path] | None, ca: Path, sender: str = "CLIENT1",
              ciphers: str | None = None) -> str:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(str(ca))
    if cert is not None:
        ctx.load_cert_chain(str(cert[0]), str(cert[1]))
    if ciphers is not None:
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
        ctx.set_ciphers(ciphers)
    try:
        conn = Connection("127.0.0.1", port)
        conn.sock = ctx.wrap_socket(conn.sock, server_hostname="localhost")
        conn.send(frame("35=A\x0198=0\x01108=30\x01141=Y", 1, sender, "FIXGW"))
        raw = conn.read_message(5)
    except (ssl.SSLError, OSError, TimeoutError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return "closed" if raw is None else ("logged on" if parse(raw)[35] == b"A" else "answered")


def test_only_the_configured_ca_is_trusted_and_a_certificate_logs_on_only_as_its_session(
        tmp_path: Path, valkey: ValkeyProcess, certs: dict) -> None:  # noqa: F811
    d = tmp_path / "env-ca"
    d.mkdir()
    env_ca = make_ca(d, "environment")
    env_client = make_cert(d, "client", env_ca)  # CN=client, as the venue's own client
    (d / "hashed").mkdir()
    os.symlink(env_ca[0], d / "hashed" / "ca.pem")
    subprocess_env = {"SSL_CERT_FILE": str(env_ca[0]), "SSL_CERT_DIR": str(d / "hashed")}
    port = free_port()
    tls = (f'[gateway.tls]\ncertificate = "{certs["server"][0]}"\nkey = "{certs["server"][1]}"\n'
           f'client_ca = "{certs["ca"][0]}"\n')
    gw = GatewayProc(tmp_path, valkey.url, fix_port=port, sessions=BOUND, extra=tls, env=subprocess_env).start()
    gw.wait_active(30)
    try:
        assert tls_logon(port, certs["client"], certs["ca"][0]) == "logged on"
        assert tls_logon(port, env_client, certs["ca"][0]) != "logged on", "a CA named only in SSL_CERT_FILE/DIR"
        assert tls_logon(port, certs["stranger"], certs["ca"][0]) != "logged on", "a foreign CA"
        assert tls_logon(port, certs["client"], certs["ca"][0], sender="CLIENT2") == "closed", \
            "client's certificate cannot log on as CLIENT2"
        assert "certificate (client) not allowed" in gw.output()
        weak = tls_logon(port, certs["client"], certs["ca"][0], ciphers="AES128-SHA")
        assert weak != "logged on" and weak.startswith("SSL"), f"no forward secrecy, no entry: {weak}"
        assert tls_logon(port, certs["client"], certs["ca"][0]) == "logged on", "and the session logs on after"
        assert http_json(gw.http_port)[0] == 200
    finally:
        gw.stop()


# --- 4. open by default; accounts ------------------------------------------------------------

def test_a_gateway_reachable_from_other_machines_refuses_sessions_anyone_could_log_on_as() -> None:
    with pytest.raises(ValueError, match=r"sessions \['C'\] log on with their CompIDs alone"):
        GatewaySettings(host="0.0.0.0", session=[{"name": "C"}])
    GatewaySettings(host="0.0.0.0", session=[{"name": "C", "password_hash": HASH}], message_log=False)
    GatewaySettings(host="0.0.0.0", session=[{"name": "C"}], insecure_allow_unauthenticated_sessions=True)
    GatewaySettings(host="127.0.0.1", session=[{"name": "C"}])
    with pytest.raises(ValueError, match="allowed_subjects needs"):
        GatewaySettings(session=[{"name": "C", "allowed_subjects": ["c"]}])


def fd_targets(pid: int) -> Iterator[str]:
    """What each open descriptor of ``pid`` points at; one closed while they are read (a
    short-lived connection of the running process) is skipped."""
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            yield os.readlink(f"/proc/{pid}/fd/{fd}")
        except FileNotFoundError:
            continue


def listening_ports_of(pid: int) -> set[int]:
    """The TCP ports ``pid`` listens on, in its network namespace."""
    inodes = {target[8:-1] for target in fd_targets(pid) if target.startswith("socket:[")}
    ports = set()
    for line in Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[3] == "0A" and fields[9] in inodes:  # LISTEN, and one of its own
            ports.add(int(fields[1].split(":")[1], 16))
    return ports


@pytest.fixture
def machines() -> Iterator[Net]:
    """This host ("gw") and another machine ("peer"), each a network namespace of its own; where
    this machine cannot make them (root, ``ip``, ``nft``), skipped saying why, or a failure with
    ``FIXGW_REQUIRE_FAULTS=1``, as CI sets it."""
    yield from hosts(["gw", "peer"])


def test_quickfix_behind_the_front_takes_no_connection_from_another_machine(tmp_path: Path, machines: Net) -> None:
    """QuickFIX's C++ acceptor binds its port on every address whatever its settings say; the
    gateway binds that socket to the loopback device (``fixgw/engine_port.py``). From another
    machine (a network namespace of its own) only the front answers: a Logon through it logs on,
    and QuickFIX's port refuses the connection as a closed port would."""
    one_session = f'[[gateway.session]]\nname = "CLIENT1"\nusername = "alice"\npassword_hash = "{HASH}"\n'
    net = machines
    address = net.address["gw"]
    port = free_port()
    with net.inside("gw"), standalone() as valkey:
        gw = GatewayProc(tmp_path, valkey.url, fix_port=port, sessions=one_session, extra="message_log = false",
                         gateway_lines=f'host = "{address}"').start()
        try:
            gw.wait_active()
            assert gw.proc is not None
            engine = listening_ports_of(gw.proc.pid) - {port, gw.http_port}
            assert len(engine) == 1, f"QuickFIX's port among {engine}"
            engine_port = engine.pop()
            with net.inside("peer"):
                with pytest.raises(ConnectionRefusedError):
                    socket.create_connection((address, engine_port), timeout=5).close()
                client = RawSession(port, host=address)
                try:
                    client.send(b"35=A\x0198=0\x01108=30\x01553=alice\x01554=s3cret-pass")
                    raw = client.read(timeout=15)
                finally:
                    client.close()
            assert raw is not None and parse(raw)[35] == b"A", "the front still passes a Logon on to QuickFIX"
            assert gw.alive
        finally:
            gw.stop()


def test_confining_a_port_drops_what_came_from_elsewhere_and_keeps_this_host(machines: Net) -> None:
    """The moment between QuickFIX's ``listen`` and the bind: a connection another machine made
    then, already accepted, is shut down; after it, another machine is refused and this host
    still connects."""
    net = machines
    with net.inside("gw"):
        address = net.address["gw"]
        with socket.socket() as listener:
            listener.bind(("0.0.0.0", 0))  # as QuickFIX's acceptor binds: every address
            listener.listen()
            port = listener.getsockname()[1]
            with net.inside("peer"):
                early = socket.create_connection((address, port), timeout=5)
            accepted, _ = listener.accept()
            try:
                confine_to_loopback(port, settle_s=1)
                early.settimeout(5)
                assert early.recv(1) == b"", "the connection from elsewhere is shut down"
                with net.inside("peer"), pytest.raises(ConnectionRefusedError):
                    socket.create_connection((address, port), timeout=5).close()
                with socket.create_connection(("127.0.0.1", port), timeout=5) as local:
                    served, _ = listener.accept()
                    local.sendall(b"x")
                    assert served.recv(1) == b"x"
                    served.close()
            finally:
                early.close()
                accepted.close()
        with pytest.raises(ConfigError, match="not found"):
            confine_to_loopback(port)  # closed: nothing to confine


def test_confining_leaves_quickfix_s_socket_blocking() -> None:
    """The confinement works on a duplicate of QuickFIX's descriptor, which shares its file's
    flags; a socket object made while a default timeout is set turns O_NONBLOCK on, and
    QuickFIX's accept thread expects a blocking socket. The flags are put back."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        before = fcntl.fcntl(listener.fileno(), fcntl.F_GETFL)
        socket.setdefaulttimeout(5)
        try:
            confine_to_loopback(listener.getsockname()[1], settle_s=0)
        finally:
            socket.setdefaulttimeout(None)
        assert fcntl.fcntl(listener.fileno(), fcntl.F_GETFL) == before
        assert not before & os.O_NONBLOCK


# --- 5. credentials ---------------------------------------------------------------------------

def test_a_wrong_username_costs_the_same_scrypt_as_a_wrong_password(monkeypatch: pytest.MonkeyPatch) -> None:
    import hashlib

    calls: list[bytes] = []
    real = hashlib.scrypt

    def counting(password: bytes, **kw: object) -> bytes:
        calls.append(password)
        return real(password, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(hashlib, "scrypt", counting)
    assert credentials_problem({553: "mallory", 554: "s3cret-pass"}, "alice", HASH) == "bad credentials"
    assert credentials_problem({553: "alice", 554: "wrong"}, "alice", HASH) == "bad credentials"
    assert len(calls) == 2, "scrypt ran for the wrong username too"


def test_a_run_of_refused_logons_locks_the_session_for_a_while() -> None:
    now = [0.0]
    lockout = LogonLockout(3, 60.0, clock=lambda: now[0])
    assert [lockout.refused("C")[1] for _ in range(3)] == [False, False, True]
    assert lockout.locked_for("C") == 60.0
    now[0] = 59.0
    assert lockout.locked_for("C") == pytest.approx(1.0)
    now[0] = 61.0
    assert lockout.locked_for("C") == 0.0 and lockout.refused("C") == (0.25, False), "counting starts again"


def test_a_locked_session_refuses_even_the_right_password_and_says_so(tmp_path: Path, valkey: ValkeyProcess) -> None:
    port = free_port()
    gw = GatewayProc(tmp_path, valkey.url, fix_port=port, sessions=PROTECTED,
                     extra='message_log = false\nlogon_lockout_after = 3\nlogon_lockout = "3s"').start()
    gw.wait_active()
    try:
        for _ in range(3):
            assert b"bad credentials" in (logon_answer(port, "\x01553=alice\x01554=guess") or {}).get(58, b"")
        locked = logon_answer(port, "\x01553=alice\x01554=s3cret-pass") or {}
        assert b"too many refused Logons" in locked.get(58, b""), locked
        assert 'fixgw_logon_lockouts_total{session="t/fsg/CLIENT1"} 1.0' in http_text(gw.http_port, "/metrics")
        assert "locked for 3s after 3 refused Logons" in gw.output()
        time.sleep(3.2)
        assert (logon_answer(port, "\x01553=alice\x01554=s3cret-pass") or {}).get(35) == b"A", "unlocked after"
    finally:
        gw.stop()


def test_a_password_sent_to_a_session_without_one_reaches_no_log(tmp_path: Path, valkey: ValkeyProcess) -> None:
    port = free_port()
    gw = GatewayProc(tmp_path, valkey.url, fix_port=port).start().wait_active()  # message_log = true
    try:
        answer = logon_answer(port, "\x01554=topsecret-by-mistake", sender="CLIENT2")
        assert answer is not None and answer[35] == b"A"
        leaked = [p for p in gw.dir.rglob("*") if p.is_file() and b"topsecret" in p.read_bytes()]
        assert not leaked, f"in the gateway's files: {leaked}"
        client = valkey.client()
        assert not [k for k in client.scan_iter() if b"topsecret" in (client.dump(k) or b"")], "nor in the store"
    finally:
        gw.stop()


# --- 6. datastore and broker credentials -------------------------------------------------------

def test_secrets_never_sit_in_a_datastore_or_broker_url(monkeypatch: pytest.MonkeyPatch) -> None:
    from datastore.settings import RedisEndpoint
    from matching.broker_url import amqp_url_with_password

    with pytest.raises(ValueError, match="url must not carry a password"):
        RedisEndpoint(url="redis://:hunter2@10.0.0.7:6379/0")
    with pytest.raises(ValueError, match="no password source"):
        amqp_url_with_password("amqp://trader@10.0.0.5:5672/venue")
    monkeypatch.setenv("AMQP_PW", "s3cret")
    with pytest.raises(ValueError, match="must name its user"):
        amqp_url_with_password("amqp://10.0.0.5:5672/venue", "AMQP_PW")
    assert amqp_url_with_password("amqp://trader@[2001:db8::5]:5672/venue", "AMQP_PW") == \
        "amqp://trader:s3cret@[2001:db8::5]:5672/venue", "an IPv6 address keeps its brackets"


def test_fixgw_up_gives_its_valkey_a_password_the_cells_and_tools_use(tmp_path: Path) -> None:
    """On the default system: the embedded Valkey refuses a client without the password, which
    `fixgw up` made (0600, beside the data), and the gateway, the cells and `fixgw-inspect
    --config` all get in with it."""
    import shutil
    import signal
    import subprocess
    import sys

    import redis

    from tests.gateway_helpers import ROOT

    shutil.copytree(ROOT / "config", tmp_path / "config")
    vport, fport, hport = free_port(), free_port(), free_port()
    config = tmp_path / "config" / "fixgw.toml"  # the shipped file, on ports of this test's own
    config.write_text(config.read_text().replace("6479", str(vport)))
    up = subprocess.Popen([sys.executable, "-m", "fixgw.cli", "up", "--config", "config/fixgw.toml", "--fix-port",
                           str(fport), "--http-port", str(hport)], cwd=tmp_path, stdout=subprocess.DEVNULL,
                          stderr=subprocess.STDOUT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        wait_until(lambda: http_json(hport)[0] == 200 if _listening(hport) else False, "fixgw up to be ready", 60)
        secret = tmp_path / "var" / "valkey" / "password"
        assert secret.stat().st_mode & 0o777 == 0o600
        with pytest.raises(redis.AuthenticationError):
            redis.Redis(port=vport).ping()
        demo = subprocess.run([sys.executable, "-m", "fixgw.cli", "demo", "--port", str(fport)], cwd=tmp_path,
                              capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert demo.returncode == 0 and "DROPCOPY" in demo.stdout, demo.stdout + demo.stderr
        # The installed console script, as a user runs it after `make run`: no flags at all.
        fixgw_inspect = str(Path(sys.executable).parent / "fixgw-inspect")
        for args, expect in ((["audit"], "3 session(s) audited: whole"), (["sessions"], "fixgw/fsg/CLIENT1"),
                             (["messages", "CLIENT1"], "35=A|")):
            inspect = subprocess.run([fixgw_inspect, *args], cwd=tmp_path, capture_output=True, text=True, timeout=60)
            assert inspect.returncode == 0 and expect in inspect.stdout, inspect.stdout + inspect.stderr
            assert inspect.stderr.strip() == f"fixgw-inspect: the session store of config/fixgw.toml " \
                                             f"(redis://127.0.0.1:{vport}/0)"
        unknown = subprocess.run([fixgw_inspect, "state", "NOBODY"], cwd=tmp_path, capture_output=True, text=True)
        assert unknown.returncode == 2 and unknown.stderr.strip().endswith(
            "no stored session is named 'NOBODY' (`fixgw-inspect sessions` lists them)")
    finally:
        up.send_signal(signal.SIGINT)
        try:
            up.wait(30)
        except subprocess.TimeoutExpired:
            up.kill()


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        return True
    except OSError:
        return False
