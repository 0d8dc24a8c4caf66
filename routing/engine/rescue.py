"""Mid-stream rescue (SPEC §16): what to do when a committed stream breaks.

After the commit point a failure is normally surfaced as the door's error event. A group
with ``resume: continuation`` (or ``restart``) may instead continue the answer on the next
eligible target, when the stream was cut or stalled (``TRANSPORT``, ``TIMEOUT``) while the
assistant was producing text, and never once a tool call has begun (half a tool call
cannot be continued safely). A cut inside reasoning is not a cut in the text: with no
text yet there is nothing to continue, and after text the client holds a reasoning
fragment no other target can finish (see :func:`may_rescue`). Two ways, decided here and
carried out by the driver:

- PREFILL: the target takes an assistant prefill (an Anthropic Messages target, which
  takes a trailing assistant turn natively, or any target declaring
  ``capabilities.prefill: true``; not one declaring ``false`` or since learned otherwise):
  the original request plus the partial text as a final assistant message; whatever it
  streams is the remainder. This is what works with real models, a different model too.
- RESTART, only under ``resume: restart`` (opt-in: fit only for deterministic upstreams):
  the original request again; nothing reaches the client until the restart's text has
  reproduced, byte for byte, what the client already has (:class:`Reproduction`), then
  only the surplus flows. A restart that diverges ends in the error event: two different
  answers are never spliced. Under ``continuation`` a target that takes no prefill is
  passed over, so with none left the stream ends in the error event at once, without
  paying for a second answer that a real model would almost never reproduce.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from .failures import FailureCode


class Resume(StrEnum):
    OFF = "off"
    CONTINUATION = "continuation"  # by prefill only
    RESTART = "restart"  # by prefill, else restart-and-compare (deterministic upstreams)


class RescueMode(StrEnum):
    PREFILL = "prefill"
    RESTART = "restart"


RESCUABLE = frozenset({FailureCode.TRANSPORT, FailureCode.TIMEOUT})  # a cut, a stall


def may_rescue(
    resume: Resume, code: FailureCode, *, text: str, tool_began: bool, in_reasoning: bool = False
) -> bool:
    """Whether a committed stream that failed with ``code`` may be continued elsewhere.

    Only a cut in the answer's text (``in_reasoning``: the last thing the client got was
    reasoning). A cut inside reasoning is not rescued, before any text or after it: the
    client already holds that reasoning (a Responses ``reasoning`` item, an Anthropic
    ``thinking`` block: signed or encrypted by the target that wrote it, and cut before its
    signature), which no other target can continue or reproduce, and which the client
    sends back next turn; answering after it on another target would pair one model's
    thoughts with another's answer. The door's error event ends the stream, and with no
    text delivered yet the client's own retry loses nothing of the answer."""
    return (
        resume is not Resume.OFF
        and code in RESCUABLE
        and bool(text)
        and not tool_began
        and not in_reasoning
    )


def rescue_mode(
    resume: Resume, *, prefill: bool | None, trailing_assistant: bool, learned_no_prefill: bool
) -> RescueMode | None:
    """How a target may go on with a cut answer, or None: not at all (pass it over).

    ``prefill`` is the target's declared capability (None: not declared);
    ``trailing_assistant``: its protocol takes a trailing assistant turn natively (Anthropic
    Messages), so an undeclared one is tried; ``learned_no_prefill``: it refused one (400)."""
    takes = trailing_assistant if prefill is None else prefill
    if takes and not learned_no_prefill:
        return RescueMode.PREFILL
    return RescueMode.RESTART if resume is Resume.RESTART else None


def rejects_prefill(code: FailureCode, status: int | None) -> bool:
    """A prefill request answered 400: the target does not take prefills (learned; the
    request, not the target, was at fault, so its health is not charged)."""
    return code is FailureCode.BAD_REQUEST or status == 400


class Match(StrEnum):
    HOLDING = "holding"  # still reproducing what the client has: send nothing yet
    PASSED = "passed"  # reproduced: ``surplus`` (and everything after it) is new
    DIVERGED = "diverged"  # a different answer: surface the error


@dataclass(slots=True)
class Reproduction:
    """Checks a restart's text against what the client already has, piece by piece."""

    sent: str
    seen: int = 0  # characters of ``sent`` reproduced so far

    def feed(self, text: str) -> tuple[Match, str]:
        """One more piece of the restart's text: the verdict, and the new text beyond
        what the client has (only with PASSED)."""
        if self.seen >= len(self.sent):
            return Match.PASSED, text
        want = self.sent[self.seen : self.seen + len(text)]  # at most len(text) long
        if not text.startswith(want):
            return Match.DIVERGED, ""
        self.seen += len(want)
        if self.seen < len(self.sent):
            return Match.HOLDING, ""
        return Match.PASSED, text[len(want) :]


class Partial:
    """What a committed stream has given the client so far (choice 0 of canonical chat
    chunks): the text, whether a tool call began, and whether the last thing given was
    reasoning. Kept only for groups that resume."""

    __slots__ = ("in_reasoning", "pieces", "tool_began")

    def __init__(self) -> None:
        self.pieces: list[str] = []
        self.tool_began = False
        self.in_reasoning = False

    def feed(self, chunk: dict[str, object]) -> None:
        choices = chunk.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            return
        delta = choices[0].get("delta")
        if not isinstance(delta, dict):
            return
        if delta.get("tool_calls") or delta.get("function_call"):
            self.tool_began = True
        if delta.get("reasoning_content") or delta.get("reasoning"):
            self.in_reasoning = True
        content = delta.get("content")
        if isinstance(content, str) and content:
            self.pieces.append(content)
            self.in_reasoning = False

    @property
    def text(self) -> str:
        return "".join(self.pieces)
