"""Session schedules in QuickFIX's vocabulary: a start and end time, optionally a start and end
day, in a time zone. Pure: every answer is for a ``now`` given by the caller.

- Daily (no days): every day from ``start_time`` to ``end_time``; an end at or before the start
  runs into the next day, and an end equal to the start is a session that never closes and
  starts a new period every day at that time.
- Weekly (``start_day`` and ``end_day``): from the start day's start time to the end day's end
  time, once a week; the same day and time at both ends: a session that never closes and starts
  a new period every week.

Times are wall-clock times of ``time_zone`` (a daylight-saving change moves the UTC instant,
never the wall-clock time). A *period* is one such window; its start is the
``sessionStartTime`` the session store records for it (``docs/operations.md#session-schedules``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")


def parse_day(text: str) -> int:
    """Monday = 0 … Sunday = 6, from a day's name or its first two or more letters (as QuickFIX)."""
    t = text.strip().lower()
    found = [i for i, d in enumerate(DAYS) if len(t) >= 2 and d.startswith(t)]
    if len(found) != 1:
        raise ValueError(f"{text!r} is not a day of the week (monday … sunday)")
    return found[0]


def parse_time(text: str) -> time:
    try:
        return time.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"{text!r} is not a time of day (HH:MM:SS)") from None


@dataclass(frozen=True)
class Period:
    start: datetime  # aware, UTC
    end: datetime | None  # aware, UTC; None: the session never closes (the next period starts here)

    @property
    def start_ns(self) -> int:
        return int(self.start.timestamp()) * 1_000_000_000 + self.start.microsecond * 1000


@dataclass(frozen=True)
class Schedule:
    start_time: time
    end_time: time
    start_day: int | None = None
    end_day: int | None = None
    time_zone: str = "UTC"

    def __post_init__(self) -> None:
        if (self.start_day is None) != (self.end_day is None):
            raise ValueError("start_day and end_day go together (both, for a weekly session, or neither)")
        try:
            ZoneInfo(self.time_zone)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"time_zone {self.time_zone!r} is not a known time zone (e.g. America/New_York)") from None

    @classmethod
    def parse(cls, start_time: str, end_time: str, start_day: str | None = None, end_day: str | None = None,
              time_zone: str = "UTC") -> Schedule:
        return cls(parse_time(start_time), parse_time(end_time),
                   parse_day(start_day) if start_day is not None else None,
                   parse_day(end_day) if end_day is not None else None, time_zone)

    @property
    def weekly(self) -> bool:
        return self.start_day is not None

    @property
    def continuous(self) -> bool:
        """Never closed: one period ends where the next starts."""
        return self.start_time == self.end_time and self.start_day == self.end_day

    @property
    def length(self) -> timedelta:
        """How long a period lasts at most (a week or a day: what the store keeps per period)."""
        return timedelta(days=7 if self.weekly else 1)

    def describe(self) -> str:
        tz = self.time_zone
        if self.weekly:
            assert self.start_day is not None and self.end_day is not None
            return (f"weekly {DAYS[self.start_day].title()} {self.start_time} to {DAYS[self.end_day].title()} "
                    f"{self.end_time} {tz}")
        if self.continuous:
            return f"daily, a new period at {self.start_time} {tz}"
        return f"daily {self.start_time} to {self.end_time} {tz}"

    def _at(self, day: date, t: time) -> datetime:
        return datetime.combine(day, t, tzinfo=ZoneInfo(self.time_zone)).astimezone(UTC)

    def _window(self, start_day: date) -> Period:
        """The period starting on ``start_day`` (local date)."""
        start = self._at(start_day, self.start_time)
        if self.continuous:
            step = 7 if self.weekly else 1
            return Period(start, self._at(start_day + timedelta(days=step), self.start_time))
        if self.weekly:
            assert self.start_day is not None and self.end_day is not None
            days = (self.end_day - self.start_day) % 7
            if days == 0 and self.end_time <= self.start_time:
                days = 7
        else:
            days = 1 if self.end_time <= self.start_time else 0
        return Period(start, self._at(start_day + timedelta(days=days), self.end_time))

    def _starts_around(self, now: datetime) -> list[date]:
        """Local dates on which a period may start that could contain ``now`` or follow it."""
        local = now.astimezone(ZoneInfo(self.time_zone)).date()
        if not self.weekly:
            return [local - timedelta(days=1), local, local + timedelta(days=1)]
        assert self.start_day is not None
        this_week = local - timedelta(days=(local.weekday() - self.start_day) % 7)
        return [this_week - timedelta(days=7), this_week, this_week + timedelta(days=7)]

    def period_at(self, now: datetime) -> Period | None:
        """The period ``now`` falls in, or None (outside the schedule)."""
        for day in self._starts_around(now):
            p = self._window(day)
            assert p.end is not None
            if p.start <= now < p.end:
                return p
        return None

    def next_boundary(self, now: datetime) -> datetime:
        """When the session next opens or closes (a continuous one: its next period's start)."""
        p = self.period_at(now)
        if p is not None:
            assert p.end is not None
            return p.end
        return min(w.start for w in map(self._window, self._starts_around(now)) if w.start > now)

    def new_period_due(self, stored_start_ns: int | None, now: datetime) -> Period | None:
        """The period to start now — the one ``now`` is in, when the stored session began before
        it — or None (none due: outside the schedule, or the session is this period's already).
        A reset at Logon (ResetSeqNumFlag) during the period leaves a later start: none due."""
        p = self.period_at(now)
        if p is None:
            return None
        if stored_start_ns is not None and stored_start_ns >= p.start_ns:
            return None
        return p


def utc_now() -> datetime:
    return datetime.now(UTC)
