"""Retention: audit records are bounded by age and by count, per table.

``SWITCHYARD["AUDIT_MAX_AGE_DAYS"]`` (default 30) and ``SWITCHYARD["AUDIT_MAX_ROWS"]``
(default 200 000, per table) bound them; either may be 0/None to disable that bound.
The writer thread applies them every ``PRUNE_EVERY_S``; ``manage.py prune_records`` on
demand. Each table is pruned with one DELETE per bound (attempts before their calls),
never by loading rows into Python.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db import models, transaction
from django.db.models import Q
from django.utils import timezone

from routing.audit.models import Attempt, Call, ConfigChange, Fallback, HealthTransition
from routing.conf import switchyard_settings


def retention_from_settings() -> dict[str, Any]:
    """``records_prune`` keyword arguments from ``settings.SWITCHYARD``."""
    conf = switchyard_settings()
    days, rows = conf.AUDIT_MAX_AGE_DAYS, conf.AUDIT_MAX_ROWS
    return {
        "max_age": timedelta(days=days) if days else None,
        "max_rows": rows if rows else None,
    }


def _doomed(
    model: type[models.Model],
    time_field: str,
    max_age: timedelta | None,
    max_rows: int | None,
    now: datetime,
) -> Q:
    """Rows older than ``max_age`` or beyond the newest ``max_rows`` (by id)."""
    condition = Q()
    if max_age is not None:
        condition |= Q(**{f"{time_field}__lt": now - max_age})
    if max_rows is not None:
        boundary = list(
            model._default_manager.order_by("-id").values_list("id", flat=True)[
                max_rows : max_rows + 1
            ]
        )
        if boundary:
            condition |= Q(id__lte=boundary[0])
    return condition


def records_prune(
    *, max_age: timedelta | None, max_rows: int | None, now: datetime | None = None
) -> dict[str, int]:
    """Delete audit records beyond the bounds; returns how many of each kind went."""
    now = now or timezone.now()
    deleted = {"calls": 0, "attempts": 0, "fallbacks": 0, "health": 0, "config_changes": 0}
    with transaction.atomic():
        doomed = _doomed(Call, "started_at", max_age, max_rows, now)
        if doomed:
            calls = Call.objects.filter(doomed)
            deleted["attempts"] = Attempt.objects.filter(
                call_id__in=calls.values("call_id")
            ).delete()[0]
            deleted["calls"] = calls.delete()[0]
        for name, model in (
            ("fallbacks", Fallback),
            ("health", HealthTransition),
            ("config_changes", ConfigChange),
        ):
            doomed = _doomed(model, "at", max_age, max_rows, now)
            if doomed:
                deleted[name] = model._default_manager.filter(doomed).delete()[0]
    return deleted
