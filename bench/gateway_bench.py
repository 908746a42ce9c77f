"""Gateway throughput on the Redis store vs the same acceptor on QuickFIX's MemoryStore,
and takeover time (SIGKILL of the active gateway → the standby accepting logons).

Both acceptors run the AT behaviour (each NewOrderSingle is echoed back), neither keeps QuickFIX's
message log (``message_log = false``: the baseline has none), so every inbound
order costs one outbound message. The client is a separate process that logs on, sends
``--orders`` NewOrderSingles as fast as the socket takes them and reads every echo.

    .venv/bin/python bench/gateway_bench.py [--orders 5000]
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

from matching.config import tune_gc  # noqa: E402
from sessionstore.embedded import free_port, standalone  # noqa: E402
from tests.gateway_helpers import GatewayProc, wait_until  # noqa: E402
from tools.fixat import RawSession, fix_time  # noqa: E402


def serve_memory(port: int) -> None:
    """The baseline acceptor: the same behaviour, QuickFIX's MemoryStore, no Redis."""
    tune_gc()  # the same process tuning as the gateway's (fixgw gateway)
    import quickfix as fix

    from fixgw.at import AcceptanceBehaviour
    from fixgw.config import GatewaySettings
    from fixgw.fixmsg import from_text, inbound

    settings = GatewaySettings(mode="gateway", port=port, http_port=0,
                               session=[{"name": "CLIENT1", "begin_string": "FIX.4.4"}])
    behaviour = AcceptanceBehaviour()
    cfg = settings.session[0]

    class SendAtOnce:  # the gateway's intake answers after a group commit; here, at once
        def answer(self, sid, delivery): fix.Session.sendToTarget(from_text(delivery.text), sid)  # noqa: E704

    behaviour.start(SimpleNamespace(application=SimpleNamespace(intake=SendAtOnce())))

    class App(fix.Application):  # type: ignore[misc]
        def onCreate(self, s): return None  # noqa: E704,N802
        def onLogon(self, s): return None  # noqa: E704,N802
        def onLogout(self, s): return None  # noqa: E704,N802
        def toAdmin(self, m, s): return None  # noqa: E704,N802
        def toApp(self, m, s): return None  # noqa: E704,N802
        def fromAdmin(self, m, s): return None  # noqa: E704,N802
        def fromApp(self, m, s): behaviour.on_app_message(inbound(m), s, cfg)  # noqa: E704,N802

    path = Path(tempfile.mkdtemp()) / "qf.cfg"
    path.write_text(settings.quickfix_settings(path.parent / "store"))
    qs = fix.SessionSettings(str(path))
    acceptor = fix.ThreadedSocketAcceptor(App(), fix.MemoryStoreFactory(), qs)
    acceptor.start()
    print("ready", flush=True)
    signal.sigwait([signal.SIGTERM])
    os._exit(0)


def client(port: int, orders: int) -> None:
    """Logon, send every order, read every echo; print the rate of echoes (outbound messages)."""
    session = RawSession(port)
    send, conn = session.send, session.conn
    send("35=A\x0198=0\x01108=30\x01141=Y")
    assert conn.read_message(10) is not None
    started = time.perf_counter()
    for i in range(orders):
        send(f"35=D\x0111=O{i}\x0155=ACME\x0154=1\x0140=2\x0144=10\x0138=1\x0160={fix_time().decode()}")
    got = 0
    while got < orders:
        msg = conn.read_message(30)
        assert msg is not None
        if b"\x0135=D\x01" in msg:
            got += 1
    print(f"{orders / (time.perf_counter() - started):.1f}", flush=True)


def run_client(port: int, orders: int) -> float:
    out = subprocess.run([sys.executable, __file__, "--client", str(port), "--orders", str(orders)],
                         capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


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
    ap.add_argument("--client", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--serve-memory", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.client:
        return client(args.client, args.orders)
    if args.serve_memory:
        return serve_memory(args.serve_memory)

    tmp = Path(tempfile.mkdtemp(prefix="fixgw-bench-"))
    mem_port = free_port()
    mem = subprocess.Popen([sys.executable, __file__, "--serve-memory", str(mem_port)], stdout=subprocess.PIPE,
                           text=True)
    assert mem.stdout is not None and mem.stdout.readline().strip() == "ready"
    try:
        memory_rate = run_client(mem_port, args.orders)
    finally:
        mem.terminate()
    rows = []
    for fsync in ("everysec", "always"):
        with standalone(aof=True, appendfsync=fsync) as server:
            gw = GatewayProc(tmp, server.url, name=f"gw-{fsync}", fix_port=free_port(), mode="at",
                             lock_ttl="10s", renewal="2s", extra="message_log = false",
                             sessions='[[gateway.session]]\nname = "CLIENT1"\n')
            gw.start().wait_active(60)
            try:
                rows.append((f"redis store, appendfsync={fsync}", run_client(gw.fix_port, args.orders)))
            finally:
                gw.stop()
    with standalone() as server:
        takeovers = [(ttl, takeover_seconds(tmp, server.url, ttl, renewal))
                     for ttl, renewal in (("2s", "500ms"), ("5s", "1s"))]
    print(f"\n{args.orders} NewOrderSingle in, {args.orders} echoes out; client in a separate process\n")
    print(f"{'acceptor':40} {'out msg/s':>10} {'vs memory':>10} {'added µs/msg':>13}")
    print(f"{'QuickFIX MemoryStore (baseline)':40} {memory_rate:10.0f} {'1.00x':>10} {'-':>13}")
    for name, rate in rows:
        added = (1 / rate - 1 / memory_rate) * 1e6
        print(f"{name:40} {rate:10.0f} {rate / memory_rate:9.2f}x {added:13.0f}")
    print("\nadded µs/msg: what the Redis store adds per echo (group commits of echoes, coalesced inbound numbers).")
    for ttl, secs in takeovers:
        print(f"takeover (SIGKILL → standby accepts a logon), lockTtl={ttl}: {secs:.2f} s")


if __name__ == "__main__":
    main()
