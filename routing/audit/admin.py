"""The Django admin as the audit console: list and detail views, filters, search; no
add, change or delete for anyone (superusers included) — records change only through
retention. Staff need the ``view`` permission of each model (superusers have it)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.http import HttpRequest
from django.utils.html import format_html

from routing.audit.display import duration
from routing.audit.models import Attempt, Call, ConfigChange, Fallback, HealthTransition

if TYPE_CHECKING:
    # Generic only in django-stubs: no subscript at run time without django_stubs_ext.
    AnyModelAdmin = admin.ModelAdmin[Any]  # one read-only base for every audit model
    AttemptInlineBase = admin.TabularInline[Attempt, Call]
else:
    AnyModelAdmin, AttemptInlineBase = admin.ModelAdmin, admin.TabularInline

admin.site.site_header = "Switchyard audit and configuration"
admin.site.site_title = "Switchyard admin"
admin.site.index_title = "Records and configuration"
admin.site.site_url = "/groups/"


class ReadOnlyAdmin(AnyModelAdmin):
    actions = None
    list_per_page = 50
    show_full_result_count = False  # no COUNT(*) over a large audit table per page view

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class AttemptInline(AttemptInlineBase):
    model = Attempt
    fields = (
        "index",
        "target",
        "upstream_kind",
        "try_number",
        "ok",
        "code",
        "status",
        "reason",
        "elapsed",
        "will_retry",
        "switched",
        "switched_to",
        "probe",
        "continuation",
        "rewrites",
        "message",
    )
    readonly_fields = fields
    ordering = ("index",)
    extra = 0
    max_num = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="elapsed")
    def elapsed(self, obj: Attempt) -> str:
        return duration(obj.elapsed_ms)


@admin.register(Call)
class CallAdmin(ReadOnlyAdmin):
    list_display = (
        "call_id",
        "started_at",
        "group",
        "outcome",
        "served_by",
        "served_by_fallback",
        "key_name",
        "front_door",
        "attempt_count",
        "elapsed",
        "ttft",
        "overhead",
        "total_tokens",
        "http_status",
        "error_code",
    )
    list_filter = (
        "outcome",
        "group",
        "served_by",
        "served_by_fallback",
        "key_name",
        "front_door",
        "error_code",
        "stream",
        "started_at",
    )
    search_fields = ("^call_id", "=session")
    date_hierarchy = "started_at"
    inlines = (AttemptInline,)
    exclude = ("elapsed_ms", "ttft_ms", "overhead_ms")
    readonly_fields = ("elapsed", "ttft", "overhead")

    @admin.display(description="elapsed", ordering="elapsed_ms")
    def elapsed(self, obj: Call) -> str:
        return duration(obj.elapsed_ms)

    @admin.display(description="time to first token", ordering="ttft_ms")
    def ttft(self, obj: Call) -> str:
        return duration(obj.ttft_ms)

    @admin.display(description="gateway overhead", ordering="overhead_ms")
    def overhead(self, obj: Call) -> str:
        return duration(obj.overhead_ms)


@admin.register(Attempt)
class AttemptAdmin(ReadOnlyAdmin):
    list_display = (
        "call_id",
        "index",
        "target",
        "upstream_kind",
        "try_number",
        "ok",
        "code",
        "status",
        "reason",
        "elapsed",
        "switched_to",
    )
    list_filter = (
        "ok",
        "code",
        "target",
        "upstream_kind",
        "reason",
        "will_retry",
        "switched",
        "continuation",
    )
    search_fields = ("^call__call_id",)

    @admin.display(description="elapsed", ordering="elapsed_ms")
    def elapsed(self, obj: Attempt) -> str:
        return duration(obj.elapsed_ms)


@admin.register(Fallback)
class FallbackAdmin(ReadOnlyAdmin):
    list_display = (
        "at",
        "call_id",
        "group",
        "from_target",
        "to_target",
        "reason",
        "code",
        "status",
        "cooldown_s",
    )
    list_filter = ("reason", "code", "group", "from_target", "to_target", "at")
    search_fields = ("^call_id",)
    date_hierarchy = "at"


@admin.register(HealthTransition)
class HealthTransitionAdmin(ReadOnlyAdmin):
    list_display = (
        "at",
        "kind",
        "target",
        "provider",
        "code",
        "until",
        "ok",
        "cooldown_s",
        "actor",
    )
    list_filter = ("kind", "code", "provider", "target", "at")
    search_fields = ("target", "provider", "actor")
    date_hierarchy = "at"


@admin.register(ConfigChange)
class ConfigChangeAdmin(ReadOnlyAdmin):
    list_display = ("at", "actor", "path", "object_type", "object_name", "changed_fields")
    list_filter = ("path", "object_type", "actor", "at")
    search_fields = ("object_name", "actor")
    date_hierarchy = "at"
    fields = (
        "at",
        "actor",
        "path",
        "object_type",
        "object_name",
        "pretty_diff",
        "pretty_before",
        "pretty_after",
    )
    readonly_fields = fields

    @admin.display(description="changed")
    def changed_fields(self, obj: ConfigChange) -> str:
        return ", ".join(sorted(obj.diff or {})) or "-"

    @admin.display(description="diff")
    def pretty_diff(self, obj: ConfigChange) -> str:
        return _pre(obj.diff)

    @admin.display(description="before")
    def pretty_before(self, obj: ConfigChange) -> str:
        return _pre(obj.before)

    @admin.display(description="after")
    def pretty_after(self, obj: ConfigChange) -> str:
        return _pre(obj.after)


def _pre(value: object) -> str:
    if value is None:
        return "-"
    return format_html(
        "<pre>{}</pre>", json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)
    )
