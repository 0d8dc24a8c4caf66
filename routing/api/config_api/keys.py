"""``/keys``: gateway keys, listed by prefix, created (secret shown once), revoked."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Query, Router, Status

from routing import selectors, services
from routing.api.config_api.http import body_doc, inline_schema, json_body, parse, who
from routing.api.config_api.schemas import (
    AUTH,
    FILTERED,
    READ,
    WRITE,
    InvalidOut,
    KeyCreatedOut,
    KeyDetailOut,
    KeyId,
    KeyIn,
    KeyOut,
    KeyPatchIn,
    KeysQuery,
)
from routing.gateway.runtime import get_runtime
from routing.limits.usage import key_detail

router = Router(tags=["keys"])


@router.get(
    "/keys", response={200: list[KeyOut], **FILTERED}, summary="Keys, newest first (never a secret)"
)
def keys_list(request: HttpRequest, filters: Query[KeysQuery]) -> list[dict[str, Any]]:
    return selectors.key_list(prefix=filters.prefix)


@router.post(
    "/keys",
    response={201: KeyCreatedOut, **AUTH, 422: InvalidOut},
    summary="Create a key; its secret is in this response only",
    openapi_extra=body_doc(inline_schema(KeyIn)),
)
def keys_create(request: HttpRequest) -> Status[dict[str, Any]]:
    body = parse(KeyIn, json_body(request))
    key, secret = services.key_create(
        name=body.name,
        kind=body.kind,
        groups=body.groups,
        limits=body.limits,
        actor=who(request),
        path="api",
    )
    return Status(201, {**selectors.key_out(key), "secret": secret})


@router.delete(
    "/keys/{int:key_id}",
    response={200: KeyOut, **READ},
    summary="Revoke a key: refused from the next request on",
)
def keys_revoke(request: HttpRequest, key_id: KeyId) -> dict[str, Any]:
    key = services.key_revoke(key_id=key_id, actor=who(request), path="api")
    return selectors.key_out(key)


@router.get(
    "/keys/{int:key_id}",
    response={200: KeyDetailOut, **READ},
    summary="A key: its limits, their use in the current windows, and its spend",
)
def keys_detail(request: HttpRequest, key_id: KeyId) -> dict[str, Any]:
    return key_detail(key_id, gate=get_runtime().limit_gate)


@router.patch(
    "/keys/{int:key_id}",
    response={200: KeyOut, **WRITE},
    summary="Set a key's limits (replacing them); applied from the next request on",
    openapi_extra=body_doc(inline_schema(KeyPatchIn)),
)
def keys_update(request: HttpRequest, key_id: KeyId) -> dict[str, Any]:
    body = parse(KeyPatchIn, json_body(request))
    key = services.key_update(key_id=key_id, limits=body.limits, actor=who(request), path="api")
    return selectors.key_out(key)
