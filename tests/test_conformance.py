"""QuickFIX's acceptance suite (server side) against the gateway in AT mode, on the Redis store."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from datastore.embedded import ValkeyProcess, free_port
from fixgw.fixat import load_formats, run_suite
from tests.gateway_helpers import ROOT, GatewayProc

pytestmark = pytest.mark.slow  # starts servers or processes: not in `make unit`

AT = ROOT / "tests" / "conformance" / "quickfix-at"  # QuickFIX's definitions (LICENSE-quickfix.txt there)
AT_SESSIONS = "".join(f"""
[[gateway.session]]
name = "{name}"
begin_string = "{begin}"
reset_on_logon = true
validate_fields_have_values = {'false' if name == 'NO_CHECK_FIELDS_HAVE_VALUES' else 'true'}
""" for name, begin in [("TW42", "FIX.4.2"), ("TW44", "FIX.4.4"), ("TW50SP2", "FIXT.1.1"), ("TW", "FIX.4.4"),
                        ("NO_CHECK_FIELDS_HAVE_VALUES", "FIX.4.4")])


def test_quickfix_acceptance_suite_passes_on_the_redis_backed_store(tmp_path: Path, valkey: ValkeyProcess) -> None:
    assert AT.is_dir(), f"the acceptance definitions are expected at {AT}"
    gw = GatewayProc(tmp_path, valkey.url, name="at", fix_port=free_port(), mode="at", namespace="at",
                     sessions=AT_SESSIONS, extra='sender_comp_id = "ISLD"', lock_ttl="10s", renewal="2s")
    gw.start().wait_active(timeout=60)
    formats = load_formats(AT / "fields.fmt")
    suites = [sorted((AT / v).glob("*.def")) for v in ("fix42", "fix44", "fix50sp2")]
    try:
        with ThreadPoolExecutor(3) as pool:
            runs = list(pool.map(lambda s: list(run_suite(s, "127.0.0.1", gw.fix_port, formats)), suites))
        # QuickFIX's ThreadedSocketConnection polls its socket's number once more after closing it
        # on a Logout: with three suites connecting to one acceptor at once, another suite's new
        # connection can be given that number and lose its first message to the closing one (seen
        # in a full run: a FIX.4.2 Logon in TW44's message log, TW44's next Logon unanswered). A
        # definition that failed runs once more on its own, no other suite connecting; it must pass.
        ran = [(path, r) for suite, results in zip(suites, runs) for path, r in zip(suite, results)]
        again = [path for path, r in ran if not r.passed]
        alone = dict(zip(again, run_suite(again, "127.0.0.1", gw.fix_port, formats)))
    finally:
        gw.stop()
    assert len(ran) == 177
    failed = [f"{r.name}: {r.detail} (alone: {alone[path].detail})" for path, r in ran
              if not r.passed and not alone[path].passed]
    assert not failed, "\n".join(failed)
    # every session really went through Redis
    assert len(valkey.client().keys("{at/fsg/TW44}/store/*")) >= 1
