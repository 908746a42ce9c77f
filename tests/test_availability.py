"""How work waits for a datastore to have a primary again (``datastore.availability``), and
how a datastore is named in one line (``datastore.settings.parse_address``)."""

from __future__ import annotations

import pytest

from datastore.availability import Availability
from datastore.settings import ConfigError, RedisEndpoint, parse_address
from sessionstore import FencedWrite, StoreUnavailable

pytestmark = pytest.mark.slow  # starts servers or processes: not in `make unit`


class Clock:
    """Time that moves only when the code under test sleeps."""

    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def flaky(failures: int, error: Exception | None = None) -> tuple[list[int], object]:
    calls: list[int] = []

    def operation() -> str:
        calls.append(1)
        if len(calls) <= failures:
            raise error or StoreUnavailable("Redis unreachable: No master found for 'fixgw'")
        return "done"

    return calls, operation


def test_an_operation_is_held_through_a_failover_and_succeeds_once_a_primary_answers() -> None:
    clock = Clock()
    availability = Availability("session store", 20.0, (StoreUnavailable,), clock=clock, sleep=clock.sleep)
    seen: list[list[str]] = []
    calls, operation = flaky(6)

    def may_go_on() -> None:
        seen.append(availability.problems())

    assert availability.call(operation, may_go_on) == "done"  # type: ignore[arg-type]
    assert len(calls) == 7
    assert seen[0] and seen[0][0].startswith("session store: not taking writes for 0.0s")
    assert "No master found" in seen[-1][0]
    assert availability.problems() == [], "back: nothing missing"
    assert availability.outages == 1 and availability.held_total == 1
    assert clock.slept == [0.02, 0.04, 0.08, 0.16, 0.32, 0.5], "backoff doubles up to half a second"


def test_the_wait_is_bounded_and_the_last_error_is_raised_after_it() -> None:
    clock = Clock()
    availability = Availability("session store", 2.0, (StoreUnavailable,), clock=clock, sleep=clock.sleep)
    calls, operation = flaky(10_000)
    with pytest.raises(StoreUnavailable, match="No master found"):
        availability.call(operation)  # type: ignore[arg-type]
    assert clock.now - 100.0 == pytest.approx(2.0)
    assert availability.down_for == pytest.approx(2.0), "still missing: /ready keeps saying so"


def test_a_caller_that_lost_its_lock_stops_waiting_at_once() -> None:
    clock = Clock()
    availability = Availability("session store", 20.0, (StoreUnavailable,), clock=clock, sleep=clock.sleep)
    calls, operation = flaky(10_000)

    def lock_lost() -> None:
        raise FencedWrite("{fixgw/fsg} lock not held: could not renew before the lease ran out")

    with pytest.raises(FencedWrite):
        availability.call(operation, lock_lost)  # type: ignore[arg-type]
    assert len(calls) == 1 and clock.slept == []


def test_errors_that_are_not_transient_are_not_retried() -> None:
    clock = Clock()
    availability = Availability("session store", 20.0, (StoreUnavailable,), clock=clock, sleep=clock.sleep)
    calls, operation = flaky(1, ValueError("a bug"))
    with pytest.raises(ValueError):
        availability.call(operation)  # type: ignore[arg-type]
    assert len(calls) == 1 and availability.problems() == []


@pytest.mark.parametrize("address, fields", [
    ("redis://10.0.0.7:6379/0", {"url": "redis://10.0.0.7:6379/0"}),
    ("rediss://db.example:6380/2", {"url": "rediss://db.example:6380/2"}),
    ("unix:///run/valkey.sock", {"url": "unix:///run/valkey.sock"}),
    ("sentinel://s1:26379,s2:26379,s3:26379/matching-p1",
     {"sentinels": ["s1:26379", "s2:26379", "s3:26379"], "sentinelGroup": "matching-p1"}),
    ("cluster://n1:6379,n2:6379", {"nodes": ["n1:6379", "n2:6379"]}),
])
def test_a_datastore_is_named_in_one_line_and_written_back_the_same(address: str, fields: dict[str, object]) -> None:
    assert parse_address(address) == fields
    endpoint = RedisEndpoint(url="redis://127.0.0.1:1/0", username="cell", socketTimeout="5s").at(address)
    assert endpoint.address == address
    assert (endpoint.username, endpoint.socketTimeout) == ("cell", 5.0), "the client settings are kept"


@pytest.mark.parametrize("address, reason", [
    ("10.0.0.7:6379", "write one of redis://"),
    ("sentinel://s1:26379,s2:26379", "sentinel://host:port,host:port/group"),
    ("sentinel://s1/group", "'s1' must be host:port"),
    ("cluster://", "cluster://host:port"),
    ("mongodb://x:1", "unknown scheme 'mongodb'"),
])
def test_a_bad_address_is_refused_with_the_forms_it_may_take(address: str, reason: str) -> None:
    with pytest.raises(ConfigError, match=reason.replace("/", ".").replace("(", ".")):
        parse_address(address)


def test_an_operation_waiting_long_for_a_reply_is_reported_before_it_fails() -> None:
    """A stalled datastore (paused, or a partition that drops packets) answers nothing: no error
    for socketTimeout × maxAttempts, yet /ready must already say so."""
    clock = Clock()
    availability = Availability("session store", 20.0, (StoreUnavailable,), clock=clock, sleep=clock.sleep)
    seen: list[list[str]] = []

    def slow() -> str:
        clock.now += 0.5
        seen.append(availability.problems())
        clock.now += 1.0
        seen.append(availability.problems())
        return "done"

    assert availability.call(slow) == "done"
    assert seen[0] == [], "half a second is a slow reply, not a problem"
    assert seen[1] == ["session store: an operation has waited 1.5s for a reply"]
    assert availability.problems() == []
