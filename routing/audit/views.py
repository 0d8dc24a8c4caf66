"""``GET /metrics``: Prometheus text.

Like every other API it needs credentials: an admin key as a bearer token (Prometheus:
``authorization: {credentials_file: ...}`` in the scrape config) or a staff session. An
operator who scrapes from a trusted network can open it with ``SWITCHYARD_METRICS_PUBLIC=1``.
Only aggregate numbers leave here, labelled by group, target, code and outcome.
"""

from __future__ import annotations

import hashlib

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST

from routing.conf import switchyard_settings
from routing.gateway.runtime import get_runtime
from routing.observability.metrics import exposition


async def _allowed(request: HttpRequest) -> bool:
    if switchyard_settings().METRICS_PUBLIC:
        return True
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        table = await get_runtime().current_table()
        key = table.keys.get(hashlib.sha256(token.strip().encode()).hexdigest())
        return key is not None and key.kind == "admin"
    user = await request.auser()
    return bool(user.is_active and user.is_staff)


@require_GET
async def metrics_view(request: HttpRequest) -> HttpResponse:
    if not await _allowed(request):
        response = JsonResponse(
            {"detail": "Unauthorized: send an admin key or log in as staff."}, status=401
        )
        response["www-authenticate"] = "Bearer"
        return response
    return HttpResponse(await exposition(get_runtime()), content_type=CONTENT_TYPE_LATEST)
