"""A lean Django ASGI handler for the OpenAI-compatible ``/v1`` endpoints.

The settings page and admin need sessions, CSRF, auth and messages middleware; the gateway
path needs none of them, and Django's built-in middleware is sync, so each one costs a
thread hop per request under ASGI. ``/v1`` requests are therefore served by a second handler
whose middleware stack is ``GATEWAY_MIDDLEWARE`` (async-capable only). Same URLconf, same
views, same error handling — only the middleware differs.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.handlers.asgi import ASGIHandler

GATEWAY_MIDDLEWARE: list[str] = []


class GatewayASGIHandler(ASGIHandler):
    def load_middleware(self, is_async: bool = False) -> None:
        # BaseHandler reads settings.MIDDLEWARE; swap it only while this handler loads
        # (once, at start-up, before any request is served).
        full = settings.MIDDLEWARE
        settings.MIDDLEWARE = GATEWAY_MIDDLEWARE
        try:
            super().load_middleware(is_async=is_async)
        finally:
            settings.MIDDLEWARE = full


def split_gateway_traffic(default_app: Any, prefix: str = "/v1/") -> Any:
    """An ASGI app sending ``prefix`` paths to the lean handler, the rest to ``default_app``."""
    gateway_app = GatewayASGIHandler()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["path"].startswith(prefix):
            await gateway_app(scope, receive, send)
        else:
            await default_app(scope, receive, send)

    return app
