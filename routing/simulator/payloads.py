"""JSON shapes of OpenAI chat completions: bodies, stream chunks, usage, errors.

Pure functions and one small factory, no I/O: ``play`` decides *when* to send, this
module decides *what* it looks like. Shapes follow the OpenAI API as the ``openai``
SDK parses it: every chunk carries the same ``id``, ``created`` and the requested
``model``; with ``stream_options.include_usage`` every regular chunk has
``"usage": null`` and a last chunk with ``choices: []`` carries the usage.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

TOOL_CALL = {"name": "get_weather", "arguments": '{"city": "Paris"}'}


@dataclass(frozen=True)
class ToolSpec:
    """One scripted tool call, normalised: ``arguments`` is a JSON text (function tools)
    or, when ``custom``, the freeform string input of a custom tool."""

    name: str
    arguments: str
    custom: bool = False

    @property
    def input_object(self) -> Any:
        """The arguments as Anthropic's ``tool_use.input`` (a custom tool's string input
        travels as ``{"input": ...}``, the one-string-argument function it maps to)."""
        if self.custom:
            return {"input": self.arguments}
        try:
            return json.loads(self.arguments or "{}")
        except ValueError:
            return {}

    @property
    def function_arguments(self) -> str:
        """The arguments as a chat / Responses function call's JSON text."""
        return json.dumps({"input": self.arguments}) if self.custom else self.arguments


def tool_specs(value: Any) -> list[ToolSpec]:
    """``Reply.tool_call`` as a list of calls.

    ``False`` -> none; ``True`` -> the classic ``get_weather`` call; a dict
    ``{"name": str, "arguments": dict | str}`` -> that function call; a dict
    ``{"name": str, "input": str}`` -> a custom (freeform) tool call; a list of such
    dicts -> several calls in that order.
    """
    if value is False or value is None:
        return []
    if value is True:
        return [ToolSpec(TOOL_CALL["name"], TOOL_CALL["arguments"])]
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list):
        raise ValueError(f"tool_call must be a bool, an object or a list, not {value!r}")
    specs = []
    for item in value:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise ValueError(f"a scripted tool call needs a string 'name', got {item!r}")
        if "input" in item:
            specs.append(ToolSpec(item["name"], str(item["input"]), custom=True))
            continue
        arguments = item.get("arguments", {})
        text = arguments if isinstance(arguments, str) else json.dumps(arguments)
        specs.append(ToolSpec(item["name"], text))
    return specs


def _spread(units: list[str], count: int) -> list[str]:
    """Join ``units`` into ``count`` contiguous groups whose sizes differ by at most one."""
    size, extra = divmod(len(units), count)
    pieces, start = [], 0
    for i in range(count):
        end = start + size + (1 if i < extra else 0)
        pieces.append("".join(units[start:end]))
        start = end
    return pieces


def split_pieces(text: str, count: int) -> list[str]:
    """Split ``text`` into ``count`` contiguous, non-empty pieces that join back to it.

    Cuts between words when there are enough words (streams read naturally), else
    between characters; fewer pieces when the text is shorter than ``count``, none
    for an empty text.
    """
    count = max(0, min(count, len(text)))
    if count == 0:
        return []
    words = re.findall(r"\s*\S+\s*", text) or [text]
    if len(words) >= count and "".join(words) == text:
        return _spread(words, count)
    return _spread(list(text), count)


def fill_model(text: str, model: str) -> str:
    return text.replace("{model}", model)


def _words(value: Any) -> int:
    if isinstance(value, str):
        return len(value.split())
    if isinstance(value, list):  # content parts
        return sum(_words(part.get("text", "")) for part in value if isinstance(part, dict))
    return 0


def usage_for(request_body: dict[str, Any], completion_text: str) -> dict[str, int]:
    """Deterministic token counts: one token per whitespace-separated word (min. 1)."""
    messages = request_body.get("messages") or []
    prompt = sum(_words(m.get("content")) for m in messages if isinstance(m, dict))
    prompt += _words(request_body.get("input"))  # the Responses shape
    for turn in request_body.get("contents") or ():  # the Gemini shape
        prompt += _words(turn.get("parts")) if isinstance(turn, dict) else 0
    prompt = max(prompt, 1)
    completion = _words(completion_text)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def with_cache(usage: dict[str, Any], *, read: int, write: int) -> dict[str, Any]:
    """Chat usage with prompt-cache tokens (counted inside ``prompt_tokens``, as OpenAI
    does; writes in the ``cache_creation_input_tokens`` extension)."""
    if not read and not write:
        return usage
    prompt = usage["prompt_tokens"] + read + write
    out = {**usage, "prompt_tokens": prompt, "total_tokens": prompt + usage["completion_tokens"]}
    out["prompt_tokens_details"] = {"cached_tokens": read}
    if write:
        out["cache_creation_input_tokens"] = write
    return out


def default_error_type(status: int) -> str:
    if status == 429:
        return "rate_limit_error"
    if status >= 500:
        return "server_error"
    return "invalid_request_error"


def error_body(message: str, type_: str, code: str | None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "code": code, "param": None}}


def _call_id(base: str, index: int) -> str:
    return f"call_{base[-12:]}" + (f"_{index}" if index else "")


def _tool_call(index: int, spec: ToolSpec, call_id: str, with_header: bool) -> dict[str, Any]:
    """One chat tool-call delta; a custom tool streams as chat's ``custom`` call type."""
    if spec.custom:
        call: dict[str, Any] = {"index": index, "custom": {"input": spec.arguments}}
        if with_header:
            call = {"index": index, "id": call_id, "type": "custom", "custom": {"name": spec.name}}
        return call
    call = {"index": index, "function": {"arguments": spec.arguments}}
    if with_header:
        call = {"index": index, "id": call_id, "type": "function"}
        call["function"] = {"name": spec.name, "arguments": ""}
    return call


def chat_tool_call(spec: ToolSpec, call_id: str) -> dict[str, Any]:
    """A whole chat ``tool_calls`` entry (non-stream)."""
    if spec.custom:
        return {
            "id": call_id,
            "type": "custom",
            "custom": {"name": spec.name, "input": spec.arguments},
        }
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": spec.name, "arguments": spec.arguments},
    }


@dataclass
class Completion:
    """The identity of one response; builds its body or its chunks."""

    model: str
    include_usage: bool = False
    id: str = field(default_factory=lambda: f"chatcmpl-sim-{uuid.uuid4().hex[:24]}")
    created: int = field(default_factory=lambda: int(time.time()))

    # -- non-stream ------------------------------------------------------------------
    def body(
        self,
        *,
        content: str,
        reasoning: str = "",
        tool_calls: Sequence[ToolSpec] = (),
        finish_reason: str = "stop",
        usage: dict[str, int] | None = None,
    ) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if reasoning:
            message["reasoning_content"] = reasoning
        if tool_calls:
            message["tool_calls"] = [
                chat_tool_call(spec, _call_id(self.id, i)) for i, spec in enumerate(tool_calls)
            ]
        body: dict[str, Any] = {
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [
                {"index": 0, "message": message, "finish_reason": finish_reason, "logprobs": None}
            ],
        }
        if usage is not None:
            body["usage"] = usage
        return body

    # -- stream ----------------------------------------------------------------------
    def chunk(self, delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [
                {"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}
            ],
        }
        if self.include_usage:
            out["usage"] = None
        return out

    def role_chunk(self) -> dict[str, Any]:
        return self.chunk({"role": "assistant", "content": ""})

    def content_chunk(self, text: str) -> dict[str, Any]:
        return self.chunk({"content": text})

    def reasoning_chunk(self, text: str) -> dict[str, Any]:
        return self.chunk({"reasoning_content": text})

    def tool_call_chunks(self, spec: ToolSpec, index: int = 0) -> list[dict[str, Any]]:
        """A tool call in two deltas, as OpenAI streams it: header, then arguments."""
        call_id = _call_id(self.id, index)
        return [
            self.chunk({"tool_calls": [_tool_call(index, spec, call_id, with_header=True)]}),
            self.chunk({"tool_calls": [_tool_call(index, spec, call_id, with_header=False)]}),
        ]

    def finish_chunk(self, finish_reason: str) -> dict[str, Any]:
        return self.chunk({}, finish_reason)

    def usage_chunk(self, usage: dict[str, int]) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [],
            "usage": usage,
        }


def embeddings(request_body: dict[str, Any], model: str) -> dict[str, Any]:
    """An embeddings list: one deterministic 4-dimensional vector per input."""
    inputs = request_body.get("input")
    items = inputs if isinstance(inputs, list) else [inputs]
    data = [
        {
            "object": "embedding",
            "index": i,
            "embedding": [float(len(str(text))), 0.5, 0.25, float(i)],
        }
        for i, text in enumerate(items)
    ]
    tokens = sum(_words(str(text)) for text in items)
    return {
        "object": "list",
        "data": data,
        "model": model,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }
