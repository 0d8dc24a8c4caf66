"""Anthropic Messages answers <-> the canonical ``chat.completion``, and the door's errors.

``completion_to_canonical`` reads an ``anthropic`` target's JSON answer;
``completion_from_canonical`` writes the ``/v1/messages`` door's; ``error_body`` is an error
in the door's shape. Stop reasons map through ``ANTHROPIC_TO_FINISH`` / ``FINISH_TO_ANTHROPIC``;
cache token counts to and from the canonical usage's cache fields.
"""

from __future__ import annotations

import uuid
from typing import Any

import orjson

from routing.limits.spec import usage_parts
from routing.protocols import ANTHROPIC_TO_FINISH, FINISH_TO_ANTHROPIC
from routing.protocols.canonical import (
    AnswerParts,
    chat_usage,
    read_completion,
    tool_call,
)


def completion_to_canonical(body: dict[str, Any]) -> dict[str, Any]:
    parts = AnswerParts()
    for block in body.get("content") or ():
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            parts.text.append(str(block.get("text", "")))
        elif kind == "thinking":
            parts.reasoning.append(str(block.get("thinking", "")))
        elif kind == "tool_use":
            parts.tool_calls.append(tool_use_call(block))
        elif kind is not None:  # server tool calls and results, redacted thinking…: content
            parts.opaque.append(str(kind))
    return parts.completion(
        body,
        finish_reason=ANTHROPIC_TO_FINISH.get(str(body.get("stop_reason")), "stop"),
        usage=canonical_usage(body.get("usage") or {}),
    )


def tool_use_call(block: dict[str, Any]) -> dict[str, Any]:
    """A ``tool_use`` block (an answer's or a history's) as a canonical tool call."""
    arguments = orjson.dumps(block.get("input") or {}).decode()
    return tool_call(block.get("id"), block.get("name"), arguments)


def canonical_usage(usage: dict[str, Any]) -> dict[str, Any]:
    """An Anthropic usage as the canonical one (cached input counted into the prompt)."""
    return chat_usage(
        input_tokens=int(usage.get("input_tokens") or 0),
        output_tokens=int(usage.get("output_tokens") or 0),
        cache_read=int(usage.get("cache_read_input_tokens") or 0),
        cache_write=int(usage.get("cache_creation_input_tokens") or 0),
    )


def anthropic_usage(usage: dict[str, Any] | None) -> dict[str, Any]:
    """A canonical usage as Anthropic's (cached input counted apart from ``input_tokens``)."""
    uncached, output, cache_read, cache_write = usage_parts(usage)
    return {
        "input_tokens": uncached,
        "output_tokens": output,
        "cache_read_input_tokens": cache_read,
        "cache_creation_input_tokens": cache_write,
    }


def message_id(id_: str) -> str:
    """The door's ``msg_`` id for a canonical answer's id (a fresh one when it has none)."""
    return id_ if id_.startswith("msg_") else f"msg_{id_ or uuid.uuid4().hex}"


def completion_from_canonical(body: dict[str, Any]) -> dict[str, Any]:
    answer = read_completion(body)
    content: list[dict[str, Any]] = []
    if answer.reasoning:
        content.append({"type": "thinking", "thinking": answer.reasoning, "signature": ""})
    if answer.text:
        content.append({"type": "text", "text": answer.text})
    for call in answer.tool_calls:
        try:
            arguments = orjson.loads(call.arguments or "{}")
        except orjson.JSONDecodeError:
            arguments = {}
        content.append({"type": "tool_use", "id": call.id, "name": call.name, "input": arguments})
    return {
        "id": message_id(str(body.get("id") or "")),
        "type": "message",
        "role": "assistant",
        "model": body.get("model"),
        "content": content,
        "stop_reason": FINISH_TO_ANTHROPIC.get(str(answer.finish_reason), "end_turn"),
        "stop_sequence": None,
        "usage": anthropic_usage(body.get("usage")),
    }


# ------------------------------------------------------------------------------- errors
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    503: "overloaded_error",
    529: "overloaded_error",
}


def error_type(status: int) -> str:
    return _ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")


def error_body(message: str, *, status: int) -> bytes:
    return orjson.dumps(
        {"type": "error", "error": {"type": error_type(status), "message": message}}
    )
