"""The reasoning-effort policy (SPEC §13) in the Messages and Responses doors' own fields:
``reasoning.effort`` (Responses), ``thinking.budget_tokens`` and ``output_config.effort``
(Anthropic Messages). Pure functions; the end-to-end tests are in
``tests/api/test_front_door_effort.py``."""

from __future__ import annotations

from typing import Any

import pytest

from routing.continuity.effort import (
    EffortPolicy,
    apply_effort,
    apply_messages_effort,
    apply_responses_effort,
)
from routing.protocols import messages as messages_protocol

INHERIT, MAX, DROP = EffortPolicy.INHERIT, EffortPolicy.MAX, EffortPolicy.DROP
USER = [{"role": "user", "content": "hi"}]


# --------------------------------------------------------------------------- Responses
@pytest.mark.parametrize(
    ("policy", "efforts", "reasoning", "expected", "rewrites"),
    [
        (INHERIT, None, {"effort": "high"}, {"effort": "high"}, []),
        (INHERIT, ("low", "medium"), {"effort": "medium"}, {"effort": "medium"}, []),
        (
            INHERIT,
            ("low", "medium"),
            {"effort": "high", "summary": "auto"},
            {"summary": "auto"},
            ["effort:high->dropped(unsupported)"],
        ),
        (INHERIT, ("low",), {"effort": "high"}, None, ["effort:high->dropped(unsupported)"]),
        (DROP, None, {"effort": "low"}, None, ["effort:low->dropped"]),
        (
            DROP,
            None,
            {"effort": "low", "summary": "auto"},
            {"summary": "auto"},
            ["effort:low->dropped"],
        ),
        (DROP, None, {"summary": "auto"}, {"summary": "auto"}, []),
        (DROP, None, None, None, []),
        (
            MAX,
            ("low", "xhigh", "medium"),
            {"effort": "low"},
            {"effort": "xhigh"},
            ["effort:low->xhigh"],
        ),
        (MAX, ("low", "high"), None, {"effort": "high"}, ["effort:-->high"]),
        (
            MAX,
            ("low", "high"),
            {"summary": "detailed"},
            {"summary": "detailed", "effort": "high"},
            ["effort:-->high"],
        ),
        (MAX, ("low", "high"), {"effort": "high"}, {"effort": "high"}, []),
    ],
)
def test_responses_reasoning_effort_follows_the_chat_rules(
    policy: EffortPolicy,
    efforts: tuple[str, ...] | None,
    reasoning: dict[str, Any] | None,
    expected: dict[str, Any] | None,
    rewrites: list[str],
) -> None:
    body: dict[str, Any] = {"model": "m", "input": "hi"}
    if reasoning is not None:
        body["reasoning"] = reasoning
    before = {k: (dict(v) if isinstance(v, dict) else v) for k, v in body.items()}
    out, notes = apply_responses_effort(body, policy, efforts or ())
    assert out.get("reasoning") == expected
    assert {k: v for k, v in out.items() if k != "reasoning"} == {"model": "m", "input": "hi"}
    assert notes == rewrites
    assert body == before  # the client's body is never changed in place


def test_responses_and_chat_rules_agree() -> None:
    """The same policy gives the same effort and the same note at both doors."""
    for policy, efforts, value in [
        (INHERIT, ("low",), "high"),
        (MAX, ("low", "medium"), "low"),
        (DROP, (), "medium"),
        (MAX, ("minimal", "high"), None),
    ]:
        chat = {"model": "m"} | ({"reasoning_effort": value} if value else {})
        responses = {"model": "m"} | ({"reasoning": {"effort": value}} if value else {})
        chat_out, chat_notes = apply_effort(chat, policy, efforts)
        resp_out, resp_notes = apply_responses_effort(responses, policy, efforts)
        assert chat_notes == resp_notes
        assert chat_out.get("reasoning_effort") == (resp_out.get("reasoning") or {}).get("effort")


# --------------------------------------------------------------------------- Messages
def _messages(**fields: Any) -> dict[str, Any]:
    return {"model": "m", "max_tokens": 4096, "messages": USER, **fields}


def test_drop_removes_thinking_and_the_effort_level() -> None:
    body = _messages(
        thinking={"type": "enabled", "budget_tokens": 2048},
        output_config={"effort": "medium", "format": {"type": "json_schema", "schema": {}}},
    )
    out, notes = apply_messages_effort(body, DROP, ())
    assert "thinking" not in out
    assert out["output_config"] == {"format": {"type": "json_schema", "schema": {}}}
    assert notes == ["effort:low(budget 2048)->dropped", "effort:medium->dropped"]
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}  # not in place


def test_drop_removes_adaptive_thinking_keeps_disabled_and_leaves_a_plain_request() -> None:
    out, notes = apply_messages_effort(_messages(thinking={"type": "adaptive"}), DROP, ())
    assert "thinking" not in out and notes == ["effort:adaptive->dropped"]
    disabled = _messages(thinking={"type": "disabled"})
    assert apply_messages_effort(disabled, DROP, ()) == (disabled, [])
    plain = _messages(output_config={"effort": "low"})
    out, notes = apply_messages_effort(plain, DROP, ())
    assert "output_config" not in out and notes == ["effort:low->dropped"]
    assert apply_messages_effort(_messages(), DROP, ()) == (_messages(), [])


def test_max_sets_the_thinking_budget_of_the_top_effort_and_makes_room_for_it() -> None:
    body = _messages(thinking={"type": "enabled", "budget_tokens": 2048, "display": "omitted"})
    out, notes = apply_messages_effort(body, MAX, ("low", "medium", "high"))
    assert out["thinking"] == {"type": "enabled", "budget_tokens": 16384, "display": "omitted"}
    assert out["max_tokens"] == 16384 + 4096 > out["thinking"]["budget_tokens"]
    assert notes == [
        "effort:low(budget 2048)->high(budget 16384)",
        "max_tokens raised to 20480 above the thinking budget",
    ]
    same = _messages(max_tokens=40000, thinking={"type": "enabled", "budget_tokens": 16384})
    assert apply_messages_effort(same, MAX, ("high",)) == (same, [])


def test_max_turns_thinking_on_for_a_request_without_it_like_a_translated_one() -> None:
    body = _messages(temperature=0.2, top_k=5, max_tokens=100000)
    out, notes = apply_messages_effort(body, MAX, ("low", "medium"))
    assert out["thinking"] == {"type": "enabled", "budget_tokens": 8192}
    assert "temperature" not in out and "top_k" not in out
    assert out["max_tokens"] == 100000
    assert notes == [
        "effort:-->medium(budget 8192)",
        "dropped temperature (not allowed with thinking)",
        "dropped top_k (not allowed with thinking)",
    ]
    # the same budget a chat request translated for an Anthropic target gets
    translated, _ = messages_protocol.from_canonical(
        {"model": "m", "messages": USER, "reasoning_effort": "medium"}, "m"
    )
    assert translated["thinking"] == out["thinking"]


def test_max_does_not_turn_thinking_on_when_a_tool_is_forced() -> None:
    body = _messages(tool_choice={"type": "tool", "name": "get_weather"}, temperature=0.5)
    out, notes = apply_messages_effort(body, MAX, ("high",))
    assert out == body
    assert notes == ["effort:-->unchanged(tool_choice forces a tool)"]


def test_max_raises_the_effort_level_and_keeps_adaptive_thinking_adaptive() -> None:
    level = _messages(output_config={"effort": "low"})
    out, notes = apply_messages_effort(level, MAX, ("low", "xhigh"))
    assert out["output_config"] == {"effort": "xhigh"} and "thinking" not in out
    assert notes == ["effort:low->xhigh"]
    adaptive = _messages(thinking={"type": "adaptive"})
    out, notes = apply_messages_effort(adaptive, MAX, ("medium", "high"))
    assert out["thinking"] == {"type": "adaptive"} and out["output_config"] == {"effort": "high"}
    assert notes == ["effort:adaptive->high"]
    both = _messages(
        thinking={"type": "enabled", "budget_tokens": 9000}, output_config={"effort": "medium"}
    )
    out, notes = apply_messages_effort(both, MAX, ("medium", "high"))
    assert out["output_config"] == {"effort": "high"}
    assert out["thinking"]["budget_tokens"] == 16384
    assert notes[:2] == ["effort:medium->high", "effort:medium(budget 9000)->high(budget 16384)"]


@pytest.mark.parametrize(
    ("budget", "level", "efforts", "kept"),
    [
        (2048, "low", ("low",), True),
        (4096, "low", ("low", "high"), True),
        (8192, "medium", ("low", "high"), False),
        (20000, "high", ("medium", "high"), True),
        (20000, "high", ("low", "medium"), False),
    ],
)
def test_inherit_drops_a_budget_whose_effort_the_target_does_not_accept(
    budget: int, level: str, efforts: tuple[str, ...], kept: bool
) -> None:
    body = _messages(max_tokens=30000, thinking={"type": "enabled", "budget_tokens": budget})
    out, notes = apply_messages_effort(body, INHERIT, efforts)
    assert ("thinking" in out) is kept
    assert notes == ([] if kept else [f"effort:{level}(budget {budget})->dropped(unsupported)"])
    assert apply_messages_effort(body, INHERIT, ()) == (body, [])  # no list: passed on


def test_inherit_drops_an_unsupported_effort_level() -> None:
    body = _messages(output_config={"effort": "max"})
    out, notes = apply_messages_effort(body, INHERIT, ("low", "high"))
    assert "output_config" not in out and notes == ["effort:max->dropped(unsupported)"]
    ok = _messages(output_config={"effort": "high"})
    assert apply_messages_effort(ok, INHERIT, ("low", "high")) == (ok, [])


def test_a_messages_effort_level_reaches_a_translated_target_as_reasoning_effort() -> None:
    chat, notes = messages_protocol.to_canonical(
        _messages(
            thinking={"type": "enabled", "budget_tokens": 2048}, output_config={"effort": "high"}
        )
    )
    assert chat["reasoning_effort"] == "high" and notes == []
    chat, notes = messages_protocol.to_canonical(_messages(output_config={"effort": "max"}))
    assert chat["reasoning_effort"] == "xhigh" and notes == ["effort:max->xhigh"]
