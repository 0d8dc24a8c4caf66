"""Bad input never raises past a view's constructor (issue 13: "a history the gateway
cannot rewrite safely passes through untouched and is counted, never raises").

A table of malformed items for each door's view: each either makes the constructor raise
:class:`UnknownShape` (the caller then sends the history untouched and counts it), or is
read and rewritten like any other history, every question and order of the view
answered without an exception."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from routing.continuity.chat import ChatHistory
from routing.continuity.history import UnknownShape
from routing.continuity.messages import MessagesHistory
from routing.continuity.provenance import Producer
from routing.continuity.responses import ResponsesHistory
from routing.continuity.rewrite import TargetContinuity, rewrite_history

A, B = Producer("p1", "a"), Producer("p2", "b")
ODD: list[Any] = [None, True, 7, 2.5, "text", [], [1], {}, {"type": 1}, {"text": ["x"]}]
View = type[ChatHistory] | type[MessagesHistory] | type[ResponsesHistory]


def read_all(view_cls: View, body: dict[str, Any]) -> str:
    """Build the view the way the call path does and use every part of it."""
    frozen = copy.deepcopy(body)
    try:
        view = view_cls(body)
    except UnknownShape:
        return "refused"
    turns = view.assistant_turns()
    for turn in turns:
        view.fingerprint(turn)
        view.has_reasoning(turn)
        view.has_tool_calls(turn)
    list(view.user_texts_after(-1))
    view.ends_with_tool_result()
    # the second view the call path builds once the shape is known, for the rewrite
    for target in (TargetContinuity(B, break_tool_loop=True), TargetContinuity(A)):
        rewritten = view_cls(body, checked=True)
        rewrite_history(rewritten, dict.fromkeys(turns, A), target)
        rewritten.body()
    assert body == frozen  # the client's body is never changed
    return "read"


def messages_bodies() -> list[Any]:
    user = {"role": "user", "content": "q"}
    bodies: list[Any] = [{"messages": odd} for odd in ODD]
    bodies += [{"messages": [user, odd]} for odd in ODD]
    bodies += [{"messages": [user, {"role": odd, "content": "x"}]} for odd in ODD]
    bodies += [{"messages": [user, {"role": "assistant", "content": odd}]} for odd in ODD]
    bodies += [{"messages": [user, {"role": "assistant", "content": [odd]}]} for odd in ODD]
    for kind in ("text", "thinking", "redacted_thinking", "tool_use", "tool_result", "image"):
        for field in ("text", "thinking", "id", "content", "input", "signature", "data"):
            for odd in ODD:
                block = {"type": kind, field: odd}
                bodies.append({"messages": [user, {"role": "assistant", "content": [block]}]})
                bodies.append({"messages": [user, {"role": "user", "content": [block]}]})
    return bodies


def responses_bodies() -> list[Any]:
    user = {"role": "user", "content": "q"}
    bodies: list[Any] = [{"input": odd} for odd in ODD]
    bodies += [{"input": [user, odd]} for odd in ODD]
    bodies += [{"input": [user, {"type": odd, "role": "assistant"}]} for odd in ODD]
    bodies += [{"input": [user, {"role": odd, "content": "x"}]} for odd in ODD]
    shapes = {
        "reasoning": ("summary", "id", "encrypted_content", "content"),
        "message": ("content", "id", "status"),
        "function_call": ("call_id", "name", "arguments"),
        "function_call_output": ("call_id", "output"),
    }
    for kind, fields in shapes.items():
        for field in fields:
            for odd in ODD:
                for wrap in (odd, [odd]):
                    item = {"type": kind, "role": "assistant", field: wrap}
                    bodies.append({"input": [user, item]})
                    bodies.append({"input": [user, item, {"type": "function_call_output"}]})
    return bodies


def chat_bodies() -> list[Any]:
    user = {"role": "user", "content": "q"}
    bodies: list[Any] = [{"messages": odd} for odd in ODD]
    bodies += [{"messages": [user, odd]} for odd in ODD]
    for field in (
        "content",
        "reasoning_content",
        "reasoning",
        "reasoning_details",
        "thinking_blocks",
        "tool_calls",
        "function_call",
        "refusal",
    ):
        for odd in ODD:
            for wrap in (odd, [odd]):
                turn = {"role": "assistant", "content": "x", field: wrap}
                bodies.append({"messages": [user, turn]})
                bodies.append({"messages": [user, turn, {"role": "tool", "content": wrap}]})
    return bodies


@pytest.mark.parametrize(
    ("view_cls", "bodies"),
    [
        (MessagesHistory, messages_bodies()),
        (ResponsesHistory, responses_bodies()),
        (ChatHistory, chat_bodies()),
    ],
    ids=["messages", "responses", "chat"],
)
def test_malformed_items_are_refused_at_construction_or_read_safely(
    view_cls: View, bodies: list[dict[str, Any]]
) -> None:
    outcomes = [read_all(view_cls, body) for body in bodies]
    assert "refused" in outcomes and "read" in outcomes  # the table exercises both


@pytest.mark.parametrize(
    "item",
    [
        {"type": "reasoning", "summary": True},
        {"type": "reasoning", "summary": 3},
        {"type": "reasoning", "summary": "thought"},
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": 7}]},
        {"type": "reasoning", "summary": ["thought"]},
        {"type": "message", "role": "assistant", "content": 42},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": 1}]},
        {"type": "function_call", "call_id": 5, "name": "f"},
        {"type": 3, "role": "assistant"},
        {"role": ["assistant"], "content": "x"},
    ],
)
def test_responses_unknown_shapes_raise_unknown_shape(item: dict[str, Any]) -> None:
    # a reasoning item whose summary is `true` used to reach the fingerprint and raise
    # TypeError there, failing the call
    with pytest.raises(UnknownShape):
        ResponsesHistory({"input": [{"role": "user", "content": "q"}, item]})


@pytest.mark.parametrize(
    "message",
    [
        {"role": "assistant", "content": 42},
        {"role": "assistant"},
        {"role": "assistant", "content": [{"text": "no type"}]},
        {"role": "assistant", "content": ["thinking"]},
        {"role": 1, "content": "x"},
        "assistant",
    ],
)
def test_messages_unknown_shapes_raise_unknown_shape(message: Any) -> None:
    with pytest.raises(UnknownShape):
        MessagesHistory({"messages": [{"role": "user", "content": "q"}, message]})


def test_a_well_formed_responses_turn_is_still_read() -> None:
    body = {
        "input": [
            {"role": "user", "content": "q"},
            {"type": "reasoning", "id": "rs_1", "summary": []},
            {"type": "reasoning", "id": "rs_2"},
            {"type": "message", "role": "assistant", "content": "plain text"},
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "ok"},
        ]
    }
    view = ResponsesHistory(body)
    assert view.assistant_turns() == [1]
    assert rewrite_history(view, {1: A}, TargetContinuity(B)) == [
        "strip-reasoning:1",  # one turn, both its reasoning items
        "model-changed-notice",
    ]
    assert [i.get("type", i.get("role")) for i in view.body()["input"]] == [
        "user",
        "message",
        "function_call",
        "function_call_output",
        "user",
    ]
