"""Reads of audit records for the API (async ORM; one query per table)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Literal

from django.db.models import Count, Max, Prefetch, QuerySet

from routing.audit.models import Attempt, Call, ConfigChange, Fallback, HealthTransition

EventKindName = Literal["fallback", "health", "config"]
EventRow = Fallback | HealthTransition | ConfigChange

_EVENT_MODELS: dict[str, type[EventRow]] = {
    "fallback": Fallback,
    "health": HealthTransition,
    "config": ConfigChange,
}


async def calls_recent(*, group: str | None = None, limit: int = 50) -> list[Call]:
    """Newest calls first, each with its attempts in order (``call.attempts.all()``)."""
    calls = Call.objects.order_by("-id").prefetch_related(
        Prefetch("attempts", queryset=Attempt.objects.order_by("index"))
    )
    if group:
        calls = calls.filter(group=group)
    return [call async for call in calls[:limit]]


async def calls_count(*, group: str | None = None) -> int:
    """How many call records are kept (for one group)."""
    calls = Call.objects.all()
    if group:
        calls = calls.filter(group=group)
    return await calls.acount()


def event_kind(row: EventRow) -> EventKindName:
    if isinstance(row, Fallback):
        return "fallback"
    if isinstance(row, HealthTransition):
        return "health"
    return "config"


async def events_recent(
    *, kind: EventKindName | None = None, since: datetime | None = None, limit: int = 100
) -> list[EventRow]:
    """Fallback, health and config-change records after ``since``, newest first."""
    rows: list[EventRow] = []
    for name, model in _EVENT_MODELS.items():
        if kind is not None and kind != name:
            continue
        query = model._default_manager.order_by("-at", "-id")
        if since is not None:
            query = query.filter(at__gt=since)
        rows.extend([row async for row in query[:limit]])
    rows.sort(key=lambda row: row.at, reverse=True)
    return rows[:limit]


def key_usage_query() -> QuerySet[Call, Mapping[str, Any]]:
    """Per key: its calls and its newest call's id. ``COUNT(*)`` and ``MAX(id)`` grouped
    by ``key_id`` read the ``(key_id, id)`` index alone (a covering scan, no table row
    touched); ``MAX(started_at)`` here would fetch every call row of the ledger."""
    return (
        Call.objects.filter(key_id__isnull=False)
        .order_by()
        .values("key_id")
        .annotate(calls=Count("*"), newest=Max("id"))
    )


_LOOKUP_BATCH = 500  # ids per IN (...): under every backend's parameter limit


def key_usage() -> dict[int, tuple[int, datetime | None]]:
    """``{key id: (calls, last used)}`` from the ledger (sync ORM; a page render, never a
    call). Calls pruned by retention no longer count.

    Two cheap reads instead of one that walks the ledger: :func:`key_usage_query`, then
    the newest calls themselves by primary key (one row per key). "Last used" is the start
    of the key's newest *recorded* call: ids follow the order calls are recorded (when they
    finish), so it is exact unless a long call of that key outlived a later one, and then
    earlier by at most that call's duration.
    """
    rows = list(key_usage_query())
    newest = [row["newest"] for row in rows]
    started: dict[int, datetime] = {}
    for at in range(0, len(newest), _LOOKUP_BATCH):
        batch = newest[at : at + _LOOKUP_BATCH]
        started.update(Call.objects.filter(id__in=batch).values_list("id", "started_at"))
    return {row["key_id"]: (row["calls"], started.get(row["newest"])) for row in rows}
