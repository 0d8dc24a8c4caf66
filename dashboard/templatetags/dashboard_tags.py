"""Small formatting helpers for the dashboard templates."""

from __future__ import annotations

import json
from typing import Any

from django import template

register = template.Library()


@register.simple_tag
def server_now() -> str:
    """The gateway clock (epoch seconds): the browser corrects its countdowns by it."""
    from routing.gateway.runtime import get_runtime

    return f"{get_runtime().clock():.3f}"


@register.filter
def duration_ms(value: float | int | None) -> str:
    """``840 ms`` below a second, ``1.2 s`` above."""
    if value is None:
        return ""
    ms = float(value)
    if ms < 1000:
        return f"{ms:.0f} ms"
    return f"{ms / 1000:.1f} s"


@register.filter
def countdown(seconds: float | int | None) -> str:
    """Server-side first frame of the countdown the browser then ticks (same format)."""
    if not seconds or seconds <= 0:
        return "over, next call probes"
    whole = int(-(-float(seconds) // 1))  # ceil
    if whole < 60:
        return f"{whole} s"
    return f"{whole // 60}:{whole % 60:02d}"


@register.filter
def as_json(value: Any) -> str:
    return json.dumps(value)


@register.filter
def contains(container: Any, item: Any) -> bool:
    try:
        return item in container
    except TypeError:
        return False


@register.filter
def length_is_one(value: Any) -> bool:
    """True for a one-item list: a provider with one model adopts it (seed 003)."""
    try:
        return len(value) == 1
    except TypeError:
        return False


@register.filter
def when(value: Any) -> str:
    """Date, time with seconds and zone: ``2026-12-01 14:05:09 UTC`` (a datetime or epoch)."""
    from routing.audit.display import when as format_when

    return format_when(value)


@register.filter
def duration(value: float | int | None) -> str:
    """``0.42 ms``, ``840 ms``, ``1.24 s``, ``2 min 5 s``; ``–`` when unknown."""
    from routing.audit.display import duration as format_duration

    return format_duration(value)


@register.filter
def percent(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value * 100:.0f} %"


@register.simple_tag
def spark(values: Any, label: str, low: Any = None, high: Any = None) -> str:
    """An inline SVG sparkline of per-minute values (``dashboard.sparkline``)."""
    from dashboard.sparkline import sparkline

    return sparkline(
        list(values),
        label=label,
        low=None if low is None else float(low),
        high=None if high is None else float(high),
    )


@register.inclusion_tag("dashboard/feedback.html")
def feedback_slot(
    feedback: Any, where: str, *slot: Any, main: bool = False, reload_url: str = ""
) -> dict[str, Any]:
    """The feedback line of one slot (``dashboard.feedback``), named by its parts
    (``"target" t.id`` is the slot ``target:12``; none is the action bar's ``""``): shown
    when the answered action is this slot's, otherwise an empty hidden line that
    ``dashboard.js`` fills on a network error (the ``main`` one also on a live conflict)."""
    name = ":".join(str(part) for part in slot)
    shown = feedback if feedback and (where or "") == name else None
    return {"feedback": shown, "main": main, "reload_url": reload_url}
