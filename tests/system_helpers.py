"""The whole system in processes: Valkey servers, conductors, outbox workers, the gateway."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import tomllib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import aio_pika

from datastore.embedded import ValkeyProcess, free_port, standalone
from fixgw.demo import DemoClient
from tests.gateway_helpers import ROOT, GatewayProc, cell_env, endpoint_lines

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

ORDER_ENTRY_SESSIONS = """
[[gateway.session]]
name = "CLIENT1"

[[gateway.session]]
name = "CLIENT2"
"""
DROP_COPY_SESSIONS = """
[[gateway.session]]
name = "DROPCOPY"
kind = "dc"
"""
SESSIONS = ORDER_ENTRY_SESSIONS + DROP_COPY_SESSIONS


class Broker:
    """A RabbitMQ virtual host of a test's own on the machine's broker (``tests/test_rabbitmq.py``).
    The password travels in an environment variable, as the settings require."""

    PASSWORD_ENV = "FIXGW_TEST_AMQP_PASSWORD"

    def __init__(self, url: str, password: str) -> None:
        self.url = url  # amqp://user@host:port/vhost, no password
        self.password = password
        os.environ[self.PASSWORD_ENV] = password  # inherited by every process a test starts

    @property
    def full_url(self) -> str:
        from matching.broker_url import amqp_url_with_password

        return amqp_url_with_password(self.url, self.PASSWORD_ENV)

    def cell_env(self) -> dict[str, str]:
        return {"MATCHING_TRANSPORT": "rabbitmq", "MATCHING_AMQP_URL": self.url,
                "MATCHING_AMQP_PASSWORD_ENV": self.PASSWORD_ENV}

    def gateway_settings(self) -> str:
        return f"""
transport = "rabbitmq"
amqp_url = "{self.url}"
amqp_password_env = "{self.PASSWORD_ENV}"
"""


def broker_missing(host: str = "127.0.0.1", port: int = 5672) -> str | None:
    """Why the RabbitMQ tests and bench rows cannot run here (None: they can)."""
    import shutil

    try:
        socket.create_connection((host, port), timeout=2).close()
    except OSError as exc:
        return f"no RabbitMQ broker at {host}:{port} ({exc})"
    if shutil.which("rabbitmqctl") is None:
        return "rabbitmqctl is not installed (needed to make a virtual host of our own)"
    return None


def rabbitmqctl(*args: str) -> str:
    return subprocess.run(["rabbitmqctl", *args], capture_output=True, text=True, check=True, timeout=60).stdout


@contextmanager
def rabbitmq_vhost(prefix: str) -> Iterator[Broker]:
    """A virtual host of our own on the machine's broker (user guest), deleted afterwards: the
    queues keep seed 000's names without touching anyone else's."""
    import uuid

    vhost = f"{prefix}-{uuid.uuid4().hex[:8]}"
    broker = Broker(f"amqp://guest@127.0.0.1:5672/{vhost}", "guest")
    rabbitmqctl("add_vhost", vhost)
    try:
        rabbitmqctl("set_permissions", "-p", vhost, "guest", ".*", ".*", ".*")
        yield broker
    finally:
        # A queue left with thousands of messages (a benchmark's backlog) would keep the
        # broker busy deleting it for minutes after ``delete_vhost`` returns, and slow every
        # later user of the shared broker: emptied first, which returns when it is done.
        # (rabbitmqctl's message counts lag by seconds: every queue is purged, over AMQP.)
        try:
            names = rabbitmqctl("list_queues", "-p", vhost, "-q", "--no-table-headers", "name").split()
            if names:
                asyncio.run(purge_queues(broker.full_url, names))
        except Exception as exc:  # noqa: BLE001 (the vhost goes whatever happened to its queues)
            print(f"rabbitmq_vhost: queues of {vhost} not emptied before deletion: {exc}", file=sys.stderr)
        rabbitmqctl("delete_vhost", vhost)


async def purge_queues(url: str, names: list[str]) -> None:
    connection = await aio_pika.connect(url)
    async with connection:
        channel = await connection.channel()
        for name in names:
            await (await channel.get_queue(name, ensure=True)).purge()


class CellProc:
    """A conductor or outbox worker process for one partition."""

    def __init__(self, role: str, partition: int, url: str, instruments: Path, log: Path,
                 target_url: str | None = None, also: list[str] | None = None, durability: str = "memory",
                 broker: Broker | None = None, inbox_delivery: str = "outbox") -> None:
        self.args = [sys.executable, "-m", "matching", role]
        if target_url:
            self.args.append(f"--target={target_url}")
        self.args += [f"--also={a}" for a in (also or [])]
        self.env = {**os.environ, "PYTHONPATH": str(ROOT), **cell_env(url), "MATCHING_PARTITION_COUNT": "2",
                    "MATCHING_PARTITION": str(partition), "MATCHING_INSTRUMENTS": str(instruments),
                    "MATCHING_DURABILITY": durability, "MATCHING_LEASE_TTL_MS": "2000",
                    "MATCHING_INBOX_DELIVERY": inbox_delivery}
        if broker is not None:
            self.env.update(broker.cell_env())
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
                 sessions: str = SESSIONS, gateway_routes: dict[int, str] | None = None,
                 matching: str = "", broker: Broker | None = None, drop_copy_sessions: str = "",
                 inbox_delivery: str = "direct", gateway_lines: str = "", drop_copy_gateway_lines: str = "",
                 lock_ttl: str = "2s", store_lines: str = "", gateway_env: dict[str, str] | None = None) -> None:
        """``gateway_routes``: partition → the gateway's own ``[[matching.partition]]`` lines
        (its URL and client settings), e.g. through a ``ReplyDroppingProxy``.
        ``drop_copy_sessions``: drop-copy sessions served by a gateway process of their own
        (``drop_copy_gateway``, the same namespace, its own FIX port). ``inbox_delivery``: as
        ``fixgw up`` starts the cells (direct: a conductor whose partition shares the session
        store's datastore appends events to the inboxes itself; the others fall back to the outbox).
        ``gateway_lines``, ``drop_copy_gateway_lines``: more ``[gateway]`` settings of each gateway;
        ``lock_ttl``, ``store_lines``: the gateways' lockTtl and more ``[session_store]`` settings;
        ``gateway_env``: more environment of the order-entry gateway's process."""
        self.tmp = tmp
        self.store = store
        self.partitions = partitions
        self.instruments = tmp / "instruments.toml"
        self.instruments.write_text(INSTRUMENTS)
        self.fix_port = free_port()
        routes = gateway_routes or {}
        if broker is not None:  # commands and events through RabbitMQ
            matching += broker.gateway_settings()
        extra_matching = "".join(f"""
[[matching.partition]]
index = {i}
{routes.get(i, endpoint_lines(server.url))}
""" for i, server in enumerate(partitions) if server is not store or i in routes)
        extra = f"""
[matching]
partition_count = 2
instruments = "{self.instruments}"
{matching}
{extra_matching}"""
        self.gateway_extra = extra  # the [matching] part of a gateway's config here
        self.gateway = GatewayProc(tmp, store.url, name="gateway", fix_port=self.fix_port, mode="gateway",
                                   namespace="e2e", sessions=sessions, lock_ttl=lock_ttl, renewal="500ms", extra=extra,
                                   gateway_lines=gateway_lines, store_extra=store_lines, env=gateway_env)
        self.drop_copy_gateway: GatewayProc | None = None
        self.ports: dict[str, int] = {}  # session name → its gateway's FIX port, where not ``fix_port``
        if drop_copy_sessions:
            self.drop_copy_gateway = GatewayProc(tmp, store.url, name="gateway-dc", fix_port=free_port(),
                                                 mode="gateway", namespace="e2e", sessions=drop_copy_sessions,
                                                 lock_ttl=lock_ttl, renewal="500ms", extra=extra,
                                                 gateway_lines=drop_copy_gateway_lines, store_extra=store_lines)
            for session in tomllib.loads(drop_copy_sessions)["gateway"]["session"]:
                self.ports[session["name"]] = self.drop_copy_gateway.fix_port
        self.cells: dict[tuple[str, int], CellProc] = {}
        for p, server in enumerate(partitions):
            for role in ("conductor", "outbox"):
                also = ["{e2e/dc}/inbox"] if broker is None else None
                target = store.url if broker is None else None
                self.cells[(role, p)] = CellProc(role, p, server.url, self.instruments, tmp / f"{role}{p}.log",
                                                 target_url=target, also=also, broker=broker,
                                                 inbox_delivery="outbox" if broker is not None else inbox_delivery)
        self.clients: list[DemoClient] = []

    def start(self) -> System:
        """The gateways first: their ports were picked (``free_port``) when they were made, and a
        cell's HTTP server binding port 0 meanwhile was once given the gateway's FIX port. A
        start that fails stops what it started (else its cells outlive the test, retrying a
        datastore that is gone)."""
        try:
            self.gateway.start().wait_active(60)
            if self.drop_copy_gateway is not None:
                self.drop_copy_gateway.start().wait_active(60)
            for cell in self.cells.values():
                cell.start()
        except BaseException:
            self.stop()
            raise
        return self

    def client(self, name: str, reset_on_logon: bool = False) -> DemoClient:
        (self.tmp / "clients").mkdir(exist_ok=True)
        c = DemoClient(self.tmp / "clients", "127.0.0.1", self.ports.get(name, self.fix_port), name, "FIXGW",
                       reset_on_logon=reset_on_logon)
        c.initiator.start()
        assert c.wait(lambda: c.logged_on, 20), f"{name} could not log on"
        self.clients.append(c)
        return c

    def stop(self) -> None:
        for c in self.clients:
            c.close()
        self.clients.clear()
        self.gateway.stop()
        if self.drop_copy_gateway is not None:
            self.drop_copy_gateway.stop()
        for cell in self.cells.values():  # all at once: each takes up to a second to release its lease
            if cell.proc is not None and cell.proc.poll() is None:
                cell.proc.terminate()
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



class ReplyDroppingProxy:
    """A TCP proxy to a Valkey server that can lose the server's replies: a command the client
    sends still reaches the server and runs, but the client never learns it did (the
    ambiguous outcome of a write that timed out after landing)."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.drop_replies = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.url = f"redis://127.0.0.1:{self.port}"
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.target_port))
            threading.Thread(target=self._pipe, args=(client, server, False), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client, True), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, replies: bool) -> None:
        try:
            while data := src.recv(65536):
                if not (replies and self.drop_replies.is_set()):
                    dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.close()
                except OSError:
                    pass

    def close(self) -> None:
        self._closed = True
        self.listener.close()


@contextmanager
def system_on_one_server(tmp: Path, aof: bool = False, **options: object) -> Iterator[System]:
    """A whole system (gateway, both partitions' cells) on one Valkey, stopped afterwards."""
    with standalone(aof=aof) as server:
        s = System(tmp, server, [server, server], **options).start()  # type: ignore[arg-type]
        try:
            yield s
        finally:
            s.stop()


def _group_done(client, stream: str) -> bool:  # type: ignore[no-untyped-def]
    """Every entry of ``stream`` delivered to each of its consumer groups and acknowledged."""
    if not client.exists(stream):
        return True
    for group in client.xinfo_groups(stream):
        last = group["last-delivered-id"]
        last = last.decode() if isinstance(last, bytes) else str(last)
        if int(group["pending"]) or client.xrange(stream, f"({last}", "+", count=1):
            return False
    return True


def last_report_sent(store, namespace: str, kind: str, name: str) -> int:  # type: ignore[no-untyped-def]
    """The highest MsgSeqNum the session store holds for an application message of the session
    (heartbeats and other admin messages aside): what the client must have read last."""
    from sessionstore.codec import decode_record, decode_seq_field
    from sessionstore.keys import SessionKey

    key = SessionKey(namespace, kind, name)
    highest = 0
    for chunk in store.scan_iter(match=f"{key.tag}/store/*".replace("{", "\\{").replace("}", "\\}")):
        for field, raw in store.hgetall(chunk).items():
            record = decode_record(chunk.decode(), field, raw)
            if record.msg_type.decode() not in ("0", "1", "2", "3", "4", "5", "A"):
                highest = max(highest, decode_seq_field(chunk.decode(), field))
    return highest


def read_up_to(client: DemoClient) -> int:
    """The highest MsgSeqNum of the application messages ``client`` has read."""
    return max((int(r[34]) for r in reports(client)), default=0)


def wait_quiet(system: System, sessions: dict[str, tuple[str, Callable[[], int]]], timeout: float = 60.0) -> None:
    """Wait until nothing more can reach these sessions: every partition's commands processed and
    events published, every gateway inbox dispatched (committed, sent, acknowledged), and each
    client has read every application message its session stored. Then a report that has
    not arrived never will: "exactly once" is checked on stored state, not after a pause."""
    from sessionstore.keys import GatewayKey

    store = system.store.client()
    streams = [(server.client(), key) for p, server in enumerate(system.partitions)
               for key in (f"matching:{{matching-p{p}}}:commands", f"matching:{{matching-p{p}}}:events")]
    streams += [(store, GatewayKey("e2e", kind).inbox_stream) for kind in ("fsg", "dc")]

    def quiet() -> bool:
        if not all(_group_done(client, stream) for client, stream in streams):
            return False
        for name, (kind, read) in sessions.items():
            if read() < last_report_sent(store, "e2e", kind, name):
                return False
        return True

    deadline = time.monotonic() + timeout
    while not quiet():
        assert time.monotonic() < deadline, f"not quiet after {timeout:.0f} s"
        time.sleep(0.1)
