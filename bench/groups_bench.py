"""Order entry on one session group against two: the same total flow, the same four sessions.

One group: one gateway process serves CLIENT1..CLIENT4 (pinned to the first CPU, as ``fixgw up``
pins it). Two groups: ``a`` serves CLIENT1-2 and ``b`` CLIENT3-4, each a gateway process of its
own, pinned to a CPU of its own (docs/architecture.md, session groups). Around them, as
``fixgw up`` runs them: the embedded Valkey (on the CPUs the gateways leave: none left with two
gateways on two cores, so it floats) and a conductor per partition writing reports straight
into the inboxes. Four load generators, one per session, each its own process (the e2e bench's
raw FIX client): each sends ``--orders``/4 as fast as the socket takes them (throughput), then
``--rate``/4 per second for ``--seconds`` (latency: send → first report, the four merged).

Printed: orders/s and p50/p99 for each layout, the ratio two groups / one, and the CPU each
process spent per order. On a two-core machine the two gateways share the cores with Valkey,
the cells and the load generators: the ratio is bounded by them (the CPU table says where the
cores went), not by the gateway tier, which is what groups spread.

    .venv/bin/python bench/groups_bench.py [--orders 4000] [--rate 1000] [--seconds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from datastore.embedded import free_port  # noqa: E402
from datastore.settings import read_toml  # noqa: E402
from fixgw.cli import DEFAULT_CONFIG, embedded_server  # noqa: E402
from tests.gateway_helpers import GatewayProc  # noqa: E402
from tests.system_helpers import System  # noqa: E402

SESSIONS = ["CLIENT1", "CLIENT2", "CLIENT3", "CLIENT4"]
LOAD_CLIENT = ROOT / "bench" / "loadclient.py"  # the load generator (one process per session)


def sessions_toml(names: list[str], group: str | None) -> str:
    return "".join(f'\n[[gateway.session]]\nname = "{n}"\n' + (f'group = "{group}"\n' if group else "") for n in names)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def load(ports: dict[str, int], orders: int, rate: float, seconds: float) -> dict[str, Any]:
    """The four load generators at once; their results merged."""
    procs = [subprocess.Popen([sys.executable, str(LOAD_CLIENT), str(ports[name]), "--sender", name,
                               "--orders", str(orders // len(SESSIONS)), "--rate", str(rate / len(SESSIONS)),
                               "--seconds", str(seconds)], stdout=subprocess.PIPE, text=True)
             for name in SESSIONS]
    results = []
    for p in procs:
        out, _ = p.communicate(timeout=600)
        if p.returncode != 0:
            raise SystemExit(f"a load generator failed (exit {p.returncode})")
        results.append(json.loads(out.strip().splitlines()[-1]))
    latencies = sorted(1000 * (got - sent) for r in results for sent, got in r["wall"].values())
    # every order of the four bursts, from the first sent until the last answered
    span = max(r["burst"][1] for r in results) - min(r["burst"][0] for r in results)
    return {"throughput": orders // len(SESSIONS) * len(SESSIONS) / span,
            "p50_ms": statistics.median(latencies), "p99_ms": latencies[int(len(latencies) * 0.99) - 1],
            "answered": sum(r["answered"] for r in results), "paced": sum(r["paced"] for r in results)}


def run(layout: str, args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, float]]:
    cpus = sorted(os.sched_getaffinity(0))
    two = layout == "two groups"
    pinned = set(cpus[:2]) if two else {cpus[0]}
    tmp = Path(tempfile.mkdtemp(prefix="fixgw-groups-"))
    with embedded_server(read_toml(DEFAULT_CONFIG), pinned) as server:
        first = SESSIONS[:2] if two else SESSIONS
        system = System(tmp, server, [server, server], sessions=sessions_toml(first, "a" if two else None),
                        gateway_lines=f'cpu_affinity = [{cpus[0]}]')
        system.instruments.write_text((ROOT / "config" / "instruments.toml").read_text())
        second: GatewayProc | None = None
        if two:
            second = GatewayProc(tmp, server.url, name="gateway-b", fix_port=free_port(), mode="gateway",
                                 namespace="e2e", sessions=sessions_toml(SESSIONS[2:], "b"), lock_ttl="2s",
                                 renewal="500ms", extra=system.gateway_extra,
                                 gateway_lines=f'cpu_affinity = [{cpus[-1]}]')
        try:
            if second is not None:
                second.start().wait_active(60)
            system.start()
            ports = {name: system.fix_port for name in SESSIONS}
            if second is not None:
                ports.update({name: second.fix_port for name in SESSIONS[2:]})
            procs = {"gateway a" if two else "gateway": system.gateway.proc.pid,  # type: ignore[union-attr]
                     "valkey": server.proc.pid}
            if second is not None:
                procs["gateway b"] = second.proc.pid  # type: ignore[union-attr]
            for (role, p), cell in system.cells.items():
                procs[f"{role} {p}"] = cell.proc.pid  # type: ignore[union-attr]
            load(ports, 200, 100, 1)  # every session logged on and warm
            before = {name: cpu_seconds(pid) for name, pid in procs.items()}
            result = load(ports, args.orders, args.rate, args.seconds)
            orders = args.orders + result["paced"]
            cpu = {name: 1000 * (cpu_seconds(pid) - before[name]) / orders for name, pid in procs.items()}
            return result, cpu
        finally:
            if second is not None:
                second.stop()
            system.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--orders", type=int, default=4000)
    ap.add_argument("--rate", type=float, default=1000)
    ap.add_argument("--seconds", type=float, default=5)
    args = ap.parse_args()
    rows = {layout: run(layout, args) for layout in ("one group", "two groups")}
    print(f"\n4 sessions, 4 load generators; {args.orders} orders for throughput, {args.rate:.0f}/s in all for "
          f"{args.seconds:.0f}s for latency (send → first report)\n")
    print(f"{'':12} {'orders/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'answered':>10}")
    for layout, (r, _) in rows.items():
        print(f"{layout:12} {r['throughput']:9.0f} {r['p50_ms']:8.2f} {r['p99_ms']:8.2f} {r['answered']:>5}/{r['paced']}")
    one, two = rows["one group"][0], rows["two groups"][0]
    print(f"{'two / one':12} {two['throughput'] / one['throughput']:8.2f}× {two['p50_ms'] / one['p50_ms']:7.2f}× "
          f"{two['p99_ms'] / one['p99_ms']:7.2f}×")
    print("\nCPU per order (ms), by process (the load generators not counted):")
    names = sorted({n for _, cpu in rows.values() for n in cpu})
    print(f"  {'':12} " + " ".join(f"{n:>10}" for n in names) + f" {'all':>8}")
    for layout, (_, cpu) in rows.items():
        print(f"  {layout:12} " + " ".join(f"{cpu[n]:10.3f}" if n in cpu else f"{'':>10}" for n in names)
              + f" {sum(cpu.values()):8.3f}")
    print(f"\n(machine: {os.cpu_count()} CPUs; gateways pinned apart in the two-group layout, Valkey and the cells "
          "float: on two cores the cells, Valkey and the load generators bound the ratio)")


if __name__ == "__main__":
    main()
