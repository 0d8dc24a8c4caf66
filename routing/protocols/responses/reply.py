"""OpenAI Responses answers <-> the canonical ``chat.completion``.

``completion_to_canonical`` reads an ``openai-responses`` target's JSON answer;
``completion_from_canonical`` writes the ``/v1/responses`` door's. The item and response
builders here are the stream encoder's too.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from routing.protocols.canonical import AnswerParts, chat_usage, read_completion
from routing.protocols.responses.tools import ToolNames, call_item, canonical_call


def response_status(finish_reason: str | None) -> str:
    """A finished response's ``status`` for a canonical finish reason."""
    return "incomplete" if finish_reason == "length" else "completed"


def canonical_usage(usage: dict[str, Any] | None) -> dict[str, Any] | None:
    """A Responses usage as the canonical one (None when the answer carried none)."""
    if not usage:
        return None
    cached = int((usage.get("input_tokens_details") or {}).get("cached_tokens") or 0)
    out = chat_usage(
        input_tokens=int(usage.get("input_tokens") or 0) - cached,
        output_tokens=int(usage.get("output_tokens") or 0),
        cache_read=cached,
    )
    reasoning = (usage.get("output_tokens_details") or {}).get("reasoning_tokens")
    if reasoning:
        out["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    return out


def _usage_out(usage: dict[str, Any] | None) -> dict[str, Any]:
    usage = usage or {}
    prompt = int(usage.get("prompt_tokens") or 0)
    output = int(usage.get("completion_tokens") or 0)
    cached = int((usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
    reasoning = int((usage.get("completion_tokens_details") or {}).get("reasoning_tokens") or 0)
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": prompt + output,
    }


def finish_reason(response: dict[str, Any], has_calls: bool) -> str:
    """The canonical finish reason of a response (its status, and whether it called tools)."""
    if response.get("status") == "incomplete":
        reason = (response.get("incomplete_details") or {}).get("reason")
        return "content_filter" if reason == "content_filter" else "length"
    return "tool_calls" if has_calls else "stop"


def completion_to_canonical(body: dict[str, Any]) -> dict[str, Any]:
    parts = AnswerParts()
    for item in body.get("output") or ():
        kind = item.get("type") if isinstance(item, dict) else None
        if kind == "message":
            for part in item.get("content") or ():
                if isinstance(part, dict) and part.get("type") == "output_text":
                    parts.text.append(str(part.get("text", "")))
                elif isinstance(part, dict) and part.get("type") == "refusal":
                    parts.text.append(str(part.get("refusal", "")))
        elif kind == "reasoning":
            for part in item.get("summary") or ():
                parts.reasoning.append(str(part.get("text", "")))
            for part in item.get("content") or ():
                parts.reasoning.append(str(part.get("text", "")))
        elif kind in ("function_call", "custom_tool_call"):
            parts.tool_calls.append(canonical_call(item))
        elif isinstance(kind, str):  # hosted tool calls, compaction…: content all the same
            parts.opaque.append(kind)
    return parts.completion(
        body,
        finish_reason=finish_reason(body, bool(parts.tool_calls)),
        usage=canonical_usage(body.get("usage")),
    )


def new_id() -> str:
    """A fresh id suffix for a response, an item or a call."""
    return uuid.uuid4().hex[:24]


def response_object(
    id_: str, model: str, status: str, output: list[dict[str, Any]], usage: dict[str, Any] | None
) -> dict[str, Any]:
    """The door's ``response`` object: the stream's shell (no output yet) or the whole one."""
    return {
        "id": id_,
        "object": "response",
        "created_at": int(time.time()),
        "status": status,
        "error": None,
        "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
        "instructions": None,
        "model": model,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "temperature": None,
        "top_p": None,
        "metadata": {},
        "store": False,
        "usage": _usage_out(usage) if usage is not None else None,
    }


def message_item(text: str, id_: str | None = None, status: str = "completed") -> dict[str, Any]:
    return {
        "id": id_ or f"msg_{new_id()}",
        "type": "message",
        "role": "assistant",
        "status": status,
        "content": [{"type": "output_text", "text": text, "annotations": []}]
        if text or status == "completed"
        else [],
    }


def reasoning_item(text: str, id_: str | None = None) -> dict[str, Any]:
    return {
        "id": id_ or f"rs_{new_id()}",
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": text}] if text else [],
    }


def response_id(id_: str) -> str:
    """The door's ``resp_`` id for a canonical answer's id (a fresh one when it has none)."""
    return id_ if id_.startswith("resp_") else f"resp_{id_ or new_id()}"


def completion_from_canonical(
    body: dict[str, Any], names: ToolNames | None = None
) -> dict[str, Any]:
    answer = read_completion(body)
    output: list[dict[str, Any]] = []
    if answer.reasoning:
        output.append(reasoning_item(answer.reasoning))
    if answer.text:
        output.append(message_item(answer.text))
    for call in answer.tool_calls:
        output.append(
            call_item(
                str(call.id),
                str(call.name),
                call.arguments or "",
                names or {},
                id_=f"fc_{new_id()}",
            )
        )
    return response_object(
        response_id(str(body.get("id") or "")),
        str(body.get("model") or ""),
        response_status(answer.finish_reason),
        output,
        body.get("usage") or {},
    )
