"""``/providers``: CRUD (the credential is write-only) and the provider actions."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from django.http import HttpRequest, HttpResponse
from ninja import Router, Status

from routing import selectors, services
from routing.api.config_api.http import (
    IfMatch,
    based_on,
    body_doc,
    inline_schema,
    json_body,
    provider_name,
    provider_version,
    tagged,
    who,
)
from routing.api.config_api.schemas import (
    AUTH,
    CREATE,
    READ,
    WRITE,
    ActionOut,
    ErrorOut,
    ProviderOut,
    ProviderPath,
    ProviderTestOut,
)
from routing.config.schema import ProviderIn

router = Router(tags=["providers"])

PATCH_DOC = body_doc(
    inline_schema(ProviderIn, partial=True),
    'Keys left out keep their value; timeouts merge per key. api_key: absent or "" keeps '
    "the stored credential, a string replaces it, null clears it. The name cannot change.",
)


@router.get(
    "/providers",
    response={200: list[ProviderOut], **AUTH},
    summary="Providers (never a credential)",
)
def providers_list(request: HttpRequest) -> list[dict[str, Any]]:
    return selectors.provider_list()


@router.post(
    "/providers",
    response={201: ProviderOut, **CREATE},
    summary="Create a provider",
    openapi_extra=body_doc(inline_schema(ProviderIn)),
)
def providers_create(request: HttpRequest, response: HttpResponse) -> Status[dict[str, Any]]:
    provider = services.provider_create(data=json_body(request), actor=who(request), path="api")
    return Status(201, tagged(response, selectors.provider_detail(name=provider.name)))


@router.get("/providers/{name}", response={200: ProviderOut, **READ}, summary="One provider")
def providers_get(
    request: HttpRequest, name: ProviderPath, response: HttpResponse
) -> dict[str, Any]:
    return tagged(response, selectors.provider_detail(name=provider_name(name)))


@router.patch(
    "/providers/{name}",
    response={200: ProviderOut, **WRITE},
    summary="Change a provider",
    openapi_extra=PATCH_DOC,
)
def providers_update(
    request: HttpRequest, name: ProviderPath, response: HttpResponse, if_match: IfMatch = None
) -> dict[str, Any]:
    name = provider_name(name)
    version = based_on(if_match, provider_version(name))
    services.provider_update(
        name=name, data=json_body(request), based_on=version, actor=who(request), path="api"
    )
    return tagged(response, selectors.provider_detail(name=name))


@router.delete(
    "/providers/{name}", response={204: None, **WRITE}, summary="Delete a provider no group uses"
)
def providers_delete(
    request: HttpRequest, name: ProviderPath, if_match: IfMatch = None
) -> Status[None]:
    name = provider_name(name)
    version = based_on(if_match, provider_version(name))
    services.provider_delete(name=name, based_on=version, actor=who(request), path="api")
    return Status(204, None)


@router.post(
    "/providers/{name}/enable",
    response={200: ActionOut, **READ},
    summary="Re-enable a provider whose credential was disabled",
)
def providers_enable(request: HttpRequest, name: ProviderPath) -> dict[str, str]:
    services.provider_enable(name=provider_name(name), actor=who(request))
    return {"detail": f"provider {name!r} is enabled"}


@router.post(
    "/providers/{name}/refresh-models",
    response={200: ProviderOut, 424: ErrorOut, **READ},
    summary="Reload the model list from the upstream's /models",
)
def providers_refresh_models(
    request: HttpRequest, name: ProviderPath, response: HttpResponse
) -> dict[str, Any]:
    name = provider_name(name)
    services.provider_refresh_models(name=name, actor=who(request), path="api")
    return tagged(response, selectors.provider_detail(name=name))


@router.post(
    "/providers/{name}/test",
    response={200: ProviderTestOut, **READ},
    summary="One cheap completion (max_tokens 1) to the provider's first model",
)
def providers_test(request: HttpRequest, name: ProviderPath) -> dict[str, Any]:
    return asdict(services.provider_test(name=provider_name(name)))
