"""The OpenAI-compatible edge: ``POST /v1/chat/completions`` and ``GET /v1/models``.

Thin on purpose: authenticate against the in-memory key index, parse, resolve the model,
run one ``Call``, render its reply. Every error leaves here in OpenAI's shape
``{"error": {"message", "type", "code", "param"}}`` — never a Django HTML page.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse
from ninja import NinjaAPI

from routing.api.asgi import RelayResponse
from routing.gateway.call import Call
from routing.gateway.replies import ErrorReply, Reply, StreamReply
from routing.runtime import get_runtime
from routing.table import KeySpec, RoutingTable

api = NinjaAPI(
    title="Switchyard OpenAI-compatible API",
    urls_namespace="openai",
    docs_url=None,
    openapi_url=None,
)


def render(reply: Reply) -> HttpResponse:
    """Turn a gateway reply into an HTTP response — the only place that does."""
    if isinstance(reply, StreamReply):
        response = RelayResponse(
            reply.chunks, content_type="text/event-stream", headers=reply.headers
        )
        response["cache-control"] = "no-cache"
        response["x-accel-buffering"] = "no"
        return response
    body = reply.body  # JSON answers and OpenAI-shaped errors alike
    response = HttpResponse(
        body, status=reply.status, content_type="application/json", headers=reply.headers
    )
    response["content-length"] = str(len(body))  # /v1 runs without CommonMiddleware
    return response


def authenticate(request: HttpRequest, table: RoutingTable) -> KeySpec | ErrorReply:
    header = request.headers.get("authorization", "")
    scheme, _, secret = header.partition(" ")
    if scheme.lower() != "bearer" or not secret.strip():
        return ErrorReply(
            401, "Missing API key: send 'Authorization: Bearer <key>'.", "missing_api_key"
        )
    key = table.keys.get(hashlib.sha256(secret.strip().encode()).hexdigest())
    if key is None:
        return ErrorReply(401, "Invalid or revoked API key.", "invalid_api_key")
    return key


def parse_body(request: HttpRequest) -> dict[str, Any] | ErrorReply:
    try:
        raw = request.body
    except RequestDataTooBig:
        return ErrorReply(413, "Request body is too large.", "request_too_large")
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return ErrorReply(400, "Request body is not valid JSON.", "invalid_json")
    if not isinstance(body, dict):
        return ErrorReply(400, "Request body must be a JSON object.", "invalid_request")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        return ErrorReply(
            400, "'model' is required and must be a string.", "invalid_request", param="model"
        )
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return ErrorReply(
            400, "'messages' must be a non-empty array.", "invalid_request", param="messages"
        )
    if "stream" in body and not isinstance(body["stream"], bool):
        return ErrorReply(400, "'stream' must be a boolean.", "invalid_request", param="stream")
    return body


def session_key(request: HttpRequest, body: dict[str, Any]) -> str | None:
    session = request.headers.get("x-session-id") or body.get("user")
    if not session:
        metadata = body.get("metadata")
        if isinstance(metadata, dict):
            session = metadata.get("session_id")
    return str(session)[:200] if session else None


@api.post("/chat/completions", auth=None, include_in_schema=False)
async def chat_completions(request: HttpRequest) -> HttpResponse:
    runtime = get_runtime()
    table = await runtime.current_table()
    key = authenticate(request, table)
    if isinstance(key, ErrorReply):
        return render(key)
    body = parse_body(request)
    if isinstance(body, ErrorReply):
        return render(body)
    model = body["model"]
    group = table.resolve(model)
    if group is None:
        return render(
            ErrorReply(
                404, f"The model '{model}' does not exist.", "model_not_found", param="model"
            )
        )
    if key.groups and model not in key.groups:
        return render(
            ErrorReply(
                403,
                f"This key may not use the model '{model}'.",
                "model_not_allowed",
                "permission_error",
                "model",
            )
        )
    call = Call(
        runtime,
        group,
        body,
        stream=bool(body.get("stream")),
        session=session_key(request, body),
        started=getattr(request, "scope", {}).get("switchyard.started"),
    )
    return render(await call.run())


@api.api_operation(
    ["GET", "PUT", "PATCH", "DELETE"], "/chat/completions", auth=None, include_in_schema=False
)
async def chat_completions_wrong_method(request: HttpRequest) -> HttpResponse:
    reply = ErrorReply(
        405, f"{request.method} is not supported here; use POST.", "method_not_allowed"
    )
    response = render(reply)
    response["allow"] = "POST"
    return response


async def unknown_endpoint(request: HttpRequest, rest: str = "") -> HttpResponse:
    """Anything else under /v1: an OpenAI-shaped 404, not Django's HTML page."""
    return render(
        ErrorReply(404, f"Unknown endpoint: {request.method} {request.path}", "unknown_url")
    )


@api.get("/models", auth=None, include_in_schema=False)
async def list_models(request: HttpRequest) -> HttpResponse:
    runtime = get_runtime()
    table = await runtime.current_table()
    key = authenticate(request, table)
    if isinstance(key, ErrorReply):
        return render(key)
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
