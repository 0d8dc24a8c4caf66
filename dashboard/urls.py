"""Dashboard pages and their htmx endpoints (mounted at ``/`` by ``router_project.urls``)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect
from django.urls import path

from dashboard.views import calls, groups, keys, policy, providers, spend

app_name = "dashboard"


def home(request: HttpRequest) -> HttpResponse:
    """``/``: a browser (``text/html`` in ``Accept``) goes to the groups page; anything
    else — Claude Code's ``HEAD /`` preflight, a load balancer, curl — gets 200 and a small
    JSON saying what answers here (SPEC §15)."""
    if "text/html" in request.headers.get("accept", ""):
        return redirect("dashboard:groups")
    return JsonResponse({"service": "switchyard"})


urlpatterns = [
    path("", home, name="home"),
    path("groups/", groups.groups_page, name="groups"),
    path("groups/create/", groups.group_create, name="group-create"),
    path("stats/", groups.target_stats, name="target-stats"),
    path("groups/<str:name>/delete/", groups.group_delete, name="group-delete"),
    path("groups/<str:name>/targets/<int:target_id>/test/", groups.target_test, name="target-test"),
    path("calls/", calls.calls_page_view, name="calls"),
    path("calls/<str:call_id>/", calls.call_detail_view, name="call-detail"),
    path("keys/", keys.keys_page, name="keys"),
    path("spend/", spend.spend_page, name="spend"),
    path("keys/create/", keys.key_create, name="key-create"),
    path("keys/<int:key_id>/revoke/", keys.key_revoke, name="key-revoke"),
    path("keys/<int:key_id>/limits/", keys.key_limits, name="key-limits"),
    path("keys/<int:key_id>/", keys.key_page, name="key"),
    path("groups/<str:name>/card/", groups.group_card, name="group-card"),
    path("groups/<str:name>/limits/", groups.group_limits, name="group-limits"),
    path("groups/<str:name>/settings/", policy.group_settings, name="group-settings"),
    path("groups/<str:name>/settings/restore/", policy.group_restore, name="group-restore"),
    path("groups/<str:name>/settings/aliases/", policy.group_aliases, name="group-aliases"),
    path("groups/<str:name>/targets/reorder/", groups.targets_reorder, name="targets-reorder"),
    path("groups/<str:name>/targets/add/", groups.target_add, name="target-add"),
    path("groups/<str:name>/targets/models/", groups.provider_models, name="provider-models"),
    path(
        "groups/<str:name>/targets/<int:target_id>/remove/",
        groups.target_remove,
        name="target-remove",
    ),
    path(
        "groups/<str:name>/targets/<int:target_id>/enabled/",
        groups.target_enabled,
        name="target-enabled",
    ),
    path(
        "groups/<str:name>/targets/<int:target_id>/reset/", groups.target_reset, name="target-reset"
    ),
    path("settings/", policy.global_settings, name="global-settings"),
    path("settings/restore/", policy.global_restore, name="global-restore"),
    path("providers/", providers.providers_page, name="providers"),
    path("providers/<str:name>/", providers.provider_edit, name="provider-edit"),
    path("providers/<str:name>/refresh/", providers.provider_refresh, name="provider-refresh"),
    path("providers/<str:name>/test/", providers.provider_test, name="provider-test"),
    path("providers/<str:name>/enable/", providers.provider_enable, name="provider-enable"),
    path("providers/<str:name>/delete/", providers.provider_delete, name="provider-delete"),
]
