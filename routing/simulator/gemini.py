"""Gemini's ``generateContent`` shapes for the simulator, written apart from the gateway's
codec (``routing.protocols.gemini``) so tests compare two implementations.

A stream is ``data: <GenerateContentResponse>`` lines with no event names and no
``[DONE]``: text in pieces, a ``functionCall`` whole in one chunk (its ``thoughtSignature``
beside it, as Gemini 3 sends one), the last chunk with ``finishReason`` and
``usageMetadata``. Errors are Google's ``{"error": {"code", "message", "status"}}``.
Requests arrive at ``/v1beta/models/{model}:generateContent`` and
``:streamGenerateContent?alt=sse`` with the key in ``x-goog-api-key``.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from routing.simulator.payloads import ToolSpec

Event = tuple[str | None, dict[str, Any]]

FINISH = {"stop": "STOP", "tool_calls": "STOP", "length": "MAX_TOKENS", "content_filter": "SAFETY"}
STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
SIGNATURE = "c2ltLXRob3VnaHQtc2lnbmF0dXJl"  # what the simulator signs its calls with
ACTIONS = (":generateContent", ":streamGenerateContent")


def model_and_stream(path: str) -> tuple[str, bool] | None:
    """The model a Gemini path names and whether it asks for a stream (None: not Gemini's)."""
    head, _, name = path.rpartition("/models/")
    if not head or ":" not in name:
        return None
    model, _, action = name.partition(":")
    if f":{action}" not in ACTIONS:
        return None
    return model, action == "streamGenerateContent"


def _usage(usage: dict[str, Any] | None) -> dict[str, int]:
    usage = usage or {}
    prompt = int(usage.get("prompt_tokens", 0))
    output = int(usage.get("completion_tokens", 0))
    meta = {
        "promptTokenCount": prompt,
        "candidatesTokenCount": output,
        "totalTokenCount": prompt + output,
    }
    cached = int((usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
    if cached:
        meta["cachedContentTokenCount"] = cached
    return meta


class GeminiWire:
    """Google Gemini (generateContent)."""

    done = False

    def __init__(self, model: str, *, include_usage: bool = True) -> None:
        self.model = model
        self.id = f"sim{uuid.uuid4().hex[:20]}"

    def _chunk(self, parts: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
        first: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
        first.update(extra)
        return {"candidates": [first], "modelVersion": self.model, "responseId": self.id}

    def _call(self, spec: ToolSpec, index: int) -> dict[str, Any]:
        call = {"id": f"gc_{self.id[-8:]}_{index}", "name": spec.name, "args": spec.input_object}
        return {"functionCall": call, "thoughtSignature": SIGNATURE}

    def preamble(self) -> list[Event]:
        return []  # Gemini's first line already carries content

    def reasoning(self, text: str) -> list[Event]:
        return [(None, self._chunk([{"text": text, "thought": True}]))]

    def content(self, piece: str) -> list[Event]:
        return [(None, self._chunk([{"text": piece}]))]

    def tool_call(self, spec: ToolSpec, index: int) -> list[Event]:
        return [(None, self._chunk([self._call(spec, index)]))]

    def finish(self, reason: str, usage: dict[str, int] | None) -> list[Event]:
        last = self._chunk([{"text": ""}], finishReason=FINISH.get(reason, "STOP"))
        last["usageMetadata"] = _usage(usage)
        return [(None, last)]

    def usage_only(self, usage: dict[str, int]) -> list[Event]:
        return [(None, {"usageMetadata": _usage(usage), "modelVersion": self.model})]

    def stream_error(self) -> list[Event]:
        return [(None, self.error("The model is overloaded.", None, None, 503))]

    def body(
        self,
        *,
        content: str,
        reasoning: str = "",
        tool_calls: Sequence[ToolSpec] = (),
        finish_reason: str = "stop",
        usage: dict[str, int] | None = None,
    ) -> dict[str, Any]:
        parts: list[dict[str, Any]] = []
        if reasoning:
            parts.append({"text": reasoning, "thought": True})
        if content:
            parts.append({"text": content})
        parts += [self._call(spec, i) for i, spec in enumerate(tool_calls)]
        answer = self._chunk(parts, finishReason=FINISH.get(finish_reason, "STOP"))
        answer["usageMetadata"] = _usage(usage)
        return answer

    def error(
        self, message: str, type_: str | None, code: str | None, status: int
    ) -> dict[str, Any]:
        name = STATUS.get(status, "INTERNAL" if status >= 500 else "FAILED_PRECONDITION")
        return {"error": {"code": status, "message": message, "status": name}}
