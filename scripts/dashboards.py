"""Writes the Grafana dashboards in deploy/grafana/ (one per process kind) from the panels below:
each panel is a title and its PromQL, over the metrics the processes export (checked against a
running system by tests/test_deploy.py).

    .venv/bin/python scripts/dashboards.py     # regenerates deploy/grafana/*.json
"""

from __future__ import annotations

import json
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "deploy" / "grafana"

Panel = tuple[str, list[tuple[str, str]], str]  # title, [(PromQL, legend)], unit

DASHBOARDS: dict[str, tuple[str, list[Panel]]] = {
    "fixgw-gateway": ("fixgw gateway", [
        ("Sessions logged on", [("fixgw_session_logged_on", "{{session}}")], "short"),
        ("Messages in per second", [("sum by (session) (rate(fixgw_messages_in_total[1m]))", "{{session}}")],
         "ops"),
        ("Messages out per second", [("sum by (session) (rate(fixgw_messages_out_total[1m]))", "{{session}}")],
         "ops"),
        ("Group commit: messages per batch (p50, p99)", [
            ("histogram_quantile(0.5, sum by (le) (rate(fixgw_group_commit_batch_messages_bucket[1m])))", "p50"),
            ("histogram_quantile(0.99, sum by (le) (rate(fixgw_group_commit_batch_messages_bucket[1m])))", "p99")],
         "short"),
        ("Group commit misses per second", [
            ("sum by (session) (rate(fixgw_group_commit_misses_total[1m]))", "{{session}}")], "ops"),
        ("Session store write latency (p99)", [
            ("histogram_quantile(0.99, sum by (le) (rate(fixgw_store_write_seconds_bucket[1m])))", "p99")], "s"),
        ("Parked sessions", [("fixgw_dispatcher_parked_sessions", "parked")], "short"),
        ("Refused requests by reason", [
            ("sum by (reason) (rate(fixgw_refused_requests_total[5m]))", "{{reason}}")], "ops"),
        ("Callback errors", [("sum by (callback) (rate(fixgw_callback_errors_total[5m]))", "{{callback}}")], "ops"),
        ("Logons refused (engine and front)", [
            ("sum by (session) (rate(fixgw_refused_logons_total[5m]))", "{{session}}"),
            ("sum by (reason) (rate(fixgw_front_refused_total[5m]))", "front: {{reason}}")], "ops"),
        ("Dispatcher lock held", [("fixgw_lock_held", "{{gateway}} {{instance}}")], "short"),
        ("Session store unavailable", [("fixgw_session_store_unavailable_seconds", "seconds")], "s"),
    ]),
    "fixgw-cell": ("fixgw matching cell", [
        ("Commands per second", [("sum by (partition) (rate(matching_commands_total[1m]))", "p{{partition}}")],
         "ops"),
        ("Events per second", [("sum by (partition) (rate(matching_events_created_total[1m]))", "p{{partition}}")],
         "ops"),
        ("Commands per batch (p50, p99)", [
            ("histogram_quantile(0.5, sum by (le, partition) (rate(matching_batch_commands_bucket[1m])))",
             "p50 p{{partition}}"),
            ("histogram_quantile(0.99, sum by (le, partition) (rate(matching_batch_commands_bucket[1m])))",
             "p99 p{{partition}}")], "short"),
        ("Batch commit latency (p99)", [
            ("histogram_quantile(0.99, sum by (le, partition) (rate(matching_batch_seconds_bucket[1m])))",
             "p{{partition}}")], "s"),
        ("WAITAOF failures", [
            ("sum by (partition) (rate(matching_durability_failures_total[5m]))", "conductor p{{partition}}"),
            ("sum by (partition) (rate(matching_outbox_not_durable_total[5m]))", "outbox p{{partition}}")], "ops"),
        ("Lease held (conductor, outbox)", [
            ("matching_conductor_lease_owned", "conductor p{{partition}} {{instance}}"),
            ("matching_outbox_lease_owned", "outbox p{{partition}} {{instance}}")], "short"),
        ("Lease taken (flapping when it climbs)", [
            ("sum by (partition) (increase(matching_conductor_lease_taken_total[15m]))", "p{{partition}}")],
         "short"),
        ("Commands backlog", [("matching_commands_backlog", "p{{partition}}")], "short"),
        ("Outbox pending and stream length", [
            ("matching_outbox_pending", "pending p{{partition}}"),
            ("matching_outbox_stream_length", "stream p{{partition}}")], "short"),
        ("Dead-lettered entries", [
            ("sum by (partition) (increase(matching_outbox_dead_lettered_total[1h]))", "outbox p{{partition}}"),
            ("increase(fixgw_dispatcher_dead_lettered_total[1h])", "gateway inbox")], "short"),
    ]),
    "fixgw-datastore": ("fixgw datastore", [
        ("Memory used against maxmemory", [
            ("fixgw_datastore_used_memory_bytes", "used"), ("fixgw_datastore_maxmemory_bytes", "maxmemory")],
         "bytes"),
        ("Memory used ratio", [("fixgw_datastore_memory_used_ratio", "used / maxmemory")], "percentunit"),
        ("AOF rewrite in progress", [("fixgw_datastore_aof_rewrite_in_progress", "rewriting")], "short"),
        ("Replicas connected", [("fixgw_datastore_connected_replicas", "replicas")], "short"),
        ("Replication lag", [("fixgw_datastore_replica_lag_bytes", "slowest replica")], "bytes"),
        ("Clock skew against the datastore", [("fixgw_clock_skew_seconds", "host − datastore")], "s"),
    ]),
}


def panel(i: int, title: str, targets: list[tuple[str, str]], unit: str) -> dict[str, object]:
    return {
        "id": i + 1, "type": "timeseries", "title": title, "datasource": {"type": "prometheus", "uid": "prometheus"},
        "gridPos": {"h": 8, "w": 12, "x": (i % 2) * 12, "y": (i // 2) * 8},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "targets": [{"refId": chr(ord("A") + j), "expr": expr, "legendFormat": legend}
                    for j, (expr, legend) in enumerate(targets)],
    }


def dashboard(uid: str, title: str, panels: list[Panel]) -> dict[str, object]:
    return {"uid": uid, "title": title, "tags": ["fixgw"], "timezone": "utc", "schemaVersion": 39,
            "refresh": "10s", "time": {"from": "now-30m", "to": "now"},
            "panels": [panel(i, *p) for i, p in enumerate(panels)]}


def render() -> dict[str, str]:
    return {f"{uid}.json": json.dumps(dashboard(uid, title, panels), indent=2) + "\n"
            for uid, (title, panels) in DASHBOARDS.items()}


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for name, text in render().items():
        (OUT / name).write_text(text)


if __name__ == "__main__":
    main()
