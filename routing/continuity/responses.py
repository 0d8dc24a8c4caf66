"""The OpenAI Responses implementation of :class:`~routing.continuity.history.HistoryView`.

Used where a Responses-door request goes to an ``openai-responses`` target as a
pass-through. A Responses ``input`` has no assistant *messages* as such: an assistant turn
is a run of consecutive output items (``reasoning``, an assistant ``message``,
``function_call``, ``custom_tool_call``). A turn is named by the position of its first item; stripping removes
its ``reasoning`` items (their ``encrypted_content`` belongs to them alone), dropping
removes the whole run. Fingerprints match a served turn's canonical chunks: the
``output_text`` joined, the ``call_id``s, the summary text when there is neither.

Unknown shapes (an ``input`` that is neither text nor a list of objects; an item whose
``type`` or ``role`` is not text; an assistant turn's ``content``, ``summary`` or
``call_id`` of another shape than the protocol's) raise :class:`UnknownShape` at
construction: the caller sends the input untouched and counts it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from routing.continuity.history import Stripped, UnknownShape
from routing.continuity.provenance import fingerprint_of

# A Codex turn is reasoning + a ``custom_tool_call`` (its shell) as often as a function call.
CALL_TYPES = frozenset({"function_call", "custom_tool_call"})
OUTPUT_TYPES = frozenset({"reasoning"}) | CALL_TYPES
RESULT_TYPES = frozenset({"function_call_output", "custom_tool_call_output"})


def _kind(item: dict[str, Any]) -> str:
    kind = item.get("type")
    if kind is None and "role" in item:
        return "message"
    return str(kind)


def _is_output(item: dict[str, Any]) -> bool:
    kind = _kind(item)
    return kind in OUTPUT_TYPES or (kind == "message" and item.get("role") == "assistant")


def _check(items: Any) -> list[dict[str, Any]]:
    """Refuse what the view cannot read safely; return the items."""
    if type(items) is not list:
        raise UnknownShape("input is neither text nor a list of items")
    for item in items:
        if type(item) is not dict:
            raise UnknownShape("an input item is not an object")
        for name in ("type", "role"):
            if name in item and type(item[name]) is not str:
                raise UnknownShape(f"an input item's {name} is not text")
        if _is_output(item):
            _check_output(item)
    return items


def _parts(value: Any, what: str) -> None:
    if value is None or type(value) is str:
        return
    if type(value) is not list:
        raise UnknownShape(f"{what} is neither text nor a list of parts")
    for part in value:
        if type(part) is not dict or type(part.get("text", "")) is not str:
            raise UnknownShape(f"a part of {what} is not an object with text")


def _check_output(item: dict[str, Any]) -> None:
    kind = _kind(item)
    if kind == "reasoning":
        summary = item.get("summary")
        if type(summary) is str:
            raise UnknownShape("a reasoning summary is not a list of parts")
        _parts(summary, "a reasoning summary")
    elif kind in CALL_TYPES:
        if type(item.get("call_id", "")) is not str:
            raise UnknownShape("a function call's call_id is not text")
    else:
        _parts(item.get("content"), "an assistant message's content")


def has_output_items(body: dict[str, Any]) -> bool:
    """Whether ``input`` may hold an assistant turn, at a glance (an odd value says yes:
    the view decides what it is)."""
    items = body.get("input")
    if type(items) is str:
        return False
    if type(items) is not list:
        return True
    return any(type(item) is not dict or _is_output(item) for item in items)


def _text(item: dict[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "".join(
        str(p.get("text", ""))
        for p in content
        if isinstance(p, dict) and p.get("type") in ("output_text", "input_text", "text")
    )


class ResponsesHistory:
    """A copy-on-write view of a Responses body's ``input`` items."""

    def __init__(self, body: dict[str, Any], *, checked: bool = False) -> None:
        """``checked``: the caller already built a view of this very body (shape known)."""
        self._body = body
        raw = body.get("input")
        items: list[dict[str, Any]]
        if type(raw) is str:
            items = []
        else:
            items = body["input"] if checked else _check(raw)
        self._items = items
        self._runs: dict[int, list[int]] = {}
        start: int | None = None
        for index, item in enumerate(items):
            if _is_output(item):
                if start is None:
                    start = index
                    self._runs[start] = []
                self._runs[start].append(index)
            else:
                start = None
        self._removed: set[int] = set()
        self._appended: list[dict[str, Any]] = []

    def assistant_turns(self) -> Sequence[int]:
        return list(self._runs)

    def _run(self, turn: int) -> list[dict[str, Any]]:
        return [self._items[i] for i in self._runs[turn] if i not in self._removed]

    def fingerprint(self, turn: int) -> str | None:
        items = [self._items[i] for i in self._runs[turn]]
        text = "".join(_text(i) for i in items if _kind(i) == "message")
        ids = [str(i.get("call_id")) for i in items if _kind(i) in CALL_TYPES]
        reasoning = "".join(
            str(s.get("text", ""))
            for i in items
            if _kind(i) == "reasoning"
            for s in i.get("summary") or ()
            if isinstance(s, dict)
        )
        return fingerprint_of(text, ids, reasoning)

    def has_reasoning(self, turn: int) -> bool:
        return any(_kind(i) == "reasoning" for i in self._run(turn))

    def has_tool_calls(self, turn: int) -> bool:
        return any(_kind(i) in CALL_TYPES for i in self._run(turn))

    def user_texts_after(self, turn: int) -> Iterator[str]:
        for item in self._items[turn + 1 :]:
            if _kind(item) == "message" and item.get("role") == "user":
                yield _text(item)
        for item in self._appended:
            yield _text(item)

    def ends_with_tool_result(self) -> bool:
        if self._appended:
            return False
        kept = [item for i, item in enumerate(self._items) if i not in self._removed]
        return bool(kept) and _kind(kept[-1]) in RESULT_TYPES

    def strip_reasoning(self, turn: int) -> Stripped:
        reasoning = [
            i
            for i in self._runs[turn]
            if i not in self._removed and _kind(self._items[i]) == "reasoning"
        ]
        if not reasoning:
            return Stripped.NOTHING
        self._removed.update(reasoning)
        return Stripped.STRIPPED if self._run(turn) else Stripped.EMPTIED

    def drop(self, turn: int) -> None:
        self._removed.update(self._runs[turn])

    def append_user_notice(self, text: str) -> None:
        self._appended.append({"role": "user", "content": text})

    def body(self) -> dict[str, Any]:
        if not self._removed and not self._appended:
            return self._body
        original = self._body.get("input")
        items = (
            [{"role": "user", "content": original}]
            if isinstance(original, str)
            else [item for i, item in enumerate(self._items) if i not in self._removed]
        )
        return {**self._body, "input": items + self._appended}
