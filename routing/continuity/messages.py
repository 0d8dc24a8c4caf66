"""The Anthropic Messages implementation of :class:`~routing.continuity.history.HistoryView`.

Used where a Messages-door request goes to an ``anthropic`` target as a pass-through (the
other legs rewrite the canonical chat view with ``ChatHistory``). Reasoning lives in
``thinking`` and ``redacted_thinking`` content blocks; stripping removes both (a signature
belongs to its block, so nothing parallel is left behind). Fingerprints match the ones a
served turn gets from its canonical chunks: the text blocks joined, the ``tool_use`` ids,
the thinking text when there is neither.

A notice is appended as a user message; the Messages API combines consecutive user turns.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from routing.continuity.history import Stripped, UnknownShape
from routing.continuity.provenance import fingerprint_of

THINKING_BLOCKS = frozenset({"thinking", "redacted_thinking"})
_DROPPED: dict[str, Any] = {}


def _check(messages: Any) -> list[dict[str, Any]]:
    if type(messages) is not list:
        raise UnknownShape("messages is not a list")
    for message in messages:
        if type(message) is not dict or type(message.get("role")) is not str:
            raise UnknownShape("a message is not an object with a role")
        content = message.get("content")
        if type(content) is str:
            continue
        if type(content) is not list:
            raise UnknownShape("a content is neither text nor blocks")
        for block in content:
            if type(block) is not dict or type(block.get("type")) is not str:
                raise UnknownShape("a content block has no type")
    return messages


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    return content if isinstance(content, list) else []


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "".join(str(b.get("text", "")) for b in _blocks(message) if b["type"] == "text")


class MessagesHistory:
    """A copy-on-write view of a Messages body's ``messages``."""

    def __init__(self, body: dict[str, Any], *, checked: bool = False) -> None:
        self._body = body
        self._messages = body["messages"] if checked else _check(body.get("messages"))
        self._out: list[dict[str, Any]] | None = None
        self._appended: list[dict[str, Any]] = []

    def _current(self, turn: int) -> dict[str, Any]:
        return self._out[turn] if self._out is not None else self._messages[turn]

    def assistant_turns(self) -> Sequence[int]:
        return [i for i, m in enumerate(self._messages) if m["role"] == "assistant"]

    def fingerprint(self, turn: int) -> str | None:
        message = self._messages[turn]
        blocks = _blocks(message)
        ids = [str(b.get("id")) for b in blocks if b["type"] == "tool_use" and b.get("id")]
        reasoning = "".join(str(b.get("thinking", "")) for b in blocks if b["type"] == "thinking")
        return fingerprint_of(_text(message), ids, reasoning)

    def has_reasoning(self, turn: int) -> bool:
        return any(b["type"] in THINKING_BLOCKS for b in _blocks(self._current(turn)))

    def has_tool_calls(self, turn: int) -> bool:
        return any(b["type"] == "tool_use" for b in _blocks(self._current(turn)))

    def user_texts_after(self, turn: int) -> Iterator[str]:
        for message in self._messages[turn + 1 :]:
            if message["role"] == "user":
                yield _text(message)
        for message in self._appended:
            yield _text(message)

    def ends_with_tool_result(self) -> bool:
        if self._appended:
            return False
        out = self._out if self._out is not None else self._messages
        kept = [m for m in out if m is not _DROPPED]
        if not kept or kept[-1]["role"] != "user":
            return False
        blocks = _blocks(kept[-1])
        return bool(blocks) and blocks[-1]["type"] == "tool_result"

    def _write(self, turn: int, message: dict[str, Any]) -> None:
        if self._out is None:
            self._out = list(self._messages)
        self._out[turn] = message

    def strip_reasoning(self, turn: int) -> Stripped:
        message = self._current(turn)
        if message is _DROPPED or not self.has_reasoning(turn):
            return Stripped.NOTHING
        kept = [b for b in _blocks(message) if b["type"] not in THINKING_BLOCKS]
        self._write(turn, {**message, "content": kept})
        return Stripped.STRIPPED if kept else Stripped.EMPTIED

    def drop(self, turn: int) -> None:
        self._write(turn, _DROPPED)

    def append_user_notice(self, text: str) -> None:
        self._appended.append({"role": "user", "content": [{"type": "text", "text": text}]})

    def body(self) -> dict[str, Any]:
        if self._out is None and not self._appended:
            return self._body
        out = self._out if self._out is not None else self._messages
        return {**self._body, "messages": [m for m in out if m is not _DROPPED] + self._appended}
