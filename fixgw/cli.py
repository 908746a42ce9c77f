"""The ``fixgw`` command: ``up`` runs the whole system on an embedded Valkey.

Owns argument parsing and process lifecycle (signals, exit codes); the work itself lives
in the packages it starts.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from sessionstore.embedded import standalone
from sessionstore.settings import ConfigError, read_toml

DEFAULT_CONFIG = Path(__file__).resolve().parent.parent / "config" / "fixgw.toml"

log = logging.getLogger("fixgw")


def _embedded_settings(config: dict[str, Any]) -> dict[str, Any]:
    table = dict(config.get("embedded", {}))
    unknown = set(table) - {"port", "aof", "appendfsync", "data_dir"}
    if unknown:
        raise ConfigError(f"[embedded] {', '.join(sorted(unknown))}: unknown setting")
    return table


def cmd_up(args: argparse.Namespace) -> int:
    config = read_toml(args.config)
    emb = _embedded_settings(config)
    data_dir = Path(args.data_dir or emb.get("data_dir", "var/valkey"))
    port = args.port if args.port is not None else int(emb.get("port", 6479))
    server = standalone(aof=bool(emb.get("aof", True)), appendfsync=emb.get("appendfsync", "everysec"),
                        data_dir=data_dir, port=port or None, name="fixgw")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    server.start()
    try:
        print(f"fixgw: embedded Valkey listening on {server.url} "
              f"(AOF {'on' if emb.get('aof', True) else 'off'}, data in {data_dir})", flush=True)
        print("fixgw: press Ctrl-C to stop", flush=True)
        stop.wait()
        print("fixgw: stopping", flush=True)
    finally:
        server.stop()
    return 0


def cmd_gateway(args: argparse.Namespace) -> int:
    from .config import load_gateway
    from .gateway import Gateway

    overrides = {"mode": args.mode} if args.mode else {}
    settings, store_settings = load_gateway(args.config, overrides)
    return Gateway(settings, store_settings, behaviour_for(settings.mode)).run()


def behaviour_for(mode: str) -> Any:
    if mode == "at":
        from .at import AcceptanceBehaviour

        return AcceptanceBehaviour()
    from .orders import OrderEntryBehaviour

    return OrderEntryBehaviour()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fixgw", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start the embedded Valkey and the gateway")
    up.add_argument("--config", default=str(DEFAULT_CONFIG), help="TOML configuration (default: config/fixgw.toml)")
    up.add_argument("--port", type=int, default=None, help="embedded Valkey port (0 = any free port)")
    up.add_argument("--data-dir", default=None, help="embedded Valkey data directory")
    up.set_defaults(func=cmd_up)
    gw = sub.add_parser("gateway", help="run the FIX acceptor (standby until it holds the dispatcher lock)")
    gw.add_argument("--config", default=str(DEFAULT_CONFIG), help="TOML configuration")
    gw.add_argument("--mode", choices=["gateway", "at"], help="override [gateway] mode (at = acceptance-test app)")
    gw.set_defaults(func=cmd_gateway)
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
