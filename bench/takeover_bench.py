"""Takeover time with millions of stored messages: a warm standby against one that reads every
session whole when it takes over.

Several sessions' histories (2 million stored ExecutionReports in all, seed 004's format) are
loaded straight into an embedded Valkey. Then, for each kind of standby, in the same run: an
active gateway and a standby (``fixgw gateway`` processes) on that datastore; once the standby is
waiting (the warm one: once its copy holds everything), the active one is SIGKILLed and a client
tries to log on every 10 ms. Printed: from the kill to the first Logon answered, beside
``lockTtl``; the part after the lock expired (what the standby itself takes: the lock's
remaining time is read at the kill); and, after the takeover, a resend of the oldest stored
report and of the most recent one compared with what Redis holds.

    .venv/bin/python bench/takeover_bench.py [--messages 2000000] [--sessions 4] [--lock-ttl 5s]
"""

from __future__ import annotations

import argparse
import socket
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from datastore.connection import connect  # noqa: E402
from datastore.embedded import free_port, standalone  # noqa: E402
from datastore.settings import RedisEndpoint  # noqa: E402
from fixgw.fixat import RawSession  # noqa: E402
from sessionstore import FixedEpoch, GatewayKey, SessionKey, SessionStore  # noqa: E402
from sessionstore.keys import chunk_index  # noqa: E402
from tests.gateway_helpers import GatewayProc, body_without, fields, http_json  # noqa: E402
from tests.store_helpers import store_history  # noqa: E402

VOLATILE = {"43", "122", "52", "9", "10"}  # what a resend changes (PossDup, times, length, checksum)


def sessions_config(names: list[str]) -> str:
    return "".join(f'\n[[gateway.session]]\nname = "{n}"\nbegin_string = "FIX.4.4"\n' for n in names)


def load(client, names: list[str], total: int) -> dict[str, int]:  # type: ignore[no-untyped-def]
    """``total`` messages over the sessions, the first holding the most (4:3:2:1 for four)."""
    weights = list(range(len(names), 0, -1))
    counts = {n: total * w // sum(weights) for n, w in zip(names, weights)}
    counts[names[0]] += total - sum(counts.values())
    for n, count in counts.items():
        started = time.perf_counter()
        store_history(client, SessionKey("t", "fsg", n), count)
        print(f"  loaded {count:>9,} messages for {n} in {time.perf_counter() - started:5.1f} s", flush=True)
    return counts


def first_logon(port: int, name: str, seq: int, timeout: float) -> float:
    """Try to log on every 10 ms; the monotonic time the first Logon answer came."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            raw = RawSession(port, sender=name, seq=seq)
        except OSError:
            time.sleep(0.01)
            continue
        try:
            raw.send("35=A\x0198=0\x01108=30")
            reply = raw.read(timeout=5)
            if reply is not None and dict(fields(reply)).get("35") == "A":
                answered = time.monotonic()
                log_out(raw)
                return answered
        except OSError:
            pass
        finally:
            raw.close()
        time.sleep(0.01)
    raise SystemExit(f"no Logon answered within {timeout} s")


def log_out(raw: RawSession) -> None:
    """Logout, and wait for the gateway's (so the next Logon finds the session free)."""
    raw.send("35=5")
    while (msg := raw.read(timeout=5)) is not None:
        if dict(fields(msg)).get("35") == "5":
            return


def resend(port: int, name: str, seq: int, wanted: int) -> bytes:
    raw = RawSession(port, sender=name, seq=seq)
    try:
        raw.send("35=A\x0198=0\x01108=30")
        raw.read()
        raw.send(f"35=2\x017={wanted}\x0116={wanted}")
        while True:
            msg = raw.read()
            if msg is None:
                raise SystemExit(f"no resend of {wanted}")
            if dict(fields(msg)).get("34") == str(wanted):
                log_out(raw)
                return msg
    finally:
        raw.close()


def stored_count(client, names: list[str]) -> int:  # type: ignore[no-untyped-def]
    """How many messages the sessions hold in Redis (every chunk's HLEN)."""
    total = 0
    for n in names:
        key = SessionKey("t", "fsg", n)
        last = SessionStore(client, FixedEpoch(0)).load_state(key).last_sent_seq_num
        pipe = client.pipeline(transaction=False)
        for i in range(chunk_index(last) + 1):
            pipe.hlen(key.chunk(i))
        total += sum(pipe.execute())
    return total


def copy_holds(standby: GatewayProc) -> int:
    try:
        problem = http_json(standby.http_port)[1]["problems"][0]
    except (OSError, KeyError, IndexError):
        return -1
    return int(problem.split("holds ")[1].split(" ")[0]) if "local copy holds" in problem else -1


def takeover(tmp: Path, url: str, names: list[str], lock_ttl: str, warm: bool) -> tuple[float, float]:
    """One active, one standby (warm or not); SIGKILL the active one. (kill → first Logon
    answered, lock expiry → first Logon answered), in seconds."""
    port = free_port()
    lines = f'standby_poll = "{"100ms" if warm else "0s"}"\nmessage_log = false'
    common = dict(fix_port=port, sessions=sessions_config(names), lock_ttl=lock_ttl, renewal="1s",
                  gateway_lines=lines)
    kind = "warm" if warm else "cold"
    active = GatewayProc(tmp, url, name=f"{kind}-a", **common).start()  # type: ignore[arg-type]
    active.wait_active(timeout=600)
    standby = GatewayProc(tmp, url, name=f"{kind}-b", **common).start()  # type: ignore[arg-type]
    client = connect(RedisEndpoint(url=url))
    try:
        standby.wait_http(timeout=60)
        if warm:
            started = time.monotonic()
            while copy_holds(standby) < stored_count(client, names):
                if time.monotonic() - started > 600:
                    raise SystemExit("the standby's copy did not catch up within 600 s")
                time.sleep(0.2)
            print(f"  {kind}: the standby's copy caught up with {copy_holds(standby):,} messages in "
                  f"{time.monotonic() - started:.1f} s (while waiting)", flush=True)
        else:
            time.sleep(2)
        target = SessionStore(client, FixedEpoch(0)).load_state(SessionKey("t", "fsg", names[-1])).target_seq_num
        active.kill()
        killed = time.monotonic()
        remaining_ms = int(client.pttl(GatewayKey("t", "fsg").lock))
        expiry = killed + max(remaining_ms, 0) / 1000
        answered = first_logon(port, names[-1], target, timeout=600)
        standby.wait_active(timeout=60)
        # the oldest stored report and the newest application message, resent as Redis holds them
        store = SessionStore(client, FixedEpoch(0))
        biggest = SessionKey("t", "fsg", names[0])
        state = store.load_state(biggest)
        first = next(store.iter_messages(biggest, 1, 1))
        recent = max(r for r in (state.last_sent_seq_num - i for i in range(10))
                     if next(store.iter_messages(biggest, r, r)).msg_type == b"8")
        for wanted, record in ((1, first), (recent, next(store.iter_messages(biggest, recent, recent)))):
            got = resend(port, names[0], store.load_state(biggest).target_seq_num, wanted)
            same = body_without(got, VOLATILE) == body_without(record.body, VOLATILE)
            print(f"  {kind}: resend of {names[0]} #{wanted} after the takeover: "
                  f"{'as stored' if same else 'DIFFERS from what Redis holds'}", flush=True)
        for line in standby.output().splitlines():
            if "took over in" in line or "older messages were loaded" in line:
                print(f"  {kind}: {line.split('fixgw.gateway')[-1].strip(': ')}", flush=True)
        return answered - killed, answered - expiry
    finally:
        active.kill()
        standby.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=2_000_000)
    parser.add_argument("--sessions", type=int, default=4)
    parser.add_argument("--lock-ttl", default="5s")
    args = parser.parse_args()
    names = [f"H{i + 1}" for i in range(args.sessions)]
    socket.setdefaulttimeout(10)
    with standalone() as server, tempfile.TemporaryDirectory() as tmp:
        client = connect(RedisEndpoint(url=server.url))
        print(f"loading {args.messages:,} stored messages over {len(names)} sessions", flush=True)
        load(client, names, args.messages)
        used = int(client.info("memory")["used_memory"])
        print(f"  datastore: {used / 2**20:,.0f} MiB used", flush=True)
        results = {}
        for warm in (False, True):
            results[warm] = takeover(Path(tmp), server.url, names, args.lock_ttl, warm)
        (cold_total, cold_after), (warm_total, warm_after) = results[False], results[True]
        print()
        print(f"{'standby':<34}{'kill → first Logon':>20}{'lock expiry → Logon':>22}")
        print(f"{'reads every session at takeover':<34}{cold_total:>19.2f}s{cold_after:>21.2f}s")
        print(f"{'warm (standby_poll = 100ms)':<34}{warm_total:>19.2f}s{warm_after:>21.2f}s")
        print(f"lockTtl = {args.lock_ttl}; goal: kill → first Logon <= lockTtl + 1 s")
        print(f"after the lock expired: warm / cold = {warm_after / cold_after:.3f} "
              f"({warm_after:.2f} s vs {cold_after:.2f} s, {args.messages:,} stored messages)")


if __name__ == "__main__":
    main()
