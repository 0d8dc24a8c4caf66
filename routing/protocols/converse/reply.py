"""Converse answers (``ConverseResponse``) -> the canonical ``chat.completion``; Bedrock's
error body.

An answer is ``{"output": {"message": {"role": "assistant", "content": [blocks]}},
"stopReason", "usage": {"inputTokens", "outputTokens", "totalTokens",
"cacheReadInputTokens", "cacheWriteInputTokens"}, "metrics"}``: no id and no model (the
URL named it), so the canonical answer gets a fresh id and the model the call asked for.
"""

from __future__ import annotations

import uuid
from typing import Any

import orjson

from routing.limits.spec import usage_parts
from routing.protocols.canonical import (
    AnswerParts,
    call_arguments,
    chat_usage,
    read_completion,
    tool_call,
)

CONVERSE_TO_FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "guardrail_intervened": "content_filter",
    "content_filtered": "content_filter",
}

FINISH_TO_CONVERSE = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "content_filter": "content_filtered",
}


def finish_reason(reason: Any) -> str:
    return CONVERSE_TO_FINISH.get(str(reason), "stop")


def answer_id() -> str:
    return f"msg_bdrk_{uuid.uuid4().hex[:24]}"


def tool_use_call(block: dict[str, Any]) -> dict[str, Any]:
    """A ``toolUse`` block (``{"toolUseId", "name", "input"}``) as a canonical tool call."""
    arguments = orjson.dumps(block.get("input") or {}).decode()
    return tool_call(block.get("toolUseId"), block.get("name"), arguments)


def canonical_usage(usage: Any) -> dict[str, Any] | None:
    """Converse's usage as the canonical one (``inputTokens`` excludes cached input)."""
    if not isinstance(usage, dict):
        return None
    return chat_usage(
        input_tokens=int(usage.get("inputTokens") or 0),
        output_tokens=int(usage.get("outputTokens") or 0),
        cache_read=int(usage.get("cacheReadInputTokens") or 0),
        cache_write=int(usage.get("cacheWriteInputTokens") or 0),
    )


def completion_to_canonical(body: dict[str, Any]) -> dict[str, Any]:
    """A ``bedrock-converse`` target's JSON answer as the canonical ``chat.completion``."""
    parts = AnswerParts()
    message = (body.get("output") or {}).get("message") or {}
    for block in message.get("content") or ():
        if not isinstance(block, dict):
            continue
        if "text" in block:
            parts.text.append(str(block["text"]))
        elif "toolUse" in block:
            parts.tool_calls.append(tool_use_call(block["toolUse"] or {}))
        elif "reasoningContent" in block:
            text = ((block["reasoningContent"] or {}).get("reasoningText") or {}).get("text")
            if text:
                parts.reasoning.append(str(text))
        elif block:  # images, documents, citations…: content the gateway cannot translate
            parts.opaque.append(next(iter(block)))
    answer = {"id": answer_id(), "model": body.get("model") or ""}
    return parts.completion(
        answer,
        finish_reason=finish_reason(body.get("stopReason")),
        usage=canonical_usage(body.get("usage")),
    )


def error_body(message: str, *, status: int) -> bytes:
    """Bedrock's error body (the error's type travels in ``x-amzn-errortype``)."""
    return orjson.dumps({"message": message})


def completion_from_canonical(body: dict[str, Any]) -> dict[str, Any]:
    """A canonical answer as a ``ConverseResponse`` (what a Converse door would send)."""
    answer = read_completion(body)
    blocks: list[dict[str, Any]] = []
    if answer.reasoning:
        blocks.append({"reasoningContent": {"reasoningText": {"text": answer.reasoning}}})
    if answer.text:
        blocks.append({"text": answer.text})
    for call in answer.tool_calls:
        use = {"toolUseId": call.id, "name": call.name, "input": call_arguments(call.arguments)}
        blocks.append({"toolUse": use})
    uncached, output, cache_read, cache_write = usage_parts(body.get("usage"))
    usage = {
        "inputTokens": uncached,
        "outputTokens": output,
        "totalTokens": uncached + cache_read + cache_write + output,
        "cacheReadInputTokens": cache_read,
        "cacheWriteInputTokens": cache_write,
    }
    stop = FINISH_TO_CONVERSE.get(answer.finish_reason or "stop", "end_turn")
    message = {"role": "assistant", "content": blocks}
    return {"output": {"message": message}, "stopReason": stop, "usage": usage}
