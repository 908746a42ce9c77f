"""The whole system in processes: Valkey servers, conductors, outbox workers, the gateway."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from fixgw.demo import DemoClient
from sessionstore.embedded import ValkeyProcess, free_port
from tests.gateway_helpers import ROOT, GatewayProc

SYMBOLS = [f"T{i}" for i in range(1, 25)]
INSTRUMENTS = "".join(f"""
[[instrument]]
symbol = "{s}"
pair_id = {i + 10}
tick_size = "0.05"
lot_size = "1"
min_quantity = "1"
max_quantity = "1000"
min_price = "1"
max_price = "1000"
""" for i, s in enumerate(SYMBOLS))

SESSIONS = """
[[gateway.session]]
name = "CLIENT1"

[[gateway.session]]
name = "CLIENT2"

[[gateway.session]]
name = "DROPCOPY"
kind = "dc"
"""


class CellProc:
    """A conductor or outbox worker process for one partition."""

    def __init__(self, role: str, partition: int, url: str, instruments: Path, log: Path,
                 target_url: str | None = None, also: list[str] | None = None, durability: str = "memory") -> None:
        self.args = [sys.executable, "-m", "matching", role]
        if target_url:
            self.args.append(f"--target-url={target_url}")
        self.args += [f"--also={a}" for a in (also or [])]
        self.env = {**os.environ, "PYTHONPATH": str(ROOT), "REDIS_URL": url, "MATCHING_PARTITION_COUNT": "2",
                    "MATCHING_PARTITION": str(partition), "MATCHING_INSTRUMENTS": str(instruments),
                    "MATCHING_DURABILITY": durability, "MATCHING_LEASE_TTL_MS": "2000"}
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> CellProc:
        self.proc = subprocess.Popen(self.args, env=self.env, stdout=open(self.log, "ab"), stderr=subprocess.STDOUT)
        return self

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()


class System:
    """Session store on ``store``; partition p's cell on ``partitions[p]`` (may be the same server)."""

    def __init__(self, tmp: Path, store: ValkeyProcess, partitions: list[ValkeyProcess],
                 sessions: str = SESSIONS) -> None:
        self.tmp = tmp
        self.store = store
        self.partitions = partitions
        self.instruments = tmp / "instruments.toml"
        self.instruments.write_text(INSTRUMENTS)
        self.fix_port = free_port()
        extra_matching = "".join(f"""
[[matching.partition]]
index = {i}
url = "{server.url}"
""" for i, server in enumerate(partitions) if server is not store)
        self.gateway = GatewayProc(tmp, store.url, name="gateway", fix_port=self.fix_port, mode="gateway",
                                   namespace="e2e", sessions=sessions, lock_ttl="2s", renewal="500ms",
                                   extra=f"""
[matching]
partition_count = 2
instruments = "{self.instruments}"
{extra_matching}""")
        self.cells: dict[tuple[str, int], CellProc] = {}
        for p, server in enumerate(partitions):
            for role in ("conductor", "outbox"):
                also = ["{e2e/dc}/inbox"] if role == "outbox" else None
                target = store.url if role == "outbox" else None
                self.cells[(role, p)] = CellProc(role, p, server.url, self.instruments, tmp / f"{role}{p}.log",
                                                 target_url=target, also=also)
        self.clients: list[DemoClient] = []

    def start(self) -> System:
        for cell in self.cells.values():
            cell.start()
        self.gateway.start().wait_active(60)
        return self

    def client(self, name: str, reset_on_logon: bool = False) -> DemoClient:
        (self.tmp / "clients").mkdir(exist_ok=True)
        c = DemoClient(self.tmp / "clients", "127.0.0.1", self.fix_port, name, "FIXGW", reset_on_logon=reset_on_logon)
        c.initiator.start()
        assert c.wait(lambda: c.logged_on, 20), f"{name} could not log on"
        self.clients.append(c)
        return c

    def stop(self) -> None:
        for c in self.clients:
            c.close()
        self.clients.clear()
        self.gateway.stop()
        for cell in self.cells.values():
            cell.stop()


def reports(client: DemoClient, clordid: str | None = None) -> list[dict[int, str]]:
    with client.cond:
        return [r for r in client.reports if clordid is None or r.get(11) == clordid or r.get(41) == clordid]


def wait_reports(client: DemoClient, clordid: str, n: int, timeout: float = 20.0) -> list[dict[int, str]]:
    ok = client.wait(lambda: len(reports(client, clordid)) >= n, timeout)
    got = reports(client, clordid)
    assert ok, f"{client.name}: expected {n} reports about {clordid}, got {got}"
    return got


def summary(rs: list[dict[int, str]]) -> list[tuple[str, ...]]:
    return [(r[35], r.get(150, ""), r.get(39, "")) for r in rs]

