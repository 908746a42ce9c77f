"""The ``fixgw`` command: ``up`` runs the whole system on an embedded Valkey.

Owns argument parsing and process lifecycle (signals, exit codes); the work itself lives
in the packages it starts.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import re
import secrets
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from datastore.embedded import ALLOCATORS, ValkeyProcess, jemalloc_library, standalone
from datastore.settings import ConfigError, read_toml
from matching.config import tune_gc
from sessionstore.keys import GatewayKey

from .admin_cli import DEFAULT_TOKEN_FILE as ADMIN_TOKEN_FILE
from .affinity import (
    NICE,
    cpus_for,
    datastore_cpus,
    group_nice,
    raise_priority,
    realtime_described,
    realtime_here,
    run_realtime,
    valkey_cpu_settings,
)
from .awake import KeepAwake

ROOT = Path(__file__).resolve().parent.parent
if TYPE_CHECKING:
    from .config import GatewaySettings

DEFAULT_CONFIG = ROOT / "config" / "fixgw.toml"

log = logging.getLogger("fixgw")


# Valkey's default (64mb) suits a quiet server. This one writes ~5.6–6.6 KB of AOF a request
# (bench/e2e_bench.py prints it), and a rewrite is a forked child that serialises the whole
# dataset: on 2 cores it takes one of them for seconds (12 s at 876 MB on a slow VM), and the
# order path, left one, queues — a 30 s window's p99 13–36 ms without a rewrite, up to 350 ms with
# one (docs/decisions/2026-12-04-aof-rewrites-in-the-maintenance-window.md). So the rewrite belongs
# in the maintenance window (`fixgw compact`); during trading only past this size. Bigger costs
# replay time after a crash (~0.4 GB/s here) and disk.
AOF_REWRITE_MIN_SIZE = "4gb"
_SIZE = re.compile(r"[1-9][0-9]*(?:[kmg]b)?", re.IGNORECASE)


EMBEDDED_SETTINGS = frozenset({"port", "aof", "appendfsync", "data_dir", "aof_rewrite_min_size", "nice",
                               "realtime_priority", "keep_cpus_awake", "allocator"})


def _embedded_settings(config: dict[str, Any]) -> dict[str, Any]:
    table = dict(config.get("embedded", {}))
    unknown = set(table) - EMBEDDED_SETTINGS
    if unknown:
        raise ConfigError(f"[embedded] {', '.join(sorted(unknown))}: unknown setting")
    size = table.get("aof_rewrite_min_size", AOF_REWRITE_MIN_SIZE)
    if not isinstance(size, str) or not _SIZE.fullmatch(size):
        raise ConfigError(f"[embedded] aof_rewrite_min_size {size!r}: a size such as \"512mb\" "
                          "(bytes, or kb / mb / gb)")
    nice = table.get("nice", NICE)
    if not isinstance(nice, int) or isinstance(nice, bool) or not -20 <= nice <= 19:
        raise ConfigError(f"[embedded] nice {nice!r}: a whole number from -20 (first) to 19 (last); 0 is the OS's default")
    realtime = table.get("realtime_priority", 0)
    if not isinstance(realtime, int) or isinstance(realtime, bool) or not 0 <= realtime <= 99:
        raise ConfigError(f"[embedded] realtime_priority {realtime!r}: a whole number from 1 (lowest real-time) "
                          "to 99; 0 leaves the system to the OS's normal scheduling")
    if not isinstance(table.get("keep_cpus_awake", False), bool):
        raise ConfigError(f"[embedded] keep_cpus_awake {table['keep_cpus_awake']!r}: true or false")
    if table.get("allocator", "jemalloc") not in ALLOCATORS:
        raise ConfigError(f"[embedded] allocator {table['allocator']!r}: one of {', '.join(ALLOCATORS)}")
    return table


def allocator_described(server: ValkeyProcess, wanted: str) -> str:
    """What ``fixgw up`` says of the embedded Valkey's allocator: the one it runs on and, when
    jemalloc was asked for and this machine has none, how to get it."""
    if server.preload:
        return "jemalloc"
    if wanted == "jemalloc":
        return "the C library's: jemalloc not found, install it for ~10 % less CPU (Debian: libjemalloc2)"
    return "the C library's"


EMBEDDED_PASSWORD_ENV = "FIXGW_EMBEDDED_VALKEY_PASSWORD"  # how the cells `fixgw up` starts get it


def secret_file(path: Path) -> str:
    """A random secret made once and kept in ``path``, readable by this user only."""
    if path.exists():
        return path.read_text().strip()
    path.parent.mkdir(parents=True, exist_ok=True)
    secret = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(secret + "\n")
    return secret


def local_operator(settings: GatewaySettings, token_file: Path) -> GatewaySettings:
    """`fixgw up` with no ``[[gateway.operator]]``: one, "local", its token made once in
    ``token_file`` (this user only), which ``fixgw-admin`` reads by default."""
    if settings.operator:
        return settings
    from .config import OperatorConfig
    from .credentials import hash_password

    operator = OperatorConfig(name="local", token_hash=hash_password(secret_file(token_file)))
    return settings.model_copy(update={"operator": [operator]})


def embedded_password(data_dir: Path) -> str:
    """The embedded Valkey's password: made once (random, 32 bytes) and kept beside its data in
    ``<data_dir>/password``, readable by this user only, so the tools find it there
    (``passwordFile`` in config/fixgw.toml) and no other local user can read the orders."""
    return secret_file(data_dir / "password")


def embedded_server(config: dict[str, Any], gateway_cpus: set[int], *, data_dir: Path | None = None,
                    port: int | None = None, password: str | None = None) -> ValkeyProcess:
    """The Valkey that ``fixgw up`` starts (not started), from the config's ``[embedded]`` table:
    AOF as it says, on the CPUs the gateway's ``gateway_cpus`` leave (``affinity.datastore_cpus``).
    ``data_dir`` / ``port``: as given (None: a temporary directory, a free port)."""
    emb = _embedded_settings(config)
    preload = jemalloc_library() if emb.get("allocator", "jemalloc") == "jemalloc" else None
    return standalone(aof=bool(emb.get("aof", True)), appendfsync=emb.get("appendfsync", "everysec"),
                      data_dir=data_dir, port=port, name="fixgw", preload=preload,
                      **({"requirepass": password} if password else {}),
                      **{"auto-aof-rewrite-min-size": emb.get("aof_rewrite_min_size", AOF_REWRITE_MIN_SIZE),
                         **valkey_cpu_settings(datastore_cpus(gateway_cpus))})


def cmd_up(args: argparse.Namespace) -> int:
    """The whole system on one machine: embedded Valkey, the cells, the gateway."""
    from .config import load_gateway
    from .gateway import Gateway

    tune_gc()  # the gateway runs in this process: collected as `fixgw gateway` is
    config = read_toml(args.config)
    emb = _embedded_settings(config)
    # Before any thread or child exists: Valkey, the cells and the gateway's threads inherit it.
    priority = raise_priority(emb.get("nice", NICE))
    overrides: dict[str, Any] = {}
    if args.fix_port is not None:
        overrides["port"] = args.fix_port
    if args.http_port is not None:
        overrides["http_port"] = args.http_port
    settings, store_settings, matching = load_gateway(args.config, overrides)
    if args.transport == "rabbitmq" and matching.transport != "rabbitmq":
        matching = matching.model_copy(update={"transport": "rabbitmq", "amqp_url": matching.amqp_url or args.amqp_url,
                                               "amqp_password_env": matching.amqp_password_env or args.amqp_password_env})
        try:
            matching.broker_url()  # as loading the setting would check it: no password in the URL, the variable set
        except ValueError as exc:
            raise ConfigError(f"--transport rabbitmq: {exc}") from None
    data_dir = Path(args.data_dir or emb.get("data_dir", "var/valkey"))
    admin_token = Path(ADMIN_TOKEN_FILE)
    settings = local_operator(settings, admin_token)
    port = args.port if args.port is not None else int(emb.get("port", 6479))
    password = embedded_password(data_dir)
    gateway_cpus = cpus_for(settings.cpu_affinity)
    server = embedded_server(config, gateway_cpus, data_dir=data_dir, port=port or None, password=password)
    server.start()
    realtime = emb.get("realtime_priority", 0)
    if server.proc is not None:  # Valkey leads a session of its own (``ValkeyProcess.start``): its share too
        group_nice(server.proc.pid, os.getpriority(os.PRIO_PROCESS, 0))
    # Valkey's main thread, then this process: the cells and every thread of the gateway started
    # from here on inherit it (docs/decisions/2026-12-07-the-system-ahead-of-every-normal-thread.md).
    realtime_done = (server.proc is not None and run_realtime(server.proc.pid, realtime)) and realtime_here(realtime)
    children: list[subprocess.Popen[bytes]] = []
    # The cells share the CPUs the gateway leaves with Valkey (all of them when the gateway is
    # not pinned or takes every CPU): off the gateway's CPU, the gateway's threads wait less for
    # it (docs/decisions/2026-12-05-cells-beside-the-datastore.md).
    cell_cpus = datastore_cpus(gateway_cpus) or os.sched_getaffinity(0)
    # Every CPU the system runs on spins when idle (fixgw/awake.py says why and what it costs).
    awake = KeepAwake((gateway_cpus or os.sched_getaffinity(0)) | cell_cpus) if emb.get("keep_cpus_awake") else None

    def start_cell(cmd: list[str], cenv: dict[str, str]) -> subprocess.Popen[bytes]:
        # A child starts on the CPUs of the thread that makes it (the main thread, or a pinned one
        # of the gateway): this thread moves to the cells' CPUs for the moment it takes, so the
        # cell never runs a step on the gateway's.
        own = os.sched_getaffinity(0)
        os.sched_setaffinity(0, cell_cpus)
        try:
            return subprocess.Popen(cmd, env=cenv)
        finally:
            os.sched_setaffinity(0, own)

    supervising = threading.Event()
    supervisor: threading.Thread | None = None
    try:
        if awake is not None:
            awake.start()
        print(f"fixgw: embedded Valkey listening on {server.url} (AOF {'on' if server.config['appendonly'] == 'yes' else 'off'}, "
              f"data in {data_dir}, password in {data_dir / 'password'}, allocator "
              f"{allocator_described(server, emb.get('allocator', 'jemalloc'))}); the system runs at {priority}, "
              f"{realtime_described(realtime, realtime_done)}"
              + (f"; {awake.describe()}" if awake is not None else ""), flush=True)
        # Everything lives on the embedded Valkey: the session store and every partition.
        store_settings = store_settings.model_copy(update={"url": server.url, "nodes": [], "sentinels": [],
                                                           "sentinelGroup": None, "passwordEnv": None,
                                                           "passwordFile": data_dir / "password", "username": None})
        matching = matching.model_copy(update={"partition": []})
        env = {**os.environ, "REDIS_URL": server.url, "REDIS_PASSWORD_ENV": EMBEDDED_PASSWORD_ENV,
               EMBEDDED_PASSWORD_ENV: password, "MATCHING_PARTITION_COUNT": str(matching.partition_count),
               "MATCHING_INSTRUMENTS": str(matching.instruments), "PYTHONPATH": str(ROOT)}
        also = [f"--also={GatewayKey(store_settings.namespace, group).inbox_stream}"
                for group, kind in settings.groups().items() if kind == "dc"]
        env["MATCHING_INBOX_DELIVERY"] = matching.inbox_delivery
        env["MATCHING_BATCH_LINGER_MS"] = f"{matching.batch_linger * 1000:g}"
        if matching.transport == "rabbitmq":  # commands and events through the broker
            env["MATCHING_INBOX_DELIVERY"] = "outbox"
            also = []
            env.update({"MATCHING_TRANSPORT": "rabbitmq", "MATCHING_AMQP_URL": str(matching.amqp_url),
                        "MATCHING_AMQP_EXCHANGE": matching.amqp_exchange})
            if matching.amqp_password_env:
                env["MATCHING_AMQP_PASSWORD_ENV"] = matching.amqp_password_env
            if matching.amqp_password_file:
                env["MATCHING_AMQP_PASSWORD_FILE"] = str(matching.amqp_password_file)
        commands = []
        for p in range(matching.partition_count):
            penv = {**env, "MATCHING_PARTITION": str(p)}
            commands += [([sys.executable, "-m", "matching", "conductor", *also], penv),
                         ([sys.executable, "-m", "matching", "outbox", *also], penv)]
        children += [start_cell(cmd, cenv) for cmd, cenv in commands]
        # A supervisor, as systemd would be: a cell that exits is started again (a relocated
        # partition's cells stand down, and started again they follow it: `fixgw-cell relocate`).
        supervising.set()

        def supervise() -> None:
            while supervising.is_set():
                time.sleep(1.0)
                for i, (cmd, cenv) in enumerate(commands):
                    code = children[i].poll()
                    if code == 2:  # its settings are wrong: starting it again cannot help (it said why)
                        continue
                    if code is not None and supervising.is_set():
                        print(f"fixgw: {cmd[3]} p{cenv['MATCHING_PARTITION']} exited ({code}); starting it again",
                              flush=True)
                        children[i] = start_cell(cmd, cenv)

        supervisor = threading.Thread(target=supervise, name="cell-supervisor", daemon=True)
        supervisor.start()
        print(f"fixgw: {matching.partition_count} matching partitions (conductor + outbox each), transport "
              f"{matching.transport}", flush=True)
        print(f"fixgw: FIX acceptor on {settings.host}:{settings.port}, TargetCompID={settings.sender_comp_id}; "
              "sessions: " + ", ".join(f"{s.target_comp_id} ({s.begin_string}, {s.kind})" for s in settings.session),
              flush=True)
        print(f"fixgw: try it: .venv/bin/fixgw demo --port {settings.port}    (Ctrl-C stops everything)", flush=True)
        if any(op.name == "local" for op in settings.operator) and admin_token.exists():
            print(f"fixgw: sessions: .venv/bin/fixgw-admin --url http://127.0.0.1:{settings.http_port} sessions "
                  f"(token in {admin_token})", flush=True)
        return Gateway(settings, store_settings, behaviour_for(settings.mode), matching=matching).run()
    except KeyboardInterrupt:  # Ctrl-C before the gateway took over the signal: still a clean stop
        return 0
    finally:
        supervising.clear()
        if supervisor is not None:
            supervisor.join(5)
        for child in children:
            child.terminate()
        for child in children:
            try:
                child.wait(10)
            except subprocess.TimeoutExpired:
                child.kill()
        if awake is not None:
            awake.stop()
        server.stop()
        with contextlib.suppress(BrokenPipeError):  # (whoever read our output may be gone by now)
            print("fixgw: stopped", flush=True)


def cmd_compact(args: argparse.Namespace) -> int:
    """Rewrite (compact) the embedded Valkey's AOF now, and wait until it is done: what a
    maintenance window runs, so that no rewrite comes during trading (AOF_REWRITE_MIN_SIZE)."""
    import redis

    config = read_toml(args.config)
    emb = _embedded_settings(config)
    data_dir = Path(args.data_dir or emb.get("data_dir", "var/valkey"))
    port = args.port if args.port is not None else int(emb.get("port", 6479))
    password_file = data_dir / "password"
    if not password_file.exists():
        print(f"fixgw compact: no embedded Valkey data in {data_dir} (no password file): is this where "
              "`fixgw up` keeps it (--data-dir)?", file=sys.stderr)
        return 1
    client = redis.Redis(host="127.0.0.1", port=port, password=password_file.read_text().strip(),
                         socket_timeout=10)
    try:
        before = client.info("persistence")
        if before.get("aof_enabled") != 1:
            print(f"fixgw compact: the Valkey on port {port} keeps no AOF ([embedded] aof = false): nothing to compact",
                  file=sys.stderr)
            return 1
        size = _aof_bytes(data_dir)
        started = time.monotonic()
        if not before.get("aof_rewrite_in_progress"):
            client.bgrewriteaof()
        while True:
            time.sleep(0.2)
            info = client.info("persistence")
            if (not info.get("aof_rewrite_in_progress") and not info.get("aof_rewrite_scheduled")
                    and info.get("aof_rewrites", 0) > before.get("aof_rewrites", 0)):
                break
            if time.monotonic() - started > args.timeout:
                print(f"fixgw compact: the rewrite did not finish within {args.timeout:g}s; it goes on in Valkey",
                      file=sys.stderr)
                return 1
    except redis.RedisError as exc:
        print(f"fixgw compact: the embedded Valkey on port {port}: {exc}", file=sys.stderr)
        return 1
    if info.get("aof_last_bgrewrite_status") != "ok":
        print(f"fixgw compact: the rewrite failed ({info.get('aof_last_bgrewrite_status')}): see Valkey's log",
              file=sys.stderr)
        return 1
    print(f"fixgw compact: AOF rewritten in {time.monotonic() - started:.1f}s: {size / 2**20:.1f} MB -> "
          f"{_aof_bytes(data_dir) / 2**20:.1f} MB", flush=True)
    return 0


def _aof_bytes(data_dir: Path) -> int:
    """The size of the AOF's files (Valkey's appendonlydir: base, increments, manifest)."""
    return sum(f.stat().st_size for f in data_dir.rglob("*") if f.is_file() and "appendonly" in str(f))


def cmd_gateway(args: argparse.Namespace) -> int:
    from .config import load_gateway
    from .gateway import Gateway

    tune_gc()
    overrides: dict[str, Any] = {"mode": args.mode} if args.mode else {}
    if args.http_port is not None:
        overrides["http_port"] = args.http_port
    if args.state_dir is not None:
        overrides["state_dir"] = args.state_dir
    settings, store_settings, matching = load_gateway(args.config, overrides)
    return Gateway(settings, store_settings, behaviour_for(settings.mode), matching=matching).run()


def cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run

    return run(args.host, args.port, args.target, args.drop_copy or None)


def cmd_passwd(args: argparse.Namespace) -> int:
    """Print the password_hash of a password read from the terminal (or one line of stdin)."""
    import getpass

    from .credentials import hash_password

    password = getpass.getpass("password: ") if sys.stdin.isatty() else sys.stdin.readline().rstrip("\n")
    if not password:
        print("fixgw passwd: an empty password is refused", file=sys.stderr)
        return 2
    print(hash_password(password))
    return 0


def behaviour_for(mode: str) -> Any:
    if mode == "at":
        from .at import AcceptanceBehaviour

        return AcceptanceBehaviour()
    from .orders import OrderEntryBehaviour

    return OrderEntryBehaviour()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fixgw", description="FIX gateway on Redis/Valkey: run it (up), "
                                     "serve FIX (gateway), or try it (demo).")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start the embedded Valkey and the gateway")
    up.add_argument("--config", default=str(DEFAULT_CONFIG), help="TOML configuration (default: config/fixgw.toml)")
    up.add_argument("--port", type=int, default=None, help="embedded Valkey port (0 = any free port)")
    up.add_argument("--data-dir", default=None, help="embedded Valkey data directory")
    up.add_argument("--fix-port", type=int, default=None, help="override [gateway] port")
    up.add_argument("--http-port", type=int, default=None, help="override [gateway] http_port")
    up.add_argument("--transport", choices=["redis-streams", "rabbitmq"], default=None,
                    help="override [matching] transport (rabbitmq: commands and events through the broker)")
    up.add_argument("--amqp-url", default="amqp://guest@127.0.0.1:5672/",
                    help="with --transport rabbitmq and no [matching] amqp_url: the broker (no password here)")
    up.add_argument("--amqp-password-env", default="FIXGW_AMQP_PASSWORD",
                    help="with --transport rabbitmq: the environment variable holding the broker password")
    up.set_defaults(func=cmd_up)
    compact = sub.add_parser("compact", help="rewrite the embedded Valkey's AOF now (a maintenance window's job)")
    compact.add_argument("--config", default=str(DEFAULT_CONFIG), help="TOML configuration (default: config/fixgw.toml)")
    compact.add_argument("--port", type=int, default=None, help="embedded Valkey port (default: [embedded] port)")
    compact.add_argument("--data-dir", default=None, help="embedded Valkey data directory (default: [embedded] data_dir)")
    compact.add_argument("--timeout", type=float, default=600, help="seconds to wait for the rewrite")
    compact.set_defaults(func=cmd_compact)
    gw = sub.add_parser("gateway", help="run the FIX acceptor (standby until it holds the dispatcher lock)")
    gw.add_argument("--config", default=str(DEFAULT_CONFIG), help="TOML configuration")
    gw.add_argument("--mode", choices=["gateway", "at"], help="override [gateway] mode (at = acceptance-test app)")
    gw.add_argument("--http-port", type=int, default=None, help="override [gateway] http_port")
    gw.add_argument("--state-dir", default=None, help="override [gateway] state_dir (one per process)")
    gw.set_defaults(func=cmd_gateway)
    demo = sub.add_parser("demo", help="trade against a running gateway and print the ExecutionReports")
    demo.add_argument("--host", default="127.0.0.1")
    demo.add_argument("--port", type=int, default=9878)
    demo.add_argument("--target", default="FIXGW", help="the gateway's CompID")
    demo.add_argument("--drop-copy", default="DROPCOPY", help="drop-copy session to watch ('' for none)")
    demo.set_defaults(func=cmd_demo)
    passwd = sub.add_parser("passwd", help="print a session's password_hash (reads the password; the file holds hashes only)")
    passwd.set_defaults(func=cmd_passwd)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return int(args.func(args))
    except ConfigError as exc:
        print(f"fixgw: configuration error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
