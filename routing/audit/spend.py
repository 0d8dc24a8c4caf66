"""Spend read from the call ledger, off the request path (SPEC §17): calls, tokens and
cost per key, group, serving target or UTC day, over a time range.

Refused calls are left out (they reached no upstream and cost nothing); a call without
usage counts as a call with no tokens; ``cost`` is null when no call in the row had one
(never 0 for "unknown").
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from django.db.models import Count, Q, QuerySet, Sum
from django.db.models.functions import TruncDate

from routing.audit.models import Call, Outcome

By = Literal["key", "group", "target", "day"]
BY_VALUES: tuple[str, ...] = ("key", "group", "target", "day")


def _calls(
    since: dt.datetime | None, until: dt.datetime | None, key_id: int | None
) -> QuerySet[Call]:
    calls = Call.objects.exclude(outcome=Outcome.REFUSED)
    if since is not None:
        calls = calls.filter(started_at__gte=since)
    if until is not None:
        calls = calls.filter(started_at__lt=until)
    if key_id is not None:
        calls = calls.filter(key_id=key_id)
    return calls


def spend_rows(
    *,
    by: By,
    since: dt.datetime | None = None,
    until: dt.datetime | None = None,
    key_id: int | None = None,
) -> list[dict[str, Any]]:
    """Rows of ``{<by>: value, calls, tokens, cost}``, largest cost first (days in order)."""
    calls = _calls(since, until, key_id)
    if by == "day":
        calls = calls.annotate(day=TruncDate("started_at", tzinfo=dt.UTC))
    column = {"key": "key_name", "group": "group", "target": "served_by", "day": "day"}[by]
    rows = (
        calls.values(column)
        .annotate(calls=Count("id"), tokens=Sum("total_tokens"), cost=Sum("cost"))
        .order_by(column)
    )
    out = [
        {
            by: (row[column].isoformat() if by == "day" else row[column]) or None,
            "calls": row["calls"],
            "tokens": row["tokens"] or 0,
            "cost": row["cost"],
        }
        for row in rows
    ]
    if by != "day":
        out.sort(key=lambda r: (-(r["cost"] or 0.0), -r["tokens"], str(r[by])))
    return out


def spend_totals(*, since: dt.datetime | None = None, key_id: int | None = None) -> dict[str, Any]:
    row = _calls(since, None, key_id).aggregate(
        calls=Count("id"),
        tokens=Sum("total_tokens"),
        cost=Sum("cost", filter=Q(cost__isnull=False)),
    )
    return {"calls": row["calls"], "tokens": row["tokens"] or 0, "cost": row["cost"]}


def day_start(now: dt.datetime) -> dt.datetime:
    return now.astimezone(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def month_start(now: dt.datetime) -> dt.datetime:
    return day_start(now).replace(day=1)


def spend_by_day(
    *, by: Literal["key", "group", "target"], since: dt.datetime, key_id: int | None = None
) -> list[dict[str, Any]]:
    """``{day, name, calls, tokens, cost}`` per UTC day and key, group or serving target
    (the Spend page's chart), oldest day first."""
    column = {"key": "key_name", "group": "group", "target": "served_by"}[by]
    rows = (
        _calls(since, None, key_id)
        .annotate(day=TruncDate("started_at", tzinfo=dt.UTC))
        .values("day", column)
        .annotate(calls=Count("id"), tokens=Sum("total_tokens"), cost=Sum("cost"))
        .order_by("day", column)
    )
    return [
        {
            "day": row["day"],
            "name": row[column] or "–",
            "calls": row["calls"],
            "tokens": row["tokens"] or 0,
            "cost": row["cost"],
        }
        for row in rows
    ]
