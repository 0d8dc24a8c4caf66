"""Targets: added, changed, removed and reordered under their group's ETag; and the
health reset of one target."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from ninja import Router, Status

from routing import selectors, services
from routing.api.config_api.http import (
    IfMatch,
    based_on,
    body_doc,
    group_name,
    group_version,
    inline_schema,
    json_body,
    parse,
    tagged,
    who,
)
from routing.api.config_api.schemas import (
    READ,
    TARGET_PATCH_DOC,
    WRITE,
    ActionOut,
    GroupOut,
    GroupPath,
    InvalidOut,
    OrderIn,
    TargetId,
)
from routing.config.schema import TargetIn, target_options

router = Router(tags=["targets"])


@router.post(
    "/groups/{name}/targets",
    response={201: GroupOut, **WRITE, 409: InvalidOut},
    summary="Append a target (If-Match: the group's ETag; answers the group)",
    openapi_extra=body_doc(inline_schema(TargetIn)),
)
def targets_add(
    request: HttpRequest, name: GroupPath, response: HttpResponse, if_match: IfMatch = None
) -> Status[dict[str, Any]]:
    name = group_name(name)
    version = based_on(if_match, group_version(name))
    current = selectors.version_of("group", name)
    if current != version:  # stale before invalid, as in every other write
        raise services.VersionConflict(current)
    item = parse(TargetIn, json_body(request))
    services.target_add(
        group=name,
        provider=item.provider,
        model=item.model,
        weight=item.weight,
        context_window=item.context_window,
        enabled=item.enabled,
        options=target_options(item),
        based_on=version,
        actor=who(request),
        path="api",
    )
    return Status(201, tagged(response, selectors.group_detail(name=name)))


@router.patch(
    "/groups/{name}/targets/{int:target_id}",
    response={200: GroupOut, **WRITE},
    summary="Change a target's weight, enabled flag or context window",
    openapi_extra=body_doc(TARGET_PATCH_DOC),
)
def targets_update(
    request: HttpRequest,
    name: GroupPath,
    target_id: TargetId,
    response: HttpResponse,
    if_match: IfMatch = None,
) -> dict[str, Any]:
    name = group_name(name)
    version = based_on(if_match, group_version(name))
    services.target_update(
        group=name,
        target_id=target_id,
        changes=json_body(request),
        based_on=version,
        actor=who(request),
        path="api",
    )
    return tagged(response, selectors.group_detail(name=name))


@router.delete(
    "/groups/{name}/targets/{int:target_id}",
    response={200: GroupOut, **WRITE},
    summary="Remove a target (answers the group, with its new ETag)",
)
def targets_remove(
    request: HttpRequest,
    name: GroupPath,
    target_id: TargetId,
    response: HttpResponse,
    if_match: IfMatch = None,
) -> dict[str, Any]:
    name = group_name(name)
    version = based_on(if_match, group_version(name))
    services.target_remove(
        group=name, target_id=target_id, based_on=version, actor=who(request), path="api"
    )
    return tagged(response, selectors.group_detail(name=name))


@router.put(
    "/groups/{name}/targets/order",
    response={200: GroupOut, **WRITE},
    summary="Reorder every target in one atomic write",
    openapi_extra=body_doc(inline_schema(OrderIn)),
)
def targets_reorder(
    request: HttpRequest, name: GroupPath, response: HttpResponse, if_match: IfMatch = None
) -> dict[str, Any]:
    name = group_name(name)
    version = based_on(if_match, group_version(name))
    body = parse(OrderIn, json_body(request))
    services.targets_reorder(
        group=name, order=body.order, based_on=version, actor=who(request), path="api"
    )
    return tagged(response, selectors.group_detail(name=name))


@router.post(
    "/targets/{int:target_id}/reset",
    response={200: ActionOut, **READ},
    summary="Forget a target's health: it is healthy for the next call",
)
def targets_reset(request: HttpRequest, target_id: TargetId) -> dict[str, str]:
    services.target_reset(target_id=target_id, actor=who(request))
    return {"detail": f"target {target_id} is healthy"}
