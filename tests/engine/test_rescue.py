"""The mid-stream rescue rules (SPEC §16) as tables."""

from __future__ import annotations

import pytest

from routing.engine.failures import FailureCode
from routing.engine.rescue import (
    Match,
    Reproduction,
    RescueMode,
    Resume,
    may_rescue,
    rejects_prefill,
    rescue_mode,
)

F = FailureCode


@pytest.mark.parametrize(
    ("resume", "code", "text", "tool_began", "allowed"),
    [
        (Resume.CONTINUATION, F.TRANSPORT, "partial", False, True),  # a cut
        (Resume.CONTINUATION, F.TIMEOUT, "partial", False, True),  # a stall
        (Resume.OFF, F.TRANSPORT, "partial", False, False),  # opt-in only
        (Resume.CONTINUATION, F.TRANSPORT, "partial", True, False),  # a tool call began
        (Resume.CONTINUATION, F.TRANSPORT, "", False, False),  # no text to continue
        (Resume.CONTINUATION, F.SERVER, "partial", False, False),  # an error event
        (Resume.CONTINUATION, F.CONTENT_FILTER, "partial", False, False),
    ],
)
def test_may_rescue(
    resume: Resume, code: FailureCode, text: str, tool_began: bool, allowed: bool
) -> None:
    assert may_rescue(resume, code, text=text, tool_began=tool_began) is allowed


@pytest.mark.parametrize(
    ("prefill", "learned", "mode"),
    [
        (True, False, RescueMode.PREFILL),
        (True, True, RescueMode.RESTART),  # a 400 taught us otherwise
        (False, False, RescueMode.RESTART),
    ],
)
def test_rescue_mode(prefill: bool, learned: bool, mode: RescueMode) -> None:
    assert rescue_mode(prefill=prefill, learned_no_prefill=learned) is mode


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
