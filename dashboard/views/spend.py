"""The Spend page: what keys, groups and targets cost, per UTC day (SPEC §17).

A chart (``dashboard.spend_chart``) and a table, both from the call ledger
(``routing.audit.spend``), off the request path of calls. The panel reloads itself when
calls finish (``dashboard.js``: a ``call.recorded`` push arms one throttled htmx reload),
like the rest of the console; nothing polls.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from asgiref.sync import sync_to_async
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from dashboard.spend_chart import spend_chart
from dashboard.views.common import staff_required
from routing.audit.spend import spend_by_day, spend_rows

BY = ("key", "group", "target")
DAYS = (7, 30, 90)


def _context(by: str, days: int) -> dict[str, Any]:
    today = dt.datetime.now(dt.UTC).date()
    first = today - dt.timedelta(days=days - 1)
    since = dt.datetime(first.year, first.month, first.day, tzinfo=dt.UTC)
    rows = spend_by_day(by=by, since=since)  # type: ignore[arg-type]
    chart = spend_chart(rows, days=[first + dt.timedelta(days=n) for n in range(days)])
    table = spend_rows(by=by, since=since)  # type: ignore[arg-type]
    return {
        "by": by,
        "days": days,
        "by_choices": BY,
        "day_choices": DAYS,
        "chart": chart,
        "legend": list(enumerate(chart.series)),
        "table": [{**row, "name": row[by] or "–"} for row in table],
        "since": first,
    }


@require_GET
@staff_required
async def spend_page(request: HttpRequest) -> HttpResponse:
    by = request.GET.get("by", "key")
    by = by if by in BY else "key"
    try:
        days = int(request.GET.get("days", "30"))
    except ValueError:
        days = 30
    days = days if days in DAYS else 30
    context = await sync_to_async(_context)(by, days)
    if request.headers.get("hx-request"):
        return render(request, "dashboard/spend.html#spend_panel", context)
    return render(request, "dashboard/spend.html", {**context, "nav": "spend"})
