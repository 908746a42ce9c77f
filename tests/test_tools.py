"""Operator tools: the sizing calculator and session inspection, against real Valkey."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sessionstore import FixedEpoch, OutboundRecord, SessionKey, SessionStore, connect
from sessionstore.codec import encode_seq_field
from sessionstore.embedded import Cluster, ValkeyProcess
from sessionstore.settings import RedisEndpoint
from tools import inspect_cli, sizing

MEASURE_TOLERANCE = 0.15  # measured bytes/message within ±15 % of the formula's 800


def run(main, argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:  # type: ignore[no-untyped-def]
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_seed_example_gives_2_8_gb(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(sizing.main, ["--orders-per-day", "50000", "--messages-per-order", "5", "--days", "7",
                                     "--gateways", "2", "--json"], capsys)
    data = json.loads(out)
    assert code == 0
    assert data["primary_bytes"] == 2_800_000_000
    assert data["with_replicas_bytes"] == 2_800_000_000
    assert data["with_headroom_bytes"] == 3_500_000_000  # the 25 % midpoint


def test_the_gateways_records_are_counted_beside_the_messages(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(sizing.main, ["--orders-per-day", "50000", "--messages-per-order", "5", "--days", "7",
                                     "--gateways", "2", "--retention-days", "7", "--window-days", "1", "--json"], capsys)
    data = json.loads(out)
    assert data["delivery_records_bytes"] == 50_000 * 7 * 2 * (5 * sizing.INBOX_ENTRY_BYTES + sizing.CLOSED_VIEW_BYTES)
    assert data["clordid_records_bytes"] == 50_000 * sizing.CLORDID_RECORD_BYTES
    assert data["all_with_headroom_bytes"] == (2_800_000_000 + data["delivery_records_bytes"]
                                               + data["clordid_records_bytes"]) * 125 // 100


def test_replicas_headroom_and_message_size_scale_the_estimate(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(sizing.main, ["--orders-per-day", "1000", "--messages-per-order", "2", "--days", "1",
                                     "--gateways", "1", "--message-size", "350", "--replicas", "2",
                                     "--headroom", "30", "--json"], capsys)
    data = json.loads(out)
    assert data["bytes_per_message"] == 400  # 350 + 24 header + 26 Redis overhead
    assert data["primary_bytes"] == 800_000
    assert data["with_replicas_bytes"] == 2_400_000
    assert data["with_headroom_bytes"] == 3_120_000


def test_readable_summary_shows_both_headroom_bounds(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(sizing.main, ["--orders-per-day", "50000", "--messages-per-order", "5", "--days", "7",
                                     "--gateways", "2"], capsys)
    assert "2.80 GB" in out and "20% headroom" in out and "30% headroom" in out and "3.36 GB" in out


def test_bad_sizing_input_is_refused_with_the_reason(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        sizing.main(["--orders-per-day", "0", "--messages-per-order", "5", "--days", "7", "--gateways", "2"])
    assert exit_.value.code == 2
    assert "--orders-per-day must be at least 1" in capsys.readouterr().err


def test_measured_bytes_per_message_is_near_the_formula(valkey: ValkeyProcess,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(sizing.main, ["--measure", "--url", valkey.url, "--sample", "3000", "--json"], capsys)
    m = json.loads(out)
    assert code == 0 and m["formula_bytes_per_message"] == 800
    assert abs(m["memory_usage_bytes_per_message"] / 800 - 1) < MEASURE_TOLERANCE
    assert valkey.client().dbsize() == 0, "the measurement deletes what it wrote"


def seed_sessions(client, namespace: str = "insp") -> tuple[SessionKey, SessionKey]:  # type: ignore[no-untyped-def]
    store = SessionStore(client, FixedEpoch(1))
    a, b = SessionKey(namespace, "fsg", "CLIENT1"), SessionKey(namespace, "dc", "CLIENT2")
    for s in (a, b):
        store.stamp_owner(s)
    store.commit_outbound_many(a, [OutboundRecord(i, 1_700_000_000_000_000_000 + i, b"8",
                                                  f"8=FIX.4.4\x0135=8\x0134={i}\x01".encode()) for i in range(1, 1100)])
    store.commit_outbound(b, OutboundRecord(1, 1_700_000_000_000_000_000, b"A", b"8=FIX.4.4\x0135=A\x01"))
    store.set_next_target_seq_num(a, 12)
    store.record_connection_start(a, 1_700_000_000_123_456_789)
    return a, b


def test_sessions_lists_sequence_numbers_and_counts(valkey: ValkeyProcess, capsys: pytest.CaptureFixture[str]) -> None:
    seed_sessions(valkey.client())
    code, out, _ = run(inspect_cli.main, ["--url", valkey.url, "--json", "sessions", "--namespace", "insp"], capsys)
    rows = {r["session"]: r for r in json.loads(out)["sessions"]}
    assert code == 0
    assert rows["insp/fsg/CLIENT1"]["messages"] == 1099 and rows["insp/fsg/CLIENT1"]["senderSeqNum"] == 1100
    assert rows["insp/fsg/CLIENT1"]["targetSeqNum"] == 12
    assert rows["insp/dc/CLIENT2"]["messages"] == 1
    code, out, _ = run(inspect_cli.main, ["--url", valkey.url, "sessions"], capsys)
    assert "insp/fsg/CLIENT1" in out and "2 session(s)" in out


def test_state_decodes_fields_with_widths_and_iso_times(valkey: ValkeyProcess,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    seed_sessions(valkey.client())
    code, out, _ = run(inspect_cli.main, ["--url", valkey.url, "--json", "state", "insp/fsg/CLIENT1"], capsys)
    fields = {f["field"]: f for f in json.loads(out)["fields"]}
    assert fields["targetSeqNum"]["value"] == 12 and fields["targetSeqNum"]["width"] == 4
    assert fields["connectionStartTime"]["iso"] == "2023-11-14T22:13:20.123456789Z"
    assert fields["connectionStartTime"]["width"] == 8
    assert json.loads(out)["defaults_used"] == ["sessionStartTime"]


def test_messages_decoded_with_soh_as_bar_and_range(valkey: ValkeyProcess, capsys: pytest.CaptureFixture[str]) -> None:
    seed_sessions(valkey.client())
    code, out, _ = run(inspect_cli.main, ["--url", valkey.url, "--json", "messages", "insp/fsg/CLIENT1",
                                          "--from", "1023", "--to", "1025"], capsys)
    msgs = json.loads(out)["messages"]
    assert [m["seq"] for m in msgs] == [1023, 1024, 1025]
    assert msgs[0]["body"] == "8=FIX.4.4|35=8|34=1023|" and msgs[0]["msgType"] == "8"
    assert msgs[0]["sendingTime"].startswith("2023-11-14T22:13:20.0000010")


def test_corrupt_record_is_reported_and_the_listing_goes_on(valkey: ValkeyProcess,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    a, _ = seed_sessions(valkey.client())
    valkey.client().hset(a.chunk(0), encode_seq_field(5), b"\x00" * 10)
    code, out, err = run(inspect_cli.main, ["--url", valkey.url, "--json", "messages", str(a), "--to", "10"], capsys)
    data = json.loads(out)
    assert code == 1
    assert [m["seq"] for m in data["messages"]] == [1, 2, 3, 4, 6, 7, 8, 9, 10]
    assert data["problems"] == [{"key": a.chunk(0), "field": "5",
                                 "problem": "record truncated: 10 bytes, header alone is 24"}]
    assert "field 5: record truncated" in err


def test_missing_session_is_reported_clearly(valkey: ValkeyProcess, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(inspect_cli.main, ["--url", valkey.url, "state", "insp/fsg/NOBODY"], capsys)
    assert code == 1 and "{insp/fsg/NOBODY}/state field -: no such session" in err


def test_cluster_scan_reaches_every_primary_with_progress(valkey_cluster: Cluster, capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inspect_cli, "PROGRESS_EVERY", 10)
    client = connect(RedisEndpoint(nodes=valkey_cluster.addresses))
    store = SessionStore(client, FixedEpoch(1))
    names = [SessionKey("clus", "fsg", f"C{i}") for i in range(30)]
    for s in names:
        store.stamp_owner(s)
        store.commit_outbound(s, OutboundRecord(1, 1, b"0", b"35=0"))
    holders = {client.keyslot(s.state) for s in names}
    assert len({client.nodes_manager.get_node_from_slot(slot).name for slot in holders}) == 3
    code, out, err = run(inspect_cli.main, ["--nodes", ",".join(valkey_cluster.addresses), "--json", "sessions",
                                            "--namespace", "clus"], capsys)
    assert "scanning" in err and "scanned" in err
    assert sorted(r["session"] for r in json.loads(out)["sessions"]) == sorted(str(s) for s in names)


def test_console_scripts_are_installed() -> None:
    for tool in ("fixgw-sizing", "fixgw-inspect"):
        out = subprocess.run([str(Path(sys.executable).parent / tool), "--help"], capture_output=True, text=True)
        assert out.returncode == 0 and "usage" in out.stdout


def test_json_may_follow_the_subcommand_as_users_type_it(valkey: ValkeyProcess,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    seed_sessions(valkey.client())
    code, out, _ = run(inspect_cli.main, ["--url", valkey.url, "messages", "insp/fsg/CLIENT1", "--json",
                                          "--from", "1", "--to", "2"], capsys)
    assert code == 0 and [m["seq"] for m in json.loads(out)["messages"]] == [1, 2]
    code, out, _ = run(inspect_cli.main, ["--url", valkey.url, "--json", "state", "insp/fsg/CLIENT1"], capsys)
    assert code == 0 and json.loads(out)["fields"], "--json before the subcommand still works"
