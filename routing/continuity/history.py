"""The protocol-neutral view of a request's history that rewriting works on.

A front door's protocol (Chat Completions today; Anthropic Messages and OpenAI Responses
later) implements :class:`HistoryView` over its own request body. The rewriter only asks
these questions and gives these orders, so one set of rules (SPEC §13) serves every door:

- which turns are assistant turns, and a stable *fingerprint* of each (what provenance is
  keyed by: the same turn sent back by the client has the same fingerprint);
- does a turn carry reasoning / tool calls; strip a turn's reasoning, keeping every
  parallel structure aligned, and report whether the turn is left empty;
- drop a turn; the texts of the user turns after a position (covering notices);
- does the request end with a tool result; append a user notice;
- the rewritten body (the original object when nothing changed).

A view never mutates the body it was given: changed messages are copies, untouched ones
are the very same objects (so they serialize byte for byte as they came in).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from enum import Enum
from typing import Any, Protocol


class Stripped(Enum):
    """What stripping a turn's reasoning did."""

    NOTHING = "nothing"  # the turn had no reasoning
    STRIPPED = "stripped"  # reasoning removed, content left
    EMPTIED = "emptied"  # reasoning was all the turn had: drop it
    ENVELOPE_DROPPED = "envelope-dropped"  # a parallel structure did not line up: dropped whole


class UnknownShape(ValueError):
    """The history has a shape the view cannot rewrite safely: send it untouched."""


class HistoryView(Protocol):
    def assistant_turns(self) -> Sequence[int]:
        """Positions of the assistant turns, in order."""

    def fingerprint(self, turn: int) -> str | None:
        """Provenance key of an assistant turn; None when it carries nothing to identify."""

    def has_reasoning(self, turn: int) -> bool: ...

    def has_tool_calls(self, turn: int) -> bool: ...

    def strip_reasoning(self, turn: int) -> Stripped:
        """Remove the turn's reasoning from the outbound copy, parallel structures in step."""

    def drop(self, turn: int) -> None:
        """Leave the turn out of the outbound copy."""

    def user_texts_after(self, turn: int) -> Iterator[str]:
        """Texts of the user turns after position ``turn`` (-1: the whole history)."""

    def ends_with_tool_result(self) -> bool: ...

    def append_user_notice(self, text: str) -> None: ...

    def body(self) -> dict[str, Any]:
        """The outbound body: the original object when nothing was changed."""
