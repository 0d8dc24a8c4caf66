"""``GET /metrics``: Prometheus text, no authentication (scrapers do not log in).

Only aggregate numbers leave here, labelled by group, target, code and outcome.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST

from routing.audit.metrics import exposition
from routing.runtime import get_runtime


@require_GET
async def metrics_view(request: HttpRequest) -> HttpResponse:
    return HttpResponse(await exposition(get_runtime()), content_type=CONTENT_TYPE_LATEST)
