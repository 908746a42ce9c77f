"""fixgw-admin: operate the sessions of a running gateway through its admin API (fixgw/admin.py).

    fixgw-admin sessions
    fixgw-admin next-sender CLIENT1 120        # refused at or below a number already sent
    fixgw-admin next-target CLIENT1 7
    fixgw-admin reset CLIENT1                  # a new FIX session: both numbers 1
    fixgw-admin logout CLIENT1 --text "end of day"
    fixgw-admin disconnect CLIENT1
    fixgw-admin cancel-orders --session CLIENT1 | --account ACC
    fixgw-admin move-session CLIENT1 --to b --to-url http://gw-b:9879   # to another session group

The token: FIXGW_ADMIN_TOKEN, else --token-file (default var/admin-token, which `fixgw up`
writes). Exit 0 when done, 1 when the gateway refused (the reason is printed), 2 when it could
not be asked.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

DEFAULT_URL = "http://127.0.0.1:9879"
DEFAULT_TOKEN_FILE = "var/admin-token"


def token_from(args: argparse.Namespace) -> str:
    token = os.environ.get("FIXGW_ADMIN_TOKEN", "")
    if token:
        return token
    path = Path(args.token_file)
    if not path.exists():
        raise SystemExit(f"fixgw-admin: no token: set FIXGW_ADMIN_TOKEN or --token-file ({path} does not exist)")
    return path.read_text().strip()


def call(url: str, token: str, method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
    data = json.dumps(body or {}).encode() if method == "POST" else None
    request = urllib.request.Request(url.rstrip("/") + path, data=data, method=method,
                                     headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as r:
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def table(sessions: list[dict[str, Any]]) -> str:
    head = (f"{'session':28} {'on':3} {'peer':15} {'sender':>7} {'target':>7} {'stored s/t':>13} {'epoch':>5} "
            f"{'parked':6} {'open':>5}  last in / last out")
    lines = [head]
    for s in sessions:
        stored = s["stored"]
        lines.append(
            f"{s['session']:28} {'yes' if s['logged_on'] else 'no':3} {s['peer'] or '-':15} "
            f"{_n(s['next_sender']):>7} {_n(s['next_target']):>7} "
            f"{str(stored['next_sender']) + '/' + str(stored['next_target']):>13} {_n(s['owner_epoch']):>5} "
            f"{'yes' if s['parked'] else 'no':6} {_n(s.get('open_orders')):>5}  "
            f"{s['last_in'] or '-'} / {s['last_out'] or '-'}")
    return "\n".join(lines)


def _n(value: Any) -> str:
    return "-" if value is None else str(value)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="fixgw-admin", description=__doc__.splitlines()[0])
    p.add_argument("--url", default=os.environ.get("FIXGW_ADMIN_URL", DEFAULT_URL),
                   help=f"the gateway's http_port (default {DEFAULT_URL}, or FIXGW_ADMIN_URL)")
    p.add_argument("--token-file", default=DEFAULT_TOKEN_FILE, help=f"(default {DEFAULT_TOKEN_FILE})")
    p.add_argument("--json", action="store_true", help="print the gateway's JSON answer")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("sessions", help="every session's state")
    for name, what in (("next-sender", "the next number the gateway sends"),
                       ("next-target", "the next number expected from the counterparty")):
        a = sub.add_parser(name, help=f"set {what}")
        a.add_argument("session")
        a.add_argument("seq", type=int)
    sub.add_parser("reset", help="a new FIX session: both numbers 1, stored messages cleared").add_argument("session")
    lo = sub.add_parser("logout", help="send a Logout with a text")
    lo.add_argument("session")
    lo.add_argument("--text", default="logged out by the venue")
    sub.add_parser("disconnect", help="close the session's connection").add_argument("session")
    c = sub.add_parser("cancel-orders", help="cancel every open order of a session or of an account")
    which = c.add_mutually_exclusive_group(required=True)
    which.add_argument("--session")
    which.add_argument("--account")
    m = sub.add_parser("move-session", help="move a session to another group: drained here (logged out, its "
                                           "open orders canceled), handed over, served by that group's gateway")
    m.add_argument("session")
    m.add_argument("--to", required=True, help="the session group that will serve it")
    m.add_argument("--to-url", required=True, help="the http_port of that group's active gateway")
    m.add_argument("--timeout", type=float, default=30, help="seconds the drain may take (30)")
    return p


def request_of(args: argparse.Namespace) -> tuple[str, str, dict[str, Any] | None]:
    if args.command == "sessions":
        return "GET", "/admin/sessions", None
    if args.command in ("next-sender", "next-target"):
        return "POST", f"/admin/sessions/{args.session}/{args.command}", {"seq": args.seq}
    if args.command == "logout":
        return "POST", f"/admin/sessions/{args.session}/logout", {"text": args.text}
    if args.command == "move-session":
        return "POST", f"/admin/sessions/{args.session}/release", {"to": args.to, "timeout": args.timeout}
    if args.command == "cancel-orders":
        if args.account is not None:
            return "POST", f"/admin/accounts/{args.account}/cancel-orders", {}
        return "POST", f"/admin/sessions/{args.session}/cancel-orders", {}
    return "POST", f"/admin/sessions/{args.session}/{args.command}", {}


def receiving_problem(args: argparse.Namespace) -> str | None:
    """Before a move changes anything: is the receiving gateway active, and does it list the
    session in group ``--to``? (Released to a gateway that cannot adopt it, the session would be
    served nowhere until one can.)"""
    try:
        status, answer = call(args.to_url, token_from(args), "GET", "/admin/sessions")
    except (OSError, ValueError) as exc:
        return f"the receiving gateway at {args.to_url} does not answer: {exc}"
    if status != 200:
        return f"the receiving gateway at {args.to_url}: {answer.get('error', answer)} (HTTP {status})"
    listed = [s for s in answer.get("sessions", []) if s.get("name") == args.session]
    if not listed or str(listed[0].get("session", "")).split("/")[1:2] != [args.to]:
        return (f"the gateway at {args.to_url} does not list {args.session} in group {args.to}: add it to its "
                f"configuration with group = \"{args.to}\" and move_target = true")
    return None


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    method, path, body = request_of(args)
    if args.command == "move-session":
        problem = receiving_problem(args)
        if problem is not None:
            print(f"fixgw-admin: not moved: {problem}", file=sys.stderr)
            return 1
    try:
        status, answer = call(args.url, token_from(args), method, path, body)
    except (OSError, ValueError) as exc:
        print(f"fixgw-admin: could not ask the gateway at {args.url}: {exc}", file=sys.stderr)
        return 2
    if status != 200:
        print(f"fixgw-admin: {answer.get('error', answer)} (HTTP {status})", file=sys.stderr)
        return 1
    if args.command == "move-session":  # released here: now the new group's gateway takes it
        try:
            status, adopted = call(args.to_url, token_from(args), "POST", f"/admin/sessions/{args.session}/adopt", {})
        except (OSError, ValueError) as exc:
            print(f"fixgw-admin: released, but could not ask the gateway at {args.to_url} to adopt it: {exc}; "
                  "run the same command again once it answers", file=sys.stderr)
            return 2
        if status != 200:
            print(f"fixgw-admin: released, but the gateway at {args.to_url} refused it: "
                  f"{adopted.get('error', adopted)} (HTTP {status}); run the same command again", file=sys.stderr)
            return 1
        answer = {"before": answer.get("before"), "after": {**answer.get("after", {}), **adopted.get("after", {})}}
    if args.json:
        print(json.dumps(answer, indent=2))
    elif args.command == "sessions":
        print(table(answer["sessions"]))
    else:
        print(f"{args.command}: done; before {json.dumps(answer.get('before'))}, after {json.dumps(answer.get('after'))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
