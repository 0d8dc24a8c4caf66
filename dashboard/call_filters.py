"""The calls page's filter form: query-string values → ``CallFilters`` or field errors.

One parser for the page's first render and for the websocket, which receives the same
query string from the open page to decide which finished calls to append live (so the
page and the live append cannot read the filters differently).

Times: ``since`` / ``until`` accept an ISO time with an offset, or the browser's
``datetime-local`` value (no zone), which is read in the server's time zone — the zone
the page prints next to every time.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from django.utils import timezone

from routing.audit.call_query import CallFilters, FilterError
from routing.audit.models import FrontDoor, Outcome

FIELDS = (
    "group",
    "target",
    "key",
    "outcome",
    "code",
    "session",
    "front_door",
    "since",
    "until",
    "fallback",
)
TEXT_MAX = 300


def _time(raw: str) -> datetime:
    value = datetime.fromisoformat(raw.strip().replace("Z", "+00:00"))
    if value.tzinfo is None:
        value = timezone.make_aware(value, timezone.get_current_timezone())
    return value


def parse_filters(values: Mapping[str, str]) -> tuple[CallFilters | None, dict[str, str]]:
    """``(filters, {})`` or ``(None, {field: message})``. Empty fields are no filter."""
    raw = {name: str(values.get(name, "") or "").strip() for name in FIELDS}
    errors: dict[str, str] = {}
    kwargs: dict[str, object] = {}
    for name in ("group", "target", "code", "session"):
        if raw[name]:
            if len(raw[name]) > TEXT_MAX or not raw[name].isprintable():
                errors[name] = f"at most {TEXT_MAX} printable characters"
            else:
                kwargs[name] = raw[name]
    if raw["key"]:
        if raw["key"].isdigit():
            kwargs["key_id"] = int(raw["key"])
        else:
            errors["key"] = "pick a key from the list"
    if raw["outcome"]:
        if raw["outcome"] in Outcome.values:
            kwargs["outcome"] = raw["outcome"]
        else:
            errors["outcome"] = f"one of {', '.join(Outcome.values)}"
    if raw["front_door"]:
        if raw["front_door"] in FrontDoor.values:
            kwargs["front_door"] = raw["front_door"]
        else:
            errors["front_door"] = f"one of {', '.join(FrontDoor.values)}"
    if raw["fallback"]:
        if raw["fallback"] in ("1", "0"):
            kwargs["fallback"] = raw["fallback"] == "1"
        else:
            errors["fallback"] = "yes, no or any"
    for name in ("since", "until"):
        if raw[name]:
            try:
                kwargs[name] = _time(raw[name])
            except ValueError:
                errors[name] = "a date and time, e.g. 2026-12-01T14:00"
    if errors:
        return None, errors
    try:
        return CallFilters(**kwargs), {}  # type: ignore[arg-type]
    except FilterError as exc:
        return None, {exc.field: exc.message}


def parse_before(value: str | None) -> int | None:
    text = (value or "").strip()
    return int(text) if text.isdigit() and int(text) > 0 else None
