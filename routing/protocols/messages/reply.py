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

from routing.protocols import ANTHROPIC_TO_FINISH, FINISH_TO_ANTHROPIC
from routing.protocols.canonical import (
    OPAQUE,
    chat_usage,
    completion,
    message_text,
    usage_parts,
)


def completion_to_canonical(body: dict[str, Any]) -> dict[str, Any]:
    texts: list[str] = []
    reasoning: list[str] = []
    calls: list[dict[str, Any]] = []
    for block in body.get("content") or ():
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            texts.append(str(block.get("text", "")))
        elif kind == "thinking":
            reasoning.append(str(block.get("thinking", "")))
        elif kind == "tool_use":
            calls.append(
                {
                    "id": block.get("id"),
                    "type": "function",
                    "function": {
                        "name": block.get("name"),
                        "arguments": orjson.dumps(block.get("input") or {}).decode(),
                    },
                }
            )
    usage = body.get("usage") or {}
    opaque = [
        str(b["type"])
        for b in body.get("content") or ()
        if isinstance(b, dict) and b.get("type") not in ("text", "thinking", "tool_use", None)
    ]
    out = completion(
        id_=str(body.get("id") or ""),
        model=str(body.get("model") or ""),
        content="".join(texts) or None,
        reasoning="".join(reasoning),
        tool_calls=calls,
        finish_reason=ANTHROPIC_TO_FINISH.get(str(body.get("stop_reason")), "stop"),
        usage=canonical_usage(usage),
    )
    if opaque:
        out["choices"][0]["message"][OPAQUE] = opaque
    return out


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
    choice = (body.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    content: list[dict[str, Any]] = []
    if message.get("reasoning_content"):
        content.append(
            {"type": "thinking", "thinking": message["reasoning_content"], "signature": ""}
        )
    text = message_text(message.get("content"))
    if text:
        content.append({"type": "text", "text": text})
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        try:
            arguments = orjson.loads(function.get("arguments") or "{}")
        except orjson.JSONDecodeError:
            arguments = {}
        content.append(
            {
                "type": "tool_use",
                "id": call.get("id"),
                "name": function.get("name"),
                "input": arguments,
            }
        )
    return {
        "id": message_id(str(body.get("id") or "")),
        "type": "message",
        "role": "assistant",
        "model": body.get("model"),
        "content": content,
        "stop_reason": FINISH_TO_ANTHROPIC.get(str(choice.get("finish_reason")), "end_turn"),
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
