"""The calls page: every call, newest first, filtered, paged by keyset, appended live; and
one call's detail (attempts, timings, tokens, rewrites, the served-by-fallback mark).

Bad filter values answer 422 with the form's field errors and no rows (nothing is
guessed). The first page (no ``before``) registers its filters on the websocket, which
appends the calls that match as they finish (``dashboard.consumers``).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from asgiref.sync import sync_to_async
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from dashboard.call_filters import FIELDS, parse_before, parse_filters
from dashboard.call_rows import row_from_call
from dashboard.views.common import staff_required
from routing import selectors
from routing.audit.call_query import call_detail, calls_page
from routing.audit.models import FrontDoor, Outcome
from routing.engine.failures import FailureCode
from routing.engine.targets import target_key
from routing.gateway.runtime import get_runtime

CODES = [*(code.value for code in FailureCode), "ROUTES_EXHAUSTED"]


def _choices() -> dict[str, Any]:
    groups = selectors.group_list()
    targets = sorted({target_key(t["provider"], t["model"]) for g in groups for t in g["targets"]})
    return {
        "groups": [g["name"] for g in groups],
        "targets": targets,
        "keys": [(k["id"], k["name"], k["prefix"]) for k in selectors.key_list()],
    }


@require_GET
@staff_required
async def calls_page_view(request: HttpRequest) -> HttpResponse:
    values = {name: request.GET.get(name, "") for name in FIELDS}
    filters, errors = parse_filters(values)
    before = parse_before(request.GET.get("before"))
    context: dict[str, Any] = {
        "nav": "calls",
        "values": values,
        "errors": errors,
        "outcomes": Outcome.values,
        "doors": FrontDoor.values,
        "codes": CODES,
        "rows": [],
        "load_error": "",
        "before": before,
        "query": urlencode({k: v for k, v in values.items() if v}),
        "keyless": get_runtime().keyless.count,  # refused without a key: only sampled here
        **await sync_to_async(_choices)(),
    }
    if filters is None:
        return render(request, "dashboard/calls.html", context, status=422)
    try:
        page = await calls_page(filters, before=before)
    except Exception as exc:  # the page says why instead of a bare 500
        context["load_error"] = f"{type(exc).__name__}: {exc}"
        return render(request, "dashboard/calls.html", context, status=500)
    context["rows"] = [row_from_call(call) for call in page.calls]
    context["next_before"] = page.next_before
    context["live"] = before is None
    return render(request, "dashboard/calls.html", context)


@require_GET
@staff_required
async def call_detail_view(request: HttpRequest, call_id: str) -> HttpResponse:
    call = await call_detail(call_id)
    if call is None:
        raise Http404("no such call")
    attempts = list(call.attempts.all())
    context = {
        "nav": "calls",
        "call": call,
        "row": row_from_call(call),
        "attempts": attempts,
        "rewrites": [(a.index, getattr(a, "rewrites", "")) for a in attempts],
    }
    return render(request, "dashboard/call_detail.html", context)
