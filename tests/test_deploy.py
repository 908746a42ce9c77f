"""The dashboards, alert rules and systemd units in deploy/ checked against the code: the rules by
promtool (syntax and unit tests on series shaped like ours), the units by systemd-analyze, and
every metric a rule or a panel names against what a running `fixgw up` exports — and every
metric it exports against the docs."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from datastore.embedded import free_port
from tests.gateway_helpers import ROOT, http_status, wait_until

DEPLOY = ROOT / "deploy"
METRIC = re.compile(r"\b(?:fixgw|matching)_[a-z0-9_]+\b")
SUFFIXES = ("_total", "_created", "_bucket", "_sum", "_count")


def tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        why = f"{name} is not installed (make debian-tools installs it as root)"
        if os.environ.get("FIXGW_REQUIRE_FAULTS") == "1":  # CI: the machine's tools are required
            pytest.fail(f"FIXGW_REQUIRE_FAULTS=1 but {why}")
        pytest.skip(why)
    return path


def test_the_alert_rules_pass_promtool_and_their_unit_tests() -> None:
    promtool = tool("promtool")
    rules = DEPLOY / "prometheus"
    checked = subprocess.run([promtool, "check", "rules", "fixgw-alerts.yml"], cwd=rules, capture_output=True,
                             text=True, timeout=60)
    assert checked.returncode == 0 and "SUCCESS" in checked.stdout, checked.stdout + checked.stderr
    tested = subprocess.run([promtool, "test", "rules", "fixgw-alerts.test.yml"], cwd=rules, capture_output=True,
                            text=True, timeout=60)
    assert tested.returncode == 0 and "SUCCESS" in tested.stdout, tested.stdout + tested.stderr


def anchors(markdown: str) -> set[str]:
    """GitHub's anchors of a document's headings."""
    out = set()
    for line in markdown.splitlines():
        if line.startswith("#"):
            text = line.lstrip("#").strip().lower()
            out.add(re.sub(r"[^a-z0-9 _-]", "", text).replace(" ", "-"))
    return out


def test_each_alert_has_a_unit_test_and_a_runbook_that_exists() -> None:
    rules = (DEPLOY / "prometheus" / "fixgw-alerts.yml").read_text()
    tests = (DEPLOY / "prometheus" / "fixgw-alerts.test.yml").read_text()
    alerts = re.findall(r"- alert: (\w+)", rules)
    assert len(alerts) >= 15
    untested = [a for a in alerts if f"alertname: {a}\n" not in tests]
    assert not untested, f"alerts without a unit test: {untested}"
    for doc, anchor in re.findall(r"runbook: (docs/[\w.]+\.md)(?:#([\w-]+))?", rules):
        assert (ROOT / doc).is_file(), doc
        if anchor:
            assert anchor in anchors((ROOT / doc).read_text()), f"{doc}#{anchor} is not a heading"


def test_the_units_verify() -> None:
    analyze = tool("systemd-analyze")
    units = Path(os.environ.get("TMPDIR", "/tmp")) / f"fixgw-units-{os.getpid()}"
    units.mkdir(exist_ok=True)
    try:
        names = []
        for unit in sorted((DEPLOY / "systemd").glob("*.service")):
            text = unit.read_text().replace("/opt/fixgw/.venv", str(Path(sys.executable).parent.parent))
            name = unit.name.replace("@.service", "@0.service")  # an instance of each template
            (units / name).write_text(text)
            names.append(name)
        assert names == ["fixgw-awake@0.service", "fixgw-conductor@0.service", "fixgw-gateway.service",
                         "fixgw-outbox@0.service"]
        verified = subprocess.run([analyze, "verify", *names], cwd=units, capture_output=True, text=True, timeout=60)
        assert verified.returncode == 0 and not verified.stderr.strip(), verified.stderr
        for name in names:
            text = (units / name).read_text()
            for setting in ("User=fixgw", "NoNewPrivileges=yes", "PrivateTmp=yes", "ProtectSystem=strict",
                            "EnvironmentFile=/etc/fixgw/", "Restart=always", "LimitNOFILE=", "MemoryMax="):
                if setting.startswith("EnvironmentFile") and name.startswith("fixgw-awake"):
                    continue  # (a spinner has no settings and no secrets)
                assert setting in text, f"{name} lacks {setting}"
        assert "CPUWeight=idle" in (units / "fixgw-awake@0.service").read_text()
        for name in names[1:]:  # the system's own ahead of other units, not only within its own
            text = (units / name).read_text()
            assert "Nice=-10" in text and "CPUWeight=1000" in text, name
            # and real-time, as `fixgw up` runs them ([embedded] realtime_priority)
            assert "CPUSchedulingPolicy=fifo\nCPUSchedulingPriority=1\n" in text, name
    finally:
        shutil.rmtree(units, ignore_errors=True)


def test_the_dashboards_are_what_scripts_dashboards_writes() -> None:
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import dashboards  # type: ignore[import-not-found]
    finally:
        sys.path.pop(0)
    for name, text in dashboards.render().items():
        assert (DEPLOY / "grafana" / name).read_text() == text, f"deploy/grafana/{name}: run scripts/dashboards.py"


def named_by_rules_and_panels() -> set[str]:
    names = set(METRIC.findall((DEPLOY / "prometheus" / "fixgw-alerts.yml").read_text()))
    for board in (DEPLOY / "grafana").glob("*.json"):
        for panel in json.loads(board.read_text())["panels"]:
            for target in panel["targets"]:
                names |= set(METRIC.findall(target["expr"]))
    return names


def scrape(url: str) -> tuple[set[str], set[str]]:
    """(metric families, sample names) a /metrics endpoint exports."""
    with urllib.request.urlopen(url, timeout=10) as r:
        text = r.read().decode()
    families = {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")}
    samples = {line.split("{")[0].split(" ")[0] for line in text.splitlines() if line and not line.startswith("#")}
    return families, samples


@pytest.mark.slow
def test_every_metric_a_rule_or_a_panel_names_is_exported_and_every_one_exported_is_documented(
        tmp_path: Path) -> None:
    """`fixgw up` on free ports, a demo's trades through it, then every process scraped (the
    gateway and each partition's conductor and outbox)."""
    shutil.copytree(ROOT / "config", tmp_path / "config")
    vport, fport, hport = free_port(), free_port(), free_port()
    config = tmp_path / "config" / "fixgw.toml"
    config.write_text(config.read_text().replace("6479", str(vport)))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    log = tmp_path / "up.log"
    up = subprocess.Popen([sys.executable, "-m", "fixgw.cli", "up", "--config", "config/fixgw.toml", "--fix-port",
                           str(fport), "--http-port", str(hport)], cwd=tmp_path, stdout=open(log, "wb"),
                          stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        try:
            wait_until(lambda: http_status(hport) == 200 or up.poll() is not None, "fixgw up to be ready", 120)
        except AssertionError:
            raise AssertionError(f"fixgw up not ready in 120 s: {log.read_text()[-3000:]}") from None
        assert up.poll() is None, f"fixgw up exited: {log.read_text()[-3000:]}"
        demo = subprocess.run([sys.executable, "-m", "fixgw.cli", "demo", "--port", str(fport)], cwd=tmp_path,
                              capture_output=True, text=True, timeout=120, env=env)
        assert demo.returncode == 0, demo.stdout + demo.stderr
        time.sleep(1.5)  # (the gateway's datastore gauges are read every second)
        cells = re.compile(r"(http://127\.0\.0\.1:\d+/metrics)")
        wait_until(lambda: len(cells.findall(log.read_text())) >= 4, "the cells' /metrics lines", 30)
        urls = [f"http://127.0.0.1:{hport}/metrics"] + cells.findall(log.read_text())
        assert len(urls) == 5, urls  # the gateway, a conductor and an outbox for each of 2 partitions
        families: set[str] = set()
        samples: set[str] = set()
        for url in urls:
            f, s = scrape(url)
            families |= f
            samples |= s
    finally:
        os.killpg(up.pid, signal.SIGTERM)
        up.wait(30)
    exported = samples | families
    missing = sorted(n for n in named_by_rules_and_panels() if n not in exported)
    assert not missing, f"named by a rule or a panel, exported by no process: {missing}"
    docs = "\n".join(p.read_text() for p in (ROOT / "docs").glob("*.md"))
    undocumented = sorted(f for f in families if not f.endswith("_created") and f not in docs)
    assert not undocumented, f"exported without a line in docs/: {undocumented}"
