"""The providers page: list, create, edit, refresh models, test, re-enable, delete.

The credential is write-only here as everywhere: inputs of type password that are never
filled in, no echo of a submitted key in any answer (a rejected form asks for it again),
and the list shows only "set" and the selector's short masked hint. Extra header values
are not shown either (they often carry keys); their names are.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import sync_to_async
from django.http import Http404, HttpRequest, HttpResponse, QueryDict
from django.shortcuts import render
from django.template.loader import render_to_string
from django.views.decorators.http import require_http_methods, require_POST

from dashboard.feedback import Feedback, outcome
from dashboard.health import disabled_providers
from dashboard.views.common import PAGE_PATH, actor, int_or_none, staff_required
from routing import selectors, services
from routing.config.errors import ConfigError
from routing.config.fields import declared_fields
from routing.config.schema import PLATFORM_SECRETS, TimeoutsIn
from routing.gateway.runtime import get_runtime
from routing.protocols.registry import KIND_CHOICES, PLATFORM_CHOICES

PAGE = "dashboard/providers.html"
# (key, label) from the declared timeouts (routing.config.schema.TimeoutsIn).
TIMEOUT_FIELDS: tuple[tuple[str, str], ...] = tuple(
    (item.name, item.title) for item in declared_fields(TimeoutsIn)
)


@dataclass(slots=True)
class TimeoutField:
    name: str  # form field name, "timeouts.connect_s"
    label: str
    value: Any
    errors: list[str]


@dataclass(slots=True)
class ListField:
    name: str  # form field name, "betas.allow"
    text: str  # the list, space-separated
    placeholder: str
    errors: list[str]


@dataclass(slots=True)
class ProviderForm:
    name: str = ""
    version: int = 0
    provider: Mapping[str, Any] | None = None
    values: dict[str, Any] = field(default_factory=dict)
    errors: dict[str, list[str]] = field(default_factory=dict)
    general_errors: list[str] = field(default_factory=list)
    conflict: bool = False
    key_dropped: bool = False
    notice: str = ""

    @property
    def feedback(self) -> Feedback | None:
        """What the form's banners say, for the line beside its submit button."""
        said = outcome(
            conflict=self.conflict,
            general_errors=self.general_errors,
            rejected=bool(self.errors),
            notice=self.notice,
        )
        if said is not None and self.errors and self.key_dropped and not self.conflict:
            return Feedback(said.tone, f"{said.text} Enter the credential again.")
        return said

    @property
    def kinds(self) -> list[tuple[str, str, bool]]:
        """The kind select's options (the protocol registry's): value, label, selected."""
        chosen = self.values.get("kind") or "openai"
        return [(value, label, value == chosen) for value, label in KIND_CHOICES]

    @property
    def platforms(self) -> list[tuple[str, str, bool]]:
        """The platform select's options (the registry's): value, label, selected."""
        chosen = self.values.get("platform") or "direct"
        return [(value, label, value == chosen) for value, label in PLATFORM_CHOICES]

    @property
    def timeouts(self) -> list[TimeoutField]:
        current = self.values.get("timeouts") or {}
        return [
            TimeoutField(
                f"timeouts.{key}", label, current.get(key), self.errors.get(f"timeouts.{key}", [])
            )
            for key, label in TIMEOUT_FIELDS
        ]

    @property
    def betas(self) -> list[ListField]:
        """The two anthropic-beta lists, as space-separated text fields."""
        current = self.values.get("betas") or {}
        return [
            ListField(
                f"betas.{key}",
                " ".join(current.get(key) or ()),
                label,
                self.errors.get(f"betas.{key}", []),
            )
            for key, label in (("allow", "all"), ("strip", "none"))
        ]


def _read_form(post: QueryDict) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """Values as the schema expects them; blank timeouts are left out (= default)."""
    values: dict[str, Any] = {
        "name": post.get("name", "").strip(),
        "kind": post.get("kind", "openai"),
        "platform": post.get("platform", "direct"),
        "base_url": post.get("base_url", "").strip(),
        **{
            name: post.get(name, "").strip() or None
            for name in ("region", "project", "credentials_file")
        },
        "entra": post.get("entra") == "1",
    }
    errors: dict[str, list[str]] = {}
    timeouts: dict[str, Any] = {}
    for key, _ in TIMEOUT_FIELDS:
        text = post.get(f"timeouts.{key}", "").strip()
        if not text:
            timeouts[key] = None
            continue
        try:
            number = float(text)
            if not math.isfinite(number):
                raise ValueError(text)
            timeouts[key] = number
        except ValueError:
            timeouts[key] = text
            errors[f"timeouts.{key}"] = ["enter a number of seconds"]
    values["timeouts"] = timeouts
    text = post.get("health_check_s", "").strip()
    values["health_check_s"] = None  # blank: the gateway's interval
    if text:
        try:
            number = float(text)
            if not math.isfinite(number):
                raise ValueError(text)
            values["health_check_s"] = number
        except ValueError:
            values["health_check_s"] = text
            errors["health_check_s"] = ["enter a number of seconds (0 turns checks off)"]
    betas: dict[str, list[str]] = {}
    allow = post.get("betas.allow", "").replace(",", " ").split()
    if allow:
        betas["allow"] = allow
    strip = post.get("betas.strip", "").replace(",", " ").split()
    if strip:
        betas["strip"] = strip
    values["betas"] = betas  # {}: every anthropic-beta passes
    return values, errors


def _split(exc: ConfigError) -> tuple[dict[str, list[str]], list[str]]:
    known = {"name", "base_url", "api_key", "kind", "health_check_s", "betas.allow", "betas.strip"}
    known |= {"platform", "region", "project", "credentials_file", "entra", *PLATFORM_SECRETS}
    known |= {f"timeouts.{k}" for k, _ in TIMEOUT_FIELDS}
    by_field: dict[str, list[str]] = {}
    general: list[str] = []
    for error in exc.errors:
        if error.path in known:
            by_field.setdefault(error.path, []).append(error.message)
        else:
            general.append(str(error))
    return by_field, general


async def _cards(names: list[str] | None = None) -> list[dict[str, Any]]:
    providers = await sync_to_async(selectors.provider_list)()
    if names is not None:
        providers = [p for p in providers if p["name"] in names]
    disabled = await disabled_providers(get_runtime(), [p["name"] for p in providers])
    for p in providers:
        p["disabled_code"] = disabled.get(p["name"], "")
    return providers


async def _card(request: HttpRequest, name: str, status: int = 200, **extra: Any) -> HttpResponse:
    cards = await _cards([name])
    if not cards:
        return HttpResponse("", status=200)  # gone: the card disappears
    card = {**cards[0], **extra}
    card["feedback"] = outcome(error=card.get("error", ""), notice=card.get("notice", ""))
    return render(request, f"{PAGE}#provider_card", {"p": card}, status=status)


@require_http_methods(["GET", "POST"])
@staff_required
async def providers_page(request: HttpRequest) -> HttpResponse:
    """GET: the list and the create form. POST: create (the form posts back here, so no
    URL under ``providers/`` is taken from a provider name)."""
    if request.method == "POST":
        return await _create(request)
    load_error = ""
    providers: list[dict[str, Any]] = []
    try:
        providers = await _cards()
    except Exception as exc:
        load_error = f"{type(exc).__name__}: {exc}"
    context = {
        "providers": providers,
        "load_error": load_error,
        "form": ProviderForm(),
        "nav": "providers",
    }
    return render(request, PAGE, context, status=500 if load_error else 200)


async def _create(request: HttpRequest) -> HttpResponse:
    values, errors = _read_form(request.POST)
    key = request.POST.get("api_key", "")
    data = {**values, "timeouts": {k: v for k, v in values["timeouts"].items() if v is not None}}
    if data["health_check_s"] is None:
        del data["health_check_s"]
    if not data["betas"]:
        del data["betas"]
    if key.strip():
        data["api_key"] = key
    secrets = _secrets(request.POST)
    data.update(secrets)
    dropped = bool(key.strip() or secrets)
    form = ProviderForm(values=values, errors=errors, key_dropped=dropped)
    if not errors:
        try:
            await sync_to_async(services.provider_create)(
                data=data, actor=actor(request), path=PAGE_PATH
            )
        except ConfigError as exc:
            form.errors, form.general_errors = _split(exc)
        else:
            card = (await _cards([values["name"]]))[0]
            fresh = ProviderForm(
                notice=f"Added provider {values['name']}. Refresh its models to use it."
            )
            html: str = render_to_string(f"{PAGE}#create_form", {"form": fresh}, request=request)
            html += '<div hx-swap-oob="beforebegin:#provider-create">'
            html += (
                render_to_string(f"{PAGE}#provider_card", {"p": card}, request=request) + "</div>"
            )
            return HttpResponse(html)
    return render(request, f"{PAGE}#create_form", {"form": form}, status=422)


def _secrets(post: QueryDict) -> dict[str, str | None]:
    """The platform secrets the form sent (write-only like the key: empty keeps)."""
    if post.get("clear_aws_keys") == "1":
        return dict.fromkeys(PLATFORM_SECRETS)
    return {name: post.get(name, "") for name in PLATFORM_SECRETS if post.get(name, "").strip()}


def _edit_form(detail: Mapping[str, Any], **state: Any) -> ProviderForm:
    values = {
        "kind": detail["kind"],
        "platform": detail["platform"],
        **{name: detail[name] for name in ("region", "project", "credentials_file", "entra")},
        "base_url": detail["base_url"],
        "timeouts": dict(detail["timeouts"]),
        "health_check_s": detail.get("health_check_s"),
        "betas": dict(detail.get("betas") or {}),
    }
    return ProviderForm(
        name=detail["name"],
        version=detail["version"],
        provider=detail,
        values=state.pop("values", values),
        **state,
    )


async def _detail(name: str) -> dict[str, Any]:
    try:
        return await sync_to_async(selectors.provider_detail)(name=name)
    except services.NotFound:
        raise Http404(f"no provider {name!r}") from None


@require_http_methods(["GET", "POST"])
@staff_required
async def provider_edit(request: HttpRequest, name: str) -> HttpResponse:
    detail = await _detail(name)
    if request.method == "GET":
        context = {"form": _edit_form(detail), "edit": True, "nav": "providers"}
        return render(request, PAGE, context)
    values, errors = _read_form(request.POST)
    values.pop("name")
    based_on = int_or_none(request.POST.get("based_on")) or 0
    key = request.POST.get("api_key", "")
    data: dict[str, Any] = {
        "base_url": values["base_url"],
        "kind": values["kind"],
        "platform": values["platform"],
        **{name: values[name] for name in ("region", "project", "credentials_file", "entra")},
        "timeouts": values["timeouts"],
        "health_check_s": values["health_check_s"],
        "betas": values["betas"] or None,
    }
    if request.POST.get("clear_api_key") == "1":
        data["api_key"] = None
    elif key.strip():
        data["api_key"] = key
    data.update(_secrets(request.POST))
    template = f"{PAGE}#edit_form"
    if based_on != detail["version"]:
        form = _edit_form(
            detail,
            version=based_on,
            values=values,
            errors=errors,
            conflict=True,
            key_dropped=bool(key.strip()),
        )
        return render(request, template, {"form": form}, status=409)
    if errors:
        form = _edit_form(detail, values=values, errors=errors, key_dropped=bool(key.strip()))
        return render(request, template, {"form": form}, status=422)
    try:
        await sync_to_async(services.provider_update)(
            name=name, data=data, based_on=based_on, actor=actor(request), path=PAGE_PATH
        )
    except services.VersionConflict:
        form = _edit_form(
            detail, version=based_on, values=values, conflict=True, key_dropped=bool(key.strip())
        )
        return render(request, template, {"form": form}, status=409)
    except ConfigError as exc:
        by_field, general = _split(exc)
        form = _edit_form(
            detail,
            values=values,
            errors=by_field,
            general_errors=general,
            key_dropped=bool(key.strip()),
        )
        return render(request, template, {"form": form}, status=422)
    fresh = await _detail(name)
    notice = (
        "Saved." if fresh["version"] != detail["version"] else "Nothing to save: nothing changed."
    )
    return render(request, template, {"form": _edit_form(fresh, notice=notice)})


@require_POST
@staff_required
async def provider_refresh(request: HttpRequest, name: str) -> HttpResponse:
    try:
        models = await sync_to_async(services.provider_refresh_models)(
            name=name, actor=actor(request), path=PAGE_PATH
        )
    except services.ProviderCallError as exc:
        return await _card(request, name, error=f"Could not load the model list: {exc.message}")
    except services.NotFound:
        return HttpResponse("")
    if not models:
        return await _card(request, name, error="The upstream listed no models.")
    return await _card(
        request, name, notice=f"Loaded {len(models)} model{'s' if len(models) != 1 else ''}."
    )


@require_POST
@staff_required
async def provider_test(request: HttpRequest, name: str) -> HttpResponse:
    try:
        result = await sync_to_async(services.provider_test)(name=name)
    except services.NotFound:
        return HttpResponse("")
    return await _card(request, name, test=result)


@require_POST
@staff_required
async def provider_enable(request: HttpRequest, name: str) -> HttpResponse:
    try:
        await sync_to_async(services.provider_enable)(name=name, actor=actor(request))
    except services.NotFound:
        return HttpResponse("")
    if request.POST.get("quiet") == "1":
        return HttpResponse(status=204)  # a health badge asked: the health push redraws it
    return await _card(request, name, notice="Re-enabled: calls may use it again.")


@require_POST
@staff_required
async def provider_delete(request: HttpRequest, name: str) -> HttpResponse:
    based_on = int_or_none(request.POST.get("based_on")) or 0
    try:
        await sync_to_async(services.provider_delete)(
            name=name, based_on=based_on, actor=actor(request), path=PAGE_PATH
        )
    except services.VersionConflict:
        return await _card(
            request,
            name,
            409,
            error="Not deleted: changed in another window. This is its current state.",
        )
    except ConfigError as exc:
        return await _card(
            request, name, 422, error="Not deleted: " + "; ".join(e.message for e in exc.errors)
        )
    except services.NotFound:
        pass
    return HttpResponse("")
