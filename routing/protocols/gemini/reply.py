"""Gemini ``GenerateContentResponse`` answers <-> the canonical ``chat.completion``, and
Google's error body.

An answer's ``candidates[0].content.parts`` are text parts (``thought: true`` ones are
reasoning) and ``functionCall {id, name, args}`` parts, a call's ``thoughtSignature``
beside it. In the canonical view a call's signature rides on the tool call as
``extra_content.google.thought_signature`` (where Google's own OpenAI-compatible API
puts it), so a Gemini target gets its own signature back on the next turn; continuity
strips it from turns another target produced. A call without an ``id`` (Gemini 2.x
omits it) gets a fresh ``call_…`` one.

Finish reasons: ``STOP`` → ``stop`` (``tool_calls`` when the answer calls a function),
``MAX_TOKENS`` → ``length``, the safety family → ``content_filter``; usage: Gemini counts
cached input inside ``promptTokenCount`` and thoughts apart from ``candidatesTokenCount``.
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

GEMINI_TO_FINISH = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    "SAFETY": "content_filter",
    "RECITATION": "content_filter",
    "BLOCKLIST": "content_filter",
    "PROHIBITED_CONTENT": "content_filter",
    "SPII": "content_filter",
    "IMAGE_SAFETY": "content_filter",
}
FINISH_TO_GEMINI = {
    "stop": "STOP",
    "tool_calls": "STOP",
    "function_call": "STOP",
    "length": "MAX_TOKENS",
    "content_filter": "SAFETY",
}
SIGNATURE = "thoughtSignature"


def finish_reason(reason: Any, *, calls: bool) -> str:
    """The canonical finish reason of a candidate's ``finishReason`` (``OTHER``,
    ``MALFORMED_FUNCTION_CALL`` and unknown ones end the turn: ``stop``)."""
    finish = GEMINI_TO_FINISH.get(str(reason), "stop")
    return "tool_calls" if calls and finish == "stop" else finish


def signature_of(call: dict[str, Any]) -> str | None:
    """A canonical tool call's Gemini thought signature, if it carries one."""
    extra = call.get("extra_content")
    google = extra.get("google") if isinstance(extra, dict) else None
    signature = google.get("thought_signature") if isinstance(google, dict) else None
    return signature if isinstance(signature, str) and signature else None


def function_call_of(part: dict[str, Any]) -> dict[str, Any]:
    """A ``functionCall`` part (and its sibling signature) as a canonical tool call."""
    call = part.get("functionCall") or {}
    id_ = call.get("id") or f"call_{uuid.uuid4().hex[:24]}"
    canonical = tool_call(id_, call.get("name"), orjson.dumps(call.get("args") or {}).decode())
    if isinstance(part.get(SIGNATURE), str) and part[SIGNATURE]:
        canonical["extra_content"] = {"google": {"thought_signature": part[SIGNATURE]}}
    return canonical


def function_call_part(id_: Any, name: Any, arguments: Any) -> dict[str, Any]:
    """A canonical tool call's fields as a ``functionCall`` part (arguments: JSON text)."""
    args = call_arguments(arguments)
    call: dict[str, Any] = {"name": name, "args": args if isinstance(args, dict) else {}}
    if id_:
        call["id"] = id_
    return {"functionCall": call}


def candidate(body: dict[str, Any]) -> dict[str, Any]:
    """The first candidate of a response (an empty one when it has none)."""
    candidates = body.get("candidates")
    first = candidates[0] if isinstance(candidates, list) and candidates else {}
    return first if isinstance(first, dict) else {}


def blocked(body: dict[str, Any]) -> bool:
    """A prompt Gemini refused before answering (``promptFeedback.blockReason``)."""
    feedback = body.get("promptFeedback")
    return isinstance(feedback, dict) and bool(feedback.get("blockReason"))


def completion_to_canonical(body: dict[str, Any]) -> dict[str, Any]:
    """A ``gemini`` target's JSON answer as the canonical ``chat.completion``."""
    parts = AnswerParts()
    first = candidate(body)
    for part in (first.get("content") or {}).get("parts") or ():
        if not isinstance(part, dict):
            continue
        if "functionCall" in part:
            parts.tool_calls.append(function_call_of(part))
        elif "text" in part:
            (parts.reasoning if part.get("thought") else parts.text).append(str(part["text"]))
        elif part.get("executableCode") or part.get("codeExecutionResult"):
            parts.opaque.append("code_execution")
    finish = finish_reason(first.get("finishReason"), calls=bool(parts.tool_calls))
    if not first and blocked(body):
        finish = "content_filter"
    answer = {"id": body.get("responseId"), "model": body.get("modelVersion")}
    return parts.completion(answer, finish_reason=finish, usage=canonical_usage(body))


def canonical_usage(body: dict[str, Any]) -> dict[str, Any] | None:
    """A response's ``usageMetadata`` as the canonical usage (None when it has none)."""
    meta = body.get("usageMetadata")
    if not isinstance(meta, dict):
        return None
    prompt = int(meta.get("promptTokenCount") or 0) + int(meta.get("toolUsePromptTokenCount") or 0)
    cached = int(meta.get("cachedContentTokenCount") or 0)
    thoughts = int(meta.get("thoughtsTokenCount") or 0)
    usage = chat_usage(
        input_tokens=max(prompt - cached, 0),
        output_tokens=int(meta.get("candidatesTokenCount") or 0) + thoughts,
        cache_read=cached,
    )
    if thoughts:
        usage["completion_tokens_details"] = {"reasoning_tokens": thoughts}
    return usage


def gemini_usage(usage: dict[str, Any] | None) -> dict[str, Any]:
    """A canonical usage as Gemini's ``usageMetadata``."""
    uncached, output, cache_read, cache_write = usage_parts(usage)
    details = (usage or {}).get("completion_tokens_details") or {}
    thoughts = min(int(details.get("reasoning_tokens") or 0), output)
    prompt = uncached + cache_read + cache_write
    meta = {
        "promptTokenCount": prompt,
        "candidatesTokenCount": output - thoughts,
        "totalTokenCount": prompt + output,
    }
    if thoughts:
        meta["thoughtsTokenCount"] = thoughts
    if cache_read:
        meta["cachedContentTokenCount"] = cache_read
    return meta


def response(
    id_: Any, model: Any, parts: list[dict[str, Any]], finish: str | None = None
) -> dict[str, Any]:
    """A ``GenerateContentResponse`` with one candidate (a stream's chunk, or an answer)."""
    first: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finish is not None:
        first["finishReason"] = FINISH_TO_GEMINI.get(finish, "STOP")
    return {"candidates": [first], "modelVersion": model, "responseId": id_}


def completion_from_canonical(body: dict[str, Any]) -> dict[str, Any]:
    """A canonical answer as the Gemini door's ``GenerateContentResponse``."""
    answer = read_completion(body)
    parts: list[dict[str, Any]] = []
    if answer.reasoning:
        parts.append({"text": answer.reasoning, "thought": True})
    if answer.text:
        parts.append({"text": answer.text})
    message = ((body.get("choices") or [{}])[0]).get("message") or {}
    for call, raw in zip(answer.tool_calls, message.get("tool_calls") or (), strict=False):
        part = function_call_part(call.id, call.name, call.arguments)
        signature = signature_of(raw)
        if signature:
            part[SIGNATURE] = signature
        parts.append(part)
    out = response(body.get("id"), body.get("model"), parts, answer.finish_reason or "stop")
    out["usageMetadata"] = gemini_usage(body.get("usage"))
    return out


# ------------------------------------------------------------------------------- errors
STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ABORTED",
    413: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "UNIMPLEMENTED",
    502: "UNAVAILABLE",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


def status_name(status: int) -> str:
    return STATUS_NAMES.get(status, "INTERNAL" if status >= 500 else "FAILED_PRECONDITION")


def error_object(message: str, *, status: int) -> dict[str, Any]:
    """Google's error shape: ``{"error": {"code", "message", "status"}}``."""
    return {"error": {"code": status, "message": message, "status": status_name(status)}}


def error_body(message: str, *, status: int) -> bytes:
    return orjson.dumps(error_object(message, status=status))
