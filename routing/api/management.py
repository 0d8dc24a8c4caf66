"""The management API under ``/api/v1/`` (django-ninja; OpenAPI at ``/api/docs``).

Every endpoint, the OpenAPI document and its page included, is authenticated by an admin
key (``Authorization: Bearer sk-sy-…`` created with ``createkey NAME --admin``) or a staff
session (with CSRF on unsafe methods). A client key is recognised and refused with 403, so
a script learns it used the wrong kind of key. Routers from their own modules are mounted
here; endpoints stay thin and call services.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from ninja import NinjaAPI
from ninja.errors import AuthorizationError
from ninja.security import HttpBearer
from ninja.security.session import SessionAuthIsStaff

from routing.api.config_api.http import document_preconditions
from routing.api.openai_docs import v1_openapi
from routing.gateway.runtime import get_runtime


class AdminKeyAuth(HttpBearer):
    """Bearer admin keys, checked against the compiled in-memory key index."""

    def authenticate(self, request: HttpRequest, token: str) -> str | None:
        runtime = get_runtime()
        table = runtime.table or runtime.reload()
        key = table.keys.get(hashlib.sha256(token.strip().encode()).hexdigest())
        if key is None:
            return None
        if key.kind != "admin":
            raise AuthorizationError(
                message="This is a client key; the management API needs an admin key."
            )
        request.switchyard_actor = f"key:{key.name}"  # type: ignore[attr-defined]
        return key.name


class StaffSessionAuth(SessionAuthIsStaff):
    def _get_key(self, request: HttpRequest) -> str | None:
        # No session cookie means this is not a session request: skip ninja's CSRF check
        # so a wrong or revoked bearer key gets its 401, not a "CSRF check failed" 403.
        if settings.SESSION_COOKIE_NAME not in request.COOKIES:
            return None
        return super()._get_key(request)

    def authenticate(self, request: HttpRequest, key: str | None) -> object | None:
        user = super().authenticate(request, key)
        if user:
            request.switchyard_actor = f"user:{request.user.get_username()}"  # type: ignore[attr-defined]
        return user


AUTH = [AdminKeyAuth(), StaffSessionAuth()]


def authenticated(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """The API document and its page need what every other endpoint needs (SPEC §9): an
    admin key or a staff session. A client key is refused with 403 as everywhere here; a
    browser without a session is sent to the login page for the docs page."""

    @functools.wraps(view)
    def guarded(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        for auth in AUTH:
            try:
                if auth(request):
                    return view(request, *args, **kwargs)
            except AuthorizationError as exc:
                return JsonResponse({"detail": str(exc)}, status=403)
        if request.path.endswith(DOCS_URL) and "Authorization" not in request.headers:
            return redirect_to_login(request.get_full_path())
        return JsonResponse({"detail": "Unauthorized"}, status=401)

    return guarded


class ManagementAPI(NinjaAPI):
    """The management API, whose OpenAPI document (``/api/docs``) also describes the
    OpenAI-compatible ``/v1`` endpoints (``routing.api.openai_docs``), so one page shows
    clients and operators everything.

    The document is the same for every reader and names no configuration: no group,
    provider or model of this installation appears in it (a scoped key must not learn
    from it what its scope hides). A body naming an unknown one is a 422 that says so."""

    def get_openapi_schema(self, *args: Any, **kwargs: Any) -> Any:
        schema = super().get_openapi_schema(*args, **kwargs)
        extra = v1_openapi()
        schema["paths"] = {**extra["paths"], **schema["paths"]}
        components = schema.setdefault("components", {})
        components.setdefault("schemas", {}).update(extra["components"]["schemas"])
        components.setdefault("securitySchemes", {}).update(extra["components"]["securitySchemes"])
        schema["tags"] = [*schema.get("tags", []), *extra["tags"]]
        return document_preconditions(schema)


DOCS_URL = "/docs"
api = ManagementAPI(
    title="Switchyard management API",
    description="`/api/v1/…` manages the gateway (an admin key or a staff session); "
    "`/v1/…` is what clients call (a client key), OpenAI-compatible.",
    version="1",
    urls_namespace="api",
    auth=AUTH,
    docs_url=DOCS_URL,
    openapi_url="/openapi.json",
    docs_decorator=authenticated,
)


@csrf_exempt  # it changes nothing; a POST to a wrong path must get this JSON, not a CSRF page
def unknown_path(request: HttpRequest, rest: str = "") -> HttpResponse:
    """Anything else under /api/v1/: a JSON 404, never Django's HTML page."""
    return JsonResponse(
        {"detail": f"Unknown endpoint: {request.method} {request.path}"}, status=404
    )


from routing.api.observability import router as observability_router  # noqa: E402

api.add_router("", observability_router)

from routing.api.spend import router as spend_router  # noqa: E402

api.add_router("", spend_router)

from routing.api.config_api import install as install_config_api  # noqa: E402

install_config_api(api)
