"""Faults of the network under the processes, injected by the kernel (``tests/netfault.py``).

The venue runs on five hosts, each a network namespace of its own on one bridge: ``gw`` (the
gateway, and the test's FIX clients beside it), ``cond`` (the two conductors), ``obx`` (the two
outbox workers), ``store`` (the session store's Valkey) and ``pds`` (the partitions' Valkey).
Under the steady flow of ``tests/venue.py`` (new orders, cancels, replaces; a drop copy
watching), one fault at a time is injected and then healed:

- a partition (every packet dropped both ways) of 2 s and of 20 s between the gateway and its
  session store, between the conductors and their partitions' primary, and between the outbox
  workers and the gateway's datastore (their target);
- 5 % of the packets lost on both datastores' links, for 10 s;
- 50 ms ± 10 ms more on every round trip to either datastore, from start to end (``DelayProxy``).

After each run, from outside the processes: every request answered exactly once (accepted,
possibly late, or refused with a reason), no sequence number reaching a client twice as a new
message, the drop copy holding every fill once, each partition's committed events equal to the
reference matcher's for its command stream, and the system serving again after the fault
without anyone touching it. A process that must stop (a gateway whose lease expired) is started
again by a supervisor, as systemd does with the unit files in ``deploy/``.

``.ci/run`` sets ``FIXGW_REQUIRE_FAULTS=1``: where root, ``ip`` or ``nft`` is missing, these tests
fail there instead of skipping.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

from datastore.connection import connect
from datastore.embedded import Sentinels, ValkeyProcess, standalone
from datastore.settings import RedisEndpoint, parse_address
from fixgw.demo import DemoClient
from tests.gateway_helpers import http_json
from tests.netfault import DelayProxy, Net, missing
from tests.system_helpers import System
from tests.venue import (
    AnswerClock,
    Flow,
    Seen,
    check_drop_copy_has_every_fill,
    check_every_request_answered_once,
    check_no_sequence_number_twice,
    check_partition_trades_as_the_reference,
    first_answered_after,
    seen_between,
    trace_requests,
    watch_ready,
)

# Run one at a time after the rest (`make faults`): each times what a client sees of a fault,
# and the processes of three other tests beside it on two cores blur that.
pytestmark = [pytest.mark.slow, pytest.mark.faults]

HOSTS = ["gw", "cond", "obx", "store", "pds"]


def hosts(names: list[str]) -> Iterator[Net]:
    """The hosts, made and removed around a test; where the machine cannot, skipped saying why
    (a failure with ``FIXGW_REQUIRE_FAULTS=1``, as CI sets it)."""
    why = missing()
    if why:
        if os.environ.get("FIXGW_REQUIRE_FAULTS") == "1":
            pytest.fail(f"FIXGW_REQUIRE_FAULTS=1 but {why}")
        pytest.skip(why)
    with Net(names) as n:
        yield n


@pytest.fixture
def net() -> Iterator[Net]:
    yield from hosts(HOSTS)


class PlacedSystem(System):
    """``System`` with each process started inside its host, and a supervisor that starts the
    gateway or a cell again when it exits (as systemd's ``Restart=always`` does)."""

    def __init__(self, net: Net, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.net = net
        self.restarts: list[str] = []
        self._stop_supervisor = threading.Event()
        self._supervisor: threading.Thread | None = None

    def host_of(self, role: str) -> str:
        return {"conductor": "cond", "outbox": "obx"}.get(role, "gw")

    def start(self) -> PlacedSystem:
        try:
            with self.net.inside("gw"):
                self.gateway.start().wait_active(60)
            for (role, _), cell in self.cells.items():
                with self.net.inside(self.host_of(role)):
                    cell.start()
        except BaseException:
            self.stop()
            raise
        self._supervisor = threading.Thread(target=self._supervise, name="supervisor", daemon=True)
        self._supervisor.start()
        return self

    def _supervise(self) -> None:
        while not self._stop_supervisor.wait(0.5):
            gw = self.gateway
            if gw.proc is not None and gw.proc.poll() is not None:
                self.restarts.append(f"gateway (exit {gw.proc.returncode})")
                gw.log.rename(gw.log.with_suffix(f".{len(self.restarts)}.log"))  # kept for the post-mortem
                with self.net.inside("gw"):
                    gw.proc = None
                    gw.start()
            for (role, p), cell in self.cells.items():
                if cell.proc is not None and cell.proc.poll() is not None:
                    self.restarts.append(f"{role} p{p} (exit {cell.proc.returncode})")
                    with self.net.inside(self.host_of(role)):
                        cell.start()

    def client(self, name: str, reset_on_logon: bool = False) -> DemoClient:
        with self.net.inside("gw"):  # QuickFIX's threads, and its reconnects, live in the gateway's host
            return super().client(name, reset_on_logon)

    def ready(self) -> tuple[int, dict[str, object]]:
        with self.net.inside("gw"):
            return http_json(self.gateway.http_port)

    def stop(self) -> None:
        self._stop_supervisor.set()
        if self._supervisor is not None:
            self._supervisor.join(5)
        super().stop()


def datastore(net: Net, host: str, name: str) -> ValkeyProcess:
    with net.inside(host):
        return standalone(host=net.address[host], name=name).start()


@dataclass
class Fault:
    what: str
    seconds: float
    start: float
    healed: float
    recovered: float  # seconds from the heal until a new order sent after it was answered
    reasons: list[str]  # what /ready said was wrong meanwhile (figures left out)
    restarts: list[str]  # processes the supervisor started again meanwhile


class Run:
    """One venue under the flow: its clients, the answer clock and the /ready watch."""

    def __init__(self, system: PlacedSystem) -> None:
        self.system = system
        self.c1, self.c2, self.dc = system.client("CLIENT1"), system.client("CLIENT2"), system.client("DROPCOPY")
        self.flow = Flow(self.c1, self.c2)
        self.clock = AnswerClock([self.c1, self.c2])
        self.ready: list[tuple[float, bool, str]] = []
        self.faults: list[Fault] = []
        self.stop_watch = threading.Event()
        with system.net.inside("gw"):
            threading.Thread(target=watch_ready, args=(system.gateway.http_port, self.ready, self.stop_watch),
                             daemon=True).start()
        self.flow.thread.start()
        time.sleep(1.5)  # trading before any fault

    def fault(self, what: str, inject: Callable[[], None], seconds: float) -> None:
        """Inject, wait ``seconds``, heal, and wait until a new order sent after the heal is
        answered by its cell; what the clients saw is told by ``finish``."""
        start = time.monotonic()
        restarted = len(self.system.restarts)
        inject()
        time.sleep(seconds)
        self.system.net.heal()
        healed = time.monotonic()
        recovered = first_answered_after(self.flow, self.clock, healed)
        reasons = sorted({re.sub(r"[\d.]+", "N", why.split(" (")[0]) for at, ok, why in self.ready
                          if start <= at and not ok})
        self.faults.append(Fault(what, seconds, start, healed, recovered, reasons, self.system.restarts[restarted:]))
        time.sleep(1.0)

    def finish(self, partitions: list[tuple[ValkeyProcess, int]]) -> list[tuple[Fault, Seen]]:
        """Stop the flow, check every guarantee, and say what the clients saw of each fault."""
        self.flow.stop.set()
        self.flow.thread.join(5)
        for c in (self.c1, self.c2, self.dc):
            if c.logout_texts:
                print(f"{c.name} was logged out: {c.logout_texts}")
        net, store = self.system.net, self.system.store
        try:
            sent = check_every_request_answered_once(self.flow, [self.c1, self.c2])
        except AssertionError as failure:
            raise AssertionError(f"{failure}\n{self._trace(failure, partitions)}") from None
        check_no_sequence_number_twice([self.c1, self.c2, self.dc])
        filled = check_drop_copy_has_every_fill([self.c1, self.c2], self.dc)
        compared = 0
        with net.inside("gw"):  # reaches both datastores' hosts
            store_client = connect(RedisEndpoint(**parse_address(store.url)))  # a URL or a Sentinel group
            for server, p in partitions:
                client = redis.Redis.from_url(server.url, socket_timeout=5)
                compared += check_partition_trades_as_the_reference(client, store_client, p,
                                                                    str(self.system.instruments))
            status, body = http_json(self.system.gateway.http_port)
        assert status == 200, f"/ready is true once every fault healed: {body}"
        self.clock.stop.set()
        self.clock.thread.join(2)
        self.clock.run_once()
        out = []
        for f in self.faults:
            seen = seen_between(self.flow, self.clock, f.start, f.healed)
            out.append((f, seen))
            print(f"{f.what} for {f.seconds:.0f} s: {seen.describe()}; a new order sent after the heal answered "
                  f"{f.recovered:.1f} s after it; /ready meanwhile: {'; '.join(f.reasons) or 'always 200'}; "
                  f"restarts: {', '.join(f.restarts) or 'none'}")
        print(f"{sent} requests answered once each, {filled} fills on the drop copy once each, {compared} commands "
              f"matched as the reference; violations: 0")
        return out

    def _trace(self, failure: AssertionError, partitions: list[tuple[ValkeyProcess, int]]) -> str:
        """What became of the requests a failure names, and the gateway's warnings: enough to tell
        which step lost one, from a single failed run."""
        clordids = re.findall(r"'([a-z]\d+)'", str(failure))
        gateway_log = self.system.gateway.log
        logs = sorted(gateway_log.parent.glob("out*.log")) + sorted(gateway_log.parent.parent.glob("outbox*.log"))
        start = self.faults[0].start if self.faults else 0.0
        try:
            with self.system.net.inside("gw"):
                store_client = connect(RedisEndpoint(**parse_address(self.system.store.url)))
                trace = trace_requests(clordids, self.flow, [self.c1, self.c2], store_client,
                                       [redis.Redis.from_url(s.url, socket_timeout=5) for s, _ in partitions], logs,
                                       since=start)
        except Exception as exc:  # noqa: BLE001 (a diagnostic: never hide the failure itself)
            trace = f"(no trace: {type(exc).__name__}: {exc})"
        warnings = [f"{path.name}: {line.rstrip()[:240]}" for path in logs for line in open(path, errors="replace")
                    if " WARNING " in line or " ERROR " in line or " CRITICAL " in line]
        return trace + "\nwarnings and errors logged:\n" + "\n".join(warnings[-80:])

    def close(self) -> None:
        self.stop_watch.set()
        self.clock.stop.set()


def venue(net: Net, tmp_path: Path, store: ValkeyProcess, pds: ValkeyProcess, *,
          store_address: str | None = None, pds_address: str | None = None) -> PlacedSystem:
    """The system on the five hosts. ``store_address``, ``pds_address``: where the processes reach
    the datastores when not directly (a ``DelayProxy``)."""

    class At:  # a datastore as the processes are told of it
        def __init__(self, server: ValkeyProcess, address: str | None) -> None:
            self.url = f"redis://{address}/0" if address else server.url

    store_at, pds_at = At(store, store_address), At(pds, pds_address)
    # The session store's lease outlives a 2 s partition but not a 20 s one (then the gateway
    # stops, is started again, and takes the lease back once the store answers).
    return PlacedSystem(net, tmp_path, store_at, [pds_at, pds_at], inbox_delivery="outbox", lock_ttl="5s")


@pytest.mark.parametrize("seconds", [2, 20])
def test_partitions_between_each_process_and_its_datastore_lose_and_double_nothing(
        net: Net, tmp_path: Path, seconds: int) -> None:
    store = datastore(net, "store", "store")
    pds = datastore(net, "pds", "partitions")
    system = venue(net, tmp_path, store, pds).start()
    run = None
    try:
        run = Run(system)
        run.fault("gateway | session store", lambda: net.cut("gw", "store"), seconds)
        run.fault("conductors | partitions' primary", lambda: net.cut("cond", "pds"), seconds)
        run.fault("outbox workers | gateway's datastore", lambda: net.cut("obx", "store"), seconds)
        if seconds == 2:
            run.fault("5 % packet loss on both datastores' links",
                      lambda: (net.lose("store", 5), net.lose("pds", 5)), 10)
        run.finish([(pds, 0), (pds, 1)])
    finally:
        if run is not None:
            run.close()
        system.stop()
        with net.inside("store"):
            store.stop()
        with net.inside("pds"):
            pds.stop()


def test_fifty_milliseconds_more_on_every_datastore_round_trip_loses_and_doubles_nothing(
        net: Net, tmp_path: Path) -> None:
    store = datastore(net, "store", "store")
    pds = datastore(net, "pds", "partitions")
    with net.inside("store"):
        store_link = DelayProxy(net.address["store"], (store.host, store.port), 0.050, 0.010)
    with net.inside("pds"):
        pds_link = DelayProxy(net.address["pds"], (pds.host, pds.port), 0.050, 0.010)
    system = venue(net, tmp_path, store, pds, store_address=store_link.address, pds_address=pds_link.address).start()
    run = None
    try:
        run = Run(system)
        began = time.monotonic()
        time.sleep(10)
        ended = time.monotonic()
        run.finish([(pds, 0), (pds, 1)])
        seen = seen_between(run.flow, run.clock, began, ended)
        print(f"50 ms ± 10 ms on every round trip for 10 s: {seen.describe()}")
        assert not [why for why in seen.refused if "stale-clordid" not in why], \
            f"a slow link is not a reason to refuse: {seen.refused}"
    finally:
        if run is not None:
            run.close()
        system.stop()
        store_link.close()
        pds_link.close()
        with net.inside("store"):
            store.stop()
        with net.inside("pds"):
            pds.stop()


SPLIT_HOSTS = ["gw", "cell", "pds", "s1", "s2", "s3"]


@pytest.fixture
def split_net() -> Iterator[Net]:
    yield from hosts(SPLIT_HOSTS)


class SpreadGroup:
    """The session store's Sentinel group spread over three hosts, as a venue runs it: the primary
    and a Sentinel on ``s1``, the replica and a Sentinel on ``s2``, a third Sentinel on ``s3``."""

    def __init__(self, net: Net, group: str = "e2e-store") -> None:
        self.net, self.group = net, group
        self.servers: dict[str, ValkeyProcess] = {}
        self.sentinels = Sentinels(name="split-sentinel")

    def start(self) -> SpreadGroup:
        net = self.net
        sync_now = {"repl-diskless-sync-delay": 0}
        with net.inside("s1"):
            primary = standalone(host=net.address["s1"], name="s1", aof=True, **sync_now).start()
        with net.inside("s2"):
            replica = standalone(host=net.address["s2"], name="s2", aof=True, replicaof=f"{primary.host} {primary.port}",
                                 **sync_now).start()
        self.servers = {"s1": primary, "s2": replica}
        for host in ("s1", "s2", "s3"):
            with net.inside(host):
                s = ValkeyProcess({"sentinel": ["resolve-hostnames no"]}, sentinel=True, name=f"sentinel-{host}",
                                  host=net.address[host])
                del s.config["save"], s.config["appendonly"]
                self.sentinels.processes.append(s.start())
        with net.inside("gw"):  # reaches every host: the group is set up from there
            wait_for(lambda: replica.client().info("replication").get("master_link_status") == "up", "replica sync")
            self.sentinels.watch(self.group, primary)
            self.sentinels.wait_discovered(self.group, replicas=1)
        return self

    @property
    def url(self) -> str:
        return f"sentinel://{','.join(self.sentinels.addresses)}/{self.group}"

    def primary_port(self) -> int:
        with self.net.inside("s3"):  # the majority's view
            return self.sentinels.processes[2].client(socket_timeout=1).sentinel_get_master_addr_by_name(self.group)[1]

    def stop(self) -> None:
        for host, s in zip(("s1", "s2", "s3"), self.sentinels.processes, strict=False):
            with self.net.inside(host):
                s.stop()
        for host, server in self.servers.items():
            with self.net.inside(host):
                server.stop()


def wait_for(check: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def test_a_split_brain_of_the_session_stores_primary_loses_and_doubles_nothing(split_net: Net, tmp_path: Path) -> None:
    """The session store's primary and its Sentinel cut off from the other two hosts of the group
    for 10 s: the majority promotes the replica, while the old primary keeps taking writes from
    the gateway and the outbox workers, which still reach it. With ``replicaAcks = 1`` nothing the
    old primary alone took is acknowledged (no replica confirms it), so nothing is sent on its
    word; once the cut heals, the old primary is demoted and what only it held is discarded."""
    net = split_net
    group = SpreadGroup(net).start()
    with net.inside("pds"):
        pds = standalone(host=net.address["pds"], name="partitions").start()

    class At:
        url = group.url

    system = PlacedSystem(net, tmp_path, At(), [pds, pds], inbox_delivery="outbox", lock_ttl="5s",  # type: ignore[arg-type]
                          store_lines='replicaAcks = 1\nreplicaAckTimeout = "300ms"')
    system.host_of = lambda role: "gw" if role == "gateway" else "cell"  # type: ignore[method-assign]
    for (role, _), cell in system.cells.items():
        if role == "outbox":  # its writes into the gateway's inboxes confirmed as the gateway's own
            cell.env["MATCHING_TARGET_REPLICA_ACKS"] = "1"
            cell.env["MATCHING_TARGET_REPLICA_ACK_TIMEOUT_MS"] = "300"
    system.start()
    run = None
    try:
        run = Run(system)
        before = group.primary_port()
        run.fault("session store's primary | the rest of its group (split brain)",
                  lambda: net.isolate("s1", ["s2", "s3"]), 10)
        assert group.primary_port() != before, "the majority promoted the replica"
        with net.inside("s1"):
            wait_for(lambda: group.servers["s1"].client().info("replication")["role"] == "slave",
                     "the old primary to be demoted once the cut healed")
        run.finish([(pds, 0), (pds, 1)])
    finally:
        if run is not None:
            run.close()
        system.stop()
        group.stop()
        with net.inside("pds"):
            pds.stop()
