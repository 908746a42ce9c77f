"""The gateway's host clock steps an hour forward, and back, during live sessions.

A real step moves CLOCK_REALTIME only; CLOCK_MONOTONIC and sleeping go on as before. The
gateway process runs with ``tests/native/clockstep.c`` preloaded (built here with the
machine's C compiler): it adds an offset, read from a file the test writes, to every wall-clock
read of the process — Python's ``time.time``, QuickFIX's timestamps — and to nothing else.
The datastores, the cells and the clients keep the true time, as they would on other hosts.

What must hold, from outside the processes: every request answered exactly once, no sequence
number twice, every fill on the drop copy once, each partition trading as the reference
matcher, and the sessions serving again once the clock is right, without anyone touching the
processes. What the clients see meanwhile is printed and written down in docs/operations.md.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import threading
import time
from pathlib import Path

import pytest

from datastore.connection import connect
from datastore.embedded import standalone
from datastore.settings import RedisEndpoint
from fixgw.demo import DemoClient
from sessionstore import FixedEpoch, SessionKey, SessionStore
from tests.gateway_helpers import ROOT, http_json
from tests.system_helpers import System
from tests.venue import (
    AnswerClock,
    Flow,
    answers,
    check_drop_copy_has_every_fill,
    check_no_sequence_number_twice,
    check_partition_trades_as_the_reference,
    first_answered_after,
    seen_between,
    watch_ready,
)

# Run one at a time after the rest (`make faults`): each times what a client sees of a fault,
# and the processes of three other tests beside it on two cores blur that.
pytestmark = [pytest.mark.slow, pytest.mark.faults]

HOUR_NS = 3600 * 10**9


def build_shim(tmp: Path) -> Path:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        why = "no C compiler to build tests/native/clockstep.c"
        if os.environ.get("FIXGW_REQUIRE_FAULTS") == "1":
            pytest.fail(f"FIXGW_REQUIRE_FAULTS=1 but {why}")
        pytest.skip(why)
    out = tmp / "clockstep.so"
    subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", str(out), str(ROOT / "tests/native/clockstep.c"), "-ldl"],
                   check=True, capture_output=True, timeout=60)
    return out


class SteppedClock:
    """The offset file the shim maps: ``step`` sets the gateway's clock this far from the truth."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.write_bytes(struct.pack("<q", 0))

    def step(self, offset_ns: int) -> None:
        with open(self.path, "r+b") as f:
            f.write(struct.pack("<q", offset_ns))


def unanswered_never_entered(server, flow: Flow, clients: list[DemoClient]) -> list[str]:  # type: ignore[no-untyped-def]
    """The requests no answer reached, each checked never to have entered the venue: no ClOrdID
    claimed for it in the session store (so no command, nothing matched). Each was either refused
    by the gateway's FIX engine with a Reject the client's engine refused in turn (its SendingTime
    from the stepped clock), or taken by that engine as the connection was being closed. Returns
    them, with the stored Reject's text where there is one."""
    with flow.lock:
        sent = dict(flow.sent)
    got: set[str] = set()
    for c in clients:
        got |= set(answers(c))
    store = SessionStore(connect(RedisEndpoint(url=server.url)), FixedEpoch(0))
    out = []
    for clordid in sorted(set(sent) - got):
        client = sent[clordid][0]
        key = SessionKey("e2e", "fsg", client.name)
        assert store.clordid_record(key, clordid) is None, \
            f"{clordid} was claimed, yet its client got no answer: {what_became_of(store, key, client, clordid)}"
        with client.cond:
            seq = next(n for n, c in client.sent_seq.items() if c == clordid)
        rejects = [m.body for m in store.load(key).messages
                   if b"\x0135=3\x01" in m.body and f"\x0145={seq}\x01".encode() in m.body]
        out.append(f"{clordid}: {'Reject stored' if rejects else 'taken as the connection closed'}")
    return out


def what_became_of(store: SessionStore, key: SessionKey, client: DemoClient, clordid: str) -> str:
    """For a failure's message: the stored messages about ``clordid`` (number, type, ExecType,
    SendingTime) and what its client received about it, with the numbers it received around."""
    tag = f"\x0111={clordid}\x01".encode()
    stored = []
    for m in store.load(key).messages:
        if tag in m.body:
            f = dict(p.split(b"=", 1) for p in m.body.split(b"\x01") if b"=" in p)
            stored.append((m.seq_num, f.get(b"35"), f.get(b"150"), f.get(b"52"), f.get(b"43")))
    with client.cond:
        got = [(r.get(34), r.get(35), r.get(150), r.get(52), r.get(43)) for r in client.reports if r.get(11) == clordid]
        numbers = sorted(int(r[34]) for r in client.reports)
    near = [n for n in numbers if any(abs(n - s[0]) < 6 for s in stored)]
    return f"stored {stored}; received {got}; numbers received near them {near}"


@pytest.mark.parametrize("direction", [+1, -1], ids=["forward", "back"])
def test_the_gateways_clock_stepping_an_hour_loses_and_doubles_nothing(tmp_path: Path, direction: int) -> None:
    """The gateway's clock an hour off for 10 s, then right again. Within a quarter of a second
    the gateway sees its clock disagree with the session store's: it closes every session's
    connection and closes new ones before any message (``max_clock_skew``); /ready and its log
    say why (a Logout would not: the clients' engines refuse its stepped SendingTime). A request that reached the
    gateway in that quarter second is refused by its FIX engine (SendingTime accuracy problem) —
    with a Reject the client's engine refuses in turn, its SendingTime being from the stepped
    clock — or taken by it as the connection closes: those requests are the only ones without an
    answer, and none of them entered the venue (no ClOrdID claimed).
    Nothing is matched twice, no number sent twice, and the sessions log on again by themselves
    once the clocks agree."""
    shim = build_shim(tmp_path)
    clock = SteppedClock(tmp_path / "clock-offset")
    env = {"LD_PRELOAD": str(shim), "FIXGW_CLOCK_OFFSET_FILE": str(clock.path)}
    with standalone() as server:
        system = System(tmp_path, server, [server, server], gateway_env=env).start()
        stop_watch = threading.Event()
        try:
            c1, c2, dc = system.client("CLIENT1"), system.client("CLIENT2"), system.client("DROPCOPY")
            flow = Flow(c1, c2)
            clock_of_answers = AnswerClock([c1, c2])
            ready: list[tuple[float, bool, str]] = []
            threading.Thread(target=watch_ready, args=(system.gateway.http_port, ready, stop_watch),
                             daemon=True).start()
            flow.thread.start()
            time.sleep(1.5)
            start = time.monotonic()
            clock.step(direction * HOUR_NS)
            time.sleep(10)
            clock.step(0)
            fixed = time.monotonic()
            recovered = first_answered_after(flow, clock_of_answers, fixed)
            time.sleep(1)
            flow.stop.set()
            flow.thread.join(5)
            check_no_sequence_number_twice([c1, c2, dc])
            check_drop_copy_has_every_fill([c1, c2], dc)
            for p in (0, 1):
                check_partition_trades_as_the_reference(server.client(), server.client(), p, str(system.instruments))
            twice = [k for c in (c1, c2) for k, n in answers(c).items() if n > 1]
            assert not twice, f"answered more than once: {twice[:10]}"
            lost_in_the_step = unanswered_never_entered(server, flow, [c1, c2])
            seen = seen_between(flow, clock_of_answers, start, fixed)
            reasons = sorted({why.split(" (")[0] for at, ok, why in ready if at >= start and not ok})
            logouts = sorted({text for c in (c1, c2, dc) for text in c.logout_texts})
            print(f"the gateway's clock {'+' if direction > 0 else '-'}1 h for 10 s: {seen.describe()}; "
                  f"{len(lost_in_the_step)} unanswered, none of them entered ({lost_in_the_step}); a new order "
                  f"sent after the clock was right answered {recovered:.1f} s after; /ready meanwhile: {reasons}; "
                  f"Logouts: {logouts}; {len(flow.sent)} requests in all")
            assert any(why.startswith("clock: this host's clock is") for why in reasons), reasons
            # (No Logout: the clients' engines would refuse its stepped SendingTime. The gateway's
            # log and /ready say why.)
            assert "clock: this host's clock is 3600.0 s" in system.gateway.output()
            status, body = http_json(system.gateway.http_port)
            assert status == 200, body
        finally:
            stop_watch.set()
            system.stop()


def test_the_skew_is_measured_against_the_midpoint_of_the_round_trip() -> None:
    from datastore.clock import skew_problem, skew_s

    assert skew_s(1000.0, (1000, 0), 1000.2) == pytest.approx(0.1)
    assert skew_s(4600.0, (1000, 500_000), 4600.0) == pytest.approx(3599.5)
    assert skew_problem(0.5, 2.0) is None
    assert "3600.0 s ahead of" in str(skew_problem(3600.0, 2.0))
    assert "3600.0 s behind" in str(skew_problem(-3600.0, 2.0))
    assert skew_problem(3600.0, 0.0) is None  # not watched
