"""Clients built from settings: topology, password sources, timeouts and pool limits honoured."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import redis

from datastore.connection import connect, own_connection, round_trip
from datastore.embedded import ValkeyProcess, standalone
from datastore.settings import RedisEndpoint
from fixgw.fixat import RawSession, fix_time
from matching.keys import PartitionKeys

pytestmark = pytest.mark.slow  # starts servers or processes: not in `make unit`


def test_each_topology_reaches_its_datastore(endpoint: RedisEndpoint) -> None:
    client = connect(endpoint)
    client.set(f"conn-{endpoint.topology}", "1")
    assert client.get(f"conn-{endpoint.topology}") == b"1"


def test_password_from_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    with standalone(requirepass="s3cret") as server:
        monkeypatch.setenv("TEST_REDIS_PW", "s3cret")
        assert connect(RedisEndpoint(url=server.url, passwordEnv="TEST_REDIS_PW")).ping()
        with pytest.raises(redis.AuthenticationError):
            connect(RedisEndpoint(url=server.url)).ping()


def test_pool_max_total_and_max_wait_are_honoured(valkey: ValkeyProcess) -> None:
    client = connect(RedisEndpoint(url=valkey.url, pool={"maxTotal": 1, "maxIdle": 1, "maxWait": "200ms"}))
    pool = client.connection_pool
    held = pool.get_connection()
    started = time.monotonic()
    with pytest.raises(redis.ConnectionError, match="No connection available"):
        pool.get_connection()
    assert time.monotonic() - started >= 0.18
    pool.release(held)
    assert client.ping()


def test_pool_min_idle_warms_and_max_idle_closes_surplus(valkey: ValkeyProcess) -> None:
    probe = valkey.client()
    before = probe.info("clients")["connected_clients"]
    client = connect(RedisEndpoint(url=valkey.url, pool={"maxTotal": 4, "maxIdle": 1, "minIdle": 1}))
    assert probe.info("clients")["connected_clients"] == before + 1  # the warmed connection
    pool = client.connection_pool
    conns = [pool.get_connection() for _ in range(3)]
    for c in conns:
        c.connect()
    for c in conns:
        pool.release(c)
    open_idle = [c for c in pool.pool.queue if c is not None and c._sock is not None]
    assert len(open_idle) == 1


def test_socket_timeout_and_max_attempts_bound_a_stalled_server(valkey: ValkeyProcess) -> None:
    client = connect(RedisEndpoint(url=valkey.url, socketTimeout="200ms", maxAttempts=2))
    client.ping()
    valkey.pause()
    try:
        started = time.monotonic()
        with pytest.raises((redis.TimeoutError, redis.ConnectionError)):
            client.get("x")
        assert time.monotonic() - started < 5
    finally:
        valkey.resume()


def first_report(session: RawSession) -> bytes:
    while True:
        message = session.read(20)
        assert message is not None, "the gateway closed the connection"
        if b"\x0135=8\x01" in message:
            return message


def thread_cpus(pid: int) -> list[set[int]]:
    """The CPUs each thread of ``pid`` may run on."""
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(ProcessLookupError, FileNotFoundError):  # a thread that ended meanwhile
            out.append(os.sched_getaffinity(int(task.name)))
    return out


def thread_nices(pid: int) -> set[int]:
    """The nice values of the threads of ``pid``."""
    out = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(ProcessLookupError, FileNotFoundError):  # a thread that ended meanwhile
            out.add(os.getpriority(os.PRIO_PROCESS, int(task.name)))
    return out


def children(pid: int) -> list[int]:
    """The live child processes of ``pid`` (from /proc)."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if int(stat[1]) == pid and stat[0] != "Z":
                    out.append(int(entry.name))
    return out


def test_fixgw_up_starts_everything_and_stops_cleanly_on_ctrl_c(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from datastore.embedded import free_port
    from fixgw.affinity import NICE

    fix_port, http_port = free_port(), free_port()
    proc = subprocess.Popen([sys.executable, "-m", "fixgw.cli", "up", "--port", "0", "--data-dir", str(tmp_path / "v"),
                             "--fix-port", str(fix_port), "--http-port", str(http_port)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=tmp_path,
                            env={**os.environ, "PYTHONPATH": os.path.dirname(os.path.dirname(__file__))},
                            start_new_session=True)  # its own process group: a failed test kills its children too
    url, password = "", None
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "embedded Valkey listening on redis://127.0.0.1:" in line and "AOF on" in line
        # The system at [embedded] nice (fixgw.affinity.NICE by default) where the OS allows it
        # (root or CAP_SYS_NICE; raising it is allowed to anyone), else the line says why not.
        own = os.getpriority(os.PRIO_PROCESS, 0)
        nice = NICE if (os.geteuid() == 0 or NICE >= own) else own
        assert f"the system runs at nice {nice}" in line and (nice == NICE or "not permitted" in line), line
        url = line.split(" on ")[1].split()[0]
        password = (tmp_path / "v" / "password").read_text().strip()  # made by `fixgw up`, 0600
        with pytest.raises(redis.AuthenticationError):
            redis.Redis.from_url(url).ping()
        assert redis.Redis.from_url(url, password=password).ping()
        # (the cells print to the same output: their lines may come in between)
        lines: list[str] = []
        while len(lines) < 20 and not (lines and lines[-1].startswith("fixgw: active")):
            lines.append(proc.stdout.readline())
        assert any(f"FIX acceptor on 127.0.0.1:{fix_port}" in ln and "CLIENT1" in ln for ln in lines)
        assert any("fixgw demo" in ln for ln in lines)
        assert lines[-1].startswith("fixgw: active"), lines
        # An order through everything it started: its New to the trader and to the drop copy,
        # delivered by the conductor itself (direct delivery: the event streams stay empty).
        trader, copy = RawSession(fix_port, sender="CLIENT1"), RawSession(fix_port, sender="DROPCOPY")
        for session in (trader, copy):
            session.send("35=A\x0198=0\x01108=30\x01141=Y")
            assert b"\x0135=A\x01" in (session.read(20) or b"")
        trader.send(f"35=D\x0111=UP-1\x0155=ACME\x0154=1\x0140=2\x0144=1.00\x0138=1\x0159=1\x0160={fix_time().decode()}")
        for session in (trader, copy):
            report = first_report(session)
            assert b"\x0111=UP-1\x01" in report and b"\x01150=0\x01" in report
        store = redis.Redis.from_url(url, password=password)
        assert [store.xlen(PartitionKeys(p).events) for p in (0, 1)] == [0, 0]
        # config/fixgw.toml pins the gateway's threads (cpu_affinity = "auto"); its cells, and a
        # cell its supervisor starts again (made by one of the pinned threads), run on the CPUs
        # the gateway leaves, beside Valkey (all of them on a machine of one CPU).
        allowed = os.sched_getaffinity(0)
        assert {frozenset(cpus) for cpus in thread_cpus(proc.pid)} == {frozenset({min(allowed)})}
        rest = (allowed - {min(allowed)}) or allowed
        valkey = next(pid for pid in children(proc.pid) if b"valkey-server" in Path(f"/proc/{pid}/cmdline").read_bytes())
        assert os.sched_getaffinity(valkey) == rest
        cells = [pid for pid in children(proc.pid) if b"matching" in Path(f"/proc/{pid}/cmdline").read_bytes()]
        assert len(cells) == 4 and all(os.sched_getaffinity(pid) == rest for pid in cells)
        # config/fixgw.toml keeps the system's CPUs awake: a spinner on each, at SCHED_IDLE
        assert "kept awake" in line, line
        spinners = [pid for pid in children(proc.pid) if b"fixgw.awake" in Path(f"/proc/{pid}/cmdline").read_bytes()]
        assert sorted(next(iter(os.sched_getaffinity(pid))) for pid in spinners) == sorted(allowed)
        assert {os.sched_getscheduler(pid) for pid in spinners} == {os.SCHED_IDLE}
        # config/fixgw.toml runs the system real-time (root or CAP_SYS_NICE; else the line says
        # why not): every thread of the gateway and of each cell, and Valkey's main thread, whose
        # other threads (and what it forks) stay normal
        if os.geteuid() == 0:
            assert "real-time (SCHED_FIFO 1: the gateway, the cells and Valkey's main thread)" in line, line
            assert os.sched_getscheduler(valkey) == os.SCHED_FIFO | os.SCHED_RESET_ON_FORK
            others = [int(t) for t in os.listdir(f"/proc/{valkey}/task") if int(t) != valkey]
            assert others and {os.sched_getscheduler(t) for t in others} == {os.SCHED_OTHER}
            threads = [int(t) for pid in (proc.pid, *cells) for t in os.listdir(f"/proc/{pid}/task")]
            assert {os.sched_getscheduler(t) for t in threads} == {os.SCHED_FIFO}
        else:
            assert "real-time priority 1 not permitted" in line, line
        # every thread of the gateway (QuickFIX's included), of Valkey and of each cell at that nice
        assert [thread_nices(pid) for pid in (proc.pid, valkey, *cells)] == [{nice}] * 6
        # and, where the kernel groups processes by session (autogroup), the session `fixgw up`
        # leads (as started here) and Valkey's at that value too: the groups share the CPUs
        if Path(f"/proc/{proc.pid}/autogroup").exists() and nice == NICE:
            assert "its session's too" in line, line
            assert [Path(f"/proc/{pid}/autogroup").read_text().split()[-1] for pid in (proc.pid, valkey, *cells)] \
                == [str(nice)] * 6
        os.kill(cells[0], signal.SIGKILL)
        deadline = time.monotonic() + 20
        while not (again := [pid for pid in children(proc.pid) if pid not in cells
                             and b"matching" in Path(f"/proc/{pid}/cmdline").read_bytes()]):
            assert time.monotonic() < deadline, "the supervisor did not start the cell again"
            time.sleep(0.2)
        assert os.sched_getaffinity(again[0]) == rest and thread_nices(again[0]) == {nice}
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 0
        assert not [pid for pid in spinners if Path(f"/proc/{pid}").exists()
                    and Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"], "spinners left"
        with pytest.raises(redis.ConnectionError):
            redis.Redis.from_url(url, socket_connect_timeout=0.5, password=password).ping()
        assert (tmp_path / "v" / "appendonlydir").is_dir()
    finally:
        with contextlib.suppress(ProcessLookupError):  # (nothing left after a clean stop)
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
        if url:  # the embedded Valkey runs in a session of its own: shut down, if a failure left it up
            with contextlib.suppress(redis.RedisError):
                redis.Redis.from_url(url, socket_connect_timeout=0.5, password=password).shutdown(nosave=True)


def test_sentinel_pool_waits_for_a_free_connection_and_honours_idle_bounds(sentinel_group) -> None:  # type: ignore[no-untyped-def]
    """Under Sentinel, maxTotal exceeded waits up to maxWait (it used to raise "Too many
    connections" at once), and minIdle/maxIdle hold as for standalone."""
    endpoint = RedisEndpoint(sentinels=sentinel_group.sentinel_addresses, sentinelGroup=sentinel_group.group,
                             pool={"maxTotal": 1, "maxIdle": 1, "minIdle": 1, "maxWait": "200ms"})
    client = connect(endpoint)
    pool = client.connection_pool
    assert [c for c in pool.pool.queue if c is not None and c._sock is not None], "minIdle: warmed"
    held = pool.get_connection()
    started = time.monotonic()
    with pytest.raises(redis.ConnectionError, match="No connection available"):
        pool.get_connection()
    assert time.monotonic() - started >= 0.18, "waited maxWait before giving up"
    pool.release(held)
    assert client.ping()
    patient = connect(endpoint.model_copy(update={"pool": endpoint.pool.model_copy(update={"maxWait": 5.0})}))
    other = patient.connection_pool.get_connection()
    threading.Timer(0.3, patient.connection_pool.release, args=(other,)).start()
    assert patient.ping(), "a command waits for the connection released meanwhile"


def client_id(client) -> int:  # type: ignore[no-untyped-def]
    """The server's id of the connection a packed round trip goes over."""
    [reply] = round_trip(client, [("CLIENT", "ID")])
    return int(reply)


def test_a_loops_own_connection_carries_its_round_trips_and_reconnects_after_an_error(valkey: ValkeyProcess) -> None:
    client = connect(RedisEndpoint(url=valkey.url, pool={"maxTotal": 1, "maxIdle": 1}))
    pooled = client_id(client)
    with own_connection(client):
        own = client_id(client)
        assert own != pooled, "not the pool's connection"
        assert client_id(client) == own, "the same connection for every round trip of the loop"
        assert client.ping(), "redis-py's own calls still use the pool (maxTotal 1 is not taken)"
        valkey.client().client_kill_filter(_id=own)
        with pytest.raises(redis.ConnectionError):
            client_id(client)  # the failed exchange drops the socket...
        again = client_id(client)  # ...and the next one opens a fresh one
        assert again not in (own, pooled)
    assert client_id(client) == pooled, "after the block: the pool again"
    deadline = time.monotonic() + 5
    while again in {int(c["id"]) for c in valkey.client().client_list()} and time.monotonic() < deadline:
        time.sleep(0.05)  # the server notices the close on its next turn
    assert again not in {int(c["id"]) for c in valkey.client().client_list()}, "closed at the end of the block"


def test_an_owned_connection_under_sentinel_talks_to_the_primary(sentinel_group) -> None:  # type: ignore[no-untyped-def]
    """It is opened through Sentinel like the pool's: redis-py's send would otherwise dial
    its default address (localhost:6379) for a connection not yet open."""
    client = connect(RedisEndpoint(sentinels=sentinel_group.sentinel_addresses, sentinelGroup=sentinel_group.group))
    client.set("owned-conn-probe", "primary")
    with own_connection(client):
        role, value = round_trip(client, [("ROLE",), ("GET", "owned-conn-probe")])
    assert role[0] == b"master" and value == b"primary"
    client.delete("owned-conn-probe")


def test_cluster_refuses_pool_settings_it_cannot_honour() -> None:
    from datastore.settings import ConfigError

    with pytest.raises(ConfigError, match=r"pool.maxWait.*not supported with Redis Cluster"):
        connect(RedisEndpoint(nodes=["127.0.0.1:1"], pool={"maxWait": "1s"}))


def test_rediss_urls_connect_over_tls() -> None:
    """The bundled Valkey is built without TLS (it says "Failed finding TLS support"), so only
    the client side is checked here: a rediss:// URL makes TLS connections, with its options."""
    client = connect(RedisEndpoint(url="rediss://127.0.0.1:1/0?ssl_cert_reqs=required", username="alice"))
    pool = client.connection_pool
    assert pool.connection_class is redis.SSLConnection
    conn = pool.make_connection()
    assert conn.username == "alice" and conn.cert_reqs is not None
    plain = connect(RedisEndpoint(url="redis://127.0.0.1:1/0")).connection_pool
    assert plain.connection_class is redis.Connection


def test_fixgw_up_on_an_http_port_another_process_holds_stops_with_the_reason(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A port in use is the operator's to fix: one line naming the setting and why, exit 2 (a
    configuration error), and nothing it started left running."""
    import socket

    from datastore.embedded import free_port

    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    taken = holder.getsockname()[1]
    try:
        proc = subprocess.run([sys.executable, "-m", "fixgw.cli", "up", "--port", "0", "--data-dir", str(tmp_path / "v"),
                               "--fix-port", str(free_port()), "--http-port", str(taken)],
                              capture_output=True, text=True, cwd=tmp_path, timeout=120,
                              env={**os.environ, "PYTHONPATH": os.path.dirname(os.path.dirname(__file__))})
    finally:
        holder.close()
    assert proc.returncode == 2, proc.stderr
    assert f"fixgw: configuration error: http_port {taken}: cannot listen there (Address already in use)" in proc.stderr
    assert "Traceback" not in proc.stderr
    url = proc.stdout.split(" on ", 1)[1].split()[0]  # the embedded Valkey it had started is stopped
    with pytest.raises(redis.ConnectionError):
        redis.Redis.from_url(url, socket_connect_timeout=0.5).ping()


def test_fixgw_up_gives_its_cells_the_linger_its_file_sets(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``[matching] batch_linger`` reaches the cells `fixgw up` starts: each says its linger when
    it starts, and runs with it (MATCHING_BATCH_LINGER_MS in its environment)."""
    from datastore.embedded import free_port

    root = Path(__file__).resolve().parents[1]
    config = (root / "config" / "fixgw.toml").read_text()
    config = config.replace('\nbatch_linger = "1ms"', '\nbatch_linger = "3ms"', 1)
    assert 'batch_linger = "3ms"' in config
    (tmp_path / "fixgw.toml").write_text(config)
    proc = subprocess.Popen([sys.executable, "-m", "fixgw.cli", "up", "--config", str(tmp_path / "fixgw.toml"),
                             "--port", "0", "--data-dir", str(tmp_path / "v"), "--fix-port", str(free_port()),
                             "--http-port", str(free_port())],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=tmp_path,
                            env={**os.environ, "PYTHONPATH": str(root)}, start_new_session=True)
    url, password = "", None
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline()]
        url = lines[0].split(" on ")[1].split()[0]
        password = (tmp_path / "v" / "password").read_text().strip()
        deadline = time.monotonic() + 60
        # two partitions, a conductor and an outbox each, and the gateway up
        while sum("matching: " in ln for ln in lines) < 4 or not any(ln.startswith("fixgw: active") for ln in lines):
            assert time.monotonic() < deadline and proc.poll() is None, lines
            lines.append(proc.stdout.readline())
        cells = [ln for ln in lines if ln.startswith("matching: ")]
        assert sum("conductor p" in ln and "(memory, linger 3ms)" in ln for ln in cells) == 2, cells
        assert sum("outbox p" in ln and "(linger 3ms)" in ln for ln in cells) == 2, cells
        pids = [pid for pid in children(proc.pid) if b"matching" in Path(f"/proc/{pid}/cmdline").read_bytes()]
        assert len(pids) == 4
        for pid in pids:
            assert b"MATCHING_BATCH_LINGER_MS=3\x00" in Path(f"/proc/{pid}/environ").read_bytes()
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 0
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
        if url:
            with contextlib.suppress(redis.RedisError):
                redis.Redis.from_url(url, socket_connect_timeout=0.5, password=password).shutdown(nosave=True)
