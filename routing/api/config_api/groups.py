"""``/groups``: CRUD, policy overrides, restore-default, and the switch codes."""

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
    AUTH,
    CREATE,
    READ,
    WRITE,
    AliasesIn,
    GroupOut,
    GroupPath,
    InvalidOut,
    RestoreIn,
    SwitchCodesIn,
)
from routing.config.errors import ConfigError, FieldError
from routing.config.schema import GroupIn, PolicyIn

router = Router(tags=["groups"])

POLICY_DOC = body_doc(
    inline_schema(PolicyIn, partial=True),
    'Policy keys, nested as in the config file or dotted ("retry.max_retries": 3). Writing a '
    "key overrides it on this group; restore-default removes the override.",
)


@router.get(
    "/groups", response={200: list[GroupOut], **AUTH}, summary="Groups with targets and policy"
)
def groups_list(request: HttpRequest) -> list[dict[str, Any]]:
    return selectors.group_list()


@router.post(
    "/groups",
    response={201: GroupOut, **CREATE},
    summary="Create a group",
    openapi_extra=body_doc(inline_schema(GroupIn)),
)
def groups_create(request: HttpRequest, response: HttpResponse) -> Status[dict[str, Any]]:
    group = services.group_create(data=json_body(request), actor=who(request), path="api")
    return Status(201, tagged(response, selectors.group_detail(name=group.name)))


@router.get(
    "/groups/{name}",
    response={200: GroupOut, **READ},
    summary="A group: targets, and per policy field its value, source and override",
)
def groups_get(request: HttpRequest, name: GroupPath, response: HttpResponse) -> dict[str, Any]:
    return tagged(response, selectors.group_detail(name=group_name(name)))


@router.patch(
    "/groups/{name}",
    response={200: GroupOut, **WRITE},
    summary="Override policy fields on a group",
    openapi_extra=POLICY_DOC,
)
def groups_update(
    request: HttpRequest, name: GroupPath, response: HttpResponse, if_match: IfMatch = None
) -> dict[str, Any]:
    name = group_name(name)
    version = based_on(if_match, group_version(name))
    services.group_update_policy(
        name=name, changes=json_body(request), based_on=version, actor=who(request), path="api"
    )
    return tagged(response, selectors.group_detail(name=name))


@router.delete("/groups/{name}", response={204: None, **WRITE}, summary="Delete a group")
def groups_delete(request: HttpRequest, name: GroupPath, if_match: IfMatch = None) -> Status[None]:
    name = group_name(name)
    version = based_on(if_match, group_version(name))
    services.group_delete(name=name, based_on=version, actor=who(request), path="api")
    return Status(204, None)


@router.post(
    "/groups/{name}/restore-default",
    response={200: GroupOut, **WRITE},
    summary="Drop overrides (some fields, or all) so the lower layers show",
    openapi_extra=body_doc(inline_schema(RestoreIn), required=False),
)
def groups_restore_default(
    request: HttpRequest, name: GroupPath, response: HttpResponse, if_match: IfMatch = None
) -> dict[str, Any]:
    name = group_name(name)
    version = based_on(if_match, group_version(name))
    body = parse(RestoreIn, json_body(request, default={}))
    services.group_restore_default(
        name=name, fields=body.fields, based_on=version, actor=who(request), path="api"
    )
    return tagged(response, selectors.group_detail(name=name))


@router.put(
    "/groups/{name}/switch-codes",
    response={200: GroupOut, **WRITE},
    summary="Set the failure codes that allow moving to the next target",
    openapi_extra=body_doc(inline_schema(SwitchCodesIn)),
)
def switch_codes_set(
    request: HttpRequest, name: GroupPath, response: HttpResponse, if_match: IfMatch = None
) -> dict[str, Any]:
    name = group_name(name)
    version = based_on(if_match, group_version(name))
    raw = json_body(request)
    if not isinstance(raw, dict) or set(raw) != {"codes"}:
        raise ConfigError.single("", 'the body must be {"codes": [...]}')
    try:
        services.group_update_policy(
            name=name,
            changes={"switch_codes": raw["codes"]},
            based_on=version,
            actor=who(request),
            path="api",
        )
    except ConfigError as exc:  # the policy field is switch_codes; this body calls it codes
        raise ConfigError(
            FieldError(e.path.replace("switch_codes", "codes", 1), e.message) for e in exc.errors
        ) from None
    return tagged(response, selectors.group_detail(name=name))


@router.delete(
    "/groups/{name}/switch-codes",
    response={200: GroupOut, **WRITE},
    summary="Restore the inherited switch codes",
)
def switch_codes_restore(
    request: HttpRequest, name: GroupPath, response: HttpResponse, if_match: IfMatch = None
) -> dict[str, Any]:
    name = group_name(name)
    version = based_on(if_match, group_version(name))
    services.group_restore_default(
        name=name, fields=["switch_codes"], based_on=version, actor=who(request), path="api"
    )
    return tagged(response, selectors.group_detail(name=name))


@router.put(
    "/groups/{name}/aliases",
    response={200: GroupOut, **WRITE, 409: InvalidOut},  # 409: another group's aliases clash
    summary="Set the model-name aliases (globs) that also reach the group",
    openapi_extra=body_doc(inline_schema(AliasesIn)),
)
def aliases_set(
    request: HttpRequest, name: GroupPath, response: HttpResponse, if_match: IfMatch = None
) -> dict[str, Any]:
    name = group_name(name)
    version = based_on(if_match, group_version(name))
    raw = json_body(request)
    if not isinstance(raw, dict) or set(raw) != {"aliases"}:
        raise ConfigError.single("", 'the body must be {"aliases": [...]}')
    services.group_set_aliases(
        name=name, aliases=raw["aliases"], based_on=version, actor=who(request), path="api"
    )
    return tagged(response, selectors.group_detail(name=name))
