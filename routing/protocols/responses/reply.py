"""OpenAI Responses answers <-> the canonical ``chat.completion``.

``completion_to_canonical`` reads an ``openai-responses`` target's JSON answer;
``completion_from_canonical`` writes the ``/v1/responses`` door's. The item and response
builders here are the stream encoder's too.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from routing.protocols.canonical import OPAQUE, chat_usage, completion, message_text
from routing.protocols.responses.tools import ToolNames, call_item, custom_arguments, flat_name


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


def canonical_call(item: dict[str, Any], arguments: str | None = None) -> dict[str, Any]:
    """A ``function_call`` / ``custom_tool_call`` output item as a canonical tool call."""
    if arguments is None:
        arguments = (
            custom_arguments(item.get("input"))
            if item.get("type") == "custom_tool_call"
            else item.get("arguments") or ""
        )
    return {
        "id": item.get("call_id"),
        "type": "function",
        "function": {
            "name": flat_name(str(item.get("name") or ""), item.get("namespace")),
            "arguments": arguments,
        },
    }


def completion_to_canonical(body: dict[str, Any]) -> dict[str, Any]:
    texts: list[str] = []
    reasoning: list[str] = []
    calls: list[dict[str, Any]] = []
    opaque: list[str] = []  # hosted tool calls, compaction…: content all the same
    for item in body.get("output") or ():
        kind = item.get("type") if isinstance(item, dict) else None
        if kind == "message":
            for part in item.get("content") or ():
                if isinstance(part, dict) and part.get("type") == "output_text":
                    texts.append(str(part.get("text", "")))
                elif isinstance(part, dict) and part.get("type") == "refusal":
                    texts.append(str(part.get("refusal", "")))
        elif kind == "reasoning":
            for part in item.get("summary") or ():
                reasoning.append(str(part.get("text", "")))
            for part in item.get("content") or ():
                reasoning.append(str(part.get("text", "")))
        elif kind in ("function_call", "custom_tool_call"):
            calls.append(canonical_call(item))
        elif isinstance(kind, str):
            opaque.append(kind)
    out = completion(
        id_=str(body.get("id") or ""),
        model=str(body.get("model") or ""),
        content="".join(texts) or None,
        reasoning="".join(reasoning),
        tool_calls=calls,
        finish_reason=finish_reason(body, bool(calls)),
        usage=canonical_usage(body.get("usage")),
    )
    if opaque:
        out["choices"][0]["message"][OPAQUE] = opaque
    return out


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
    choice = (body.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    output: list[dict[str, Any]] = []
    if message.get("reasoning_content"):
        output.append(reasoning_item(message["reasoning_content"]))
    text = message_text(message.get("content"))
    if text:
        output.append(message_item(text))
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        output.append(
            call_item(
                str(call.get("id")),
                str(function.get("name")),
                function.get("arguments") or "",
                names or {},
                id_=f"fc_{new_id()}",
            )
        )
    status = "incomplete" if choice.get("finish_reason") == "length" else "completed"
    return response_object(
        response_id(str(body.get("id") or "")),
        str(body.get("model") or ""),
        status,
        output,
        body.get("usage") or {},
    )
