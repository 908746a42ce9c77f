"""``fixgw-inspect``: read-only inspection of FIX sessions stored in Redis (seed 004 format).

Where seed 004's redis-cli loops print field lengths, this decodes: state fields with
their raw widths, stored messages with SOH shown as ``|``. Works against standalone,
Sentinel or Cluster (every primary is scanned). Never writes. A corrupt field is
reported (key, field, problem) and the listing goes on; the exit status is 1 then.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from redis.exceptions import RedisError

from datastore.connection import RedisClient, connect, hash_of_bytes, is_cluster, text_or_none
from datastore.settings import ConfigError, RedisEndpoint, describe
from sessionstore.codec import (
    STATE_ATTRS,
    STATE_WIDTHS,
    StoreCorruption,
    decode_record,
    decode_state,
    encode_seq_field,
    fix_framing_problem,
)
from sessionstore.keys import CHUNK_SIZE, SessionKey, parse_key
from sessionstore.reader import audit_entries
from sessionstore.settings import load_session_store

PROGRESS_EVERY = 1000  # keys between progress lines on stderr


def iso(ns: int | None) -> str | None:
    if ns is None:
        return None
    return datetime.fromtimestamp(ns // 1_000_000_000, UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ns % 1_000_000_000:09d}Z"


def show_soh(raw: bytes) -> str:
    return raw.replace(b"\x01", b"|").decode("latin-1")


@dataclass
class Report:
    """What a command found, plus the problems it stepped over."""

    problems: list[dict[str, str]] = field(default_factory=list)

    def problem(self, key: str, fld: str, what: str) -> None:
        self.problems.append({"key": key, "field": fld, "problem": what})
        print(f"fixgw-inspect: {key} field {fld}: {what}", file=sys.stderr)


def scan(client: RedisClient, pattern: str) -> Iterator[str]:
    """SCAN every primary (all of a cluster's), with a progress line on stderr."""
    if is_cluster(client):
        nodes = [(n.name, n) for n in client.get_primaries()]  # type: ignore[union-attr]
    else:
        nodes = [("server", None)]
    seen = 0
    for name, node in nodes:
        it = (client.scan_iter(match=pattern, count=1000, target_nodes=node)
              if node is not None else client.scan_iter(match=pattern, count=1000))
        for key in it:
            seen += 1
            if seen % PROGRESS_EVERY == 0:
                print(f"\rscanning {name}: {seen} keys", end="", file=sys.stderr, flush=True)
            yield key.decode() if isinstance(key, bytes) else key
    if seen >= PROGRESS_EVERY:
        print(f"\rscanned {seen} keys{' ' * 20}", file=sys.stderr, flush=True)


def _state_or_problem(client: RedisClient, session: SessionKey, report: Report) -> tuple[dict[bytes, bytes], Any]:
    raw = hash_of_bytes(client.hgetall(session.state))
    try:
        return raw, decode_state(session.state, raw)
    except StoreCorruption as exc:
        report.problem(exc.key, exc.field, exc.problem)
        return raw, None


def cmd_sessions(client: RedisClient, args: argparse.Namespace, report: Report) -> Any:
    sessions = discover(client, args.namespace)
    rows: list[dict[str, Any]] = []
    for session in sorted(sessions, key=str):
        _, state = _state_or_problem(client, session, report)
        pipe = client.pipeline(transaction=False)
        for index in sorted(sessions[session]):
            pipe.hlen(session.chunk(index))
        count = sum(pipe.execute()) if sessions[session] else 0
        rows.append({
            "session": str(session),
            "senderSeqNum": state.sender_seq_num if state else None,
            "targetSeqNum": state.target_seq_num if state else None,
            "lastSentSeqNum": state.last_sent_seq_num if state else None,
            "messages": count,
            "sessionStartTime": iso(state.session_start_time) if state else None,
            "keptPeriods": [iso(start) or str(start) for start in kept_periods(client, session)],
        })
    if args.json:
        return {"sessions": rows, "problems": report.problems}
    header = (f"{'session':40} {'sender':>7} {'target':>7} {'lastSent':>8} {'stored':>7}  period began "
              "(sessionStartTime); ended periods kept")
    lines = [header] + [
        f"{r['session']:40} {_n(r['senderSeqNum']):>7} {_n(r['targetSeqNum']):>7} {_n(r['lastSentSeqNum']):>8}"
        f" {r['messages']:>7}  {r['sessionStartTime'] or 'unset'}"
        f"{'; kept: ' + ', '.join(map(str, r['keptPeriods'])) if r['keptPeriods'] else ''}" for r in rows]
    lines.append(f"{len(rows)} session(s)")
    return "\n".join(lines)


def _n(v: Any) -> str:
    return "?" if v is None else str(v)


def cmd_state(client: RedisClient, args: argparse.Namespace, report: Report) -> Any:
    session = session_named(client, args.session)
    raw = hash_of_bytes(client.hgetall(session.state))
    if not raw:
        report.problem(session.state, "-", "no such session (state key missing)")
        return {"session": str(session), "fields": [], "problems": report.problems} if args.json else ""
    fields = []
    for name_b, value in sorted(raw.items()):
        name = name_b.decode("ascii", "replace")
        entry: dict[str, Any] = {"field": name, "width": len(value), "raw": value.hex()}
        try:
            decoded = getattr(decode_state(session.state, {name_b: value}), STATE_ATTRS[name])
            entry["value"] = decoded
            if name.endswith("Time"):
                entry["iso"] = iso(decoded)
        except StoreCorruption as exc:
            report.problem(exc.key, exc.field, exc.problem)
            entry["error"] = exc.problem
        fields.append(entry)
    missing = [n for n in STATE_WIDTHS if n.encode() not in raw]
    if args.json:
        return {"session": str(session), "fields": fields, "defaults_used": missing, "problems": report.problems}
    lines = [f"{session.state}"]
    for f in fields:
        shown = f.get("iso") or f.get("value", f"<{f.get('error')}>")
        lines.append(f"  {f['field']:20} {str(shown):32} ({f['width']} bytes: {f['raw']})")
    for n in missing:
        lines.append(f"  {n:20} {'(missing: default)':32}")
    return "\n".join(lines)


def cmd_messages(client: RedisClient, args: argparse.Namespace, report: Report) -> Any:
    session = session_named(client, args.session)
    raw_state, state = _state_or_problem(client, session, report)
    if not raw_state and not client.exists(session.chunk(0)):
        report.problem(session.state, "-", "no such session (no state, no stored messages)")
    top = args.to if args.to is not None else (
        max(state.last_sent_seq_num, state.sender_seq_num - 1) if state else CHUNK_SIZE - 1)
    first = max(1, args.from_)
    rows: list[dict[str, Any]] = []
    for index in range(first // CHUNK_SIZE, top // CHUNK_SIZE + 1):
        key = session.chunk(index)
        for fld, value in sorted(hash_of_bytes(client.hgetall(key)).items()):
            try:
                rec = decode_record(key, fld, value)
            except StoreCorruption as exc:
                report.problem(exc.key, exc.field, exc.problem)
                continue
            if first <= rec.seq_num <= top:
                rows.append({"seq": rec.seq_num, "sendingTime": iso(rec.sending_time),
                             "msgType": rec.msg_type.decode("latin-1"), "body": show_soh(rec.body)})
    rows.sort(key=lambda r: r["seq"])
    if args.json:
        return {"session": str(session), "messages": rows, "problems": report.problems}
    lines = [f"{r['seq']:>7}  {r['sendingTime']}  {r['msgType']:>2}  {r['body']}" for r in rows]
    lines.append(f"{len(rows)} message(s), {len(report.problems)} problem(s)")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="fixgw-inspect", description=__doc__.splitlines()[0])
    where = p.add_argument_group("datastore (one of)")
    where.add_argument("--url", help="standalone: redis://host:port/db")
    where.add_argument("--sentinels", help="comma-separated host:port of Sentinels (with --sentinel-group)")
    where.add_argument("--sentinel-group", help="Sentinel group name")
    where.add_argument("--nodes", help="comma-separated cluster seed nodes host:port")
    where.add_argument("--config", help="TOML file: use its [session_store] settings (default, when no other "
                       "datastore option is given: config/fixgw.toml, the file `fixgw up` runs with)")
    p.add_argument("--password-env", help="environment variable holding the password")
    p.add_argument("--json", action="store_true", help="print JSON")
    # --json also after the subcommand, where a user types it (SUPPRESS: keep the value set before)
    after = argparse.ArgumentParser(add_help=False)
    after.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print JSON")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("sessions", parents=[after], help="list sessions with sequence numbers and stored-message counts")
    s.add_argument("--namespace", help="only this namespace")
    s.set_defaults(func=cmd_sessions)
    st = sub.add_parser("state", parents=[after], help="decode one session's state fields")
    st.add_argument("session", help="namespace/gateway/name, or a session's name alone when only one has it")
    st.set_defaults(func=cmd_state)
    au = sub.add_parser("audit", parents=[after], help="prove each session's store is whole (exit 1 on any problem)")
    au.add_argument("sessions", nargs="*", help="namespace/gateway/name (default: every session found)")
    au.add_argument("--namespace", help="only this namespace (when no session is named)")
    au.set_defaults(func=cmd_audit)
    m = sub.add_parser("messages", parents=[after], help="decode one session's stored outbound messages")
    m.add_argument("session", help="namespace/gateway/name, or a session's name alone when only one has it")
    m.add_argument("--from", dest="from_", type=int, default=1, help="first seqNum (default 1)")
    m.add_argument("--to", type=int, default=None, help="last seqNum (default lastSentSeqNum)")
    m.set_defaults(func=cmd_messages)
    al = sub.add_parser("admin-log", parents=[after], help="the operators' actions on the sessions (fixgw-admin)")
    al.add_argument("--namespace", help="the namespace (default: the configuration's, else every one found)")
    al.add_argument("--count", type=int, default=50, help="how many of the last actions (default 50)")
    al.set_defaults(func=cmd_admin_log)
    return p


def cmd_admin_log(client: RedisClient, args: argparse.Namespace, report: Report) -> Any:
    """The audit stream of each namespace (``{namespace}/admin-audit``), oldest first."""
    namespaces = [args.namespace] if args.namespace else sorted({s.namespace for s in discover(client, None)})
    rows = [dict(entry, namespace=ns) for ns in namespaces for entry in audit_entries(client, ns, args.count)]
    if args.json:
        return {"actions": rows}
    lines = [f"{'when (UTC)':24} {'operator':12} {'action':14} {'session':32} outcome / before → after"]
    for r in rows:
        when = iso(int(r["at"]) * 1_000_000) or r["at"]
        lines.append(f"{when[:23]:24} {r['operator']:12} {r['action']:14} {r['session']:32} {r['outcome']}; "
                     f"{r['params']} {r['before']} → {r['after']}")
    lines.append(f"{len(rows)} action(s)")
    return "\n".join(lines)


def session_named(client: RedisClient, text: str, found: dict[SessionKey, set[int]] | None = None) -> SessionKey:
    """``namespace/gateway/name``, or a name alone (``CLIENT1``) when exactly one stored session has it."""
    if "/" in text:
        return SessionKey.parse(text)
    matches = sorted((s for s in (found if found is not None else discover(client, None)) if s.name == text), key=str)
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise ConfigError(f"no stored session is named {text!r} (`fixgw-inspect sessions` lists them)")
    raise ConfigError(f"{text!r} names {len(matches)} sessions ({', '.join(map(str, matches))}): write "
                      "namespace/gateway/name")


def discover(client: RedisClient, namespace: str | None) -> dict[SessionKey, set[int]]:
    """Every session with a key in the datastore, and its stored chunk indexes."""
    prefix = f"{{{namespace}/" if namespace else "{"
    sessions: dict[SessionKey, set[int]] = {}
    for key in scan(client, prefix.replace("[", "\\[") + "*"):
        parsed = parse_key(key)
        if parsed is None:
            continue
        session, suffix = parsed
        chunks = sessions.setdefault(session, set())
        if suffix.startswith("store/") and suffix[6:].isdigit():
            chunks.add(int(suffix[6:]))
    return sessions


def kept_periods(client: RedisClient, session: SessionKey) -> list[int]:
    """The starts (ns) of the ended periods whose messages are kept (``keep_periods``)."""
    starts = set()
    for key in client.scan_iter(match=session.tag.replace("[", "\\[") + "/period/*", count=1000):
        parts = (key.decode() if isinstance(key, bytes) else key).split("/period/", 1)[1].split("/")
        if parts[0].isdigit():
            starts.add(int(parts[0]))
    return sorted(starts)


def ranges(numbers: list[int]) -> str:
    """``[1, 2, 3, 7]`` → ``1-3, 7``."""
    out: list[str] = []
    for n in sorted(numbers):
        if out and out[-1].split("-")[-1] == str(n - 1):
            out[-1] = f"{out[-1].split('-')[0]}-{n}"
        else:
            out.append(str(n))
    return ", ".join(out)


def audit_session(client: RedisClient, session: SessionKey, chunks: set[int], report: Report) -> dict[str, Any]:
    """Is the session's store whole? See ``cmd_audit``."""
    before = len(report.problems)
    raw_state, state = _state_or_problem(client, session, report)
    if not raw_state:
        report.problem(session.state, "-", "no state hash: sequence numbers unknown")
    last = state.last_sent_seq_num if state else 0
    wanted = set(chunks) | set(range(0, last // CHUNK_SIZE + 1))
    stored: dict[int, bytes] = {}
    for index in sorted(wanted):
        key = session.chunk(index)
        for fld, value in hash_of_bytes(client.hgetall(key)).items():
            try:
                rec = decode_record(key, fld, value)
            except StoreCorruption as exc:
                report.problem(exc.key, exc.field, exc.problem)
                continue
            framing = fix_framing_problem(rec.body, rec.seq_num)
            if framing is not None:
                report.problem(key, str(rec.seq_num), f"stored message {framing}")
            stored[rec.seq_num] = rec.body
            if len(stored) % PROGRESS_EVERY == 0:
                print(f"\raudit {session}: {len(stored)} messages", end="", file=sys.stderr, flush=True)
    if len(stored) >= PROGRESS_EVERY:
        print(file=sys.stderr)
    first = min(stored) if stored else None
    missing = [n for n in range(first, last + 1) if n not in stored] if first is not None else []
    if missing:
        report.problem(session.chunk_of(missing[0]), ranges(missing)[:200],
                       f"{len(missing)} sequence number(s) between {first} and lastSentSeqNum {last} have no "
                       "stored message: a resend request for them cannot be answered")
    if last and first is None:
        report.problem(session.chunk(0), "-", f"lastSentSeqNum is {last} but no message is stored")
    owner, counter = text_or_none(client.get(session.owner)), text_or_none(client.get(session.gateway_key.epoch))
    if owner is not None:
        if not owner.isdigit():
            report.problem(session.owner, "-", f"owner epoch {owner!r} is not a number")
        elif counter is None or int(owner) > int(counter):
            report.problem(session.owner, "-", f"owner epoch {int(owner)} is ahead of the gateway's epoch counter "
                                               f"{counter or 'none'}")
    exec_ids = {m.split(b"\x0117=", 1)[1].split(b"\x01", 1)[0] for m in stored.values() if b"\x0117=" in m}
    for seq_b, inbox_id in hash_of_bytes(client.hgetall(session.unsent)).items():
        seq = int(seq_b) if seq_b.isdigit() else -1
        # A live gateway may have committed it after the chunks were read: look again, now.
        if seq not in stored and (seq < 0 or client.hget(session.chunk_of(seq), encode_seq_field(seq)) is None):
            report.problem(session.unsent, seq_b.decode("latin-1"), "marks a number committed ahead of sending that "
                                                                    "has no stored message")
        elif seq in stored and b"\x0117=" in stored[seq] and inbox_id and inbox_id not in exec_ids:
            report.problem(session.unsent, seq_b.decode("latin-1"), f"points to inbox entry {inbox_id!r}, the stored "
                                                                    "message carries another ExecID")
    since_ms = (state.session_start_time or 0) // 1_000_000 if state else 0
    delivered = [m for m in client.zrangebyscore(session.inbox, since_ms, "+inf")]
    return {"session": str(session), "first": first, "lastSent": last, "stored": len(stored), "missing": len(missing),
            "deliveredThisSession": len(delivered),
            "deliveredAsExecID": sum(1 for m in delivered if m in exec_ids),
            "problems": len(report.problems) - before}


def cmd_audit(client: RedisClient, args: argparse.Namespace, report: Report) -> Any:
    """Read-only proof that each session's store is whole: every number from the first stored
    one to lastSentSeqNum has a record that decodes, agrees with its field and with its own
    length, and holds a FIX message whose MsgSeqNum, BodyLength and CheckSum are right; the
    state decodes; the owner epoch is not ahead of the gateway's epoch counter; every number
    marked as committed-ahead-of-sending is stored. Also counted (not a problem: a cancel
    reject carries no ExecID): events delivered this session whose ExecID is stored."""
    found = discover(client, args.namespace)
    names = [session_named(client, s, found) for s in args.sessions] or sorted(found, key=str)
    rows = [audit_session(client, s, found.get(s, set()), report) for s in names]
    if args.json:
        return {"sessions": rows, "problems": report.problems, "whole": not report.problems}
    header = f"{'session':40} {'first':>6} {'lastSent':>8} {'stored':>7} {'missing':>7} {'problems':>8}"
    lines = [header] + [f"{r['session']:40} {_n(r['first']):>6} {r['lastSent']:>8} {r['stored']:>7} {r['missing']:>7}"
                        f" {r['problems']:>8}" for r in rows]
    verdict = "whole" if not report.problems else f"{len(report.problems)} problem(s), listed above on stderr"
    lines.append(f"{len(rows)} session(s) audited: {verdict}")
    return "\n".join(lines)


def endpoint_from(args: argparse.Namespace) -> RedisEndpoint:
    if not (args.config or args.url or args.nodes or args.sentinels):
        args.config = str(default_config())
    if args.config:
        settings = load_session_store(args.config)
        print(f"fixgw-inspect: the session store of {args.config} ({settings.address})", file=sys.stderr)
        return settings
    data: dict[str, Any] = {"passwordEnv": args.password_env}
    if args.url:
        data["url"] = args.url
    if args.nodes:
        data["nodes"] = args.nodes.split(",")
    if args.sentinels:
        data["sentinels"] = args.sentinels.split(",")
        data["sentinelGroup"] = args.sentinel_group
    try:
        return RedisEndpoint(**data)
    except ValidationError as exc:
        raise ConfigError(describe(exc, "options")) from None


def default_config() -> Path:
    """The file ``fixgw up`` runs with: ./config/fixgw.toml where the user stands, else the
    one beside the installed package."""
    here = Path("config/fixgw.toml")
    return here if here.is_file() else Path(__file__).resolve().parent.parent / "config" / "fixgw.toml"


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        client = connect(endpoint_from(args), client_name="fixgw-inspect")
        report = Report()
        result = args.func(client, args, report)
    except (ConfigError, ValueError) as exc:
        print(f"fixgw-inspect: {exc}", file=sys.stderr)
        return 2
    except RedisError as exc:
        print(f"fixgw-inspect: cannot read from Redis: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result, indent=2))
    elif result:
        print(result)
    return 1 if report.problems else 0


if __name__ == "__main__":
    sys.exit(main())
