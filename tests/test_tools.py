"""Operator tools: the sizing calculator and session inspection, against real Valkey."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from datastore.connection import connect
from datastore.embedded import Cluster, ValkeyProcess, free_port
from datastore.settings import RedisEndpoint
from sessionstore import FixedEpoch, OutboundRecord, SessionKey, SessionStore, inspect_cli, sizing
from sessionstore.codec import encode_seq_field
from sessionstore.keys import GatewayKey

pytestmark = pytest.mark.slow  # starts servers or processes: not in `make unit`

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


def framed(seq: int, msg_type: str = "8", extra: str = "") -> bytes:
    """A FIX message as the gateway stores it: BodyLength and CheckSum right."""
    body = f"35={msg_type}\x0149=FIXGW\x0156=CLIENT1\x0134={seq}\x0152=20261201-10:00:00.000\x01{extra}".encode()
    head = b"8=FIX.4.4\x019=%d\x01" % len(body)
    return head + body + b"10=%03d\x01" % (sum(head + body) % 256)


def whole_session(client, namespace: str = "aud") -> SessionKey:  # type: ignore[no-untyped-def]
    store = SessionStore(client, FixedEpoch(3))
    client.set(GatewayKey(namespace, "fsg").epoch, 3)  # as the dispatcher lock's epoch counter left it
    session = SessionKey(namespace, "fsg", "CLIENT1")
    store.stamp_owner(session)
    store.commit_outbound_many(session, [OutboundRecord(i, 1_700_000_000_000_000_000, b"8",
                                                        framed(i, extra=f"17=e{i}:O\x01")) for i in range(1, 1500)])
    return session


def test_audit_finds_a_whole_store_whole(valkey: ValkeyProcess, capsys: pytest.CaptureFixture[str]) -> None:
    whole_session(valkey.client())
    code, out, _ = run(inspect_cli.main, ["--url", valkey.url, "--json", "audit", "--namespace", "aud"], capsys)
    data = json.loads(out)
    assert code == 0 and data["whole"] and data["problems"] == []
    assert data["sessions"] == [{"session": "aud/fsg/CLIENT1", "first": 1, "lastSent": 1499, "stored": 1499,
                                 "missing": 0, "deliveredThisSession": 0, "deliveredAsExecID": 0, "problems": 0}]
    code, out, _ = run(inspect_cli.main, ["--url", valkey.url, "audit", "aud/fsg/CLIENT1"], capsys)
    assert code == 0 and "1 session(s) audited: whole" in out


def test_audit_names_every_way_a_store_can_be_broken(valkey: ValkeyProcess, capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inspect_cli, "PROGRESS_EVERY", 500)
    client = valkey.client()
    s = whole_session(client, "bad")
    client.hdel(s.chunk(0), encode_seq_field(7), encode_seq_field(8))  # a resend of 7-8 cannot be answered
    wrong_sum = bytearray(framed(9, extra="17=e9:O\x01"))
    wrong_sum[-3] = ord("0") + (wrong_sum[-3] - ord("0") + 1) % 10
    client.hset(s.chunk(0), encode_seq_field(9), OutboundRecord(9, 1, b"8", bytes(wrong_sum)).encode())
    client.hset(s.chunk(0), encode_seq_field(10), OutboundRecord(10, 1, b"8", framed(11)).encode())  # 34=11 under 10
    client.hset(s.chunk(1), encode_seq_field(1030), b"\x00" * 5)
    client.set(s.owner, 9)  # an epoch no lock ever issued
    client.hset(s.unsent, "1600", "e1600:O")  # committed ahead of sending, yet not stored
    code, out, err = run(inspect_cli.main, ["--url", valkey.url, "--json", "audit", "bad/fsg/CLIENT1"], capsys)
    problems = [(p["field"], p["problem"]) for p in json.loads(out)["problems"]]
    assert code == 1 and not json.loads(out)["whole"]
    assert ("1030", "record truncated: 5 bytes, header alone is 24") in problems
    assert any(f == "9" and "CheckSum (10) says" in p for f, p in problems)
    assert ("10", "stored message MsgSeqNum (34) is 11, stored under 10") in problems
    assert ("7-8, 1030", "3 sequence number(s) between 1 and lastSentSeqNum 1499 have no stored message: a resend "
                         "request for them cannot be answered") in problems
    assert ("-", "owner epoch 9 is ahead of the gateway's epoch counter 3") in problems
    assert ("1600", "marks a number committed ahead of sending that has no stored message") in problems
    assert "audit bad/fsg/CLIENT1: 1000 messages" in err, "a progress line on stderr for a large store"
    code, out, _ = run(inspect_cli.main, ["--url", valkey.url, "audit", "--namespace", "bad"], capsys)
    assert code == 1 and "problem(s), listed above on stderr" in out


def test_compact_rewrites_the_embedded_aof_and_says_why_when_it_cannot(tmp_path: Path) -> None:
    """``fixgw compact`` (installed command) on the Valkey ``fixgw up`` would start from a config:
    the AOF is rewritten while it waits (Valkey's rewrite count moves, the data is all there),
    and it prints the AOF's size before and after. No data directory, or a Valkey without an
    AOF: refused with the reason, exit 1."""
    from fixgw.cli import embedded_password, embedded_server

    data_dir = tmp_path / "valkey"
    port = free_port()
    config_file = tmp_path / "fixgw.toml"
    config_file.write_text(f'[embedded]\nport = {port}\ndata_dir = "{data_dir}"\n')
    fixgw = str(Path(sys.executable).parent / "fixgw")
    with embedded_server({}, set(), data_dir=data_dir, port=port, password=embedded_password(data_dir)) as server:
        client = server.client()
        for i in range(200):  # the same keys again and again: a rewrite makes the AOF smaller
            client.set(f"k{i % 10}", "x" * 1000)
        rewrites = client.info("persistence")["aof_rewrites"]
        out = subprocess.run([fixgw, "compact", "--config", str(config_file)], capture_output=True, text=True,
                             timeout=120)
        assert out.returncode == 0, out.stderr
        assert "AOF rewritten in" in out.stdout and " MB -> " in out.stdout
        assert client.info("persistence")["aof_rewrites"] == rewrites + 1
        assert [client.get(f"k{i}") for i in range(10)] == [b"x" * 1000] * 10
    missing = subprocess.run([fixgw, "compact", "--config", str(config_file), "--data-dir", str(tmp_path / "none")],
                             capture_output=True, text=True, timeout=60)
    assert missing.returncode == 1 and "no embedded Valkey data in" in missing.stderr
    plain_dir = tmp_path / "plain"
    with embedded_server({"embedded": {"aof": False}}, set(), data_dir=plain_dir, port=port,
                         password=embedded_password(plain_dir)):
        no_aof = subprocess.run([fixgw, "compact", "--config", str(config_file), "--data-dir", str(plain_dir)],
                                capture_output=True, text=True, timeout=60)
    assert no_aof.returncode == 1 and "keeps no AOF" in no_aof.stderr
