"""``GET /healthz`` and ``GET /readyz`` for load balancers (SPEC §8).

No authentication, and nothing in the answer a stranger could use: no secrets, no
configuration, no host names — only which check failed.

- ``/healthz``: the process is alive and answering (always 200 while it can answer).
- ``/readyz``: the database answers a query, the health state store answers (a store
  serving from its in-process fallback because Redis is down is *not* ready: another
  process with Redis should take the traffic), and the routing table is loaded (compiled
  now if it was not). 200 when all pass, else 503; each check is ``true``/``false``.
"""

from __future__ import annotations

import logging

from asgiref.sync import sync_to_async
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET

from routing.gateway.runtime import get_runtime

log = logging.getLogger("switchyard.probes")


def _database_answers() -> bool:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            return cursor.fetchone() is not None
    except Exception:
        log.exception("readyz: the database did not answer")
        return False
    finally:
        connection.close_if_unusable_or_obsolete()


async def _store_answers() -> bool:
    try:
        described = await get_runtime().store.describe()
    except Exception:
        log.exception("readyz: the state store did not answer")
        return False
    return not described.get("degraded")


async def _table_loaded() -> bool:
    try:
        await get_runtime().current_table()
    except Exception:
        log.exception("readyz: the routing table could not be loaded")
        return False
    return True


@csrf_exempt  # a probe never carries a session: a wrong method is 405, not a CSRF 403
@require_GET
async def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "alive"})


@csrf_exempt
@require_GET
async def readyz(request: HttpRequest) -> JsonResponse:
    checks = {
        "database": await sync_to_async(_database_answers)(),
        "state_store": await _store_answers(),
        "routing_table": await _table_loaded(),
    }
    ready = all(checks.values())
    return JsonResponse(
        {"status": "ready" if ready else "not ready", "checks": checks},
        status=200 if ready else 503,
    )
