"""Logon authentication over TCP (issue 12 item 2): Username(553)/Password(554) against a
configured scrypt hash; a refused Logon gets a Logout with the reason and changes nothing."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from datastore.embedded import ValkeyProcess, free_port
from fixgw.config import SessionConfig
from fixgw.credentials import hash_password, verify_password
from tests.gateway_helpers import GatewayProc, RawFixClient, parse
from tests.test_bad_input import CLIENT1

pytestmark = pytest.mark.slow  # starts servers or processes: not in `make unit`

HASH = hash_password("s3cret-pass", salt=b"0123456789abcdef")
SESSIONS = f'[[gateway.session]]\nname = "CLIENT1"\nusername = "alice"\npassword_hash = "{HASH}"\n'


def logon(port: int, fields: str) -> tuple[dict[int, bytes], float]:
    c = RawFixClient(port, sender="CLIENT1", seq=1)
    started = time.monotonic()
    c.send("35=A\x0198=0\x01108=30" + fields)
    raw = c.read(timeout=15)
    c.close()
    assert raw is not None, "answered"
    return parse(raw), time.monotonic() - started


def test_a_logon_needs_the_sessions_username_and_password(tmp_path: Path, valkey: ValkeyProcess) -> None:
    port = free_port()
    gw = GatewayProc(tmp_path, valkey.url, fix_port=port, sessions=SESSIONS).start()  # message_log = true
    gw.wait_active()
    try:
        refusals = []
        for fields, why in [("", "Username (553) and Password (554) are required"),
                            ("\x01553=alice\x01554=wrong", "bad credentials"),
                            ("\x01553=bob\x01554=s3cret-pass", "bad credentials")]:
            answer, took = logon(port, fields)
            assert answer[35] == b"5" and why in answer[58].decode(), answer
            assert b"s3cret" not in answer[58] and b"wrong" not in answer[58]
            refusals.append(took)
        assert refusals[2] >= 0.9, "each refusal answers later (0.25 s, 0.5 s, 1 s)"
        client = valkey.client()
        # The one thing stored is each answer: a Logout carries a sequence number, and a number
        # sent is stored (never reused for other content), as for every refused Logon.
        stored = client.hgetall(CLIENT1.chunk_of(1))
        assert len(stored) == 3 and all(b"\x0135=5\x01" in record for record in stored.values())
        assert not [k for k in client.scan_iter() if b"s3cret" in (client.dump(k) or b"")], "no credential stored"
        state = client.hgetall(CLIENT1.state)
        assert state.get(b"targetSeqNum", b"\x01\x00\x00\x00") == b"\x01\x00\x00\x00", "sequence numbers untouched"
        answer, _ = logon(port, "\x01553=alice\x01554=s3cret-pass")
        assert answer[35] == b"A"
        assert gw.alive and b"s3cret-pass" not in gw.output().encode(), "the password is never logged"
    finally:
        gw.stop()
    logged = [p for p in gw.dir.rglob("*") if p.is_file() and (b"s3cret-pass" in p.read_bytes()
                                                               or b"554=wrong" in p.read_bytes())]
    assert not logged, f"no file of the gateway holds a password, right or wrong: {logged}"
    messages = (gw.dir / "state" / "log" / "FIX.4.4-FIXGW-CLIENT1.messages.current.log").read_bytes()
    assert messages.count(b"\x01553=alice\x01554=***\x01") == 2, "the Logons are logged, their passwords not"


def test_hashes_verify_and_the_file_holds_hashes_only() -> None:
    assert verify_password("s3cret-pass", HASH) and not verify_password("s3cret-pasS", HASH)
    assert hash_password("x") != hash_password("x"), "salted"
    out = subprocess.run([sys.executable, "-m", "fixgw.cli", "passwd"], input="pw-from-stdin\n", text=True,
                         capture_output=True, check=True).stdout.strip()
    assert out.startswith("scrypt$14$8$1$") and verify_password("pw-from-stdin", out)
    with pytest.raises(ValueError, match="password_hash must look like"):
        SessionConfig(name="C", password_hash="plain-text-password")
    with pytest.raises(ValueError, match="FIX.4.2 Logon has no Username"):
        SessionConfig(name="C", begin_string="FIX.4.2", password_hash=HASH)
