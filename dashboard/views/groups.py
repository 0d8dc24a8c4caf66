"""The groups page: every group's ordered targets with live health, target actions, the
fallback chain panel. Every action answers with the group's card re-rendered
(``groups.html#group_card``) so the page shows the state the server now has.

Outcome of an action, as the card shows it:

- done → 200, the fresh card (new version) with a short notice;
- stale (``VersionConflict``) → 409, the fresh card with a "changed in another window"
  banner: nothing was changed, and the card now shows what the other window did;
- rejected (``ConfigError``) → 422, the fresh card with the reason;
- group gone (``NotFound``) → 404 and a note in place of the card.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from asgiref.sync import sync_to_async
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.utils.html import format_html
from django.views.decorators.http import require_GET, require_POST

from dashboard import reads
from dashboard import stats as live_stats
from dashboard.views.common import PAGE_PATH, actor, int_or_none, staff_required
from routing import selectors, services
from routing.config.errors import ConfigError
from routing.engine.targets import split_target_key
from routing.gateway.runtime import get_runtime

CARD = "dashboard/groups.html#group_card"


@require_GET
@staff_required
async def groups_page(request: HttpRequest) -> HttpResponse:
    load_error = ""
    cards: list[reads.GroupCard] = []
    try:
        cards = await reads.all_group_cards()
    except Exception as exc:  # the page says why instead of a bare 500
        load_error = f"{type(exc).__name__}: {exc}"
    context = {
        "cards": cards,
        "load_error": load_error,
        "nav": "groups",
        **await sync_to_async(_create_context)(),
    }
    return render(request, "dashboard/groups.html", context, status=500 if load_error else 200)


def _gone(name: str) -> HttpResponse:
    html = format_html(
        '<section class="card" data-group="{}"><p class="empty">Group {} no longer exists '
        "(deleted in another window).</p></section>",
        name,
        name,
    )
    return HttpResponse(html, status=404)


async def _card_response(
    request: HttpRequest, name: str, status: int = 200, **flags: Any
) -> HttpResponse:
    try:
        card = await reads.group_card(name)
    except services.NotFound:
        return _gone(name)
    for key, value in flags.items():
        setattr(card, key, value)
    return render(request, CARD, {"card": card}, status=status)


@require_GET
@staff_required
async def group_card(request: HttpRequest, name: str) -> HttpResponse:
    return await _card_response(request, name)


async def _act(
    request: HttpRequest, name: str, write: Callable[[], object], notice: str, where: str
) -> HttpResponse:
    """Carry out one card action; ``where`` is the slot its answer is said in (the row of
    the target acted on, or ``"foot"``: the add-target form under the table)."""
    try:
        await sync_to_async(write)()
    except services.VersionConflict:
        return await _card_response(request, name, 409, conflict=True, where=where)
    except services.NotFound as exc:
        if exc.kind == "group":
            return _gone(name)
        return await _card_response(request, name, 422, error=str(exc), where=where)
    except ConfigError as exc:
        return await _card_response(
            request, name, 422, error="; ".join(e.message for e in exc.errors), where=where
        )
    return await _card_response(request, name, notice=notice, where=where)


def _row(target_id: object) -> str:
    return f"target:{target_id}"


def _based_on(request: HttpRequest) -> int:
    return int_or_none(request.POST.get("based_on")) or 0


@require_POST
@staff_required
async def targets_reorder(request: HttpRequest, name: str) -> HttpResponse:
    parts = [int_or_none(part) for part in request.POST.get("order", "").split(",")]
    order = [pk for pk in parts if pk is not None]
    moved = _row(int_or_none(request.POST.get("target")))  # the row whose arrow was pressed
    if len(order) != len(parts):
        return await _card_response(
            request, name, 422, error="the order must list target ids", where=moved
        )
    return await _act(
        request,
        name,
        lambda: services.targets_reorder(
            group=name,
            order=order,
            based_on=_based_on(request),
            actor=actor(request),
            path=PAGE_PATH,
        ),
        "Order saved: the next call follows it.",
        moved,
    )


def _price(request: HttpRequest) -> dict[str, float] | str | None:
    """The add-target form's price per million tokens (SPEC §17): None when left empty, a
    message when not numbers; the schema checks the rest (non-negative, input and output
    both given) like every other path."""
    raw = {
        name: request.POST.get(f"price_{name}", "").strip()
        for name in ("input", "output", "cached_input")
    }
    if not any(raw.values()):
        return None
    try:
        return {name: float(text) for name, text in raw.items() if text}
    except ValueError:
        return "price: enter numbers (currency per million tokens)"


@require_POST
@staff_required
async def target_add(request: HttpRequest, name: str) -> HttpResponse:
    provider = request.POST.get("provider", "")
    model = request.POST.get("model", "")
    if not provider or not model:
        return await _card_response(
            request, name, 422, error="pick a provider and one of its models", where="foot"
        )
    weight = int_or_none(request.POST.get("weight")) or 1
    context_text = request.POST.get("context_window", "").strip()
    context_window = int_or_none(context_text) if context_text else None
    if context_text and context_window is None:
        return await _card_response(
            request, name, 422, error="context window must be a whole number", where="foot"
        )
    price = _price(request)
    if isinstance(price, str):
        return await _card_response(request, name, 422, error=price, where="foot")
    return await _act(
        request,
        name,
        lambda: services.target_add(
            group=name,
            provider=provider,
            model=model,
            weight=weight,
            context_window=context_window,
            options={"price": price} if price else None,
            based_on=_based_on(request),
            actor=actor(request),
            path=PAGE_PATH,
        ),
        f"Added {provider}/{model}.",
        "foot",
    )


@require_POST
@staff_required
async def target_remove(request: HttpRequest, name: str, target_id: int) -> HttpResponse:
    return await _act(
        request,
        name,
        lambda: services.target_remove(
            group=name,
            target_id=target_id,
            based_on=_based_on(request),
            actor=actor(request),
            path=PAGE_PATH,
        ),
        "Target removed.",
        "foot",  # its row is gone: said under the table, where the rows moved up to
    )


@require_POST
@staff_required
async def target_enabled(request: HttpRequest, name: str, target_id: int) -> HttpResponse:
    enabled = request.POST.get("enabled") == "1"
    return await _act(
        request,
        name,
        lambda: services.target_set_enabled(
            group=name,
            target_id=target_id,
            enabled=enabled,
            based_on=_based_on(request),
            actor=actor(request),
            path=PAGE_PATH,
        ),
        "Target enabled." if enabled else "Target disabled: calls skip it.",
        _row(target_id),
    )


@require_POST
@staff_required
async def target_reset(request: HttpRequest, name: str, target_id: int) -> HttpResponse:
    return await _act(
        request,
        name,
        lambda: services.target_reset(target_id=target_id, actor=actor(request)),
        "Target reset: its cooling and counters are cleared.",
        _row(target_id),
    )


@require_GET
@staff_required
async def provider_models(request: HttpRequest, name: str) -> HttpResponse:
    """``<option>``s for the add-target form: the chosen provider's model list, nothing
    pre-selected; models already in the group are shown but cannot be picked."""
    provider_name = request.GET.get("provider", "")
    try:
        provider = await sync_to_async(selectors.provider_detail)(name=provider_name)
        group = await sync_to_async(selectors.group_detail)(name=name)
    except services.NotFound as exc:
        return HttpResponse(format_html('<option value="" selected disabled>{}</option>', exc))
    taken = {t["model"] for t in group["targets"] if t["provider"] == provider_name}
    context = {"models": provider["models"], "taken": taken}
    return render(request, "dashboard/groups.html#model_options", context)


# ---------------------------------------------------------------------- groups themselves
CREATE_FORM = "dashboard/groups.html#group_create"


def _create_context(**extra: Any) -> dict[str, Any]:
    providers = reads.provider_choices(selectors.provider_list())
    return {"providers": providers, "form": {}, "errors": {}, **extra}


def _create_field(path: str) -> str:
    return "name" if path == "name" else "target"


@require_POST
@staff_required
async def group_create(request: HttpRequest) -> HttpResponse:
    """Create a group with its first target (a group needs one). Field errors come back in
    the create form (422, nothing created); success returns the cleared form with a notice
    and the new card, swapped in at the top of the list (``hx-swap-oob``)."""
    form = {"name": request.POST.get("name", "").strip(), "target": request.POST.get("target", "")}
    parts = split_target_key(form["target"])
    errors: dict[str, str] = {}
    if parts is None:
        errors["target"] = "pick the group's first target"
    if not form["name"]:
        errors["name"] = "a group needs a name"
    if parts is not None and not errors:
        target = {"provider": parts.provider, "model": parts.model}
        try:
            await sync_to_async(services.group_create)(
                data={"name": form["name"], "targets": [target]},
                actor=actor(request),
                path=PAGE_PATH,
            )
        except ConfigError as exc:
            for error in exc.errors:
                field = _create_field(error.path)
                errors[field] = "; ".join(filter(None, [errors.get(field), error.message]))
    if errors:
        context = await sync_to_async(_create_context)(form=form, errors=errors)
        return render(request, CREATE_FORM, context, status=422)
    context = await sync_to_async(_create_context)(notice=f"Created group {form['name']}.")
    card = await reads.group_card(form["name"])
    context["new_card"] = card
    return render(request, CREATE_FORM, context)


@require_POST
@staff_required
async def group_delete(request: HttpRequest, name: str) -> HttpResponse:
    try:
        await sync_to_async(services.group_delete)(
            name=name, based_on=_based_on(request), actor=actor(request), path=PAGE_PATH
        )
    except services.VersionConflict:
        return await _card_response(request, name, 409, conflict=True)
    except services.NotFound:
        return _gone(name)
    html = format_html(
        '<section class="card" data-group="{}" data-deleted><div class="banner ok" role="status">'
        "Group {} deleted: clients asking for it now get 404.</div></section>",
        name,
        name,
    )
    return HttpResponse(html)


@require_POST
@staff_required
async def target_test(request: HttpRequest, name: str, target_id: int) -> HttpResponse:
    """One cheap request to this target (``max_tokens: 1``): its latency and result, shown
    beside the button. Charges no health, records nothing."""
    try:
        detail = await sync_to_async(selectors.group_detail)(name=name)
    except services.NotFound:
        return _gone(name)
    target = next((t for t in detail["targets"] if t["id"] == target_id), None)
    if target is None:
        return render(
            request,
            "dashboard/groups.html#test_result",
            {"ok": False, "message": "this target no longer exists (reload)"},
            status=404,
        )
    result = await sync_to_async(services.provider_test)(
        name=target["provider"], model=target["model"]
    )
    context = {
        "ok": result.ok,
        "latency_ms": result.latency_ms,
        "status": result.status,
        "message": result.message,
    }
    return render(request, "dashboard/groups.html#test_result", context)


@require_GET
@staff_required
async def target_stats(request: HttpRequest) -> HttpResponse:
    """``{"provider/model": "<stats cell html>"}`` for the ``key`` parameters: the page
    refreshes its statistics with this every few seconds. Memory only (the live windows
    of ``dashboard.stats``): no database query."""
    runtime = get_runtime()
    keys = [key for key in request.GET.getlist("key")[:200] if "/" in key]
    stats = live_stats.current().read(keys, runtime.clock())
    html = {
        key: render_to_string("dashboard/groups.html#stats", {"stats": value, "key": key})
        for key, value in stats.items()
    }
    return JsonResponse({"stats": html, "now": runtime.clock()})


@require_GET
@staff_required
async def group_limits(request: HttpRequest, name: str) -> HttpResponse:
    """The card's use-against-limits line, reloaded when a call of the group finishes
    (``dashboard.js``: a ``call.recorded`` push arms one throttled htmx reload)."""
    try:
        card = await reads.group_card(name)
    except services.NotFound:
        return HttpResponse(status=286)  # htmx swaps the line away
    if not card.limits:
        return HttpResponse("", status=286)
    return render(request, "dashboard/groups.html#limit_use", {"card": card})
