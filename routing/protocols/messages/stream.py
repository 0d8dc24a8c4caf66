"""Anthropic Messages streams <-> canonical chunks.

``StreamDecoder``: an ``anthropic`` upstream's events → canonical chunks. ``StreamEncoder``:
canonical chunks → the ``/v1/messages`` door's events, the preamble included. ``error_event`` ends a stream that failed after its
commit point.
"""

from __future__ import annotations

import uuid
from typing import Any

from routing.protocols import ANTHROPIC_TO_FINISH, FINISH_TO_ANTHROPIC
from routing.protocols.canonical import (
    EventDecoder,
    EventEncoder,
    sse_event,
    tool_call,
    usage_chunk,
)
from routing.protocols.messages.reply import (
    anthropic_usage,
    canonical_usage,
    error_type,
    message_id,
)


class StreamDecoder(EventDecoder):
    """An ``anthropic`` upstream's stream events → canonical chunks.

    ``finished`` turns true at ``message_stop``: a body that ends before it was cut.
    """

    terminal = "message_stop"

    def __init__(self) -> None:
        super().__init__()
        self._usage: dict[str, Any] = {}
        self.block_index = -1  # the latest content block's index (a rescue continues it)

    def decode(self, event: dict[str, Any]) -> list[dict[str, Any]]:
        kind = event.get("type")
        if kind == "content_block_start":
            self.block_index = int(event.get("index") or 0)
        if kind == "content_block_delta":
            delta = event.get("delta") or {}
            dtype = delta.get("type")
            if dtype == "text_delta":
                return [self._chunk({"content": delta.get("text", "")})]
            if dtype == "thinking_delta":
                return [self._chunk({"reasoning_content": delta.get("thinking", "")})]
            if dtype == "input_json_delta":
                return [
                    self._arguments(int(event.get("index") or 0), delta.get("partial_json", ""))
                ]
            return []
        if kind == "content_block_start":
            block = event.get("content_block") or {}
            if block.get("type") == "tool_use":
                call = tool_call(block.get("id"), block.get("name"), "")
                return [self._call_start(int(event.get("index") or 0), call)]
            if block.get("type") == "text" and block.get("text"):
                return [self._chunk({"content": block["text"]})]
            btype = block.get("type")
            if isinstance(btype, str) and btype not in ("text", "thinking"):
                # server_tool_use, web_search_tool_result, redacted_thinking…: content
                return [self._opaque(btype)]
            return []
        if kind == "message_start":
            message = event.get("message") or {}
            self._usage.update(message.get("usage") or {})
            return [self._begin(message.get("id"), message.get("model"))]
        if kind == "message_delta":
            self._usage.update(
                {k: v for k, v in (event.get("usage") or {}).items() if v is not None}
            )
            reason = (event.get("delta") or {}).get("stop_reason")
            if reason:
                finish = ANTHROPIC_TO_FINISH.get(str(reason), "stop")
                return [self._chunk({}, finish)]
            return []
        if kind == "message_stop":
            self.finished = True
            self.usage = canonical_usage(self._usage)
            return [usage_chunk(self.id, self.model, self.usage)]
        return []  # ping, content_block_stop, unknown future events


class StreamEncoder(EventEncoder):
    """Canonical chunks → the ``/v1/messages`` door's events.

    ``message_start`` and ``ping`` go out with the first committed chunk (they are the
    preamble the commit point held back); ``message_delta`` + ``message_stop`` at ``end``.
    """

    def __init__(self, *, open_text_block: int | None = None) -> None:
        """``open_text_block``: continue a stream whose preamble and text block ``index``
        the client already has (a mid-stream rescue, SPEC §16)."""
        super().__init__()
        self._started = open_text_block is not None
        self._block: str | None = "text" if open_text_block is not None else None
        self._index = open_text_block if open_text_block is not None else -1
        self._tools: dict[int, int] = {}

    def _preamble(self, first: dict[str, Any], out: list[bytes]) -> None:
        message: dict[str, Any] = {
            "id": message_id(str(first.get("id") or "")),
            "type": "message",
            "role": "assistant",
            "model": first.get("model"),
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 0, "output_tokens": 0},
        }
        out.append(sse_event("message_start", {"type": "message_start", "message": message}))
        out.append(sse_event("ping", {"type": "ping"}))

    def _reasoning(self, text: str, out: list[bytes]) -> None:
        self._open("thinking", out)
        out.append(self._delta({"type": "thinking_delta", "thinking": text}))

    def _content(self, text: str, out: list[bytes]) -> None:
        self._open("text", out)
        out.append(self._delta({"type": "text_delta", "text": text}))

    def _delta(self, delta: dict[str, Any]) -> bytes:
        return sse_event(
            "content_block_delta",
            {"type": "content_block_delta", "index": self._index, "delta": delta},
        )

    def _close(self, out: list[bytes]) -> None:
        if self._block is not None:
            if self._block == "thinking":
                out.append(self._delta({"type": "signature_delta", "signature": ""}))
            out.append(
                sse_event(
                    "content_block_stop", {"type": "content_block_stop", "index": self._index}
                )
            )
            self._block = None

    def _open(self, kind: str, out: list[bytes], block: dict[str, Any] | None = None) -> None:
        if self._block == kind and block is None:
            return
        self._close(out)
        self._index += 1
        self._block = kind
        if block is None:
            block = (
                {"type": "text", "text": ""}
                if kind == "text"
                else {
                    "type": "thinking",
                    "thinking": "",
                    "signature": "",
                }
            )
        out.append(
            sse_event(
                "content_block_start",
                {"type": "content_block_start", "index": self._index, "content_block": block},
            )
        )

    def _tool(self, call: dict[str, Any], out: list[bytes]) -> None:
        function = call.get("function") or {}
        index = int(call.get("index") or 0)
        if call.get("id") or index not in self._tools:
            block: dict[str, Any] = {
                "type": "tool_use",
                "id": call.get("id") or f"toolu_{uuid.uuid4().hex[:24]}",
                "name": function.get("name") or "",
                "input": {},
            }
            self._open("tool_use", out, block)
            self._tools[index] = self._index
        arguments = function.get("arguments")
        if arguments:
            out.append(self._delta({"type": "input_json_delta", "partial_json": arguments}))

    def end(self) -> bytes:
        out: list[bytes] = []
        self._close(out)
        stop = FINISH_TO_ANTHROPIC.get(str(self._finish), "end_turn")
        out.append(
            sse_event(
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": anthropic_usage(self._usage),
                },
            )
        )
        out.append(sse_event("message_stop", {"type": "message_stop"}))
        return b"".join(out)


def error_event(message: str, *, status: int = 502) -> bytes:
    """The event that ends a Messages stream that failed after its commit point."""
    return sse_event(
        "error", {"type": "error", "error": {"type": error_type(status), "message": message}}
    )
