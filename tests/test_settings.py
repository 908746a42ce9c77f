"""[session_store] settings: seed 004's stanza, env overrides, and refusals that name the setting."""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path
from typing import Any

import pytest

from datastore.settings import ConfigError, parse_duration
from sessionstore.settings import load_session_store

GOOD = """
[session_store]
namespace = "uat"
url = "redis://127.0.0.1:6379/0"
connectionTimeout = "2s"
socketTimeout = "500ms"
maxAttempts = 5
lockTtl = "30s"
lockRenewalInterval = "10s"
dispatchBatchSize = 256
[session_store.pool]
maxTotal = 8
maxIdle = 8
minIdle = 0
maxWait = -1
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "gw.toml"
    path.write_text(text)
    return path


def test_seed_stanza_loads_with_durations(tmp_path: Path) -> None:
    s = load_session_store(write(tmp_path, GOOD))
    assert (s.namespace, s.socketTimeout, s.lockTtl, s.lockRenewalInterval) == ("uat", 0.5, 30.0, 10.0)
    assert s.pool.maxWait is None and s.pool.maxTotal == 8
    assert s.topology == "standalone"


def test_environment_overrides_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FIXGW_SESSION_STORE_LOCKTTL", "45s")
    monkeypatch.setenv("FIXGW_SESSION_STORE_POOL__MAXTOTAL", "16")
    s = load_session_store(write(tmp_path, GOOD))
    assert s.lockTtl == 45.0 and s.pool.maxTotal == 16


@pytest.mark.parametrize(
    "change, message",
    [
        ('lockRenewalInterval = "30s"', "lockRenewalInterval (30s) must be shorter than lockTtl (30s)"),
        ("dispatchBatchSize = 0", "dispatchBatchSize must be at least 1"),
        ("colour = 3", "[session_store] colour: unknown setting"),
        ('socketTimeout = "2 parsecs"', "[session_store] socketTimeout: bad duration '2 parsecs'"),
        ("socketTimeout = 2", "duration 2 needs a unit"),
        ('password = "hunter2"', "plain-text password in configuration is refused"),
        ('sentinels = ["h:1"]', "sentinels and sentinelGroup must be set together"),
        ('nodes = ["h:1"]', "choose one topology, not url and nodes"),
        ("maxAttempts = 0", "[session_store] maxAttempts"),
    ],
)
def test_invalid_settings_stop_startup_naming_the_setting(tmp_path: Path, change: str, message: str) -> None:
    key = change.split("=")[0].strip()
    lines = [ln for ln in GOOD.splitlines() if not ln.startswith(key + " ")]
    text = "\n".join(lines).replace("[session_store]\n", f"[session_store]\n{change}\n", 1)
    with pytest.raises(ConfigError) as err:
        load_session_store(write(tmp_path, text))
    assert message in str(err.value)


def test_password_comes_from_env_or_secret_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    s = load_session_store({"url": "redis://h:1", "passwordEnv": "GW_PW"})
    with pytest.raises(ConfigError, match="GW_PW is not set"):
        s.resolve_password()
    monkeypatch.setenv("GW_PW", "s3cret")
    assert s.resolve_password() == "s3cret"
    secret = tmp_path / "pw"
    secret.write_text("fromfile\n")
    assert load_session_store({"url": "redis://h:1", "passwordFile": str(secret)}).resolve_password() == "fromfile"


def test_duration_units() -> None:
    assert [parse_duration(v) for v in ("500ms", "2s", "1m", "1h")] == [0.5, 2.0, 60.0, 3600.0]


def test_replica_acks_are_refused_with_cluster_until_supported() -> None:
    with pytest.raises(ConfigError, match="replicaAcks is supported with standalone and Sentinel"):
        load_session_store({"nodes": ["h:1"], "replicaAcks": 1})
    with pytest.raises(ConfigError, match=r"replicaAckTimeout \(2s\) must be shorter than socketTimeout \(2s\)"):
        load_session_store({"url": "redis://h:1", "replicaAcks": 1, "replicaAckTimeout": "2s"})
    assert load_session_store({"url": "redis://h:1", "replicaAcks": 1, "replicaAckTimeout": "250ms"}
                              ).replicaAckTimeout == 0.25


def test_delivery_retention_must_cover_the_idempotency_window() -> None:
    from pydantic import ValidationError

    from fixgw.config import MatchingLink

    assert MatchingLink().delivery_retention == 7 * 24 * 3600.0
    with pytest.raises(ValidationError, match="delivery_retention .* must be at least idempotency_window"):
        MatchingLink(idempotency_window="2h", delivery_retention="1h")


def test_batch_linger_pauses_only_after_a_small_batch_and_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pause after a cycle (matching/linger.py): none after one entry (a quiet moment: latency
    first) or a full batch (a backlog); the linger after anything between — when entries arrive
    fast enough to bring one more within it. A linger too long to be meant is refused with the
    setting's name, in the gateway's file and the cells' environment alike."""
    from pydantic import ValidationError

    from fixgw.config import GatewaySettings, MatchingLink
    from matching.config import load_cell_settings
    from matching.linger import Linger

    def fed(rate: float, cycles: int = 50) -> Linger:
        """A linger whose loop has seen ``cycles`` cycles of 2 entries arriving at ``rate`` a second."""
        now = [0.0]
        linger = Linger(0.001, 100, clock=lambda: now[0])
        for _ in range(cycles):
            now[0] += 2 / rate
            linger.observe(2)
        return linger

    busy = fed(2000)
    assert busy.arrival_rate == pytest.approx(2000, rel=0.01)
    assert [busy.pause_after(n) for n in (0, 1, 2, 50, 99, 100, 250)] == [0, 0, 0.001, 0.001, 0.001, 0, 0]
    steady = fed(400)  # a 1 ms pause would mostly wait for nothing
    assert steady.arrival_rate == pytest.approx(400, rel=0.01)
    assert [steady.pause_after(n) for n in (2, 50)] == [0, 0]
    assert Linger(0.001, 100).pause_after(50) == 0, "no rate seen yet: no pause"
    assert Linger(0.0, 100).pause_after(50) == 0
    with pytest.raises(ValueError, match="must not be negative"):
        Linger(-0.001, 100)

    session = [{"name": "C"}]
    assert GatewaySettings(session=session).batch_linger == 0.001
    assert GatewaySettings(session=session, batch_linger="0ms").batch_linger == 0
    with pytest.raises(ValidationError, match="batch_linger 500ms is longer than 100ms"):
        GatewaySettings(session=session, batch_linger="500ms")
    # the dispatcher's own (config/fixgw.toml, pinned: none)
    assert GatewaySettings(session=session).dispatch_linger == 0.001
    assert GatewaySettings(session=session, dispatch_linger="0ms").dispatch_linger == 0
    with pytest.raises(ValidationError, match="dispatch_linger 500ms is longer than 100ms"):
        GatewaySettings(session=session, dispatch_linger="500ms")
    with pytest.raises(ValidationError, match="needs a unit"):
        GatewaySettings(session=session, batch_linger=1)

    # the cells' that `fixgw up` starts ([matching]; passed on as MATCHING_BATCH_LINGER_MS)
    assert MatchingLink().batch_linger == 0.001
    assert MatchingLink(batch_linger="2ms").batch_linger == 0.002
    with pytest.raises(ValidationError, match="batch_linger 500ms is longer than 100ms"):
        MatchingLink(batch_linger="500ms")

    assert load_cell_settings().batch_linger_ms == 1.0
    monkeypatch.setenv("MATCHING_BATCH_LINGER_MS", "250")
    with pytest.raises(ConfigError, match="MATCHING_BATCH_LINGER_MS"):
        load_cell_settings()


def test_the_drop_copy_follows_by_ten_milliseconds_unless_told_and_never_by_more_than_a_second() -> None:
    from pydantic import ValidationError

    from fixgw.config import GatewaySettings

    session = [{"name": "C"}]
    assert GatewaySettings(session=session).drop_copy_every == 0.010
    assert GatewaySettings(session=session, drop_copy_every="0ms").drop_copy_every == 0
    with pytest.raises(ValidationError, match="drop_copy_every 2000ms is longer than 1000ms"):
        GatewaySettings(session=session, drop_copy_every="2s")


def test_cpu_affinity_is_auto_a_list_of_cpus_or_nothing() -> None:
    """``[gateway] cpu_affinity`` (fixgw/affinity.py): "auto" is the first CPU this process may
    use, a list names CPUs, [] (the default) pins nothing; anything else is refused with the
    setting's name, and a CPU the process may not use with the ones it may."""
    from pydantic import ValidationError

    from fixgw.affinity import cpus_for
    from fixgw.config import GatewaySettings

    session = [{"name": "C"}]
    allowed = os.sched_getaffinity(0)
    assert GatewaySettings(session=session).cpu_affinity == []
    assert cpus_for(GatewaySettings(session=session).cpu_affinity) == set()
    assert cpus_for(GatewaySettings(session=session, cpu_affinity="auto").cpu_affinity) == {min(allowed)}
    assert cpus_for(GatewaySettings(session=session, cpu_affinity=sorted(allowed)).cpu_affinity) == allowed
    for bad, message in (("all", "cpu_affinity"), ([-1], "cpu_affinity"), ([0, 0], "names a CPU twice")):
        with pytest.raises(ValidationError, match=message):
            GatewaySettings(session=session, cpu_affinity=bad)
    with pytest.raises(ConfigError, match=re.escape(f"cpu_affinity [4095]: this process may only run on CPUs {sorted(allowed)}")):
        cpus_for([4095])


def test_embedded_valkey_runs_beside_a_pinned_gateway_with_the_aof_rewrite_threshold_of_its_table(tmp_path: Path) -> None:
    """``fixgw up``'s Valkey (``cli.embedded_server``): with the gateway pinned, its main and
    I/O threads go on the CPUs the gateway leaves, and its forked children (AOF rewrite, RDB
    save) may use any; ``[embedded] aof_rewrite_min_size`` is its auto-aof-rewrite-min-size
    (default ``cli.AOF_REWRITE_MIN_SIZE``); a bad size is refused with the setting's name."""
    from fixgw.cli import AOF_REWRITE_MIN_SIZE, _embedded_settings, embedded_server

    allowed = os.sched_getaffinity(0)
    gateway = {min(allowed)}
    with embedded_server({"embedded": {"aof_rewrite_min_size": "300mb"}}, gateway, data_dir=tmp_path / "a") as server:
        config = server.client().config_get("*")
        assert config["auto-aof-rewrite-min-size"] == str(300 * 1024 * 1024)
        assert config["appendonly"] == "yes" and config["appendfsync"] == "everysec"
        anywhere = ",".join(map(str, sorted(allowed)))
        if len(allowed) > 1:
            rest = ",".join(map(str, sorted(allowed - gateway)))
            assert (config["server-cpulist"], config["bio-cpulist"]) == (rest, rest)
            assert os.sched_getaffinity(server.proc.pid) == allowed - gateway  # type: ignore[union-attr]
            assert (config["aof-rewrite-cpulist"], config["bgsave-cpulist"]) == (anywhere, anywhere)
    # Not pinned (or pinned to every CPU): Valkey is left to the OS, with the default threshold.
    with embedded_server({}, set(), data_dir=tmp_path / "b") as server:
        config = server.client().config_get("*")
        assert config["server-cpulist"] == ""
        assert config["auto-aof-rewrite-min-size"] == str(4 * 1024**3) and AOF_REWRITE_MIN_SIZE == "4gb"
    for bad in ("lots", "0mb", 64, "64 mb", "-1"):
        with pytest.raises(ConfigError, match=re.escape(f"[embedded] aof_rewrite_min_size {bad!r}")):
            _embedded_settings({"embedded": {"aof_rewrite_min_size": bad}})


def test_embedded_valkey_runs_on_jemalloc_where_the_machine_has_it_and_says_so_where_not(tmp_path: Path) -> None:
    """``[embedded] allocator``: ``jemalloc`` (the default) loads the machine's jemalloc ahead of
    the server's own allocator, which then serves the data; where the machine has none, the
    server runs on the C library's and ``fixgw up``'s start-up line says how to get it;
    ``libc`` never loads it; any other value is refused with the setting's name."""
    from datastore.embedded import jemalloc_library
    from fixgw.cli import _embedded_settings, allocator_described, embedded_server

    def mapped(pid: int) -> bool:
        return "jemalloc" in Path(f"/proc/{pid}/maps").read_text()

    library = jemalloc_library()
    with embedded_server({}, set(), data_dir=tmp_path / "a") as server:
        assert server.proc is not None
        client = server.client()
        client.set("k", b"x" * 5000)
        assert client.get("k") == b"x" * 5000
        assert mapped(server.proc.pid) == (library is not None)
        if library is not None:
            assert allocator_described(server, "jemalloc") == "jemalloc"
        else:
            assert "jemalloc not found" in allocator_described(server, "jemalloc")
            assert "libjemalloc2" in allocator_described(server, "jemalloc")
    with embedded_server({"embedded": {"allocator": "libc"}}, set(), data_dir=tmp_path / "b") as server:
        assert server.proc is not None
        assert not mapped(server.proc.pid)
        assert allocator_described(server, "libc") == "the C library's"
    with pytest.raises(ConfigError, match=re.escape("[embedded] allocator 'tcmalloc': one of jemalloc, libc")):
        _embedded_settings({"embedded": {"allocator": "tcmalloc"}})


def test_the_system_runs_at_the_nice_value_it_is_given_every_thread_and_child_after_it() -> None:
    """``fixgw.affinity.raise_priority`` (``[embedded] nice``): the threads there are and every
    thread and child made later run at it; a value outside -20 … 19 is refused with the setting's
    name. (In a process of its own: raising the value is allowed to anyone, and not undone.)"""
    import subprocess
    import sys

    from fixgw.cli import _embedded_settings

    script = """
import os, subprocess, sys, threading
from fixgw.affinity import raise_priority
before = threading.Thread(target=threading.Event().wait, args=(5,), daemon=True); before.start()
print(raise_priority(7))
seen = []
after = threading.Thread(target=lambda: seen.append(os.getpriority(os.PRIO_PROCESS, 0))); after.start(); after.join()
child = subprocess.run([sys.executable, "-c", "import os; print(os.getpriority(os.PRIO_PROCESS, 0))"], capture_output=True, text=True)
print(os.getpriority(os.PRIO_PROCESS, before.native_id), seen[0], child.stdout.strip())
"""
    root = str(Path(__file__).resolve().parents[1])
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": root}, cwd=root)
    assert out.returncode == 0, out.stderr
    # (a process sharing its session: the session's share of the CPUs is left as it is)
    assert out.stdout.split("\n")[:2] == ["nice 7 (within the session it shares: docs/configuration.md, [embedded] nice)",
                                          "7 7 7"]
    for bad in (-21, 20, "high", 1.5, True):
        with pytest.raises(ConfigError, match=re.escape(f"[embedded] nice {bad!r}: a whole number from -20")):
            _embedded_settings({"embedded": {"nice": bad}})
    assert _embedded_settings({"embedded": {"nice": 0}}) == {"nice": 0}


def _forked_policies(server: Any, pid: int) -> set[int]:
    """The scheduling policies of what Valkey ``pid`` forks for an RDB save (one that lasts a moment)."""
    import time

    client = server.client()
    client.execute_command("DEBUG", "POPULATE", 300_000, "k", 200)
    client.bgsave()
    forked: set[int] = set()
    deadline = time.monotonic() + 20
    while not forked and time.monotonic() < deadline:
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                with contextlib.suppress(OSError, IndexError, ValueError):
                    if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                        forked.add(int(entry.name))
    policies = set()
    for child in forked:
        with contextlib.suppress(ProcessLookupError):  # (the save ended meanwhile)
            policies.add(os.sched_getscheduler(child))
    return policies


def test_valkey_runs_real_time_and_what_it_forks_runs_as_a_normal_process(tmp_path: Path) -> None:
    """``run_realtime`` (``[embedded] realtime_priority``): Valkey's main thread under SCHED_FIFO,
    so no normal thread keeps it waiting for its CPU; what it forks (here an RDB save; an AOF
    rewrite alike) runs as a normal process, never ahead of the gateway. 0 leaves it alone;
    a value outside 0 … 99 is refused with the setting's name."""
    from datastore.embedded import standalone
    from fixgw.affinity import realtime_described, run_realtime
    from fixgw.cli import _embedded_settings

    server = standalone(name="realtime", data_dir=tmp_path, **{"enable-debug-command": "yes"}).start()
    try:
        assert server.proc is not None
        pid = server.proc.pid
        assert run_realtime(pid, 0) is False and os.sched_getscheduler(pid) == os.SCHED_OTHER
        done = run_realtime(pid, 1)
        if os.geteuid() != 0:  # (no CAP_SYS_NICE: the start-up line says why, nothing changes)
            assert done is False and os.sched_getscheduler(pid) == os.SCHED_OTHER
        else:
            assert done is True
            assert os.sched_getscheduler(pid) == os.SCHED_FIFO | os.SCHED_RESET_ON_FORK
            assert os.sched_getparam(pid).sched_priority == 1
            assert _forked_policies(server, pid) == {os.SCHED_OTHER}
            assert os.sched_getscheduler(pid) == os.SCHED_FIFO | os.SCHED_RESET_ON_FORK  # the server itself stays
    finally:
        server.stop()
    assert realtime_described(0, False) == "scheduled as normal processes"
    assert realtime_described(1, False) == ("scheduled as normal processes (real-time priority 1 not permitted: "
                                            "it needs root or CAP_SYS_NICE)")
    for bad in (-1, 100, "high", 1.5, True):
        with pytest.raises(ConfigError, match=re.escape(f"[embedded] realtime_priority {bad!r}: a whole number")):
            _embedded_settings({"embedded": {"realtime_priority": bad}})
    assert _embedded_settings({"embedded": {"realtime_priority": 0}}) == {"realtime_priority": 0}
    with pytest.raises(ConfigError, match=re.escape("realtime_priority 100: a whole number")):
        run_realtime(os.getpid(), 100)


def test_real_time_here_reaches_every_thread_and_what_they_make_later() -> None:
    """``realtime_here``: every thread of the process (``fixgw up``'s, before the gateway and the
    cells start) under SCHED_FIFO, and the threads and children made after it inherit it. (In a
    process of its own; without root or CAP_SYS_NICE nothing changes and it says so.)"""
    import subprocess
    import sys

    script = """
import os, subprocess, sys, threading
from fixgw.affinity import realtime_here
before = threading.Thread(target=threading.Event().wait, args=(5,), daemon=True); before.start()
print(realtime_here(0), os.sched_getscheduler(0))
print(realtime_here(2))
seen = []
after = threading.Thread(target=lambda: seen.append(os.sched_getscheduler(0))); after.start(); after.join()
child = subprocess.run([sys.executable, "-c", "import os; print(os.sched_getscheduler(0), os.sched_getparam(0).sched_priority)"],
                       capture_output=True, text=True)
print(os.sched_getscheduler(before.native_id), seen[0], child.stdout.strip())
"""
    root = str(Path(__file__).resolve().parents[1])
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": root}, cwd=root)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.split("\n")[:3]
    assert lines[0] == f"False {os.SCHED_OTHER}"
    if os.geteuid() == 0:
        assert lines[1:] == ["True", f"{os.SCHED_FIFO} {os.SCHED_FIFO} {os.SCHED_FIFO} 2"]
    else:
        assert lines[1:] == ["False", f"{os.SCHED_OTHER} {os.SCHED_OTHER} {os.SCHED_OTHER} 0"]


def test_a_session_of_its_own_gets_the_nice_value_for_its_group_and_a_shared_session_is_left_alone() -> None:
    """``group_nice``: where the kernel groups each session's processes (autogroup), a thread's
    nice value ranks it only within its session's group, so a process leading a session of its
    own (Valkey under ``fixgw up``; ``fixgw up`` under setsid) has the group's weight set too;
    a process sharing its session (with a shell, say) leaves that group as it is."""
    import subprocess
    import sys

    from fixgw.affinity import group_nice

    own = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], start_new_session=True)
    shared = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        autogroups = Path(f"/proc/{own.pid}/autogroup").exists()
        before = Path(f"/proc/{shared.pid}/autogroup").read_text() if autogroups else ""
        assert group_nice(own.pid, 7) is autogroups
        assert group_nice(shared.pid, 7) is False
        if autogroups:
            assert Path(f"/proc/{own.pid}/autogroup").read_text().strip().endswith("nice 7")
            assert Path(f"/proc/{shared.pid}/autogroup").read_text() == before
        script = ("import os; from fixgw.affinity import raise_priority; os.setsid(); print(raise_priority(6)); "
                  "print(open('/proc/self/autogroup').read().strip() if os.path.exists('/proc/self/autogroup') else '')")
        root = str(Path(__file__).resolve().parents[1])
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                             env={**os.environ, "PYTHONPATH": root}, cwd=root)
        assert out.returncode == 0, out.stderr
        said, group = out.stdout.split("\n")[:2]
        assert said == ("nice 6, its session's too" if autogroups else "nice 6")
        assert group.endswith("nice 6") if autogroups else group == ""
    finally:
        for proc in (own, shared):
            proc.kill()
            proc.wait(10)
