"""Session schedules (fixgw/schedule.py): logons outside refused, logged out at the end, a new
FIX session at the start of the next period (1/1, the old period's messages dropped or kept),
exactly once across a takeover, and the store of a weekly session within the sizing figure."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from pathlib import Path
from time import sleep

import pytest

from datastore.connection import connect
from datastore.embedded import ValkeyProcess, free_port, standalone
from datastore.settings import RedisEndpoint
from fixgw.schedule import Schedule
from sessionstore import FixedEpoch, OutboundRecord, SessionKey, SessionStore
from sessionstore.sizing import days_kept, estimate
from tests.gateway_helpers import GatewayProc, RawFixClient, parse, wait_until
from tests.store_helpers import report_text

CLIENT1 = SessionKey("t", "fsg", "CLIENT1")
NY = "America/New_York"


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


# --- the schedule, pure -------------------------------------------------------------------------

def test_a_daily_window_its_periods_and_boundaries() -> None:
    s = Schedule.parse("08:00:00", "17:00:00", time_zone=NY)
    p = s.period_at(at("2026-12-03T12:00:00-05:00"))
    assert p is not None and p.start == at("2026-12-03T08:00:00-05:00") and p.end == at("2026-12-03T17:00:00-05:00")
    assert s.period_at(at("2026-12-03T17:00:00-05:00")) is None, "the end is not in the period"
    assert s.next_boundary(at("2026-12-03T18:00:00-05:00")) == at("2026-12-04T08:00:00-05:00")
    assert s.describe() == "daily 08:00:00 to 17:00:00 America/New_York"


def test_a_daily_window_across_midnight_and_a_continuous_one() -> None:
    night = Schedule.parse("17:00:00", "16:00:00", time_zone=NY)
    p = night.period_at(at("2026-12-04T09:00:00-05:00"))
    assert p is not None and p.start == at("2026-12-03T17:00:00-05:00") and p.end == at("2026-12-04T16:00:00-05:00")
    assert night.period_at(at("2026-12-04T16:30:00-05:00")) is None
    always = Schedule.parse("17:00:00", "17:00:00", time_zone=NY)
    assert always.continuous
    q = always.period_at(at("2026-12-04T16:59:59-05:00"))
    r = always.period_at(at("2026-12-04T17:00:00-05:00"))
    assert q is not None and r is not None and q.end == r.start == at("2026-12-04T17:00:00-05:00")


def test_wall_clock_times_hold_across_a_daylight_saving_change() -> None:
    s = Schedule.parse("17:00:00", "17:00:00", time_zone=NY)
    before = s.period_at(at("2026-03-07T18:00:00-05:00"))  # the US moves to EDT on 2026-03-08
    after = s.period_at(at("2026-03-08T18:00:00-04:00"))
    assert before is not None and after is not None
    assert before.end == after.start == at("2026-03-08T17:00:00-04:00")
    assert after.start - before.start == timedelta(hours=23)


def test_a_weekly_session() -> None:
    s = Schedule.parse("17:00:00", "17:00:00", "sunday", "friday", NY)
    assert s.weekly and not s.continuous and s.length == timedelta(days=7)
    p = s.period_at(at("2026-12-02T10:00:00-05:00"))  # a Wednesday
    assert p is not None and p.start == at("2026-11-29T17:00:00-05:00") and p.end == at("2026-12-04T17:00:00-05:00")
    assert s.period_at(at("2026-12-05T12:00:00-05:00")) is None, "Saturday: closed"
    assert s.next_boundary(at("2026-12-05T12:00:00-05:00")) == at("2026-12-06T17:00:00-05:00")
    with pytest.raises(ValueError, match="go together"):
        Schedule(time(17), time(17), start_day=6)
    with pytest.raises(ValueError, match="not a day"):
        Schedule.parse("17:00:00", "17:00:00", "someday", "friday")
    with pytest.raises(ValueError, match="not a known time zone"):
        Schedule.parse("17:00:00", "17:00:00", time_zone="Mars/Olympus")


def test_a_new_period_is_due_once() -> None:
    s = Schedule.parse("17:00:00", "17:00:00", time_zone=NY)
    now = at("2026-12-04T17:00:01-05:00")
    due = s.new_period_due(at("2026-12-03T17:00:00-05:00").timestamp() * 1e9, now)
    assert due is not None and due.start == at("2026-12-04T17:00:00-05:00")
    assert s.new_period_due(due.start_ns, now) is None, "started already"
    assert s.new_period_due(due.start_ns + 5_000_000_000, now) is None, "reset by a Logon within the period"


# --- on a running gateway ----------------------------------------------------------------------

def schedule_lines(start: datetime, end: datetime, keep: int = 0) -> str:
    return (f'[gateway.schedule]\nstart_time = "{start.strftime("%H:%M:%S")}"\nend_time = "{end.strftime("%H:%M:%S")}"\n'
            f'time_zone = "UTC"\nkeep_periods = {keep}\n')


def soon(seconds: float) -> datetime:
    return (datetime.now(UTC) + timedelta(seconds=seconds)).replace(microsecond=0)


def logon(port: int, seq: int) -> tuple[RawFixClient, dict[int, bytes]]:
    c = RawFixClient(port, sender="CLIENT1", seq=seq)
    c.send("35=A\x0198=0\x01108=30")
    raw = c.read(timeout=15)
    assert raw is not None
    return c, parse(raw)


def order(c: RawFixClient, clordid: str) -> None:
    c.send(f"35=D\x0111={clordid}\x0121=1\x0155=ACME\x0154=1\x0160=20261203-10:00:00\x0138=1\x0140=1")


def started_at(log: str, boundary: datetime) -> int:
    """How many times the log says CLIENT1's period starting at ``boundary`` was started."""
    return log.count(f"t/fsg/CLIENT1: a new period of its schedule (daily, a new period at "
                     f"{boundary.strftime('%H:%M:%S')} UTC) started at {boundary.isoformat()}")


def stored(url: str):  # type: ignore[no-untyped-def]
    return SessionStore(connect(RedisEndpoint(url=url)), FixedEpoch(0)).load_state(CLIENT1)


@pytest.mark.slow
def test_a_logon_outside_the_schedule_is_refused_naming_it(tmp_path: Path, valkey: ValkeyProcess) -> None:
    port = free_port()
    gw = GatewayProc(tmp_path, valkey.url, fix_port=port, extra=schedule_lines(soon(3600), soon(7200))).start()
    gw.wait_active()
    try:
        c, answer = logon(port, 1)
        c.close()
        assert answer[35] == b"5" and b"outside the session's schedule (daily" in answer[58], answer
        assert b"it opens at" in answer[58]
    finally:
        gw.stop()


@pytest.mark.slow
def test_logged_out_at_the_end_of_a_window(tmp_path: Path, valkey: ValkeyProcess) -> None:
    port = free_port()
    end = soon(15)  # (room for a slow start under a loaded machine)
    gw = GatewayProc(tmp_path, valkey.url, fix_port=port, extra=schedule_lines(soon(-60), end)).start()
    gw.wait_active()
    try:
        c, answer = logon(port, 1)
        assert answer[35] == b"A", answer
        logout = c.read(timeout=20)
        while logout is not None and parse(logout)[35] != b"5":
            logout = c.read(timeout=20)
        assert logout is not None and b"the session's period ended" in parse(logout)[58], logout
        assert datetime.now(UTC) >= end
        c.close()
        sleep(2.5)  # (the gateway takes Logons for a session again 2 s after a Logout it sent)
        again, answer = logon(port, 2)
        again.close()
        assert answer[35] == b"5" and b"outside the session's schedule" in answer[58], answer
    finally:
        gw.stop()


@pytest.mark.slow
@pytest.mark.parametrize("keep", [0, 2], ids=["old-period-dropped", "old-period-kept-2"])
def test_a_new_fix_session_at_the_boundary(tmp_path: Path, valkey: ValkeyProcess, keep: int) -> None:
    """A session open all day with its boundary in a few seconds: the logged-on client is logged
    out at the boundary; the stored session is new — 1/1, sessionStartTime the boundary — and
    the previous period's messages are gone (or kept under their period's keys, expiring after
    ``keep_periods``); the client logs on with 1 and is answered with 1."""
    port = free_port()
    boundary = soon(15)  # (room for a slow start under a loaded machine)
    gw = GatewayProc(tmp_path, valkey.url, fix_port=port, extra=schedule_lines(boundary, boundary, keep)).start()
    gw.wait_active()
    assert datetime.now(UTC) < boundary - timedelta(seconds=3), "the gateway started too late for this test"
    try:
        c, answer = logon(port, 1)
        assert answer[35] == b"A"
        for i in range(5):
            order(c, f"O{i}")
        wait_until(lambda: stored(valkey.url).last_sent_seq_num >= 6, "the echoes stored")
        old_start = stored(valkey.url).session_start_time
        wait_until(lambda: stored(valkey.url).session_start_time == int(boundary.timestamp()) * 10**9,
                   "the new period", 20)
        state = stored(valkey.url)
        assert (state.sender_seq_num, state.target_seq_num, state.last_sent_seq_num) == (1, 1, 0)
        client = valkey.client()
        assert client.hlen(CLIENT1.chunk(0)) == 0, "the old period's chunk is gone from the session"
        kept = client.hgetall(CLIENT1.archived_chunk(old_start, 0))
        if keep:
            assert len(kept) >= 7 and 0 < client.pttl(CLIENT1.archived_chunk(old_start, 0)) <= 2 * 86_400_000
        else:
            assert not kept
        c.close()
        again, answer = logon(port, 1)
        again.close()
        assert answer[35] == b"A" and answer[34] == b"1", answer
        assert started_at(gw.output(), boundary) == 1
    finally:
        gw.stop()


@pytest.mark.slow
@pytest.mark.parametrize("kill", ["before", "after"])
def test_a_takeover_across_the_boundary_starts_the_period_once(tmp_path: Path, valkey: ValkeyProcess,
                                                              kill: str) -> None:
    """SIGKILL of the active gateway just before the boundary, the standby taking over after it:
    the period starts (not skipped). SIGKILL after the active one started it and the client
    traded in it: the standby does not start it again (the client's numbers go on)."""
    port = free_port()
    boundary = soon(18 if kill == "before" else 12)  # (room for two slow starts under a loaded machine)
    lines = schedule_lines(boundary, boundary)
    active = GatewayProc(tmp_path, valkey.url, name="a", fix_port=port, extra=lines, lock_ttl="3s",
                         renewal="500ms").start().wait_active()
    standby = GatewayProc(tmp_path, valkey.url, name="b", fix_port=port, extra=lines, lock_ttl="3s",
                          renewal="500ms").start()
    try:
        if kill == "before":
            c, _ = logon(port, 1)
            order(c, "B1")
            wait_until(lambda: stored(valkey.url).last_sent_seq_num >= 2, "stored")
            c.close()
            wait_until(lambda: datetime.now(UTC) >= boundary - timedelta(seconds=2), "just before the boundary", 20)
            active.kill()
            standby.wait_active(30)
            assert datetime.now(UTC) > boundary
            state = stored(valkey.url)
            assert state.session_start_time == int(boundary.timestamp()) * 10**9 and state.sender_seq_num == 1
        else:
            wait_until(lambda: stored(valkey.url).session_start_time == int(boundary.timestamp()) * 10**9,
                       "the new period", 20)
            c, answer = logon(port, 1)
            assert answer[35] == b"A"
            for i in range(3):
                order(c, f"A{i}")
            wait_until(lambda: stored(valkey.url).last_sent_seq_num >= 4, "stored")
            c.close()
            active.kill()
            standby.wait_active(30)
            state = stored(valkey.url)
            assert state.session_start_time == int(boundary.timestamp()) * 10**9
            assert state.last_sent_seq_num >= 4, "the period was not started a second time"
            assert started_at(standby.output(), boundary) == 0
        started = started_at(active.output(), boundary) + started_at(standby.output(), boundary)
        assert started == 1, (active.output()[-2000:], standby.output()[-2000:])
    finally:
        active.kill()
        standby.stop()


@pytest.mark.slow
def test_a_week_of_a_weekly_session_stays_within_the_sizing_figure() -> None:
    """A weekly session (Sunday 17:00 to Friday 17:00 New York) driven through a week by its
    schedule: each trading day's reports are stored, at the next Sunday's start the period
    starts new; Valkey's memory at the end of the week, before the reset, stays within what
    `fixgw-sizing --schedule weekly` says for the same flow, and the reset gives it back."""
    orders_per_day, messages_per_order = 600, 5
    schedule = Schedule.parse("17:00:00", "17:00:00", "sunday", "friday", NY)
    size = len(record(1).body)
    figure = estimate(orders_per_day, messages_per_order, days_kept("weekly"), 1, message_size=size)
    with standalone() as server:
        client = connect(RedisEndpoint(url=server.url))
        store = SessionStore(client, FixedEpoch(1))
        store.stamp_owner(CLIENT1)
        base = int(client.info("memory")["used_memory"])
        now = at("2026-11-29T17:00:00-05:00")
        period = schedule.period_at(now)
        assert period is not None
        store.start_period(CLIENT1, period.start_ns)
        seq, peak, after = 0, 0, 0
        while now < at("2026-12-06T17:00:01-05:00"):
            due = schedule.new_period_due(store.load_state(CLIENT1).session_start_time, now)
            if due is not None:
                peak = max(peak, int(client.info("memory")["used_memory"]) - base)
                assert store.start_period(CLIENT1, due.start_ns)
                after = freed(client, base, peak)
                seq = 0
            if schedule.period_at(now) is not None:
                day = [record(s) for s in range(seq + 1, seq + 1 + orders_per_day * messages_per_order)]
                for i in range(0, len(day), 500):
                    store.commit_outbound_many(CLIENT1, day[i:i + 500])
                seq += len(day)
            now += timedelta(days=1)
        print(f"a week of a weekly session: {peak:,} bytes at the end of the week; fixgw-sizing --schedule weekly: "
              f"{figure.primary_bytes:,}; after the new period: {after:,}")
        assert peak > 0 and peak <= figure.primary_bytes, (peak, figure)
        assert after < peak / 5, "the new period gave the week's memory back"


def freed(client, base: int, peak: int) -> int:  # type: ignore[no-untyped-def]
    """Memory used above ``base`` once the server has freed what was dropped (it frees big values
    on a thread of its own: lazyfree), within a few seconds."""
    for _ in range(50):
        used = int(client.info("memory")["used_memory"]) - base
        if used < peak / 5:
            return used
        sleep(0.1)
    return used


def record(seq: int) -> OutboundRecord:
    from fixgw.fixmsg import filled_body

    body = filled_body(report_text(seq), "FIX.4.4", "FIXGW", "CLIENT1", seq, "20261203-10:00:00.000")
    return OutboundRecord(seq, 0, b"8", body)

