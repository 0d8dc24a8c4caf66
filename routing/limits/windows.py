"""UTC calendar windows: a window's id (part of a counter's name) and when it resets.

Minute and day are arithmetic on the epoch (a UTC day is exactly 86 400 s: POSIX time
has no leap seconds); a month needs the calendar, computed once per day and cached.
"""

from __future__ import annotations

import datetime as dt
from enum import StrEnum
from functools import lru_cache

DAY_S = 86_400


class Window(StrEnum):
    MINUTE = "minute"
    DAY = "day"
    MONTH = "month"
    SESSION = "session"  # a session's whole life (no reset)
    IN_FLIGHT = "in flight"  # concurrency: frees when a call ends


def minute(now: float) -> tuple[int, float]:
    start = int(now // 60)
    return start, (start + 1) * 60.0


def day(now: float) -> tuple[int, float]:
    number = int(now // DAY_S)
    return number, (number + 1) * float(DAY_S)


def month(now: float) -> tuple[int, float]:
    return _month_of_day(int(now // DAY_S))


@lru_cache(maxsize=64)
def _month_of_day(day_number: int) -> tuple[int, float]:
    date = dt.date(1970, 1, 1) + dt.timedelta(days=day_number)
    following = dt.date(date.year + date.month // 12, date.month % 12 + 1, 1)
    reset = dt.datetime(following.year, following.month, 1, tzinfo=dt.UTC).timestamp()
    return date.year * 100 + date.month, reset


def when(epoch: float) -> str:
    """A reset time as operators read it: ``2026-12-04T17:31:00Z``."""
    return dt.datetime.fromtimestamp(epoch, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
