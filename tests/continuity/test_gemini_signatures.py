"""A Gemini thought signature is the reasoning of the target that made it: history from
another target never carries one to a gemini target (SPEC §20)."""

from __future__ import annotations

import copy
from typing import Any

from routing.continuity.chat import ChatHistory
from routing.continuity.provenance import Producer
from routing.continuity.rewrite import TargetContinuity, rewrite_history
from routing.protocols.gemini import reply, request

GEMINI_A = Producer("google-a", "gemini-2.5-pro")
GEMINI_B = Producer("google-b", "gemini-2.5-pro")
ANSWER = {
    "candidates": [
        {
            "content": {
                "role": "model",
                "parts": [
                    {
                        "functionCall": {"id": "c1", "name": "shell", "args": {"cmd": "ls"}},
                        "thoughtSignature": "c2lnLWZyb20tYQ==",
                    }
                ],
            },
            "finishReason": "STOP",
        }
    ]
}


def _history() -> dict[str, Any]:
    assistant = reply.completion_to_canonical(ANSWER)["choices"][0]["message"]
    assistant["tool_calls"][0]["extra_content"]["google"]["cached_content"] = "kept"
    return {
        "model": "auto",
        "messages": [
            {"role": "user", "content": "list"},
            assistant,
            {"role": "tool", "tool_call_id": "c1", "content": "a.txt"},
        ],
    }


def _outbound(producer: Producer, target: Producer, *, model: str) -> dict[str, Any]:
    original = _history()
    kept = copy.deepcopy(original)
    view = ChatHistory(original)
    rewrite_history(view, {1: producer}, TargetContinuity(target))
    assert original == kept  # only the outbound copy changes
    body, _ = request.from_canonical(view.body(), model)
    return body


def test_a_signature_goes_back_to_the_target_that_made_it() -> None:
    body = _outbound(GEMINI_A, GEMINI_A, model="gemini-2.5-pro")
    assert body["contents"][1]["parts"][0]["thoughtSignature"] == "c2lnLWZyb20tYQ=="


def test_another_targets_signature_is_stripped_and_the_call_kept() -> None:
    history = _history()
    view = ChatHistory(history)
    assert view.has_reasoning(1)
    rewrites = rewrite_history(view, {1: GEMINI_A}, TargetContinuity(GEMINI_B))
    assert "strip-reasoning:1" in rewrites
    [call] = view.body()["messages"][1]["tool_calls"]
    assert call["extra_content"] == {"google": {"cached_content": "kept"}}
    body = _outbound(GEMINI_A, GEMINI_B, model="gemini-2.5-pro")
    [part] = body["contents"][1]["parts"]
    assert "thoughtSignature" not in part and part["functionCall"]["name"] == "shell"


def test_a_gemini_3_target_gets_the_documented_placeholder_instead() -> None:
    body = _outbound(
        GEMINI_A, Producer("google-b", "gemini-3-pro-preview"), model="gemini-3-pro-preview"
    )
    assert body["contents"][1]["parts"][0]["thoughtSignature"] == request.PLACEHOLDER_SIGNATURE
