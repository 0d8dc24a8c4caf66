"""The other front doors: ``POST /v1/messages`` (Anthropic Messages), ``POST
/v1/responses`` (OpenAI Responses), ``POST /v1/embeddings`` and the two endpoints beside
them, ``/v1/messages/count_tokens`` and ``/v1/responses/compact`` (SPEC §12, §15).

Each is a :class:`~routing.api.pipeline.Door` on the same ``/v1`` API as the chat door,
served by the same pipeline (``routing.api.pipeline.serve``): what is here is only what
differs — the body rules in the door's own terms, what its call is (which targets it
skips, what it sends), and the headers that pass through. Every error leaves in the
door's shape with ``x-should-retry: false``.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponseBase

from routing.api.openai import api
from routing.api.pipeline import Admitted, Door, Route, serve, wrong_method
from routing.gateway.count import count_tokens as count_tokens_of
from routing.gateway.replies import ErrorReply, Reply
from routing.protocols import Protocol

# What a Messages client says about the protocol itself: an anthropic target gets it as
# sent (Claude Code's betas: interleaved thinking, longer context...); other kinds do not.
ANTHROPIC_PASS_HEADERS = ("anthropic-beta", "anthropic-version")
MESSAGE_ROLES = ("user", "assistant", "system")


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


def _protocol_headers(request: HttpRequest) -> dict[str, str]:
    return {
        name: request.headers[name] for name in ANTHROPIC_PASS_HEADERS if name in request.headers
    }


MESSAGES = Door(Protocol.MESSAGES, check=_messages_errors, protocol_headers=_protocol_headers)


RESPONSES = Door(Protocol.RESPONSES, check=_responses_errors)


@api.post("/messages", auth=None, include_in_schema=False)
async def messages(request: HttpRequest) -> HttpResponseBase:
    return await serve(request, MESSAGES)


@api.post("/responses", auth=None, include_in_schema=False)
async def responses(request: HttpRequest) -> HttpResponseBase:
    return await serve(request, RESPONSES)


def _an_array_of_messages(body: dict[str, Any]) -> ErrorReply | None:
    if not isinstance(body.get("messages"), list):
        door = Protocol.MESSAGES
        return ErrorReply(400, "messages: must be an array", "invalid_request", door=door)
    return None


def _as_sent(admitted: Admitted) -> Route:
    return Route(admitted.body, stream=False)


async def _count(admitted: Admitted, route: Route) -> Reply:
    """The group's own count (``routing.gateway.count``), else the estimate."""
    headers = _protocol_headers(admitted.request)
    return await count_tokens_of(admitted.runtime, admitted.group, admitted.body, headers)


COUNT_TOKENS = Door(Protocol.MESSAGES, check=_an_array_of_messages, route=_as_sent, answer=_count)


@api.post("/messages/count_tokens", auth=None, include_in_schema=False)
async def count_tokens(request: HttpRequest) -> HttpResponseBase:
    """``POST /v1/messages/count_tokens`` (SPEC §15): answered by the group's first
    target whose protocol counts tokens (``anthropic``) that answers (its own count, its
    status), else an estimate — about four characters a token over system, messages and
    tools — marked ``x-switchyard-estimate: true`` (``routing.gateway.count``). Not a call:
    nothing is generated, so no ledger row."""
    return await serve(request, COUNT_TOKENS)


def _embeddings_errors(body: dict[str, Any]) -> ErrorReply | None:
    if not isinstance(body.get("input"), str | list) or not body["input"]:
        return ErrorReply(400, "'input' is required.", "invalid_request", param="input")
    if body.get("stream"):
        return ErrorReply(400, "Embeddings do not stream.", "invalid_request", param="stream")
    return None


def _to_embedding_kinds(admitted: Admitted) -> Route:
    without_embeddings = {
        t.key: f"kind '{t.provider.kind}' has no embeddings endpoint"
        for t in admitted.group.targets
        if not t.provider.protocol.embeddings
    }
    return Route(admitted.body, stream=False, skipped=without_embeddings)


EMBEDDINGS = Door(
    Protocol.CHAT, check=_embeddings_errors, route=_to_embedding_kinds, endpoint="embeddings"
)


@api.post("/embeddings", auth=None, include_in_schema=False)
async def embeddings(request: HttpRequest) -> HttpResponseBase:
    """Routed through groups like a JSON call; targets of a kind without an embeddings
    endpoint (``anthropic``) are skipped."""
    return await serve(request, EMBEDDINGS)


def _to_responses_targets(admitted: Admitted) -> Route | ErrorReply:
    group = admitted.group
    others = {
        t.key: f"kind '{t.provider.kind}' has no Responses compaction endpoint"
        for t in group.targets
        if t.provider.kind != Protocol.RESPONSES.value
    }
    if len(others) == len(group.targets):
        return ErrorReply(
            400,
            f"The group '{group.name}' has no openai-responses target, so it cannot "
            "compact a conversation remotely: compact it locally and send it in 'input'.",
            "unsupported_for_target",
            door=Protocol.RESPONSES,
        )
    return Route({**admitted.body, "stream": False}, stream=False, skipped=others)


COMPACT = Door(
    Protocol.RESPONSES,
    check=_responses_errors,
    route=_to_responses_targets,
    endpoint="responses/compact",
)


@api.post("/responses/compact", auth=None, include_in_schema=False)
async def responses_compact(request: HttpRequest) -> HttpResponseBase:
    """The Responses compaction endpoint (Codex's remote compaction before 0.171, which
    posts ``compaction_trigger`` items to ``/v1/responses`` instead): passed to the
    group's ``openai-responses`` targets (``<base>/responses/compact``) like a JSON call;
    a group without one answers 400 in the door's shape, and Codex compacts locally."""
    return await serve(request, COMPACT)


@api.api_operation(
    ["GET", "PUT", "PATCH", "DELETE", "OPTIONS"], "/messages", auth=None, include_in_schema=False
)
async def messages_wrong_method(request: HttpRequest) -> HttpResponseBase:
    return wrong_method(request, Protocol.MESSAGES)


@api.api_operation(
    ["GET", "PUT", "PATCH", "DELETE", "OPTIONS"], "/responses", auth=None, include_in_schema=False
)
async def responses_wrong_method(request: HttpRequest) -> HttpResponseBase:
    return wrong_method(request, Protocol.RESPONSES)


@api.api_operation(
    ["GET", "PUT", "PATCH", "DELETE", "OPTIONS"], "/embeddings", auth=None, include_in_schema=False
)
async def embeddings_wrong_method(request: HttpRequest) -> HttpResponseBase:
    return wrong_method(request, Protocol.CHAT)
