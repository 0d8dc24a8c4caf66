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

import asyncio
import math
from typing import Any

import orjson
from django.http import HttpRequest, HttpResponseBase

from routing.api.asgi import started_at
from routing.api.openai import (
    api,
    authenticate,
    parse_json,
    prepare,
    refuse,
    render,
    resolve_group,
    session_key,
    skipped,
)
from routing.gateway.call import Call
from routing.gateway.replies import ErrorReply, JsonReply
from routing.gateway.runtime import get_runtime
from routing.protocols import Protocol
from routing.protocols.betas import filter_betas
from routing.upstream.openai import UpstreamFailure

EMBEDDING_KINDS = frozenset({Protocol.CHAT.value, Protocol.RESPONSES.value})
# What a Messages client says about the protocol itself: an anthropic target gets it as
# sent (Claude Code's betas: interleaved thinking, longer context...); other kinds do not.
ANTHROPIC_PASS_HEADERS = ("anthropic-beta", "anthropic-version")
MESSAGE_ROLES = ("user", "assistant", "system")
COUNT_TOKENS_LIMIT = 1 << 20  # an upstream count is a small JSON object


def _messages_errors(body: dict[str, Any]) -> ErrorReply | None:
    door = Protocol.MESSAGES
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return ErrorReply(400, "messages: must be a non-empty array", "invalid_request", door=door)
    for i, message in enumerate(messages):
        # "system": a mid-conversation system message (Claude Code's Agent tool, beta
        # mid-conversation-system); anthropic targets judge it, other kinds get it in place.
        if not isinstance(message, dict) or message.get("role") not in MESSAGE_ROLES:
            return ErrorReply(
                400,
                f"messages.{i}.role: must be 'user', 'assistant' or 'system'",
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
        return refuse(request, key)
    body = parse_json(request, door)
    if isinstance(body, ErrorReply):
        return refuse(request, body, key=key)
    invalid = _messages_errors(body) if door is Protocol.MESSAGES else _responses_errors(body)
    if invalid is not None:
        return refuse(request, invalid, key=key)
    group = resolve_group(table, key, body["model"], door)
    if isinstance(group, ErrorReply):
        return refuse(request, group, key=key)
    prepared = prepare(door, body, group)
    if isinstance(prepared, ErrorReply):
        return refuse(request, prepared, key=key, group=group.name)
    call = Call(
        runtime,
        group,
        body,
        stream=bool(body.get("stream")),
        session=session_key(request, body),
        started=started_at(request),
        door=door,
        prepared=prepared,
        skipped=skipped(prepared, group),
        protocol_headers=_protocol_headers(request) if door is Protocol.MESSAGES else None,
        key=key,
        trace_headers=request.headers,
    )
    return render(await call.run())


def _protocol_headers(request: HttpRequest) -> dict[str, str]:
    return {
        name: request.headers[name] for name in ANTHROPIC_PASS_HEADERS if name in request.headers
    }


@api.post("/messages", auth=None, include_in_schema=False)
async def messages(request: HttpRequest) -> HttpResponseBase:
    return await _serve(request, Protocol.MESSAGES)


@api.post("/messages/count_tokens", auth=None, include_in_schema=False)
async def count_tokens(request: HttpRequest) -> HttpResponseBase:
    """``POST /v1/messages/count_tokens`` (SPEC §15): answered by the group's first
    anthropic-kind target that answers (its own count, its status), else an estimate —
    about four characters a token over system, messages and tools — marked
    ``x-switchyard-estimate: true``. Not a call: nothing is generated, so no ledger row."""
    door = Protocol.MESSAGES
    runtime = get_runtime()
    table = await runtime.current_table()
    key = authenticate(request, table, door)
    if isinstance(key, ErrorReply):
        return refuse(request, key)
    body = parse_json(request, door)
    if isinstance(body, ErrorReply):
        return refuse(request, body, key=key)
    if not isinstance(body.get("messages"), list):
        invalid = ErrorReply(400, "messages: must be an array", "invalid_request", door=door)
        return refuse(request, invalid, key=key)
    group = resolve_group(table, key, body["model"], door)
    if isinstance(group, ErrorReply):
        return refuse(request, group, key=key)
    headers = _protocol_headers(request)
    for target in group.targets:
        provider = target.provider
        if provider.kind != Protocol.MESSAGES.value or provider.config_error:
            continue
        client = runtime.client_for(provider)
        path = client.url.removeprefix(client.base_url) + "/count_tokens"
        sent, _ = filter_betas(headers, provider.betas_allow, provider.betas_strip)
        try:
            response = await asyncio.wait_for(
                client.send(orjson.dumps({**body, "model": target.model}), path=path, headers=sent),
                timeout=provider.timeouts.first_token_s,
            )
            try:
                payload = await response.read_limited(COUNT_TOKENS_LIMIT)
            finally:
                await response.aclose()
        except (UpstreamFailure, TimeoutError):
            continue  # the next anthropic target, else the estimate
        return render(JsonReply(payload, status=response.status_code))
    estimate = {"input_tokens": estimate_tokens(body)}
    return render(JsonReply(orjson.dumps(estimate), headers={"x-switchyard-estimate": "true"}))


def estimate_tokens(body: dict[str, Any]) -> int:
    """A rough input-token count: ~4 characters a token over system, messages and tools."""
    text = orjson.dumps([body.get("system"), body.get("messages"), body.get("tools")])
    return max(1, math.ceil(len(text) / 4))


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
        return refuse(request, key, endpoint="embeddings")
    body = parse_json(request)
    if isinstance(body, ErrorReply):
        return refuse(request, body, key=key, endpoint="embeddings")
    if not isinstance(body.get("input"), str | list) or not body["input"]:
        return refuse(
            request,
            ErrorReply(400, "'input' is required.", "invalid_request", param="input"),
            key=key,
            endpoint="embeddings",
        )
    if body.get("stream"):
        return refuse(
            request,
            ErrorReply(400, "Embeddings do not stream.", "invalid_request", param="stream"),
            key=key,
            endpoint="embeddings",
        )
    group = resolve_group(table, key, body["model"])
    if isinstance(group, ErrorReply):
        return refuse(request, group, key=key, endpoint="embeddings")
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
        started=started_at(request),
        endpoint="embeddings",
        skipped=without_embeddings,
        key=key,
        trace_headers=request.headers,
    )
    return render(await call.run())


@api.post("/responses/compact", auth=None, include_in_schema=False)
async def responses_compact(request: HttpRequest) -> HttpResponseBase:
    """The Responses compaction endpoint (Codex's remote compaction before 0.171, which
    posts ``compaction_trigger`` items to ``/v1/responses`` instead): passed to the
    group's ``openai-responses`` targets (``<base>/responses/compact``) like a JSON call;
    a group without one answers 400 in the door's shape, and Codex compacts locally."""
    door = Protocol.RESPONSES
    runtime = get_runtime()
    table = await runtime.current_table()
    key = authenticate(request, table, door)
    if isinstance(key, ErrorReply):
        return refuse(request, key)
    body = parse_json(request, door)
    if isinstance(body, ErrorReply):
        return refuse(request, body, key=key)
    invalid = _responses_errors(body)
    if invalid is not None:
        return refuse(request, invalid, key=key)
    group = resolve_group(table, key, body["model"], door)
    if isinstance(group, ErrorReply):
        return refuse(request, group, key=key)
    others = {
        t.key: f"kind '{t.provider.kind}' has no Responses compaction endpoint"
        for t in group.targets
        if t.provider.kind != Protocol.RESPONSES.value
    }
    if len(others) == len(group.targets):
        return refuse(
            request,
            ErrorReply(
                400,
                f"The group '{group.name}' has no openai-responses target, so it cannot "
                "compact a conversation remotely: compact it locally and send it in 'input'.",
                "unsupported_for_target",
                door=door,
            ),
            key=key,
            group=group.name,
        )
    call = Call(
        runtime,
        group,
        {**body, "stream": False},
        stream=False,
        session=session_key(request, body),
        started=started_at(request),
        door=door,
        endpoint="responses/compact",
        skipped=others,
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
