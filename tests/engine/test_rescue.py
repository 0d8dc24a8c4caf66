"""The mid-stream rescue rules (SPEC §16) as tables."""

from __future__ import annotations

import pytest

from routing.engine.failures import FailureCode
from routing.engine.rescue import (
    Match,
    Partial,
    Reproduction,
    RescueMode,
    Resume,
    may_rescue,
    rejects_prefill,
    rescue_mode,
)

F = FailureCode


@pytest.mark.parametrize(
    ("resume", "code", "text", "tool_began", "in_reasoning", "allowed"),
    [
        (Resume.CONTINUATION, F.TRANSPORT, "partial", False, False, True),  # a cut
        (Resume.CONTINUATION, F.TIMEOUT, "partial", False, False, True),  # a stall
        (Resume.OFF, F.TRANSPORT, "partial", False, False, False),  # opt-in only
        (Resume.CONTINUATION, F.TRANSPORT, "partial", True, False, False),  # a tool call began
        (Resume.CONTINUATION, F.TRANSPORT, "", False, False, False),  # no text to continue
        (Resume.CONTINUATION, F.TRANSPORT, "", False, True, False),  # inside reasoning, no text
        (Resume.CONTINUATION, F.TRANSPORT, "partial", False, True, False),  # reasoning after text
        (Resume.CONTINUATION, F.SERVER, "partial", False, False, False),  # an error event
        (Resume.CONTINUATION, F.CONTENT_FILTER, "partial", False, False, False),
    ],
)
def test_may_rescue(
    resume: Resume,
    code: FailureCode,
    text: str,
    tool_began: bool,
    in_reasoning: bool,
    allowed: bool,
) -> None:
    verdict = may_rescue(resume, code, text=text, tool_began=tool_began, in_reasoning=in_reasoning)
    assert verdict is allowed


def delta(**fields: object) -> dict[str, object]:
    return {"choices": [{"index": 0, "delta": fields}]}


@pytest.mark.parametrize(
    ("deltas", "text", "tool_began", "in_reasoning"),
    [
        ([delta(content="Hel"), delta(content="lo")], "Hello", False, False),
        ([delta(reasoning_content="hmm")], "", False, True),  # cut inside reasoning
        ([delta(reasoning_content="hmm"), delta(content="Hi")], "Hi", False, False),
        ([delta(content="Hi"), delta(reasoning="hmm")], "Hi", False, True),  # reasoning again
        ([delta(content="Hi"), delta(tool_calls=[{"index": 0}])], "Hi", True, False),
        ([{"choices": [], "usage": {"total_tokens": 3}}], "", False, False),  # usage only
    ],
)
def test_partial(
    deltas: list[dict[str, object]], text: str, tool_began: bool, in_reasoning: bool
) -> None:
    partial = Partial()
    for chunk in deltas:
        partial.feed(chunk)
    assert (partial.text, partial.tool_began, partial.in_reasoning) == (
        text,
        tool_began,
        in_reasoning,
    )


C, RS = Resume.CONTINUATION, Resume.RESTART


@pytest.mark.parametrize(
    ("resume", "prefill", "trailing", "learned", "mode"),
    [
        (C, True, False, False, RescueMode.PREFILL),  # a chat target that declares it
        (C, None, True, False, RescueMode.PREFILL),  # Anthropic, undeclared: tried
        (C, None, False, False, None),  # chat, undeclared: passed over, never restarted
        (C, False, True, False, None),  # declared false
        (C, True, False, True, None),  # a 400 taught us otherwise
        (C, None, True, True, None),
        (RS, True, False, False, RescueMode.PREFILL),  # a prefill first, even when opted in
        (RS, None, False, False, RescueMode.RESTART),  # restart only when opted in
        (RS, True, False, True, RescueMode.RESTART),
    ],
)
def test_rescue_mode(
    resume: Resume, prefill: bool | None, trailing: bool, learned: bool, mode: RescueMode | None
) -> None:
    assert (
        rescue_mode(
            resume, prefill=prefill, trailing_assistant=trailing, learned_no_prefill=learned
        )
        is mode
    )


def test_restart_is_a_resume_too_and_keeps_the_tool_call_rule() -> None:
    assert may_rescue(RS, F.TRANSPORT, text="partial", tool_began=False)
    assert not may_rescue(RS, F.TRANSPORT, text="partial", tool_began=True)


def test_a_400_rejects_prefill() -> None:
    assert rejects_prefill(F.BAD_REQUEST, 400)
    assert not rejects_prefill(F.SERVER, 500)


@pytest.mark.parametrize(
    ("pieces", "verdicts"),
    [
        # reproduced piece by piece, then the surplus of the piece that passes the mark
        (
            ["", "Hel", "lo wo", "rld and more", " tail"],
            [
                (Match.HOLDING, ""),
                (Match.HOLDING, ""),
                (Match.HOLDING, ""),
                (Match.PASSED, " and more"),
                (Match.PASSED, " tail"),
            ],
        ),
        # exactly at the mark: nothing new yet, everything after is
        (["Hello world", "!"], [(Match.PASSED, ""), (Match.PASSED, "!")]),
        # a different answer is never spliced
        (["Hello", " there"], [(Match.HOLDING, ""), (Match.DIVERGED, "")]),
        (["Help"], [(Match.DIVERGED, "")]),
    ],
)
def test_reproduction(pieces: list[str], verdicts: list[tuple[Match, str]]) -> None:
    reproduction = Reproduction("Hello world")
    assert [reproduction.feed(piece) for piece in pieces] == verdicts
