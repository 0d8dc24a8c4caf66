"""Configuration endpoints of the management API (``/api/v1/``): providers, groups,
targets, switch codes, global defaults, keys, health actions, and the route explainer.

::

    routing/api/config_api/
    ├── http.py        ETag / If-Match, JSON bodies, names, OpenAPI body docs
    ├── schemas.py     request bodies that are not config schemas; response schemas
    ├── providers.py   /providers…  (CRUD, enable, refresh-models, test)
    ├── groups.py      /groups…     (CRUD, restore-default, switch-codes)
    ├── targets.py     /groups/{name}/targets…, /targets/{id}/reset
    ├── settings.py    /global…, /config/export
    ├── keys.py        /keys…
    └── explain.py     /route/explain

Thin edges: parse, call one service or selector, render. Decisions:

- **Bodies are parsed here and validated by the shared schema**, not by ninja: the
  request body is read as JSON (``orjson``, strict UTF-8) and handed to the services,
  which validate through ``routing.config.schema``, so the API refuses exactly what the
  config file, the page and the admin refuse, with the same messages. The OpenAPI request
  bodies are generated from those same pydantic models.
- **Errors become responses in one place** (:func:`install`): ``ConfigError`` -> 422 in
  ninja's shape ``{"detail": [{"loc": ["body", …], "msg", "type"}]}``; ``NotFound`` ->
  404; ``VersionConflict`` -> 412 and a missing or unusable ``If-Match`` -> 428, both as
  ``{"detail", "current_version"}`` with the current ``ETag``; ``ProviderCallError`` ->
  424 (the upstream failed the operator's request; the gateway itself did not fail).
- **ETag / If-Match**: every single-object read and write answers ``ETag: W/"<version>"``
  (weak: a group's representation also shows inherited values that can change without
  its version). Writes to providers, groups (targets included: they carry the group's
  ETag) and global settings need ``If-Match`` with that tag; ``W/"3"``, ``"3"`` and ``3``
  are accepted, ``*`` is not (a write must say which version it read). Order of refusals:
  428, 404, 412, 422.
- Health actions (reset, enable, refresh, test) and keys are actions, not versioned
  documents: they take no ``If-Match``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse
from ninja import NinjaAPI

from routing import services
from routing.api.config_api import explain, groups, keys, providers, settings, targets
from routing.api.config_api.http import PreconditionRequired, error_loc, etag
from routing.config.errors import ConfigError


def install(api: NinjaAPI) -> None:
    """Mount the routers and turn service errors into responses."""

    def conflict(request: HttpRequest, exc: services.VersionConflict) -> HttpResponse:
        body = {"detail": str(exc), "current_version": exc.current_version}
        response = api.create_response(request, body, status=412)
        response["ETag"] = etag(exc.current_version)
        return response

    def precondition(request: HttpRequest, exc: PreconditionRequired) -> HttpResponse:
        body = {"detail": exc.detail, "current_version": exc.current_version}
        response = api.create_response(request, body, status=428)
        response["ETag"] = etag(exc.current_version)
        return response

    def invalid(request: HttpRequest, exc: ConfigError) -> HttpResponse:
        detail = [
            {"loc": error_loc(e.path), "msg": e.message, "type": "value_error"} for e in exc.errors
        ]
        return api.create_response(request, {"detail": detail}, status=422)

    def taken(request: HttpRequest, exc: services.NameTaken) -> HttpResponse:
        response = invalid(request, exc)
        response.status_code = 409
        return response

    def not_found(request: HttpRequest, exc: services.NotFound) -> HttpResponse:
        return api.create_response(request, {"detail": str(exc)}, status=404)

    def upstream(request: HttpRequest, exc: services.ProviderCallError) -> HttpResponse:
        return api.create_response(request, {"detail": exc.message}, status=424)

    handlers: dict[type[Exception], Callable[[HttpRequest, Any], HttpResponse]] = {
        services.VersionConflict: conflict,
        PreconditionRequired: precondition,
        ConfigError: invalid,
        services.NameTaken: taken,
        services.Clash: taken,
        services.NotFound: not_found,
        services.ProviderCallError: upstream,
    }
    for exc_class, handler in handlers.items():
        api.add_exception_handler(exc_class, handler)
    for module in (providers, groups, targets, settings, keys, explain):
        api.add_router("", module.router)
