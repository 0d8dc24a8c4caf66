"""``/global``: the global policy layer; ``/config/export``: the config file."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from ninja import Router

from routing import selectors, services
from routing.api.config_api.http import (
    IfMatch,
    based_on,
    body_doc,
    inline_schema,
    json_body,
    parse,
    tagged,
    who,
)
from routing.api.config_api.schemas import AUTH, WRITE, GlobalOut, RestoreIn
from routing.config.export import export_config
from routing.config.schema import PolicyIn

router = Router(tags=["global settings"])


def _current() -> int:
    return selectors.version_of("global")


@router.get(
    "/global",
    response={200: GlobalOut, **AUTH},
    summary="Global policy defaults: per field its value, source and override",
)
def global_get(request: HttpRequest, response: HttpResponse) -> dict[str, Any]:
    return tagged(response, selectors.global_detail())


@router.patch(
    "/global",
    response={200: GlobalOut, **WRITE},
    summary="Set global defaults",
    openapi_extra=body_doc(inline_schema(PolicyIn, partial=True), "Policy keys, nested or dotted."),
)
def global_update(
    request: HttpRequest, response: HttpResponse, if_match: IfMatch = None
) -> dict[str, Any]:
    version = based_on(if_match, _current)
    services.global_update_policy(
        changes=json_body(request), based_on=version, actor=who(request), path="api"
    )
    return tagged(response, selectors.global_detail())


@router.post(
    "/global/restore-default",
    response={200: GlobalOut, **WRITE},
    summary="Drop global settings so the config file / built-in defaults show",
    openapi_extra=body_doc(inline_schema(RestoreIn), required=False),
)
def global_restore_default(
    request: HttpRequest, response: HttpResponse, if_match: IfMatch = None
) -> dict[str, Any]:
    version = based_on(if_match, _current)
    body = parse(RestoreIn, json_body(request, default={}))
    services.global_restore_default(
        fields=body.fields, based_on=version, actor=who(request), path="api"
    )
    return tagged(response, selectors.global_detail())


@router.get(
    "/config/export",
    summary="The configuration as a config file (no credentials)",
    response=AUTH,  # the 200 is YAML, documented below
    openapi_extra={
        "responses": {
            200: {
                "description": "YAML, as manage.py exportconfig",
                "content": {"application/yaml": {}},
            }
        }
    },
)
def config_export(request: HttpRequest) -> HttpResponse:
    return HttpResponse(export_config(), content_type="application/yaml; charset=utf-8")
