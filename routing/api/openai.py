"""The OpenAI-compatible edge: ``POST /v1/chat/completions`` and ``GET /v1/models``, and
the ``/v1`` API every door registers on.

The chat door is a :class:`~routing.api.pipeline.Door` served by the shared pipeline
(``routing.api.pipeline.serve``); its one rule of its own is a non-empty ``messages``.
Every error leaves here in OpenAI's shape ``{"error": {"message", "type", "code",
"param"}}`` (the Messages door's in Anthropic's) — never a Django HTML page.
"""

from __future__ import annotations

import logging
from typing import Any

import orjson
from django.http import HttpRequest, HttpResponse, HttpResponseBase
from ninja import NinjaAPI

from routing.api.pipeline import Door, authenticate, render, serve, wrong_method
from routing.gateway.replies import ErrorReply
from routing.gateway.runtime import TableUnavailable, get_runtime
from routing.protocols import Protocol

log = logging.getLogger("switchyard.gateway")

api = NinjaAPI(
    title="Switchyard OpenAI-compatible API",
    urls_namespace="openai",
    docs_url=None,
    openapi_url=None,
)


@api.exception_handler(TableUnavailable)
def table_unavailable(request: HttpRequest, exc: TableUnavailable) -> HttpResponseBase:
    """No table at all (not even a last good one): every door says so in its own shape."""
    return render(
        ErrorReply(503, str(exc), "configuration_unavailable", "server_error", door=_door(request))
    )


@api.exception_handler(Exception)
def gateway_bug(request: HttpRequest, exc: Exception) -> HttpResponseBase:
    """A bug of ours is still an answer in the door's own shape, never Django's HTML page
    (the call was recorded as failed on the way out)."""
    log.exception("unhandled error on %s", request.path)
    return render(
        ErrorReply(
            500, "internal gateway error", "internal_error", "server_error", door=_door(request)
        )
    )


def _door(request: HttpRequest) -> Protocol:
    path = request.path
    if path.startswith("/v1beta/") or ":" in path.rpartition("/")[2]:
        return Protocol.GEMINI  # Gemini's door (routing.api.gemini)
    return Protocol.MESSAGES if path.rstrip("/").endswith("/messages") else Protocol.CHAT


def _chat_errors(body: dict[str, Any]) -> ErrorReply | None:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return ErrorReply(
            400, "'messages' must be a non-empty array.", "invalid_request", param="messages"
        )
    return None


CHAT = Door(Protocol.CHAT, check=_chat_errors)


@api.post("/chat/completions", auth=None, include_in_schema=False)
async def chat_completions(request: HttpRequest) -> HttpResponseBase:
    return await serve(request, CHAT)


@api.api_operation(
    ["GET", "PUT", "PATCH", "DELETE", "OPTIONS"],
    "/chat/completions",
    auth=None,
    include_in_schema=False,
)
async def chat_completions_wrong_method(request: HttpRequest) -> HttpResponseBase:
    return wrong_method(request, Protocol.CHAT)


async def unknown_endpoint(request: HttpRequest, rest: str = "") -> HttpResponseBase:
    """Anything else under /v1: an OpenAI-shaped 404, not Django's HTML page."""
    return render(
        ErrorReply(404, f"Unknown endpoint: {request.method} {request.path}", "unknown_url")
    )


@api.get("/models", auth=None, include_in_schema=False)
async def list_models(request: HttpRequest) -> HttpResponseBase:
    runtime = get_runtime()
    table = await runtime.current_table()
    anthropic = "anthropic-version" in request.headers
    key = authenticate(request, table, Protocol.MESSAGES if anthropic else Protocol.CHAT)
    if isinstance(key, ErrorReply):
        return render(key)
    if anthropic:  # what Anthropic clients discover models with (SPEC §12)
        models = [
            {
                "type": "model",
                "id": name,
                "display_name": name,
                "created_at": "1970-01-01T00:00:00Z",
            }
            for name in table.groups
            if not key.groups or name in key.groups
        ]
        listing = {
            "data": models,
            "has_more": False,
            "first_id": models[0]["id"] if models else None,
            "last_id": models[-1]["id"] if models else None,
        }
        return HttpResponse(orjson.dumps(listing), content_type="application/json")
    data = [
        {
            "id": name,
            "object": "model",
            "created": 0,
            "owned_by": "switchyard",
            "context_window": group.window.tokens,  # declared (SPEC §13)
        }
        for name, group in table.groups.items()
        if not key.groups or name in key.groups
    ]
    return HttpResponse(
        orjson.dumps({"object": "list", "data": data}), content_type="application/json"
    )
