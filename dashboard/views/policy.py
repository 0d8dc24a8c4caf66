"""The policy settings form, for one group's overrides or for the global defaults.

Every save names the version the form was rendered from (hidden ``based_on``). Outcomes:

- **saved** → 200: the form re-rendered from the new version, with a notice;
- **conflict** → 409: nothing changed; the form keeps what the user typed *and* the old
  version, with the "changed in another window — reload to see it" banner (saving again
  stays a conflict until the page is reloaded);
- **rejected** → 422: nothing changed; field errors next to the fields (text that is no
  number, and everything the shared configuration schema refuses);
- transport failures never reach the server: ``dashboard.js`` shows them.

A save sends only the fields whose submitted value differs from the effective value, so
untouched fields stay inherited (``dashboard.policy_form``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import sync_to_async
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from dashboard.feedback import Feedback, outcome
from dashboard.policy_form import FIELD_SPECS, Section, build_rows, changed_fields, parse_submission
from dashboard.views.common import PAGE_PATH, actor, int_or_none, staff_required
from routing import selectors, services
from routing.config.errors import ConfigError
from routing.config.policy import POLICY_FIELDS

PAGE = "dashboard/policy_form.html"
FORM = "dashboard/policy_form.html#form"


@dataclass(frozen=True, slots=True)
class Scope:
    """Which layer the form edits: a group's overrides, or the global settings."""

    group: str | None

    @property
    def kind(self) -> str:
        return "global" if self.group is None else "group"

    def read(self) -> dict[str, Any]:
        if self.group is None:
            return selectors.global_detail()
        return selectors.group_detail(name=self.group)

    def update(self, changes: dict[str, Any], based_on: int, who: str) -> None:
        if self.group is None:
            services.global_update_policy(
                changes=changes, based_on=based_on, actor=who, path=PAGE_PATH
            )
        else:
            services.group_update_policy(
                name=self.group, changes=changes, based_on=based_on, actor=who, path=PAGE_PATH
            )

    def restore(self, fields: list[str] | None, based_on: int, who: str) -> None:
        if self.group is None:
            services.global_restore_default(
                fields=fields, based_on=based_on, actor=who, path=PAGE_PATH
            )
        else:
            services.group_restore_default(
                name=self.group, fields=fields, based_on=based_on, actor=who, path=PAGE_PATH
            )


@dataclass(slots=True)
class FormView:
    """Everything the form partial renders."""

    scope: str
    title: str
    versioned: str  # "group:<name>" / "global:": the key websocket notices use
    version: int
    sections: list[Section]
    save_url: str
    restore_url: str
    layer_label: str
    conflict: bool = False
    rejected: bool = False
    general_errors: list[str] = field(default_factory=list)
    notice: str = ""
    warnings: list[str] = field(default_factory=list)  # accepted, but defeat compaction
    aliases: list[str] | None = None  # a group's model-name globs (None: the global form)
    aliases_url: str = ""
    where: str = ""  # the slot the answer is said in: "" (the action bar) or "field:<name>"

    @property
    def feedback(self) -> Feedback | None:
        """What the banners say, for the line beside the control that was pressed."""
        said = outcome(
            conflict=self.conflict,
            general_errors=self.general_errors,
            rejected=self.rejected,
            notice=self.notice,
        )
        if said is not None and self.warnings and not (self.conflict or self.rejected):
            return Feedback(said.tone, f"{said.text} See the warning above.")
        return said


def _form(
    scope: Scope,
    detail: Mapping[str, Any],
    *,
    version: int | None = None,
    submitted: Mapping[str, Any] | None = None,
    errors: Mapping[str, list[str]] | None = None,
    **state: Any,
) -> FormView:
    if scope.group is None:
        title, versioned, layer = "Global defaults", "global:", "in global settings"
        save_url = reverse("dashboard:global-settings")
        restore_url = reverse("dashboard:global-restore")
    else:
        title, versioned, layer = (
            f"Group {scope.group}: settings",
            f"group:{scope.group}",
            "on this group",
        )
        save_url = reverse("dashboard:group-settings", args=[scope.group])
        restore_url = reverse("dashboard:group-restore", args=[scope.group])
    return FormView(
        scope=scope.kind,
        title=title,
        versioned=versioned,
        version=detail["version"] if version is None else version,
        sections=build_rows(detail["fields"], submitted=submitted, errors=errors),
        save_url=save_url,
        restore_url=restore_url,
        layer_label=layer,
        warnings=list(detail.get("warnings") or ()),
        aliases=None if scope.group is None else list(detail.get("aliases") or ()),
        aliases_url=""
        if scope.group is None
        else reverse("dashboard:group-aliases", args=[scope.group]),
        **state,
    )


def _split_errors(exc: ConfigError) -> tuple[dict[str, list[str]], list[str]]:
    """Errors on a policy field go next to it; anything else goes in the banner."""
    by_field: dict[str, list[str]] = {}
    general: list[str] = []
    for error in exc.errors:
        if error.path in POLICY_FIELDS:
            by_field.setdefault(error.path, []).append(error.message)
        else:
            general.append(str(error))
    return by_field, general


async def _read(scope: Scope) -> dict[str, Any]:
    try:
        return await sync_to_async(scope.read)()
    except services.NotFound:
        raise Http404(f"no group {scope.group!r}") from None


async def _page(request: HttpRequest, scope: Scope) -> HttpResponse:
    if request.method == "POST":
        return await _save(request, scope)
    detail = await _read(scope)
    nav = "global" if scope.group is None else "groups"
    return render(request, PAGE, {"form": _form(scope, detail), "nav": nav})


async def _save(request: HttpRequest, scope: Scope) -> HttpResponse:
    values, parse_errors = parse_submission(request.POST)
    based_on = int_or_none(request.POST.get("based_on")) or 0
    detail = await _read(scope)
    if based_on != detail["version"]:
        form = _form(
            scope, detail, version=based_on, submitted=values, errors=parse_errors, conflict=True
        )
        return render(request, FORM, {"form": form}, status=409)
    if parse_errors:
        form = _form(scope, detail, submitted=values, errors=parse_errors, rejected=True)
        return render(request, FORM, {"form": form}, status=422)
    changes = changed_fields(values, detail["fields"])
    if not changes:
        return render(
            request,
            FORM,
            {"form": _form(scope, detail, notice="Nothing to save: no field changed.")},
        )
    return await _write(
        request,
        scope,
        values,
        based_on,
        lambda: scope.update(changes, based_on, actor(request)),
        "Saved "
        + ", ".join(FIELD_SPECS[name].label.lower() for name in changes)
        + ". The next call uses it.",
    )


async def _write(
    request: HttpRequest,
    scope: Scope,
    values: Mapping[str, Any] | None,
    based_on: int,
    write: Callable[[], None],
    notice: str,
    where: str = "",
) -> HttpResponse:
    try:
        await sync_to_async(write)()
    except services.VersionConflict:
        detail = await _read(scope)
        form = _form(scope, detail, version=based_on, submitted=values, conflict=True, where=where)
        return render(request, FORM, {"form": form}, status=409)
    except ConfigError as exc:
        detail = await _read(scope)
        by_field, general = _split_errors(exc)
        form = _form(
            scope,
            detail,
            submitted=values,
            errors=by_field,
            general_errors=general,
            rejected=True,
            where=where,
        )
        return render(request, FORM, {"form": form}, status=422)
    detail = await _read(scope)
    return render(request, FORM, {"form": _form(scope, detail, notice=notice, where=where)})


async def _restore(request: HttpRequest, scope: Scope) -> HttpResponse:
    name = request.POST.get("field", "")
    fields = [name] if name else None
    based_on = int_or_none(request.POST.get("based_on")) or 0
    values, _ = parse_submission(request.POST) if "based_on" in request.POST else ({}, {})
    if name and name in FIELD_SPECS:
        notice = f"Restored {FIELD_SPECS[name].label.lower()}: it now shows the inherited value."
        where = f"field:{name}"  # said in that field's row, beside its restore button
    else:
        notice = "Restored every field: inherited values show through."
        where = ""
    # After a restore the user's other edits are dropped on purpose: the form re-renders
    # from the new version, so what it shows is what is stored.
    return await _write(
        request,
        scope,
        values or None,
        based_on,
        lambda: scope.restore(fields, based_on, actor(request)),
        notice,
        where,
    )


@require_http_methods(["GET", "POST"])
@staff_required
async def group_settings(request: HttpRequest, name: str) -> HttpResponse:
    return await _page(request, Scope(group=name))


@require_POST
@staff_required
async def group_restore(request: HttpRequest, name: str) -> HttpResponse:
    return await _restore(request, Scope(group=name))


@require_http_methods(["GET", "POST"])
@staff_required
async def global_settings(request: HttpRequest) -> HttpResponse:
    return await _page(request, Scope(group=None))


@require_POST
@staff_required
async def global_restore(request: HttpRequest) -> HttpResponse:
    return await _restore(request, Scope(group=None))


@require_POST
@staff_required
async def group_aliases(request: HttpRequest, name: str) -> HttpResponse:
    """Replace the group's model-name aliases (whitespace- or comma-separated globs)."""
    scope = Scope(name)
    aliases = request.POST.get("aliases", "").replace(",", " ").split()
    based_on = int_or_none(request.POST.get("based_on")) or 0

    def write() -> None:
        services.group_set_aliases(
            name=name, aliases=aliases, based_on=based_on, actor=actor(request), path=PAGE_PATH
        )

    return await _write(
        request,
        scope,
        None,
        based_on,
        write,
        "Saved the aliases: " + (", ".join(aliases) or "none") + ". The next call uses them.",
        where="field:aliases",
    )
