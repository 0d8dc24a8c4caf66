"""The three upstream protocols' shapes, behind one interface ``play`` writes through.

A *wire* is the identity of one response in one protocol and builds its pieces:
``preamble`` / ``reasoning`` / ``content`` / ``tool_call`` / ``finish`` /
``usage_only`` / ``stream_error`` return stream events ``(event name or None, JSON)``;
``body`` is the non-stream answer, ``error`` an HTTP error body; ``done`` says whether the
stream ends with ``data: [DONE]`` (Chat Completions only).

Shapes follow what the official SDKs parse: Anthropic Messages (``message_start``,
``ping``, ``content_block_start/delta/stop``, ``message_delta``, ``message_stop``;
errors ``{"type": "error", "error": {"type", "message"}}``) and OpenAI Responses
(``response.created`` … ``response.completed``, each with its ``sequence_number``).
Written independently of the gateway's translators so tests compare two implementations.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Sequence
from typing import Any

from routing.simulator import bedrock
from routing.simulator.bedrock import ConverseWire
from routing.simulator.gemini import GeminiWire, model_and_stream
from routing.simulator.payloads import (
    Completion,
    ToolSpec,
    default_error_type,
    error_body,
)
from routing.simulator.vertex import vertex_path

Event = tuple[str | None, dict[str, Any]]

ANTHROPIC_STOP = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}
ANTHROPIC_ERRORS = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}


class ChatWire:
    """Chat Completions, through the existing ``Completion`` builder."""

    done = True

    def __init__(self, model: str, *, include_usage: bool) -> None:
        self.c = Completion(model, include_usage=include_usage)

    def preamble(self) -> list[Event]:
        return [(None, self.c.role_chunk())]

    def reasoning(self, text: str) -> list[Event]:
        return [(None, self.c.reasoning_chunk(text))]

    def content(self, piece: str) -> list[Event]:
        return [(None, self.c.content_chunk(piece))]

    def tool_call(self, spec: ToolSpec, index: int) -> list[Event]:
        return [(None, chunk) for chunk in self.c.tool_call_chunks(spec, index)]

    def finish(self, reason: str, usage: dict[str, int] | None) -> list[Event]:
        events: list[Event] = [(None, self.c.finish_chunk(reason))]
        if self.c.include_usage and usage is not None:
            events.append((None, self.c.usage_chunk(usage)))
        return events

    def usage_only(self, usage: dict[str, int]) -> list[Event]:
        return [(None, self.c.usage_chunk(usage))]

    def stream_error(self) -> list[Event]:
        return [(None, error_body("internal", "server_error", "server_error"))]

    def body(self, **answer: Any) -> dict[str, Any]:
        return self.c.body(**answer)

    def error(
        self, message: str, type_: str | None, code: str | None, status: int
    ) -> dict[str, Any]:
        return error_body(message, type_ or default_error_type(status), code)


def _cache_tokens(usage: dict[str, Any]) -> tuple[int, int]:
    """(read, write) prompt-cache tokens of a chat usage (``payloads.with_cache``)."""
    read = int((usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
    return read, int(usage.get("cache_creation_input_tokens") or 0)


def _anthropic_usage(usage: dict[str, Any] | None) -> dict[str, int]:
    usage = usage or {}
    read, write = _cache_tokens(usage)  # Anthropic counts cached input apart
    return {
        "input_tokens": usage.get("prompt_tokens", 0) - read - write,
        "output_tokens": usage.get("completion_tokens", 0),
        "cache_read_input_tokens": read,
        "cache_creation_input_tokens": write,
    }


class MessagesWire:
    """Anthropic Messages."""

    done = False

    def __init__(self, model: str, *, include_usage: bool = True) -> None:
        self.model = model
        self.id = f"msg_sim{uuid.uuid4().hex[:20]}"
        self._index = -1
        self._block: str | None = None

    def _open(self, kind: str, block: dict[str, Any]) -> list[Event]:
        events = self._close()
        self._index += 1
        self._block = kind
        start = {"type": "content_block_start", "index": self._index, "content_block": block}
        return [*events, ("content_block_start", start)]

    def _close(self) -> list[Event]:
        if self._block is None:
            return []
        self._block = None
        return [("content_block_stop", {"type": "content_block_stop", "index": self._index})]

    def _delta(self, delta: dict[str, Any]) -> Event:
        return (
            "content_block_delta",
            {"type": "content_block_delta", "index": self._index, "delta": delta},
        )

    def preamble(self) -> list[Event]:
        message: dict[str, Any] = {
            "id": self.id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 0, "output_tokens": 1},
        }
        return [
            ("message_start", {"type": "message_start", "message": message}),
            ("ping", {"type": "ping"}),
        ]

    def reasoning(self, text: str) -> list[Event]:
        events = self._open("thinking", {"type": "thinking", "thinking": "", "signature": ""})
        events.append(self._delta({"type": "thinking_delta", "thinking": text}))
        events.append(self._delta({"type": "signature_delta", "signature": "sim-signature"}))
        return events

    def content(self, piece: str) -> list[Event]:
        events = [] if self._block == "text" else self._open("text", {"type": "text", "text": ""})
        return [*events, self._delta({"type": "text_delta", "text": piece})]

    def _tool_id(self, index: int) -> str:
        return f"toolu_{self.id[-12:]}" + (f"_{index}" if index else "")

    def tool_call(self, spec: ToolSpec, index: int) -> list[Event]:
        block = {"type": "tool_use", "id": self._tool_id(index), "name": spec.name, "input": {}}
        events = self._open("tool_use", block)
        text = json.dumps(spec.input_object)
        half = len(text) // 2
        for part in (text[:half], text[half:]):
            events.append(self._delta({"type": "input_json_delta", "partial_json": part}))
        return events

    def finish(self, reason: str, usage: dict[str, int] | None) -> list[Event]:
        delta = {"stop_reason": ANTHROPIC_STOP.get(reason, reason), "stop_sequence": None}
        return [
            *self._close(),
            (
                "message_delta",
                {"type": "message_delta", "delta": delta, "usage": _anthropic_usage(usage)},
            ),
            ("message_stop", {"type": "message_stop"}),
        ]

    def usage_only(self, usage: dict[str, int]) -> list[Event]:
        return [("ping", {"type": "ping"})]  # Anthropic has no usage-only event before content

    def stream_error(self) -> list[Event]:
        error = {"type": "overloaded_error", "message": "Overloaded"}
        return [("error", {"type": "error", "error": error})]

    def body(
        self,
        *,
        content: str,
        reasoning: str = "",
        tool_calls: Sequence[ToolSpec] = (),
        finish_reason: str = "stop",
        usage: dict[str, int] | None = None,
    ) -> dict[str, Any]:
        blocks: list[dict[str, Any]] = []
        if reasoning:
            blocks.append({"type": "thinking", "thinking": reasoning, "signature": "sim-signature"})
        if content:
            blocks.append({"type": "text", "text": content})
        for index, spec in enumerate(tool_calls):
            blocks.append(
                {
                    "type": "tool_use",
                    "id": self._tool_id(index),
                    "name": spec.name,
                    "input": spec.input_object,
                }
            )
        return {
            "id": self.id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": blocks,
            "stop_reason": ANTHROPIC_STOP.get(finish_reason, finish_reason),
            "stop_sequence": None,
            "usage": _anthropic_usage(usage),
        }

    def error(
        self, message: str, type_: str | None, code: str | None, status: int
    ) -> dict[str, Any]:
        kind = type_ or ANTHROPIC_ERRORS.get(
            status, "api_error" if status >= 500 else "invalid_request_error"
        )
        return {"type": "error", "error": {"type": kind, "message": message}}


class ResponsesWire:
    """OpenAI Responses."""

    done = False

    def __init__(self, model: str, *, include_usage: bool = True) -> None:
        self.model = model
        self.id = f"resp_sim{uuid.uuid4().hex[:20]}"
        self.created = int(time.time())
        self._seq = 0
        self._output: list[dict[str, Any]] = []
        self._open: dict[str, Any] | None = None
        self._text = ""

    def _event(self, kind: str, **data: Any) -> Event:
        event = {"type": kind, **data, "sequence_number": self._seq}
        self._seq += 1
        return kind, event

    def _response(self, status: str, usage: dict[str, int] | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "object": "response",
            "created_at": self.created,
            "status": status,
            "model": self.model,
            "output": list(self._output),
            "error": None,
            "incomplete_details": None,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
        }
        if usage is not None:
            out["usage"] = {
                "input_tokens": usage.get("prompt_tokens", 0),
                "input_tokens_details": {"cached_tokens": _cache_tokens(usage)[0]},
                "output_tokens": usage.get("completion_tokens", 0),
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": usage.get("total_tokens", 0),
            }
        return out

    def _begin(self, item: dict[str, Any]) -> list[Event]:
        events = self._close()
        self._open, self._text = item, ""
        return [
            *events,
            self._event("response.output_item.added", output_index=len(self._output), item=item),
        ]

    def _close(self) -> list[Event]:
        item = self._open
        if item is None:
            return []
        index = len(self._output)
        events: list[Event] = []
        if item["type"] == "message":
            part = {"type": "output_text", "text": self._text, "annotations": []}
            events.append(
                self._event(
                    "response.output_text.done",
                    item_id=item["id"],
                    output_index=index,
                    content_index=0,
                    text=self._text,
                )
            )
            events.append(
                self._event(
                    "response.content_part.done",
                    item_id=item["id"],
                    output_index=index,
                    content_index=0,
                    part=part,
                )
            )
            item = {**item, "status": "completed", "content": [part]}
        elif item["type"] == "reasoning":
            item = {**item, "summary": [{"type": "summary_text", "text": self._text}]}
        elif item["type"] == "custom_tool_call":
            events.append(
                self._event(
                    "response.custom_tool_call_input.done",
                    item_id=item["id"],
                    output_index=index,
                    input=self._text,
                )
            )
            item = {**item, "status": "completed", "input": self._text}
        else:
            events.append(
                self._event(
                    "response.function_call_arguments.done",
                    item_id=item["id"],
                    output_index=index,
                    arguments=self._text,
                )
            )
            item = {**item, "status": "completed", "arguments": self._text}
        events.append(self._event("response.output_item.done", output_index=index, item=item))
        self._output.append(item)
        self._open = None
        return events

    def _item_id(self) -> str:
        return str(self._open["id"]) if self._open is not None else ""

    def preamble(self) -> list[Event]:
        return [
            self._event("response.created", response=self._response("in_progress")),
            self._event("response.in_progress", response=self._response("in_progress")),
        ]

    def reasoning(self, text: str) -> list[Event]:
        events = self._begin({"id": f"rs_{self.id[-12:]}", "type": "reasoning", "summary": []})
        self._text += text
        return [
            *events,
            self._event(
                "response.reasoning_summary_text.delta",
                item_id=events[-1][1]["item"]["id"] if events else self._item_id(),
                output_index=len(self._output),
                summary_index=0,
                delta=text,
            ),
        ]

    def content(self, piece: str) -> list[Event]:
        events: list[Event] = []
        if self._open is None or self._open["type"] != "message":
            item = {
                "id": f"msg_{uuid.uuid4().hex[:12]}",
                "type": "message",
                "role": "assistant",
                "status": "in_progress",
                "content": [],
            }
            events = self._begin(item)
            events.append(
                self._event(
                    "response.content_part.added",
                    item_id=item["id"],
                    output_index=len(self._output),
                    content_index=0,
                    part={"type": "output_text", "text": "", "annotations": []},
                )
            )
        self._text += piece
        assert self._open is not None
        events.append(
            self._event(
                "response.output_text.delta",
                item_id=self._open["id"],
                output_index=len(self._output),
                content_index=0,
                delta=piece,
                logprobs=[],
            )
        )
        return events

    def _tool_item(self, spec: ToolSpec, index: int, text: str) -> dict[str, Any]:
        suffix = self.id[-12:] + (f"_{index}" if index else "")
        if spec.custom:
            kind, field = "custom_tool_call", "input"
            item_id = f"ctc_{suffix}"
        else:
            kind, field = "function_call", "arguments"
            item_id = f"fc_{suffix}"
        return {
            "id": item_id,
            "type": kind,
            "call_id": f"call_{suffix}",
            "name": spec.name,
            field: text,
            "status": "in_progress" if not text else "completed",
        }

    def tool_call(self, spec: ToolSpec, index: int) -> list[Event]:
        item = self._tool_item(spec, index, "")
        events = self._begin(item)
        delta = (
            "response.custom_tool_call_input.delta"
            if spec.custom
            else "response.function_call_arguments.delta"
        )
        half = len(spec.arguments) // 2
        for part in (spec.arguments[:half], spec.arguments[half:]):
            self._text += part
            events.append(
                self._event(delta, item_id=item["id"], output_index=len(self._output), delta=part)
            )
        return events

    def finish(self, reason: str, usage: dict[str, int] | None) -> list[Event]:
        events = self._close()
        if reason == "length":
            response = self._response("incomplete", usage)
            response["incomplete_details"] = {"reason": "max_output_tokens"}
            return [*events, self._event("response.incomplete", response=response)]
        return [
            *events,
            self._event("response.completed", response=self._response("completed", usage)),
        ]

    def usage_only(self, usage: dict[str, int]) -> list[Event]:
        return []

    def stream_error(self) -> list[Event]:
        response = self._response("failed")
        response["error"] = {"code": "server_error", "message": "internal"}
        return [self._event("response.failed", response=response)]

    def body(
        self,
        *,
        content: str,
        reasoning: str = "",
        tool_calls: Sequence[ToolSpec] = (),
        finish_reason: str = "stop",
        usage: dict[str, int] | None = None,
    ) -> dict[str, Any]:
        if reasoning:
            self._output.append(
                {
                    "id": f"rs_{self.id[-12:]}",
                    "type": "reasoning",
                    "summary": [{"type": "summary_text", "text": reasoning}],
                }
            )
        if content or not tool_calls:
            self._output.append(
                {
                    "id": f"msg_{self.id[-12:]}",
                    "type": "message",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": content, "annotations": []}],
                }
            )
        for index, spec in enumerate(tool_calls):
            self._output.append(self._tool_item(spec, index, spec.arguments))
        status = "incomplete" if finish_reason == "length" else "completed"
        return self._response(status, usage)

    def error(
        self, message: str, type_: str | None, code: str | None, status: int
    ) -> dict[str, Any]:
        return error_body(message, type_ or default_error_type(status), code)


class BedrockMessagesWire(MessagesWire):
    """Anthropic Messages on Bedrock (InvokeModel): Bedrock's error bodies, and a stream
    failure as an exception frame."""

    def stream_error(self) -> list[Event]:
        return bedrock.exception_events("modelStreamErrorException", "Overloaded")

    def error(
        self, message: str, type_: str | None, code: str | None, status: int
    ) -> dict[str, Any]:
        return {"message": message}


Wire = ChatWire | MessagesWire | ResponsesWire | GeminiWire | ConverseWire
WireClass = (
    type[ChatWire]
    | type[MessagesWire]
    | type[ResponsesWire]
    | type[GeminiWire]
    | type[ConverseWire]
)
WIRES: dict[str, WireClass] = {
    "/v1/chat/completions": ChatWire,
    "/v1/messages": MessagesWire,
    "/v1/responses": ResponsesWire,
    "/v1/responses/compact": ResponsesWire,  # answered like a JSON response
}


def wire_class(path: str) -> WireClass:
    """The wire a request's path speaks: by path, or Gemini's ``…/models/{model}:action``."""
    found = WIRES.get(path.removeprefix("/openai"))  # Azure's v1 API: /openai/v1/…
    if found is not None:
        return found
    named = bedrock.model_and_action(path)
    if named is not None:
        return ConverseWire if named[1].startswith("converse") else BedrockMessagesWire
    vertex = vertex_path(path)
    if vertex is not None and vertex.publisher == "anthropic":
        return MessagesWire  # Claude on Vertex AI answers in Anthropic's own shapes
    return GeminiWire if model_and_stream(path) is not None else ChatWire
