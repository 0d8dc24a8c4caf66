"""The Gemini implementation of :class:`~routing.continuity.history.HistoryView`.

Used where a Gemini-door request goes to a ``gemini`` target as a pass-through (the other
legs rewrite the canonical chat view with ``ChatHistory``). An assistant turn is a
``model`` content; its reasoning is its ``thought: true`` parts and every part's
``thoughtSignature`` (a signature is its producer's encrypted reasoning, on a text or a
``functionCall`` part alike: SPEC §20 — history from another target never carries a
foreign one). Stripping removes both; a Gemini 3 target then gets Google's placeholder on
the calls that need one (``routing.protocols.gemini.request.signed_for``). Fingerprints
match the ones a served turn gets from its canonical chunks: the text parts joined, the
``functionCall`` ids, the thought text when there is neither.

A notice is appended as a ``user`` content.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from routing.continuity.history import Stripped, UnknownShape
from routing.continuity.provenance import fingerprint_of

SIGNATURE = "thoughtSignature"
_DROPPED: dict[str, Any] = {}


def _check(contents: Any) -> list[dict[str, Any]]:
    if type(contents) is not list:
        raise UnknownShape("contents is not a list")
    for content in contents:
        if type(content) is not dict or type(content.get("parts")) is not list:
            raise UnknownShape("a content is not an object with parts")
        if type(content.get("role", "user")) is not str:
            raise UnknownShape("a content's role is not text")
        if any(type(part) is not dict for part in content["parts"]):
            raise UnknownShape("a part is not an object")
    return contents


def has_model_turns(body: dict[str, Any]) -> bool:
    """Whether ``contents`` may hold a model turn, at a glance (an odd value says yes)."""
    contents = body.get("contents")
    if type(contents) is not list:
        return True
    return any(type(c) is not dict or c.get("role") == "model" for c in contents)


def _text(content: dict[str, Any]) -> str:
    return "".join(str(p["text"]) for p in content["parts"] if "text" in p and not p.get("thought"))


def _reasoning(part: dict[str, Any]) -> bool:
    return bool(part.get("thought")) or SIGNATURE in part


class GeminiHistory:
    """A copy-on-write view of a Gemini body's ``contents``."""

    def __init__(self, body: dict[str, Any], *, checked: bool = False) -> None:
        self._body = body
        self._contents = body["contents"] if checked else _check(body.get("contents"))
        self._out: list[dict[str, Any]] | None = None
        self._appended: list[dict[str, Any]] = []

    def _current(self, turn: int) -> dict[str, Any]:
        return self._out[turn] if self._out is not None else self._contents[turn]

    def assistant_turns(self) -> Sequence[int]:
        return [i for i, c in enumerate(self._contents) if c.get("role") == "model"]

    def fingerprint(self, turn: int) -> str | None:
        content = self._contents[turn]
        parts = content["parts"]
        ids = [
            str(p["functionCall"]["id"])
            for p in parts
            if isinstance(p.get("functionCall"), dict) and p["functionCall"].get("id")
        ]
        thought = "".join(str(p.get("text", "")) for p in parts if p.get("thought"))
        return fingerprint_of(_text(content), ids, thought)

    def has_reasoning(self, turn: int) -> bool:
        content = self._current(turn)
        return content is not _DROPPED and any(_reasoning(p) for p in content["parts"])

    def has_tool_calls(self, turn: int) -> bool:
        content = self._current(turn)
        return content is not _DROPPED and any("functionCall" in p for p in content["parts"])

    def user_texts_after(self, turn: int) -> Iterator[str]:
        for content in self._contents[turn + 1 :]:
            if content.get("role", "user") == "user":
                yield _text(content)
        for content in self._appended:
            yield _text(content)

    def ends_with_tool_result(self) -> bool:
        if self._appended:
            return False
        out = self._out if self._out is not None else self._contents
        kept = [c for c in out if c is not _DROPPED]
        if not kept or kept[-1].get("role", "user") != "user":
            return False
        parts = kept[-1]["parts"]
        return bool(parts) and "functionResponse" in parts[-1]

    def _write(self, turn: int, content: dict[str, Any]) -> None:
        if self._out is None:
            self._out = list(self._contents)
        self._out[turn] = content

    def strip_reasoning(self, turn: int) -> Stripped:
        if not self.has_reasoning(turn):
            return Stripped.NOTHING
        content = self._current(turn)
        kept = [
            {k: v for k, v in p.items() if k != SIGNATURE}
            for p in content["parts"]
            if not p.get("thought")
        ]
        kept = [p for p in kept if p]  # a signature-only part is left with nothing
        self._write(turn, {**content, "parts": kept})
        return Stripped.STRIPPED if kept else Stripped.EMPTIED

    def drop(self, turn: int) -> None:
        self._write(turn, _DROPPED)

    def append_user_notice(self, text: str) -> None:
        self._appended.append({"role": "user", "parts": [{"text": text}]})

    def body(self) -> dict[str, Any]:
        if self._out is None and not self._appended:
            return self._body
        out = self._out if self._out is not None else self._contents
        kept = [c for c in out if c is not _DROPPED]
        return {**self._body, "contents": kept + self._appended}
