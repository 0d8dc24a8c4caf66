"""Mid-conversation system messages folded for a chat target that takes one leading system
message only (``routing.continuity.system``): never lost, each a marked note in a user turn."""

from __future__ import annotations

from routing.continuity.system import fold_mid_system, has_mid_system, refuses_mid_system


def test_a_mid_conversation_system_message_goes_into_the_following_user_turn() -> None:
    body = {
        "model": "m",
        "messages": [
            {"role": "system", "content": "be terse"},
            {"role": "user", "content": "one"},
            {"role": "assistant", "content": "ok"},
            {"role": "system", "content": "agents: A, B"},
            {"role": "user", "content": [{"type": "text", "text": "two"}]},
        ],
    }
    assert has_mid_system(body)
    folded = fold_mid_system(body)
    assert folded["messages"] == [
        {"role": "system", "content": "be terse"},  # the leading one stays
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": "ok"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "[system message: agents: A, B]"},
                {"type": "text", "text": "two"},
            ],
        },
    ]
    assert not has_mid_system(folded) and body["messages"][3]["role"] == "system"  # a copy


def test_with_no_user_turn_after_it_the_preceding_one_carries_it() -> None:
    body = {
        "messages": [
            {"role": "user", "content": "run it"},
            {"role": "developer", "content": [{"type": "text", "text": "careful"}]},
            {"role": "assistant", "content": None, "tool_calls": []},
        ]
    }
    assert fold_mid_system(body)["messages"] == [
        {"role": "user", "content": "run it\n\n[system message: careful]"},
        {"role": "assistant", "content": None, "tool_calls": []},
    ]
    only = {
        "messages": [{"role": "assistant", "content": "hi"}, {"role": "system", "content": "x"}]
    }
    assert fold_mid_system(only)["messages"][-1] == {
        "role": "user",
        "content": "[system message: x]",
    }


def test_only_a_400_about_system_messages_teaches_it() -> None:
    assert refuses_mid_system(400, "System role not supported")
    assert not refuses_mid_system(400, "max_tokens is too large")
    assert not refuses_mid_system(500, "system overloaded")
    assert not has_mid_system({"messages": [{"role": "system", "content": "a"}, {"role": "user"}]})
