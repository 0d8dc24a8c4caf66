"""Builders for the canonical (Chat Completions) shapes the protocol modules exchange.

A canonical stream is a sequence of ``chat.completion.chunk`` dicts: deltas carrying
``content``, ``reasoning_content`` or ``tool_calls`` (``index``, and ``id``/``name`` on a
call's first delta), one chunk with a ``finish_reason``, then one usage-only chunk
(``choices: []``). A canonical answer is a ``chat.completion`` dict: each kind's reader
collects an upstream answer in ``AnswerParts``, which builds it, and each door's builder
takes one apart with ``read_completion``.

Also here, because the Messages and Responses modules both need them: the bases of their
stream codecs (``EventDecoder``, ``EventEncoder``: the state and the walk over chunks they
share) and the named-event SSE framing of their streams (chat's are ``data:`` lines only).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import orjson

# A delta (or message) field naming output items the gateway relays but cannot translate
# — hosted tool calls (``web_search_call``…), a remote ``compaction`` item: they are content
# for the commit point (never ``EMPTY_RESPONSE``), and translators ignore them.
OPAQUE = "opaque"


def chunk(
    id_: str, model: str, delta: dict[str, Any], finish_reason: str | None = None
) -> dict[str, Any]:
    return {
        "id": id_,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }


def usage_chunk(id_: str, model: str, usage: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": id_,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [],
        "usage": usage,
    }


def chat_usage(
    *, input_tokens: int, output_tokens: int, cache_read: int = 0, cache_write: int = 0
) -> dict[str, Any]:
    """Chat usage from uncached input, output and cache counts (Anthropic counts cached
    input apart from ``input_tokens``; Chat and Responses count it inside)."""
    prompt = input_tokens + cache_read + cache_write
    usage: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": output_tokens,
        "total_tokens": prompt + output_tokens,
    }
    if cache_read:
        usage["prompt_tokens_details"] = {"cached_tokens": cache_read}
    if cache_write:
        usage["cache_creation_input_tokens"] = cache_write
    return usage


def message_text(content: Any) -> str:
    """The text of a chat message's ``content`` (a string or a list of parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(p.get("text", ""))
            for p in content
            if isinstance(p, dict) and p.get("type") == "text"
        )
    return ""


def tool_call(id_: Any, name: Any, arguments: Any) -> dict[str, Any]:
    """A canonical tool call (``arguments``: the call's JSON text)."""
    return {"id": id_, "type": "function", "function": {"name": name, "arguments": arguments}}


def call_arguments(arguments: Any) -> Any:
    """A canonical tool call's ``arguments`` (JSON text) as the object a kind sends; text
    that is not JSON travels as ``{"_raw": text}``."""
    try:
        return orjson.loads(arguments or "{}")
    except orjson.JSONDecodeError:
        return {"_raw": arguments}


def function_choice(name: Any) -> dict[str, Any]:
    """A ``tool_choice`` naming the one function the model must call."""
    return {"type": "function", "function": {"name": name}}


@dataclass(slots=True)
class AnswerParts:
    """An upstream answer's parts, as a kind's reader collects them in order: text,
    reasoning, tool calls (canonical) and the output types it relays but cannot translate
    (``OPAQUE``). ``completion`` builds the ``chat.completion`` from them."""

    text: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    opaque: list[str] = field(default_factory=list)

    def completion(
        self, answer: dict[str, Any], *, finish_reason: str, usage: dict[str, Any] | None
    ) -> dict[str, Any]:
        """The ``chat.completion`` for ``answer`` (whose ``id`` and ``model`` it keeps)."""
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.text) or None}
        reasoning = "".join(self.reasoning)
        if reasoning:
            message["reasoning_content"] = reasoning
        if self.tool_calls:
            message["tool_calls"] = self.tool_calls
        if self.opaque:
            message[OPAQUE] = self.opaque
        body: dict[str, Any] = {
            "id": str(answer.get("id") or ""),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": str(answer.get("model") or ""),
            "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        }
        if usage is not None:
            body["usage"] = usage
        return body


class ToolCall(NamedTuple):
    """A canonical tool call's fields, as the call has them."""

    id: Any
    name: Any
    arguments: Any


class Choice(NamedTuple):
    """What a door's builder reads of a canonical answer: its one choice's parts."""

    reasoning: str
    text: str
    tool_calls: list[ToolCall]
    finish_reason: str | None


def read_completion(body: dict[str, Any]) -> Choice:
    """The parts of a ``chat.completion``'s first choice (empty ones when it has none)."""
    choice = (body.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    calls = []
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        calls.append(ToolCall(call.get("id"), function.get("name"), function.get("arguments")))
    return Choice(
        message.get("reasoning_content") or "",
        message_text(message.get("content")),
        calls,
        choice.get("finish_reason"),
    )


def image_source(url: str) -> dict[str, Any]:
    """An Anthropic image ``source`` for a chat ``image_url`` (data URL or http URL)."""
    if url.startswith("data:") and ";base64," in url:
        media_type, _, data = url[5:].partition(";base64,")
        return {"type": "base64", "media_type": media_type, "data": data}
    return {"type": "url", "url": url}


def image_url(source: dict[str, Any]) -> str:
    if source.get("type") == "base64":
        return f"data:{source.get('media_type', 'image/png')};base64,{source.get('data', '')}"
    return str(source.get("url", ""))


# ------------------------------------------------------------------ named-event framing
def sse_event(kind: str, data: dict[str, Any]) -> bytes:
    """One ``event:`` + ``data:`` SSE event, as the Messages and Responses doors send them."""
    return b"event: " + kind.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"


def frame(payload: bytes, event: dict[str, Any]) -> bytes:
    """An upstream event relayed as-is, with its ``event:`` name (the SDKs dispatch on it)."""
    kind = event.get("type")
    name = kind.encode() if isinstance(kind, str) else b"message"
    return b"event: " + name + b"\ndata: " + payload + b"\n\n"


# ------------------------------------------------------------------------ stream codecs
class EventDecoder:
    """An upstream's events → canonical chunks: what every kind's decoder keeps.

    ``id`` and ``model`` come from the stream's first event and stamp each chunk;
    ``finished`` turns true at the kind's last event (a body that ends before it was cut);
    ``usage`` is the canonical usage once the stream has told it.
    """

    def __init__(self) -> None:
        self.id = ""
        self.model = ""
        self.finished = False
        self.usage: dict[str, Any] | None = None
        # A tool call's canonical index, by what the kind's events name it with.
        self._calls: dict[object, int] = {}

    def decode(self, event: dict[str, Any]) -> list[dict[str, Any]]:  # pragma: no cover
        raise NotImplementedError

    def _chunk(self, delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        return chunk(self.id, self.model, delta, finish_reason)

    def _begin(self, id_: Any, model: Any) -> dict[str, Any]:
        """The stream's first chunk (the assistant's role), once its first event named the
        answer's ``id`` and ``model``."""
        self.id = str(id_ or "")
        self.model = str(model or "")
        return self._chunk({"role": "assistant", "content": ""})

    def _call_start(self, key: object, call: dict[str, Any]) -> dict[str, Any]:
        """The chunk opening tool call ``key`` (a block index, an item id) as the next
        canonical index; ``call``: its id, type and function."""
        index = len(self._calls)
        self._calls[key] = index
        return self._chunk({"tool_calls": [{"index": index, **call}]})

    def _arguments(self, key: object, arguments: Any) -> dict[str, Any]:
        """The chunk carrying more of tool call ``key``'s arguments."""
        call = {"index": self._calls.get(key, 0), "function": {"arguments": arguments}}
        return self._chunk({"tool_calls": [call]})

    def _opaque(self, kind: str) -> dict[str, Any]:
        """The chunk marking an output item the gateway relays but cannot translate."""
        return self._chunk({OPAQUE: [kind]})


class EventEncoder:
    """Canonical chunks → a door's events: the walk the Messages and Responses encoders share.

    ``encode`` hands each chunk's parts to the door's hooks: ``_preamble`` once, with the
    first chunk (the commit point held it back); then, in the order a delta carries them,
    ``_reasoning``, ``_content`` and ``_tool`` for each tool call. The finish reason and the
    usage are kept for ``end``, which closes the stream in the door's shape.
    """

    def __init__(self) -> None:
        self._started = False
        self._finish: str | None = None
        self._usage: dict[str, Any] | None = None

    def encode(self, chunks: Sequence[dict[str, Any]]) -> bytes:
        out: list[bytes] = []
        for item in chunks:
            if not self._started:
                self._started = True
                self._preamble(item, out)
            if item.get("usage"):
                self._usage = item["usage"]
            for choice in item.get("choices") or ():
                delta = choice.get("delta") or {}
                if delta.get("reasoning_content"):
                    self._reasoning(delta["reasoning_content"], out)
                if delta.get("content"):
                    self._content(delta["content"], out)
                for call in delta.get("tool_calls") or ():
                    self._tool(call, out)
                if choice.get("finish_reason"):
                    self._finish = choice["finish_reason"]
        return b"".join(out)

    def end(self) -> bytes:  # pragma: no cover - interface
        raise NotImplementedError

    def _preamble(self, first: dict[str, Any], out: list[bytes]) -> None:  # pragma: no cover
        raise NotImplementedError

    def _reasoning(self, text: str, out: list[bytes]) -> None:  # pragma: no cover
        raise NotImplementedError

    def _content(self, text: str, out: list[bytes]) -> None:  # pragma: no cover
        raise NotImplementedError

    def _tool(self, call: dict[str, Any], out: list[bytes]) -> None:  # pragma: no cover
        raise NotImplementedError
