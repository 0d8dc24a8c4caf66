"""How durations and times read to an operator, on the page and in the admin alike."""

from __future__ import annotations

from datetime import UTC, datetime

from django.utils import timezone


def duration(ms: float | int | None) -> str:
    """``0.42 ms`` / ``840 ms`` below a second, ``1.24 s`` below a minute, ``2 min 5 s``."""
    if ms is None:
        return "–"
    value = float(ms)
    if value < 10:
        return f"{value:.2f} ms"
    if value < 1000:
        return f"{value:.0f} ms"
    if value < 60_000:
        return f"{value / 1000:.2f} s"
    minutes, seconds = divmod(round(value / 1000), 60)
    return f"{minutes} min {seconds} s"


def when(value: datetime | float | None) -> str:
    """``2026-12-01 14:05:09 UTC``: date, seconds and zone (the current time zone)."""
    if value is None:
        return "–"
    if not isinstance(value, datetime):
        value = datetime.fromtimestamp(float(value), tz=UTC)
    local = timezone.localtime(value)
    return local.strftime("%Y-%m-%d %H:%M:%S ") + (local.tzname() or "")
