"""The other front doors: ``POST /v1/messages`` (Anthropic Messages), ``POST
/v1/responses`` (OpenAI Responses) and ``POST /v1/embeddings`` (SPEC §12).

Registered on the same ``/v1`` API as the chat door and as thin: authenticate (Bearer, or
``x-api-key`` on the Messages door), parse and check the body in the door's own terms,
resolve the group, translate the request for the group's other kinds (targets of a kind
that cannot take it are skipped; when none can, a 400 here, before any upstream), run one
``Call``, render. Every error
leaves in the door's shape with ``x-should-retry: false``.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponseBase

from routing.api.openai import (
    api,
    authenticate,
    parse_json,
    prepare,
    render,
    resolve_group,
    session_key,
    skipped,
)
from routing.gateway.call import Call
from routing.gateway.replies import ErrorReply
from routing.gateway.runtime import get_runtime
from routing.protocols import Protocol

EMBEDDING_KINDS = frozenset({Protocol.CHAT.value, Protocol.RESPONSES.value})
# What a Messages client says about the protocol itself: an anthropic target gets it as
# sent (Claude Code's betas: interleaved thinking, longer context...); other kinds do not.
ANTHROPIC_PASS_HEADERS = ("anthropic-beta", "anthropic-version")


def _messages_errors(body: dict[str, Any]) -> ErrorReply | None:
    door = Protocol.MESSAGES
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return ErrorReply(400, "messages: must be a non-empty array", "invalid_request", door=door)
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
            return ErrorReply(
                400,
                f"messages.{i}.role: must be 'user' or 'assistant'",
                "invalid_request",
                door=door,
            )
        if not isinstance(message.get("content"), str | list):
            return ErrorReply(
                400,
                f"messages.{i}.content: must be a string or an array of blocks",
                "invalid_request",
                door=door,
            )
    max_tokens = body.get("max_tokens")
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        return ErrorReply(
            400, "max_tokens: a positive integer is required", "invalid_request", door=door
        )
    return None


def _responses_errors(body: dict[str, Any]) -> ErrorReply | None:
    items = body.get("input")
    if not (isinstance(items, str) and items) and not (isinstance(items, list) and items):
        return ErrorReply(
            400,
            "'input' must be a non-empty string or array of items.",
            "invalid_request",
            param="input",
            door=Protocol.RESPONSES,
        )
    return None


async def _serve(request: HttpRequest, door: Protocol) -> HttpResponseBase:
    runtime = get_runtime()
    table = await runtime.current_table()
    key = authenticate(request, table, door)
    if isinstance(key, ErrorReply):
        return render(key)
    body = parse_json(request, door)
    if isinstance(body, ErrorReply):
        return render(body)
    invalid = _messages_errors(body) if door is Protocol.MESSAGES else _responses_errors(body)
    if invalid is not None:
        return render(invalid)
    group = resolve_group(table, key, body["model"], door)
    if isinstance(group, ErrorReply):
        return render(group)
    prepared = prepare(door, body, group)
    if isinstance(prepared, ErrorReply):
        return render(prepared)
    call = Call(
        runtime,
        group,
        body,
        stream=bool(body.get("stream")),
        session=session_key(request, body),
        started=getattr(request, "scope", {}).get("switchyard.started"),
        door=door,
        prepared=prepared,
        skipped=skipped(prepared, group),
        protocol_headers=_protocol_headers(request) if door is Protocol.MESSAGES else None,
        key=key,
    )
    return render(await call.run())


def _protocol_headers(request: HttpRequest) -> dict[str, str]:
    return {
        name: request.headers[name] for name in ANTHROPIC_PASS_HEADERS if name in request.headers
    }


@api.post("/messages", auth=None, include_in_schema=False)
async def messages(request: HttpRequest) -> HttpResponseBase:
    return await _serve(request, Protocol.MESSAGES)


@api.post("/responses", auth=None, include_in_schema=False)
async def responses(request: HttpRequest) -> HttpResponseBase:
    return await _serve(request, Protocol.RESPONSES)


@api.post("/embeddings", auth=None, include_in_schema=False)
async def embeddings(request: HttpRequest) -> HttpResponseBase:
    """Routed through groups like a JSON call; targets of a kind without an embeddings
    endpoint (``anthropic``) are skipped."""
    runtime = get_runtime()
    table = await runtime.current_table()
    key = authenticate(request, table)
    if isinstance(key, ErrorReply):
        return render(key)
    body = parse_json(request)
    if isinstance(body, ErrorReply):
        return render(body)
    if not isinstance(body.get("input"), str | list) or not body["input"]:
        return render(ErrorReply(400, "'input' is required.", "invalid_request", param="input"))
    if body.get("stream"):
        return render(
            ErrorReply(400, "Embeddings do not stream.", "invalid_request", param="stream")
        )
    group = resolve_group(table, key, body["model"])
    if isinstance(group, ErrorReply):
        return render(group)
    without_embeddings = {
        t.key: f"kind '{t.provider.kind}' has no embeddings endpoint"
        for t in group.targets
        if t.provider.kind not in EMBEDDING_KINDS
    }
    call = Call(
        runtime,
        group,
        body,
        stream=False,
        session=session_key(request, body),
        started=getattr(request, "scope", {}).get("switchyard.started"),
        endpoint="embeddings",
        skipped=without_embeddings,
        key=key,
    )
    return render(await call.run())


def _wrong_method(request: HttpRequest, door: Protocol) -> HttpResponseBase:
    reply = ErrorReply(
        405, f"{request.method} is not supported here; use POST.", "method_not_allowed", door=door
    )
    response = render(reply)
    response["allow"] = "POST"
    return response


@api.api_operation(
    ["GET", "PUT", "PATCH", "DELETE", "OPTIONS"], "/messages", auth=None, include_in_schema=False
)
async def messages_wrong_method(request: HttpRequest) -> HttpResponseBase:
    return _wrong_method(request, Protocol.MESSAGES)


@api.api_operation(
    ["GET", "PUT", "PATCH", "DELETE", "OPTIONS"], "/responses", auth=None, include_in_schema=False
)
async def responses_wrong_method(request: HttpRequest) -> HttpResponseBase:
    return _wrong_method(request, Protocol.RESPONSES)


@api.api_operation(
    ["GET", "PUT", "PATCH", "DELETE", "OPTIONS"], "/embeddings", auth=None, include_in_schema=False
)
async def embeddings_wrong_method(request: HttpRequest) -> HttpResponseBase:
    return _wrong_method(request, Protocol.CHAT)
