"""Gemini streams (``streamGenerateContent?alt=sse``) <-> canonical chunks.

Every ``data:`` line is a whole ``GenerateContentResponse`` (no event names, no
``[DONE]``): text in pieces, a ``functionCall`` whole in one chunk, and the last chunk
with the ``finishReason`` and the ``usageMetadata``. ``StreamDecoder``: a ``gemini``
upstream's chunks → canonical chunks (the stream is finished at the ``finishReason``).
``StreamEncoder``: canonical chunks → the Gemini door's ``data:`` lines; a tool call's
arguments arrive in pieces in the canonical view, so calls are kept and sent whole with the
last chunk. ``error_event`` ends a stream that failed after its commit point (a last
``data: {"error": …}`` line).
"""

from __future__ import annotations

from typing import Any

import orjson

from routing.protocols.canonical import EventDecoder, EventEncoder, usage_chunk
from routing.protocols.gemini.reply import (
    SIGNATURE,
    blocked,
    candidate,
    canonical_usage,
    error_object,
    finish_reason,
    function_call_of,
    function_call_part,
    gemini_usage,
    response,
)


class StreamDecoder(EventDecoder):
    """A ``gemini`` upstream's ``GenerateContentResponse`` chunks → canonical chunks."""

    def __init__(self) -> None:
        super().__init__()
        self._begun = False
        self._called = False

    def decode(self, event: dict[str, Any]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if not self._begun:
            self._begun = True
            out.append(self._begin(event.get("responseId"), event.get("modelVersion")))
        first = candidate(event)
        for part in (first.get("content") or {}).get("parts") or ():
            if not isinstance(part, dict):
                continue
            if "functionCall" in part:
                self._called = True
                call = function_call_of(part)
                out.append(self._call_start(call["id"], call))
            elif part.get("text"):
                field = "reasoning_content" if part.get("thought") else "content"
                out.append(self._chunk({field: str(part["text"])}))
            elif part.get("executableCode") or part.get("codeExecutionResult"):
                out.append(self._opaque("code_execution"))
        reason = first.get("finishReason")
        if reason or (not first and blocked(event)):
            finish = finish_reason(reason, calls=self._called) if reason else "content_filter"
            self.finished = True
            self.usage = canonical_usage(event) or self.usage
            out.append(self._chunk({}, finish))
            if self.usage is not None:
                out.append(usage_chunk(self.id, self.model, self.usage))
        elif event.get("usageMetadata"):
            self.usage = canonical_usage(event)
        return out


def _line(payload: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(payload) + b"\r\n\r\n"


class StreamEncoder(EventEncoder):
    """Canonical chunks → the Gemini door's ``data:`` lines (nothing held as a preamble:
    Gemini's first line already carries content)."""

    def __init__(self) -> None:
        super().__init__()
        self._id: Any = None
        self._model: Any = None
        self._calls: dict[int, dict[str, Any]] = {}

    def _preamble(self, first: dict[str, Any], out: list[bytes]) -> None:
        self._id, self._model = first.get("id"), first.get("model")

    def _text(self, part: dict[str, Any], out: list[bytes]) -> None:
        out.append(_line(response(self._id, self._model, [part])))

    def _reasoning(self, text: str, out: list[bytes]) -> None:
        self._text({"text": text, "thought": True}, out)

    def _content(self, text: str, out: list[bytes]) -> None:
        self._text({"text": text}, out)

    def _tool(self, call: dict[str, Any], out: list[bytes]) -> None:
        index = int(call.get("index") or 0)
        function = call.get("function") or {}
        kept = self._calls.setdefault(index, {"id": None, "name": "", "arguments": ""})
        if call.get("id"):
            kept["id"] = call["id"]
        if call.get("extra_content"):
            kept["extra_content"] = call["extra_content"]
        kept["name"] += function.get("name") or ""
        kept["arguments"] += function.get("arguments") or ""

    def end(self) -> bytes:
        parts: list[dict[str, Any]] = []
        for kept in self._calls.values():
            part = function_call_part(kept["id"], kept["name"], kept["arguments"])
            google = (kept.get("extra_content") or {}).get("google") or {}
            if google.get("thought_signature"):
                part[SIGNATURE] = google["thought_signature"]
            parts.append(part)
        last = response(self._id, self._model, parts, self._finish or "stop")
        last["usageMetadata"] = gemini_usage(self._usage)
        return _line(last)


def error_event(message: str, *, status: int = 502) -> bytes:
    """The last ``data:`` line of a Gemini stream that failed after its commit point."""
    return _line(error_object(message, status=status))
