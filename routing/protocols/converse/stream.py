"""ConverseStream events -> canonical chunks.

The bedrock platform's reader hands each event-stream frame over as one SSE event whose
data is ``{"<eventType>": <payload>}`` (``messageStart``, ``contentBlockStart``,
``contentBlockDelta``, ``contentBlockStop``, ``messageStop``, ``metadata``). The finish
reason comes with ``messageStop``, the usage with ``metadata``, the stream's last event
(a body that ends before it was cut). An exception frame never reaches the decoder: the
reader raises it as the attempt's failure.
"""

from __future__ import annotations

from typing import Any

from routing.protocols.canonical import EventDecoder, tool_call, usage_chunk
from routing.protocols.converse.reply import answer_id, canonical_usage, finish_reason


class StreamDecoder(EventDecoder):
    """A ``bedrock-converse`` upstream's stream events → canonical chunks."""

    terminal = "metadata"

    def __init__(self) -> None:
        super().__init__()
        self._begun = False
        self._finish: str | None = None

    def decode(self, event: dict[str, Any]) -> list[dict[str, Any]]:
        if len(event) != 1:
            return []
        kind, payload = next(iter(event.items()))
        if not isinstance(payload, dict):
            return []
        out: list[dict[str, Any]] = []
        if not self._begun:
            self._begun = True
            out.append(self._begin(answer_id(), ""))
        if kind == "contentBlockStart":
            start = (payload.get("start") or {}).get("toolUse")
            if isinstance(start, dict):
                call = tool_call(start.get("toolUseId"), start.get("name"), "")
                out.append(self._call_start(payload.get("contentBlockIndex"), call))
        elif kind == "contentBlockDelta":
            out += self._delta(payload.get("contentBlockIndex"), payload.get("delta") or {})
        elif kind == "messageStop":
            self._finish = finish_reason(payload.get("stopReason"))
            out.append(self._chunk({}, self._finish))
        elif kind == "metadata":
            self.usage = canonical_usage(payload.get("usage"))
            self.finished = True
            if self._finish is None:  # metadata without messageStop: the turn ended
                out.append(self._chunk({}, "stop"))
            if self.usage is not None:
                out.append(usage_chunk(self.id, self.model, self.usage))
        return out

    def _delta(self, index: Any, delta: dict[str, Any]) -> list[dict[str, Any]]:
        if "text" in delta:
            return [self._chunk({"content": str(delta["text"])})]
        if "toolUse" in delta:
            return [self._arguments(index, (delta["toolUse"] or {}).get("input", ""))]
        reasoning = delta.get("reasoningContent")
        if isinstance(reasoning, dict) and reasoning.get("text"):
            return [self._chunk({"reasoning_content": str(reasoning["text"])})]
        return []
