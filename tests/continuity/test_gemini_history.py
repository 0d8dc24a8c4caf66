"""The Gemini door's history view (``routing.continuity.gemini``) and effort rule
(``apply_gemini_effort``), and Gemini 3's placeholder signatures
(``routing.protocols.gemini.request.signed_for``): pure, no Django."""

from __future__ import annotations

from typing import Any

import pytest

from routing.continuity.chat import message_fingerprint
from routing.continuity.effort import EffortPolicy, apply_gemini_effort
from routing.continuity.gemini import GeminiHistory, has_model_turns
from routing.continuity.history import Stripped, UnknownShape
from routing.protocols.gemini.request import PLACEHOLDER_SIGNATURE, signed_for

CALL = {"functionCall": {"id": "c1", "name": "ls", "args": {}}, "thoughtSignature": "sig"}
BODY: dict[str, Any] = {
    "model": "g",
    "contents": [
        {"role": "user", "parts": [{"text": "list"}]},
        {"role": "model", "parts": [{"text": "hmm", "thought": True}, {"text": "ok"}, CALL]},
        {"role": "user", "parts": [{"functionResponse": {"id": "c1", "name": "ls"}}]},
    ],
}


def test_turns_reasoning_and_tool_calls() -> None:
    view = GeminiHistory(BODY)
    assert view.assistant_turns() == [1]
    assert view.has_reasoning(1) and view.has_tool_calls(1)
    assert view.ends_with_tool_result()
    assert list(view.user_texts_after(1)) == [""]
    assert has_model_turns(BODY) and not has_model_turns({"contents": BODY["contents"][:1]})


def test_a_turn_is_fingerprinted_as_a_served_one_is() -> None:
    served = {"role": "assistant", "content": "ok", "tool_calls": [{"id": "c1"}]}
    assert GeminiHistory(BODY).fingerprint(1) == message_fingerprint(served)


def test_stripping_removes_thoughts_and_signatures_copy_on_write() -> None:
    view = GeminiHistory(BODY)
    assert view.strip_reasoning(1) is Stripped.STRIPPED
    view.append_user_notice("[model changed]")
    out = view.body()
    assert out["contents"][1]["parts"] == [
        {"text": "ok"},
        {"functionCall": {"id": "c1", "name": "ls", "args": {}}},
    ]
    assert out["contents"][-1] == {"role": "user", "parts": [{"text": "[model changed]"}]}
    assert BODY["contents"][1]["parts"][2] is CALL  # the client's body is untouched
    assert GeminiHistory(BODY).body() is BODY


def test_a_turn_of_thoughts_only_is_emptied_and_dropped() -> None:
    body = {"contents": [{"role": "model", "parts": [{"text": "x", "thought": True}]}]}
    view = GeminiHistory(body)
    assert view.strip_reasoning(0) is Stripped.EMPTIED
    view.drop(0)
    assert view.body()["contents"] == []


def test_an_unknown_shape_is_refused() -> None:
    with pytest.raises(UnknownShape):
        GeminiHistory({"contents": [{"role": "user", "parts": "text"}]})


@pytest.mark.parametrize("model", ["gemini-3-pro", "models/gemini-3-flash"])
def test_gemini_3_gets_the_placeholder_on_a_turns_first_unsigned_call(model: str) -> None:
    two = {"functionCall": {"name": "b", "args": {}}}
    body = {
        "contents": [
            {"role": "model", "parts": [{"functionCall": {"name": "a", "args": {}}}, two]},
            {"role": "model", "parts": [CALL]},
        ]
    }
    out, notes = signed_for(body, model)
    assert notes == ["thought-signature-placeholder:1"]
    assert out["contents"][0]["parts"][0]["thoughtSignature"] == PLACEHOLDER_SIGNATURE
    assert "thoughtSignature" not in out["contents"][0]["parts"][1]
    assert out["contents"][1] is body["contents"][1]  # signed already: untouched
    assert signed_for(body, "gemini-2.5-pro") == (body, [])


@pytest.mark.parametrize(
    ("thinking", "policy", "efforts", "expected", "note"),
    [
        ({"thinkingBudget": 2048}, EffortPolicy.DROP, [], {}, "effort:low->dropped"),
        (
            {"thinking_level": "LOW", "include_thoughts": True},
            EffortPolicy.MAX,
            ["low", "high"],
            {"include_thoughts": True, "thinkingLevel": "high"},
            "effort:low->high",
        ),
        (
            {"includeThoughts": True},
            EffortPolicy.MAX,
            ["medium"],
            {"includeThoughts": True, "thinkingBudget": 8192},
            "effort:-->medium",
        ),
        (
            {"thinkingBudget": 30000},
            EffortPolicy.INHERIT,
            ["low"],
            {},
            "effort:high->dropped(unsupported)",
        ),
    ],
)
def test_the_effort_policy_in_thinking_config(
    thinking: dict[str, Any],
    policy: EffortPolicy,
    efforts: list[str],
    expected: dict[str, Any],
    note: str,
) -> None:
    body = {"contents": [], "generationConfig": {"temperature": 0, "thinkingConfig": thinking}}
    out, notes = apply_gemini_effort(body, policy, efforts)
    config = out["generationConfig"]
    assert config.get("thinkingConfig", {}) == expected and config["temperature"] == 0
    assert notes == [note]


def test_inherit_leaves_a_supported_effort_as_it_is() -> None:
    body = {"generationConfig": {"thinkingConfig": {"thinkingLevel": "high"}}}
    assert apply_gemini_effort(body, EffortPolicy.INHERIT, ["high"]) == (body, [])
