"""The token bucket behind per-session throttles (pure)."""

from __future__ import annotations

import pytest

from fixgw.throttle import TokenBucket


def test_a_burst_of_one_seconds_worth_then_the_rate() -> None:
    bucket = TokenBucket(rate=5)
    assert [bucket.take(0.0) for _ in range(7)] == [True] * 5 + [False] * 2
    assert bucket.take(0.1) is False, "half a token after 0.1 s"
    assert bucket.take(0.2) is True, "one token after 0.2 s"
    assert [bucket.take(10.0) for _ in range(6)] == [True] * 5 + [False], "never more than the burst"


def test_a_rate_below_one_a_second_still_lets_one_through_every_interval() -> None:
    bucket = TokenBucket(rate=0.5)
    assert [bucket.take(0.0) for _ in range(3)] == [True, False, False]
    assert bucket.take(1.9) is False and bucket.take(2.0) is True, "one every 2 s"


def test_refused_messages_spend_nothing() -> None:
    bucket = TokenBucket(rate=2, burst=1)
    assert bucket.take(0.0) and not bucket.take(0.1) and not bucket.take(0.2)
    assert bucket.take(0.5), "0.5 s at 2/s refills one token, whatever was refused meanwhile"


def test_a_rate_must_be_positive() -> None:
    with pytest.raises(ValueError, match="must be positive"):
        TokenBucket(rate=0)
