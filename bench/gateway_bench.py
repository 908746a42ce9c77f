"""Gateway throughput on the Redis store vs the same acceptor on QuickFIX's MemoryStore,
and takeover time (SIGKILL of the active gateway → the standby accepting logons).

Both acceptors run the AT behaviour (each NewOrderSingle is echoed back), neither keeps QuickFIX's
message log (``message_log = false``: the baseline has none), so every inbound
order costs one outbound message. The client is a separate process that logs on, sends
``--orders`` NewOrderSingles as fast as the socket takes them and reads every echo.

    .venv/bin/python bench/gateway_bench.py [--orders 5000] [--sessions 1]

Both acceptors keep their threads on one CPU, as ``fixgw up`` runs the gateway (``cpu_affinity =
"auto"``); one more row shows the gateway with its threads left to the OS.

``--sessions N``: N sessions on each acceptor, a client process each, sending ``--orders / N``
each at the same moment; the rate is every echo over the slowest client's time (the gateway's
group commits of a cycle go in one round trip for every session).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from datastore.embedded import free_port, standalone  # noqa: E402
from fixgw.fixat import RawSession, fix_time  # noqa: E402
from matching.config import tune_gc  # noqa: E402
from tests.gateway_helpers import GatewayProc, wait_until  # noqa: E402


def session_names(count: int) -> list[str]:
    return [f"CLIENT{i + 1}" for i in range(count)]


def serve_memory(port: int, sessions: int) -> None:
    """The baseline acceptor: the same behaviour, QuickFIX's MemoryStore, no Redis."""
    tune_gc()  # the same process tuning as the gateway's (fixgw gateway)
    from fixgw.affinity import cpus_for, pin_threads

    pin_threads(cpus_for("auto"))  # and its threads on one CPU, as the gateway's (PINNED)
    import quickfix as fix

    from fixgw.at import AcceptanceBehaviour
    from fixgw.config import GatewaySettings
    from fixgw.fixmsg import from_text, inbound

    settings = GatewaySettings(mode="gateway", port=port, http_port=0,
                               session=[{"name": n, "begin_string": "FIX.4.4"} for n in session_names(sessions)])
    behaviour = AcceptanceBehaviour()
    configs = {cfg.session_id_text: cfg for cfg in settings.session}

    def send_at_once(sid, delivery, inbound_seq=None):  # the gateway's intake answers after a group commit
        fix.Session.sendToTarget(from_text(delivery.text), sid)

    behaviour.start(SimpleNamespace(answer=send_at_once))  # (the one part of a GatewayContext the echo uses)

    class App(fix.Application):  # type: ignore[misc]
        def onCreate(self, s): return None  # noqa: E704,N802
        def onLogon(self, s): return None  # noqa: E704,N802
        def onLogout(self, s): return None  # noqa: E704,N802
        def toAdmin(self, m, s): return None  # noqa: E704,N802
        def toApp(self, m, s): return None  # noqa: E704,N802
        def fromAdmin(self, m, s): return None  # noqa: E704,N802
        def fromApp(self, m, s): behaviour.on_app_message(inbound(m), s, configs[s.toString()])  # noqa: E704,N802

    path = Path(tempfile.mkdtemp()) / "qf.cfg"
    path.write_text(settings.quickfix_settings(path.parent / "store"))
    qs = fix.SessionSettings(str(path))
    acceptor = fix.ThreadedSocketAcceptor(App(), fix.MemoryStoreFactory(), qs)
    acceptor.start()
    print("ready", flush=True)
    signal.sigwait([signal.SIGTERM])
    os._exit(0)


# Orders per write. One write per message, thousands of them unread, made the kernel prune the
# acceptor's receive queue (``nstat``: TcpExtRcvPruned), drop segments and resend them after a
# timeout: the baseline ran at 5.5k–12k echoes/s from one run to the next, and about one run in
# five stalled outright (the acceptor blocked in send(), the client waiting 30 s for an echo).
# In writes of 50 (a client pipelining what it has queued): no segment pruned in 15 runs.
PIPELINE = 50
# Both acceptors' threads on one CPU, as `fixgw up` runs the gateway (fixgw/affinity.py); the last
# row shows the gateway with its threads left to the OS.
PINNED = 'cpu_affinity = "auto"'


def client(port: int, orders: int, name: str, go_at: float) -> None:
    """Logon, then at ``go_at`` (wall clock) send every order (``PIPELINE`` a write) and read
    every echo; print the seconds that took."""
    session = RawSession(port, sender=name)
    send, conn = session.send, session.conn
    send("35=A\x0198=0\x01108=30\x01141=Y")
    assert conn.read_message(10) is not None
    time.sleep(max(0.0, go_at - time.time()))
    started = time.perf_counter()
    for first in range(0, orders, PIPELINE):
        session.send_many([f"35=D\x0111=O{i}\x0155=ACME\x0154=1\x0140=2\x0144=10\x0138=1\x0160={fix_time().decode()}"
                           for i in range(first, min(orders, first + PIPELINE))])
    got = 0
    while got < orders:
        msg = conn.read_message(30)
        assert msg is not None
        if b"\x0135=D\x01" in msg:
            got += 1
    print(f"{time.perf_counter() - started:.6f}", flush=True)


def run_clients(port: int, orders: int, sessions: int) -> float:
    """Every session's client at once; echoes per second over the slowest one's time."""
    each = orders // sessions
    go_at = time.time() + 1.0 + 0.05 * sessions  # after every client has logged on
    procs = [subprocess.Popen([sys.executable, __file__, "--client", str(port), "--orders", str(each),
                               "--name", name, "--go-at", str(go_at)], stdout=subprocess.PIPE, text=True)
             for name in session_names(sessions)]
    seconds = []
    for proc in procs:
        out, _ = proc.communicate(timeout=300)
        if proc.returncode != 0:
            raise SystemExit(f"a client failed ({proc.returncode})")
        seconds.append(float(out.strip().splitlines()[-1]))
    return each * sessions / max(seconds)


def takeover_seconds(tmp: Path, url: str, ttl: str, renewal: str) -> float:
    port = free_port()
    active = GatewayProc(tmp, url, name=f"active-{ttl}", fix_port=port, lock_ttl=ttl, renewal=renewal,
                         namespace="takeover").start().wait_active(60)
    standby = GatewayProc(tmp, url, name=f"standby-{ttl}", fix_port=port, lock_ttl=ttl, renewal=renewal,
                          namespace="takeover").start()
    standby.wait_http()
    try:
        killed = time.perf_counter()
        active.kill()

        def logon_works() -> bool:
            try:
                session = RawSession(port)
            except OSError:
                return False
            try:
                session.send("35=A\x0198=0\x01108=30\x01141=Y")
                reply = session.read(5)
                return reply is not None and b"\x0135=A\x01" in reply
            except (OSError, TimeoutError):
                return False
            finally:
                session.close()

        wait_until(logon_works, "a logon on the standby", 120, every=0.02)
        return time.perf_counter() - killed
    finally:
        active.kill()
        standby.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--orders", type=int, default=5000)
    ap.add_argument("--sessions", type=int, default=1, help="sessions (and client processes) on each acceptor")
    ap.add_argument("--client", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--name", default="CLIENT1", help=argparse.SUPPRESS)
    ap.add_argument("--go-at", type=float, default=0.0, help=argparse.SUPPRESS)
    ap.add_argument("--serve-memory", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.client:
        return client(args.client, args.orders, args.name, args.go_at)
    if args.serve_memory:
        return serve_memory(args.serve_memory, args.sessions)

    tmp = Path(tempfile.mkdtemp(prefix="fixgw-bench-"))
    mem_port = free_port()
    mem = subprocess.Popen([sys.executable, __file__, "--serve-memory", str(mem_port), "--sessions",
                            str(args.sessions)], stdout=subprocess.PIPE, text=True)
    assert mem.stdout is not None and mem.stdout.readline().strip() == "ready"
    try:
        memory_rate = run_clients(mem_port, args.orders, args.sessions)
    finally:
        mem.terminate()
    rows = []
    for fsync, pinned in (("everysec", True), ("always", True), ("everysec", False)):
        with standalone(aof=True, appendfsync=fsync) as server:
            gw = GatewayProc(tmp, server.url, name=f"gw-{fsync}-{pinned}", fix_port=free_port(), mode="at",
                             lock_ttl="10s", renewal="2s", extra="message_log = false",
                             gateway_lines=PINNED if pinned else "",
                             sessions="".join(f'[[gateway.session]]\nname = "{n}"\n'
                                              for n in session_names(args.sessions)))
            gw.start().wait_active(60)
            try:
                name = f"redis store, appendfsync={fsync}" + ("" if pinned else ", threads not pinned")
                rows.append((name, run_clients(gw.fix_port, args.orders, args.sessions)))
            finally:
                gw.stop()
    with standalone() as server:
        takeovers = [(ttl, takeover_seconds(tmp, server.url, ttl, renewal))
                     for ttl, renewal in (("2s", "500ms"), ("5s", "1s"))]
    n = args.orders // args.sessions * args.sessions
    print(f"\n{n} NewOrderSingle in, {n} echoes out; {args.sessions} session(s), a client process each\n")
    print(f"{'acceptor':54} {'out msg/s':>10} {'vs memory':>10} {'added µs/msg':>13}")
    print(f"{'QuickFIX MemoryStore (baseline)':54} {memory_rate:10.0f} {'1.00x':>10} {'-':>13}")
    for name, rate in rows:
        added = (1 / rate - 1 / memory_rate) * 1e6
        print(f"{name:54} {rate:10.0f} {rate / memory_rate:9.2f}x {added:13.0f}")
    print("\nadded µs/msg: what the Redis store adds per echo (group commits of echoes, coalesced inbound numbers).")
    for ttl, secs in takeovers:
        print(f"takeover (SIGKILL → standby accepts a logon), lockTtl={ttl}: {secs:.2f} s")


if __name__ == "__main__":
    main()
