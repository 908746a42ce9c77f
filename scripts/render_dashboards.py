"""Renders each dashboard of deploy/grafana/ as an SVG picture in docs/dashboards/, from a real
run: `fixgw up` on free ports, a Prometheus server (Debian's `prometheus`) scraping every
process each second, orders flowing through two sessions for a while; then each panel's PromQL
is asked of Prometheus over the run and drawn.

    .venv/bin/python scripts/render_dashboards.py [--seconds 120]
"""

from __future__ import annotations

import argparse
import html
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from datastore.embedded import free_port  # noqa: E402
from fixgw.demo import DemoClient  # noqa: E402

OUT = ROOT / "docs" / "dashboards"
COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]
W, H = 560, 230  # one panel


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.loads(r.read())


def wait(condition: Any, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if condition():
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"timed out waiting for {what}")


def flow(port: int, directory: Path, stop: threading.Event) -> None:
    """Crossing pairs and resting orders through two sessions, ~40 requests a second."""
    c1, c2 = (DemoClient(directory, "127.0.0.1", port, name, "FIXGW") for name in ("CLIENT1", "CLIENT2"))
    for c in (c1, c2):
        c.initiator.start()
        c.wait(lambda c=c: c.logged_on, 20)
    i = 0
    while not stop.is_set():
        c1.order(f"s{i}", "2", "0.01", "40000.00", symbol="BTC-USD")
        c2.order(f"b{i}", "1", "0.01", "40000.00", symbol="BTC-USD")
        if i % 4 == 0:
            c1.order(f"r{i}", "2", "0.01", "60000.00", symbol="BTC-USD")
            c1.cancel(f"x{i}", f"r{i}", "2", symbol="BTC-USD")
        i += 1
        time.sleep(0.05)
    for c in (c1, c2):
        c.close()


def legend(template: str, labels: dict[str, str]) -> str:
    return re.sub(r"\{\{(\w+)\}\}", lambda m: labels.get(m.group(1), ""), template) or json.dumps(labels)


def panel_svg(x: int, y: int, title: str, series: list[tuple[str, list[tuple[float, float]]]], unit: str,
              start: float, end: float) -> str:
    out = [f'<g transform="translate({x},{y})">',
           f'<rect width="{W - 10}" height="{H - 10}" fill="#181b1f" stroke="#2c3235"/>',
           f'<text x="10" y="20" fill="#d8d9da" font-size="13" font-family="sans-serif">{html.escape(title)}</text>']
    points = [v for _, values in series for _, v in values]
    top = max(points, default=1.0)
    bottom = min(min(points, default=0.0), 0.0)
    span = (top - bottom) or 1.0
    px0, py0, pw, ph = 50, 35, W - 80, H - 95
    out.append(f'<text x="6" y="{py0 + 8}" fill="#8e8e8e" font-size="10" font-family="sans-serif">'
               f'{top:.3g}</text>')
    out.append(f'<text x="6" y="{py0 + ph}" fill="#8e8e8e" font-size="10" font-family="sans-serif">'
               f'{bottom:.3g}</text>')
    out.append(f'<line x1="{px0}" y1="{py0 + ph}" x2="{px0 + pw}" y2="{py0 + ph}" stroke="#444"/>')
    for i, (name, values) in enumerate(series[:8]):
        colour = COLOURS[i % len(COLOURS)]
        pts = " ".join(f"{px0 + (t - start) / (end - start) * pw:.1f},{py0 + ph - (v - bottom) / span * ph:.1f}"
                       for t, v in values)
        if pts:
            out.append(f'<polyline points="{pts}" fill="none" stroke="{colour}" stroke-width="1.5"/>')
        out.append(f'<text x="{px0 + (i % 2) * 250}" y="{py0 + ph + 18 + (i // 2) * 13}" fill="{colour}" '
                   f'font-size="10" font-family="sans-serif">{html.escape(name[:40])}</text>')
    if not points:
        out.append(f'<text x="{px0 + 10}" y="{py0 + ph / 2}" fill="#8e8e8e" font-size="11" '
                   'font-family="sans-serif">no data in this run</text>')
    out.append(f'<text x="{W - 60}" y="20" fill="#8e8e8e" font-size="10" font-family="sans-serif">{unit}</text>')
    out.append("</g>")
    return "\n".join(out)


def render(board: dict[str, Any], prometheus: str, start: float, end: float) -> str:
    panels = board["panels"]
    rows = (len(panels) + 1) // 2
    body = []
    for i, p in enumerate(panels):
        series = []
        for target in p["targets"]:
            q = urllib.parse.urlencode({"query": target["expr"], "start": start, "end": end, "step": 2})
            result = get_json(f"{prometheus}/api/v1/query_range?{q}")["data"]["result"]
            for r in result:
                values = [(float(t), float(v)) for t, v in r["values"] if v not in ("NaN", "+Inf", "-Inf")]
                series.append((legend(target.get("legendFormat", ""), r["metric"]), values))
        body.append(panel_svg((i % 2) * W + 10, (i // 2) * H + 40, p["title"], series,
                              p["fieldConfig"]["defaults"]["unit"], start, end))
    width, height = 2 * W + 20, rows * H + 50
    title = html.escape(board["title"])
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}">\n<rect width="100%" height="100%" fill="#111217"/>\n'
            f'<text x="12" y="26" fill="#d8d9da" font-size="17" font-family="sans-serif">{title} — rendered from a '
            f'run of fixgw up ({time.strftime("%Y-%m-%d", time.gmtime(start))}, {int(end - start)} s)</text>\n'
            + "\n".join(body) + "\n</svg>\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=int, default=120)
    args = parser.parse_args()
    binary = shutil.which("prometheus")
    if binary is None:
        raise SystemExit("needs Debian's prometheus package (make debian-tools installs it as root)")
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        shutil.copytree(ROOT / "config", tmp / "config")
        vport, fport, hport, pport = free_port(), free_port(), free_port(), free_port()
        config = tmp / "config" / "fixgw.toml"
        config.write_text(config.read_text().replace("6479", str(vport)))
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        log = tmp / "up.log"
        up = subprocess.Popen([sys.executable, "-m", "fixgw.cli", "up", "--config", "config/fixgw.toml",
                               "--fix-port", str(fport), "--http-port", str(hport)], cwd=tmp,
                              stdout=open(log, "wb"), stderr=subprocess.STDOUT, env=env, start_new_session=True)
        prom = None
        try:
            wait(lambda: urllib.request.urlopen(f"http://127.0.0.1:{hport}/ready", timeout=2).status == 200,
                 "fixgw up")
            cells = re.compile(r"http://(127\.0\.0\.1:\d+)/metrics")
            wait(lambda: len(cells.findall(log.read_text())) >= 4, "the cells' /metrics")  # 2 partitions × 2
            targets = [f"127.0.0.1:{hport}"] + cells.findall(log.read_text())
            (tmp / "prometheus.yml").write_text(json.dumps({
                "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                "scrape_configs": [{"job_name": "fixgw", "static_configs": [{"targets": targets}]}]}))
            prom = subprocess.Popen([binary, f"--config.file={tmp / 'prometheus.yml'}",
                                     f"--storage.tsdb.path={tmp / 'tsdb'}", f"--web.listen-address=127.0.0.1:{pport}"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
            prometheus = f"http://127.0.0.1:{pport}"
            wait(lambda: get_json(f"{prometheus}/api/v1/targets")["data"]["activeTargets"], "prometheus")
            start = time.time()
            stop = threading.Event()
            worker = threading.Thread(target=flow, args=(fport, tmp / "clients", stop), daemon=True)
            worker.start()
            time.sleep(args.seconds)
            stop.set()
            worker.join(30)
            time.sleep(3)
            end = time.time()
            OUT.mkdir(parents=True, exist_ok=True)
            for path in sorted((ROOT / "deploy" / "grafana").glob("*.json")):
                board = json.loads(path.read_text())
                (OUT / f"{path.stem}.svg").write_text(render(board, prometheus, start, end))
                print(f"docs/dashboards/{path.stem}.svg", flush=True)
        finally:
            if prom is not None:
                os.killpg(prom.pid, signal.SIGTERM)
            os.killpg(up.pid, signal.SIGTERM)
            up.wait(30)


if __name__ == "__main__":
    main()
