"""Gateway keys on the page: create (the secret shown once, with a copy button), scope to
groups, revoke; last used and calls per key from the ledger.

Writes go through ``routing.services`` (``key_create`` / ``key_revoke``, recorded as config
changes with path ``page``). Every action answers with the keys panel
(``keys.html#keys_panel``) re-rendered, its feedback next to what was clicked: the create
form's field errors (422, nothing created) or the new secret under the form; a revoke's
notice in the key's own row.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET, require_POST

from dashboard.views.common import PAGE_PATH, actor, staff_required
from routing import selectors, services
from routing.audit.selectors import key_usage
from routing.config.errors import ConfigError
from routing.config.schema import LIMIT_NAMES
from routing.services.api_keys import parse_limit_options

PANEL = "dashboard/keys.html#keys_panel"


def _panel_context(**extra: Any) -> dict[str, Any]:
    usage = key_usage()
    keys = []
    for key in selectors.key_list():
        calls, last = usage.get(key["id"], (0, None))
        limits = _limits_text(key["limits"])
        keys.append({**key, "calls": calls, "last_used": last, "limits_text": limits})
    groups = [g["name"] for g in selectors.group_list()]
    return {
        "keys": keys,
        "groups": groups,
        "limit_names": LIMIT_NAMES,  # the names LimitsIn declares, as every path takes them
        "form": {},
        "errors": {},
        **extra,
    }


async def _panel(request: HttpRequest, status: int = 200, **extra: Any) -> HttpResponse:
    context = await sync_to_async(_panel_context)(**extra)
    return render(request, PANEL, context, status=status)


@require_GET
@staff_required
async def keys_page(request: HttpRequest) -> HttpResponse:
    context = await sync_to_async(_panel_context)(nav="keys")
    return render(request, "dashboard/keys.html", context)


@require_POST
@staff_required
async def key_create(request: HttpRequest) -> HttpResponse:
    name, kind = request.POST.get("name", ""), request.POST.get("kind", "client")
    groups = request.POST.getlist("groups")
    limits_text = request.POST.get("limits", "")
    form = {"name": name, "kind": kind, "groups": groups, "limits": limits_text}
    try:
        key, secret = await sync_to_async(services.key_create)(
            name=name,
            kind=kind,
            groups=groups,
            limits=parse_limit_options(_limit_items(limits_text)),
            actor=actor(request),
            path=PAGE_PATH,
        )
    except ConfigError as exc:
        errors = {path: "; ".join(messages) for path, messages in exc.by_path().items()}
        limits = [str(error) for error in exc.errors if error.path.startswith("limits")]
        if limits:  # one field on the page for every limit
            errors = {k: v for k, v in errors.items() if not k.startswith("limits")}
            errors["limits"] = "; ".join(limits)
        return await _panel(request, 422, form=form, errors=errors)
    return await _panel(request, created={"id": key.pk, "name": key.name, "secret": secret})


@require_POST
@staff_required
async def key_revoke(request: HttpRequest, key_id: int) -> HttpResponse:
    try:
        await sync_to_async(services.key_revoke)(
            key_id=key_id, actor=actor(request), path=PAGE_PATH
        )
    except services.NotFound:
        return await _panel(request, 404, row_notice=(key_id, "This key no longer exists."))
    return await _panel(
        request, row_notice=(key_id, "Revoked: requests with this key are refused from now on.")
    )


def _limit_items(text: str) -> list[str]:
    """``"rpm=60, cost_per_day=5"`` (commas or spaces between) as ``NAME=VALUE`` items."""
    return [item for item in text.replace(",", " ").split() if item]


def _limits_text(limits: dict[str, Any]) -> str:
    return ", ".join(f"{name}={value:g}" for name, value in limits.items())


@require_POST
@staff_required
async def key_limits(request: HttpRequest, key_id: int) -> HttpResponse:
    """Replace a key's limits from the row's text field; field errors in the row (422,
    nothing changed)."""
    text = request.POST.get("limits", "")
    try:
        await sync_to_async(services.key_update)(
            key_id=key_id,
            limits=parse_limit_options(_limit_items(text)),
            actor=actor(request),
            path=PAGE_PATH,
        )
    except services.NotFound:
        return await _panel(request, 404, row_notice=(key_id, "This key no longer exists."))
    except ConfigError as exc:
        message = "; ".join(str(error) for error in exc.errors)
        return await _panel(request, 422, row_error=(key_id, message, text))
    return await _panel(request, row_notice=(key_id, "Limits saved: applied from the next call."))


@require_GET
@staff_required
async def key_page(request: HttpRequest, key_id: int) -> HttpResponse:
    """A key: its limits, their use in the current windows, its spend today and this
    month, and its cost per day by group (the same reads as ``GET /api/v1/keys/{id}``)."""
    try:
        context = await sync_to_async(_key_context)(key_id)
    except services.NotFound:
        return render(request, "dashboard/key.html", {"missing": key_id, "nav": "keys"}, status=404)
    return render(request, "dashboard/key.html", {**context, "missing": None, "nav": "keys"})


def _key_context(key_id: int) -> dict[str, Any]:
    import datetime as dt

    from dashboard.spend_chart import spend_chart
    from routing.audit.spend import spend_by_day
    from routing.gateway.runtime import get_runtime
    from routing.limits.usage import key_detail

    detail = key_detail(key_id, gate=get_runtime().limit_gate)
    today = dt.datetime.now(dt.UTC).date()
    first = today - dt.timedelta(days=29)
    since = dt.datetime(first.year, first.month, first.day, tzinfo=dt.UTC)
    rows = spend_by_day(by="group", since=since, key_id=key_id)
    chart = spend_chart(rows, days=[first + dt.timedelta(days=n) for n in range(30)])
    return {
        "key": detail,
        "limits_text": _limits_text(detail["limits"]),
        "chart": chart,
        "legend": list(enumerate(chart.series)),
    }
