"""The Chat Completions implementation of :class:`~routing.continuity.history.HistoryView`.

Reasoning on an assistant message lives in several places at once, depending on the
upstream that produced it: string channels (``reasoning_content`` — DeepSeek, vLLM;
``reasoning`` — OpenRouter, Ollama), structured envelopes that run parallel to them
(``reasoning_details`` — OpenRouter; ``thinking_blocks`` — LiteLLM's Anthropic shape,
each block carrying a signature), and thinking parts inside a ``content`` list. They are
stripped together: removing one and leaving its parallel structure lets the next upstream
rebuild the reasoning from what is left (seed 003: "strip one side = the defect returns").
An envelope that is not a list of objects does not line up with anything and is dropped
whole — never handed on half-stripped.

Unknown shapes (messages that are not objects, a ``content`` that is neither a string, a
list of parts nor null) raise :class:`UnknownShape` at construction: the caller sends the
history untouched and counts it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from routing.continuity.history import Stripped, UnknownShape
from routing.continuity.provenance import fingerprint_of

REASONING_CHANNELS = ("reasoning_content", "reasoning")
REASONING_ENVELOPES = ("reasoning_details", "thinking_blocks")
THINKING_PARTS = frozenset({"thinking", "redacted_thinking", "reasoning"})
TOOL_ROLES = frozenset({"tool", "function"})
_REASONING_KEYS = frozenset((*REASONING_CHANNELS, *REASONING_ENVELOPES))
_DROPPED: dict[str, Any] = {}  # placeholder for a turn left out of the outbound copy


def _signed(call: Any) -> bool:
    """A tool call carrying a Gemini thought signature (``extra_content.google``: where the
    Gemini codec and Google's OpenAI-compatible API put it) — reasoning of its producer."""
    extra = call.get("extra_content") if isinstance(call, dict) else None
    google = extra.get("google") if isinstance(extra, dict) else None
    return isinstance(google, dict) and "thought_signature" in google


def _unsigned(call: dict[str, Any]) -> dict[str, Any]:
    """A copy of a signed tool call without its signature (other Google fields kept)."""
    extra = dict(call["extra_content"])
    google = {k: v for k, v in extra["google"].items() if k != "thought_signature"}
    if google:
        extra["google"] = google
    else:
        del extra["google"]
    out = {k: v for k, v in call.items() if k != "extra_content"}
    if extra:
        out["extra_content"] = extra
    return out


def _lines_up(envelope: Any) -> bool:
    """An envelope runs parallel to the reasoning only as a list of objects."""
    return type(envelope) is list and all(type(item) is dict for item in envelope)


def content_text(content: Any) -> str:
    """The visible text of a message's ``content`` (a string or a list of parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part["text"]
            for part in content
            if isinstance(part, dict)
            and part.get("type") == "text"
            and isinstance(part.get("text"), str)
        )
    return ""


def tool_call_ids(message: dict[str, Any]) -> list[str]:
    calls = message.get("tool_calls")
    if not isinstance(calls, list):
        return []
    return [c["id"] for c in calls if isinstance(c, dict) and isinstance(c.get("id"), str)]


def reasoning_text(message: dict[str, Any]) -> str:
    return "".join(v for name in REASONING_CHANNELS if isinstance(v := message.get(name), str))


def message_fingerprint(message: dict[str, Any]) -> str | None:
    """The fingerprint of an assistant message (a history turn or a served completion)."""
    content = message.get("content")
    text = content if type(content) is str else content_text(content)
    ids = tool_call_ids(message) if "tool_calls" in message else []
    return fingerprint_of(text, ids, "" if text or ids else reasoning_text(message))


def _check(messages: Any) -> list[int]:
    """Refuse unknown shapes; return the positions of the assistant turns (one pass)."""
    if type(messages) is not list:
        raise UnknownShape("messages is not a list")
    turns: list[int] = []
    for index, message in enumerate(messages):
        if type(message) is not dict or type(role := message.get("role")) is not str:
            raise UnknownShape("a message is not an object with a role")
        if role != "assistant":
            continue
        turns.append(index)
        content = message.get("content")
        if content is None or type(content) is str:
            continue
        if type(content) is not list:
            raise UnknownShape("an assistant content is neither text, parts nor null")
        for part in content:
            if type(part) is not dict or type(part.get("type")) is not str:
                raise UnknownShape("an assistant content part has no type")
    return turns


class ChatHistory:
    """A copy-on-write view of a Chat Completions body's ``messages``."""

    def __init__(self, body: dict[str, Any], *, checked: bool = False) -> None:
        """``checked``: the caller already built a view of this very body (shape known)."""
        self._body = body
        self._turns: list[int] | None = None if checked else _check(body.get("messages"))
        self._messages: list[dict[str, Any]] = body["messages"]
        self._out: list[dict[str, Any]] | None = None  # None until something changes
        self._appended: list[dict[str, Any]] = []

    # -- reading ---------------------------------------------------------------------
    def _current(self, turn: int) -> dict[str, Any]:
        return self._out[turn] if self._out is not None else self._messages[turn]

    def assistant_turns(self) -> Sequence[int]:
        if self._turns is None:
            self._turns = [i for i, m in enumerate(self._messages) if m["role"] == "assistant"]
        return self._turns

    def fingerprint(self, turn: int) -> str | None:
        return message_fingerprint(self._messages[turn])

    def has_reasoning(self, turn: int) -> bool:
        message = self._current(turn)
        for name in _REASONING_KEYS:
            if message.get(name):
                return True
        content = message.get("content")
        if type(content) is list and any(p["type"] in THINKING_PARTS for p in content):
            return True
        calls = message.get("tool_calls")
        return type(calls) is list and any(_signed(call) for call in calls)

    def has_tool_calls(self, turn: int) -> bool:
        message = self._current(turn)
        return bool(message.get("tool_calls") or message.get("function_call"))

    def user_texts_after(self, turn: int) -> Iterator[str]:
        for message in self._messages[turn + 1 :]:
            if message["role"] == "user":
                yield content_text(message.get("content"))
        for message in self._appended:
            yield content_text(message.get("content"))

    def ends_with_tool_result(self) -> bool:
        if self._appended:
            return False  # every appended turn is a user turn
        out = self._out if self._out is not None else self._messages
        kept = [m for m in out if m is not _DROPPED]
        return bool(kept) and kept[-1]["role"] in TOOL_ROLES

    # -- changing --------------------------------------------------------------------
    def _write(self, turn: int, message: dict[str, Any]) -> None:
        if self._out is None:
            self._out = list(self._messages)
        self._out[turn] = message

    def strip_reasoning(self, turn: int) -> Stripped:
        message = self._out[turn] if self._out is not None else self._messages[turn]
        if message is _DROPPED:
            return Stripped.NOTHING
        misaligned = removed = False
        stripped: dict[str, Any] = {}
        for key, value in message.items():
            if key in _REASONING_KEYS:
                removed = removed or bool(value)
                if key in REASONING_ENVELOPES and not _lines_up(value):
                    misaligned = True
                continue
            stripped[key] = value
        content = stripped.get("content")
        if type(content) is list:
            kept = [p for p in content if p["type"] not in THINKING_PARTS]
            if len(kept) != len(content):
                removed = True
                stripped["content"] = kept if kept else None
        calls = stripped.get("tool_calls")
        if type(calls) is list and any(_signed(call) for call in calls):
            removed = True  # a thought signature is only valid where it was made
            stripped["tool_calls"] = [_unsigned(c) if _signed(c) else c for c in calls]
        if not removed and not misaligned:
            return Stripped.NOTHING
        if self._out is None:
            self._out = list(self._messages)
        self._out[turn] = stripped
        if not ((type(content) is str and content) or self._has_substance(stripped)):
            return Stripped.EMPTIED
        return Stripped.ENVELOPE_DROPPED if misaligned else Stripped.STRIPPED

    @staticmethod
    def _has_substance(message: dict[str, Any]) -> bool:
        content = message.get("content")
        if content:  # non-empty text, or a list with parts left
            return True
        return bool(
            message.get("tool_calls") or message.get("function_call") or message.get("refusal")
        )

    def drop(self, turn: int) -> None:
        self._write(turn, _DROPPED)

    def append_user_notice(self, text: str) -> None:
        self._appended.append({"role": "user", "content": text})

    def body(self) -> dict[str, Any]:
        if self._out is None and not self._appended:
            return self._body
        out = self._out if self._out is not None else self._messages
        messages = [m for m in out if m is not _DROPPED] + self._appended
        return {**self._body, "messages": messages}
