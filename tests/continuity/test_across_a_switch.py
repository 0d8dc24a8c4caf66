"""Conversations across a switch (SPEC §13, seed 003) over real sockets: the official
``openai`` SDK → Switchyard → the fake upstream, which records the exact bytes each
attempt sent. Each test names the row of seed 003's boundary table it covers.

The shape of every test: a first call is served by target ``a`` (so the gateway remembers
that ``a`` produced the assistant turn), then the client sends the conversation back; ``a``
fails with a switch code and ``b`` answers. What ``b`` received is compared with what the
client sent, message by message and byte for byte.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import orjson
import pytest

from routing.continuity.rewrite import TOOL_LOOP_NOTICE
from routing.gateway.continuity import STATS
from routing.gateway.events import CallRecord
from routing.services.api_keys import generate_key
from routing.simulator.script import Fail, Reply
from tests.conftest import Harness

CONFIG = """
providers:
  - {name: p1, kind: openai, base_url: "{upstream}", api_key: upstream-key-p1}
  - {name: p2, kind: openai, base_url: "{upstream}", api_key: upstream-key-p2}
groups:
  - name: auto
    targets:
      - {provider: p1, model: a}
      - {provider: p2, model: b}
  - name: keep
    targets:
      - {provider: p1, model: a}
      - {provider: p2, model: b, keep_thinking: true}
  - name: loop
    targets:
      - {provider: p1, model: a}
      - {provider: p2, model: b, break_tool_loop: true}
  - name: loop-first
    targets:
      - {provider: p2, model: b, break_tool_loop: true}
  - name: same
    targets:
      - {provider: p1, model: a}
      - {provider: p1, model: a2}
  - name: effort
    targets:
      - {provider: p1, model: a, reasoning_effort: inherit}
      - {provider: p2, model: b, efforts: [low, medium]}
  - name: effort-max
    targets:
      - {provider: p1, model: a, reasoning_effort: drop}
      - {provider: p2, model: b, reasoning_effort: max, efforts: [low, high, medium]}
"""
GONE = Fail(404, "The model does not exist", code="model_not_found")
Q1 = {"role": "user", "content": "first question"}
Q2 = {"role": "user", "content": "second question"}


@pytest.fixture
def h(harness: Harness) -> Harness:
    harness.configure(CONFIG)
    harness.runtime.rand = lambda: 0.5
    return harness


def ask(
    h: Harness,
    messages: list[dict[str, Any]],
    *,
    group: str = "auto",
    session: str | None = "s1",
    stream: bool = False,
    **extra: Any,
) -> Any:
    headers = {"x-session-id": session} if session else {}
    client = h.client()
    if stream:
        raw = client.chat.completions.with_raw_response.create(
            model=group, messages=messages, stream=True, extra_headers=headers, **extra
        )
        return raw.headers, list(raw.parse())
    raw = client.chat.completions.with_raw_response.create(
        model=group, messages=messages, extra_headers=headers, **extra
    )
    return raw.headers, raw.parse()


def sent_to(h: Harness, model: str) -> tuple[dict[str, Any], bytes]:
    """The last request ``model`` received: parsed, and its exact bytes."""
    record = [r for r in h.upstream.requests if r.model == model][-1]
    return record.body, record.raw


def assert_untouched(message: dict[str, Any], raw: bytes) -> None:
    """The message went out exactly as the client sent it: same bytes."""
    assert orjson.dumps(message) in raw


def reset(h: Harness, key: str) -> None:
    """Forget a target's cooling (as the operator's reset does), on the gateway's loop."""
    store = h.runtime.store  # type: ignore[attr-defined]
    asyncio.run_coroutine_threadsafe(store.reset_target(key, 0.0), h.gateway.loop).result(5)


def serve_first_turn(
    h: Harness, reply: Reply, *, group: str = "auto", session: str | None = "s1"
) -> Any:
    h.upstream.script("a", reply)
    return ask(h, [Q1], group=group, session=session)[1]


# --- row: cross-target assistant turns lose their reasoning, in step --------------------


def test_cross_target_turn_loses_reasoning_on_every_channel_in_step(h: Harness) -> None:
    serve_first_turn(h, Reply(content="answer-a", reasoning="think-a"))
    turn = {
        "role": "assistant",
        "content": "answer-a",
        "reasoning_content": "think-a",
        "reasoning": "think-a",
        "reasoning_details": [{"type": "reasoning.text", "text": "think-a"}],
    }
    h.upstream.script("a", GONE)
    h.upstream.script("b", Reply(content="answer-b"))
    headers, completion = ask(h, [Q1, turn, Q2])
    assert completion.choices[0].message.content == "answer-b"
    body, raw = sent_to(h, "b")
    assert body["messages"][1] == {"role": "assistant", "content": "answer-a"}
    assert b"think-a" not in raw  # no channel left for the next upstream to rebuild it from
    assert_untouched(Q1, raw)
    assert_untouched(Q2, raw)
    assert "strip-reasoning:1" in headers["x-switchyard-rewrites"].split(",")
    # the attempt on the target that produced the turn sent it verbatim, no notice
    a_body, a_raw = sent_to(h, "a")
    assert_untouched(turn, a_raw)
    assert len(a_body["messages"]) == 3


def test_a_streamed_turn_is_remembered_and_rewritten_too(h: Harness) -> None:
    h.upstream.script("a", Reply(content="streamed-a", reasoning="streamed-think"))
    _headers, chunks = ask(h, [Q1], stream=True)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "streamed-a"
    turn = {"role": "assistant", "content": text, "reasoning_content": "streamed-think"}
    h.upstream.script("a", GONE)
    h.upstream.script("b", Reply(content="answer-b"))
    headers, _chunks = ask(h, [Q1, turn, Q2], stream=True)
    body, _raw = sent_to(h, "b")
    assert body["messages"][1] == {"role": "assistant", "content": "streamed-a"}
    assert "strip-reasoning:1" in headers["x-switchyard-rewrites"]


# --- row: same-target history is not touched, byte for byte -----------------------------


def test_same_target_turns_are_untouched_byte_for_byte(h: Harness) -> None:
    # turn 1 by a, then a fails and b serves turn 2; back on a, turn 1 is a's own
    serve_first_turn(h, Reply(content="answer-a", reasoning="think-a"))
    turn_a = {"role": "assistant", "content": "answer-a", "reasoning_content": "think-a"}
    h.upstream.script("a", GONE)
    h.upstream.script("b", Reply(content="answer-b", reasoning="think-b"))
    ask(h, [Q1, turn_a, Q2])
    turn_b = {"role": "assistant", "content": "answer-b", "reasoning_content": "think-b"}
    # affinity now points at b: b fails, and a (reset after its failure) answers
    h.upstream.script("a", Reply(content="answer-a2"))
    h.upstream.script("b", GONE)
    reset(h, "p1/a")
    q3 = {"role": "user", "content": "third question"}
    _headers, completion = ask(h, [Q1, turn_a, Q2, turn_b, q3])
    assert completion.choices[0].message.content == "answer-a2"
    body, raw = sent_to(h, "a")
    assert_untouched(turn_a, raw)  # a's own turn: byte for byte, reasoning kept
    assert body["messages"][3] == {"role": "assistant", "content": "answer-b"}  # b's: stripped
    assert body["messages"][-1]["content"] == (
        "[model changed: assistant turns above this point were generated by p2/b; "
        "the session continues with p1/a]"
    )


def test_a_session_that_never_switched_is_sent_as_is(h: Harness) -> None:
    serve_first_turn(h, Reply(content="answer-a", reasoning="think-a"))
    turn = {"role": "assistant", "content": "answer-a", "reasoning_content": "think-a"}
    h.upstream.script("a", Reply(content="again-a"))
    headers, _ = ask(h, [Q1, turn, Q2])
    body, raw = sent_to(h, "a")
    assert body["messages"] == [Q1, turn, Q2]
    assert_untouched(turn, raw)
    assert "x-switchyard-rewrites" not in headers


# --- row: a turn left empty by stripping is dropped ------------------------------------


def test_a_turn_left_empty_is_dropped(h: Harness) -> None:
    serve_first_turn(h, Reply(content="", reasoning="only-thinking", chunks=1))
    turn = {"role": "assistant", "content": "", "reasoning_content": "only-thinking"}
    h.upstream.script("a", GONE)
    h.upstream.script("b", Reply(content="answer-b"))
    headers, _ = ask(h, [Q1, turn, Q2])
    body, raw = sent_to(h, "b")
    assert [m["role"] for m in body["messages"]] == ["user", "user", "user"]
    assert body["messages"][:2] == [Q1, Q2]
    assert b"only-thinking" not in raw
    rewrites = headers["x-switchyard-rewrites"].split(",")
    assert "drop-turn:1" in rewrites and "model-changed-notice" in rewrites


# --- row: an envelope that does not line up is dropped whole -----------------------------


def test_a_misaligned_reasoning_envelope_is_dropped_whole(h: Harness) -> None:
    serve_first_turn(h, Reply(content="answer-a", reasoning="think-a"))
    turn = {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "think-a"},
            {"type": "text", "text": "answer-a"},
        ],
        "thinking_blocks": "signature-blob-not-a-list",
    }
    h.upstream.script("a", GONE)
    h.upstream.script("b", Reply(content="answer-b"))
    headers, _ = ask(h, [Q1, turn, Q2])
    body, raw = sent_to(h, "b")
    assert body["messages"][1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "answer-a"}],
    }
    assert b"signature-blob" not in raw and b"think-a" not in raw
    assert "drop-envelope:1" in headers["x-switchyard-rewrites"]


# --- row: non-assistant turns, unknown provenance, unknown shapes pass through ----------


def test_turns_the_gateway_did_not_serve_pass_through(h: Harness) -> None:
    serve_first_turn(h, Reply(content="answer-a", reasoning="think-a"))
    foreign = {"role": "assistant", "content": "written elsewhere", "reasoning_content": "x"}
    system = {"role": "system", "content": "be brief", "reasoning_content": "not a turn"}
    h.upstream.script("a", GONE)
    h.upstream.script("b", Reply(content="answer-b"))
    headers, _ = ask(h, [system, Q1, foreign, Q2])
    body, raw = sent_to(h, "b")
    assert body["messages"] == [system, Q1, foreign, Q2]  # no notice: who wrote it is unknown
    assert_untouched(foreign, raw)
    assert_untouched(system, raw)
    assert "x-switchyard-rewrites" not in headers


def test_an_unknown_history_shape_passes_through_counted_never_raises(h: Harness) -> None:
    serve_first_turn(h, Reply(content="answer-a", reasoning="think-a"))
    odd = {"role": "assistant", "content": 42, "reasoning_content": "think-a"}
    before = STATS.unrewritable
    h.upstream.script("a", GONE)
    h.upstream.script("b", Reply(content="answer-b"))
    headers, completion = ask(h, [Q1, odd, Q2])
    assert completion.choices[0].message.content == "answer-b"
    body, raw = sent_to(h, "b")
    assert body["messages"] == [Q1, odd, Q2]
    assert_untouched(odd, raw)
    assert headers["x-switchyard-rewrites"] == "history-unrewritable"
    assert STATS.unrewritable == before + 1
    _, admin = generate_key(name="ops", kind="admin")
    metrics = httpx.get(h.gateway.url + "/metrics", headers={"authorization": f"Bearer {admin}"})
    line = f'switchyard_history_rewrites_total{{outcome="unrewritable"}} {float(before + 1)}'
    assert line in metrics.text


# --- row: keep_thinking on the target ------------------------------------------------


def test_keep_thinking_target_receives_cross_target_reasoning(h: Harness) -> None:
    serve_first_turn(h, Reply(content="answer-a", reasoning="think-a"), group="keep")
    turn = {"role": "assistant", "content": "answer-a", "reasoning_content": "think-a"}
    h.upstream.script("a", GONE)
    h.upstream.script("b", Reply(content="answer-b"))
    headers, _ = ask(h, [Q1, turn, Q2], group="keep")
    body, raw = sent_to(h, "b")
    assert_untouched(turn, raw)
    assert body["messages"][:3] == [Q1, turn, Q2]
    assert headers["x-switchyard-rewrites"] == "model-changed-notice"


# --- the model-changed notice: text, labels, once per switch, per attempt --------------


def test_notice_text_labels_and_once_per_switch(h: Harness) -> None:
    serve_first_turn(h, Reply(content="answer-a"))
    turn = {"role": "assistant", "content": "answer-a"}
    h.upstream.script("a", GONE, then=GONE)
    h.upstream.script("b", Reply(content="answer-b"))
    ask(h, [Q1, turn, Q2])
    body, _raw = sent_to(h, "b")
    notice = {
        "role": "user",
        "content": "[model changed: assistant turns above this point were generated by "
        "p1/a; the session continues with p2/b]",
    }
    assert body["messages"][-1] == notice
    # a client that kept the notice in its history: covered, not appended twice
    h.upstream.script("b", Reply(content="answer-b2"))
    headers, _ = ask(h, [Q1, turn, Q2, notice])
    body, raw = sent_to(h, "b")
    assert body["messages"] == [Q1, turn, Q2, notice]
    assert "model-changed-notice:covered" in headers["x-switchyard-rewrites"]
    # an earlier notice does not cover a later switch: b's turn, then back on a
    turn_b = {"role": "assistant", "content": "answer-b2"}
    h.upstream.script("b", GONE)
    reset(h, "p1/a")
    h.upstream.script("a", Reply(content="answer-a3"))
    ask(h, [Q1, turn, Q2, notice, turn_b, {"role": "user", "content": "q4"}])
    body, _raw = sent_to(h, "a")
    assert body["messages"][-1]["content"].endswith(
        "generated by p2/b; the session continues with p1/a]"
    )


def test_once_per_switch_a_later_turn_by_the_same_target_gets_no_second_notice(
    h: Harness,
) -> None:
    # Q1 → a answers; Q2 → a fails and b answers (the switch, noticed once); Q3 → b again.
    serve_first_turn(h, Reply(content="answer-a", reasoning="think-a"))
    turn_a = {"role": "assistant", "content": "answer-a", "reasoning_content": "think-a"}
    h.upstream.script("a", GONE)
    h.upstream.script("b", Reply(content="answer-b", reasoning="think-b"))
    headers, _ = ask(h, [Q1, turn_a, Q2])
    assert headers["x-switchyard-rewrites"] == "strip-reasoning:1,model-changed-notice"
    turn_b = {"role": "assistant", "content": "answer-b", "reasoning_content": "think-b"}
    q3 = {"role": "user", "content": "third question"}
    h.upstream.script("b", Reply(content="answer-b2"))
    headers, completion = ask(h, [Q1, turn_a, Q2, turn_b, q3])  # affinity: b first
    assert completion.choices[0].message.content == "answer-b2"
    body, raw = sent_to(h, "b")
    # a's turn still loses its reasoning; b's own turn is byte for byte; the switch was
    # noticed on the call that made it, so this one ends with the client's Q3, no notice
    assert body["messages"] == [Q1, {"role": "assistant", "content": "answer-a"}, Q2, turn_b, q3]
    assert_untouched(turn_b, raw)
    assert b"[model changed:" not in raw
    assert headers["x-switchyard-rewrites"] == "strip-reasoning:1"


def test_notice_labels_are_models_when_the_provider_is_the_same(h: Harness) -> None:
    serve_first_turn(h, Reply(content="answer-a"), group="same")
    h.upstream.script("a", GONE)
    h.upstream.script("a2", Reply(content="answer-a2"))
    ask(h, [Q1, {"role": "assistant", "content": "answer-a"}, Q2], group="same")
    body, _raw = sent_to(h, "a2")
    assert body["messages"][-1]["content"] == (
        "[model changed: assistant turns above this point were generated by a; "
        "the session continues with a2]"
    )


def test_each_attempt_is_derived_from_the_original_request(h: Harness) -> None:
    serve_first_turn(h, Reply(content="answer-a", reasoning="think-a"))
    turn = {"role": "assistant", "content": "answer-a", "reasoning_content": "think-a"}
    h.upstream.script("a", GONE)
    h.upstream.script("b", Reply(content="answer-b"))
    ask(h, [Q1, turn, Q2])
    a_body, a_raw = sent_to(h, "a")
    b_body, _ = sent_to(h, "b")
    assert a_body["messages"] == [Q1, turn, Q2]  # a produced it: nothing to rewrite
    assert len(b_body["messages"]) == 4  # b got the stripped turn and the notice
    record = h.events(CallRecord, at_least=2)[-1]
    assert [a.rewrites for a in record.attempts] == [
        (),
        ("strip-reasoning:1", "model-changed-notice"),
    ]


def test_sessionless_calls_are_remembered_by_the_history_itself(h: Harness) -> None:
    serve_first_turn(h, Reply(content="answer-a", reasoning="think-a"), session=None)
    turn = {"role": "assistant", "content": "answer-a", "reasoning_content": "think-a"}
    h.upstream.script("a", GONE)
    h.upstream.script("b", Reply(content="answer-b"))
    headers, _ = ask(h, [Q1, turn, Q2], session=None)
    body, _raw = sent_to(h, "b")
    assert body["messages"][1] == {"role": "assistant", "content": "answer-a"}
    assert headers["x-switchyard-rewrites"] == "strip-reasoning:1,model-changed-notice"


@pytest.mark.parametrize("other", ["group", "key"])
def test_a_sessionless_switch_costs_nothing_to_other_groups_and_keys(
    h: Harness, other: str
) -> None:
    """Calls without a session keep provenance per group and client key: a switch in
    group ``auto`` does not make another group's (or another key's) sessionless calls
    fingerprint and look up their history ("costs nothing when not switched")."""
    serve_first_turn(h, Reply(content="answer-a", reasoning="think-a"), session=None)
    turn = {"role": "assistant", "content": "answer-a", "reasoning_content": "think-a"}
    h.upstream.script("a", GONE)
    h.upstream.script("b", Reply(content="answer-b"))
    before = STATS.looked_up
    headers, _ = ask(h, [Q1, turn, Q2], session=None)  # auto's sessionless scope switched
    assert headers["x-switchyard-rewrites"] == "strip-reasoning:1,model-changed-notice"
    assert STATS.looked_up == before + 1
    reset(h, "p1/a")
    group = "auto"
    if other == "key":
        _, h.key = generate_key(name="another client")
    else:
        group = "keep"  # the same two targets, in another group
    h.upstream.script("a", Reply(content="answer-a2"))
    other_turn = {"role": "assistant", "content": "other answer", "reasoning_content": "r"}
    before = STATS.looked_up
    headers, completion = ask(h, [Q1, other_turn, Q2], group=group, session=None)
    assert completion.choices[0].message.content == "answer-a2"
    assert STATS.looked_up == before  # its history was neither fingerprinted nor looked up
    assert "x-switchyard-rewrites" not in headers
    body, raw = sent_to(h, "a")
    assert body["messages"] == [Q1, other_turn, Q2]
    assert_untouched(other_turn, raw)


# --- row: break_tool_loop on the target ---------------------------------------------


def _tool_conversation(h: Harness, group: str) -> list[dict[str, Any]]:
    completion = serve_first_turn(
        h, Reply(content="", tool_call=True, finish_reason="tool_calls"), group=group
    )
    call = completion.choices[0].message.tool_calls[0]
    turn = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.function.name, "arguments": call.function.arguments},
            }
        ],
    }
    result = {"role": "tool", "tool_call_id": call.id, "content": '{"temp": 21}'}
    return [Q1, turn, result]


def test_break_tool_loop_appends_a_notice_when_history_ends_with_a_tool_result(h: Harness) -> None:
    history = _tool_conversation(h, "loop")
    # the session moved to b earlier and the notice about it is already in the history
    notice = (
        "[model changed: assistant turns above this point were generated by p1/a; "
        "the session continues with p2/b]"
    )
    h.upstream.script("a", GONE)
    h.upstream.script("b", Reply(content="answer-b"))
    headers, _ = ask(
        h, [*history[:2], {"role": "user", "content": notice}, history[2]], group="loop"
    )
    body, raw = sent_to(h, "b")
    assert body["messages"][-1] == {"role": "user", "content": TOOL_LOOP_NOTICE}
    assert_untouched(history[1], raw)
    assert "tool-loop-notice" in headers["x-switchyard-rewrites"].split(",")


def test_tool_loop_notice_is_exclusive_with_the_model_changed_notice(h: Harness) -> None:
    history = _tool_conversation(h, "loop")
    h.upstream.script("a", GONE)
    h.upstream.script("b", Reply(content="answer-b"))
    headers, _ = ask(h, history, group="loop")
    body, _raw = sent_to(h, "b")
    assert body["messages"][-1]["content"].startswith("[model changed:")
    assert [m["content"] for m in body["messages"]].count(TOOL_LOOP_NOTICE) == 0
    assert headers["x-switchyard-rewrites"] == "model-changed-notice"


def test_no_tool_loop_notice_without_the_switch_on(h: Harness) -> None:
    history = _tool_conversation(h, "auto")
    notice = {
        "role": "user",
        "content": "[model changed: assistant turns above this point were generated by p1/a; "
        "the session continues with p2/b]",
    }
    h.upstream.script("a", GONE)
    h.upstream.script("b", Reply(content="answer-b"))
    ask(h, [*history[:2], notice, history[2]])
    body, _raw = sent_to(h, "b")
    assert body["messages"][-1]["role"] == "tool"


TOOL_CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
}
TOOL_TURN = {"role": "assistant", "content": None, "tool_calls": [TOOL_CALL]}
TOOL_RESULT = {"role": "tool", "tool_call_id": "call_1", "content": '{"temp": 21}'}


def test_break_tool_loop_needs_no_switch_and_no_provenance(h: Harness) -> None:
    """SPEC §13 sets three conditions, none about a switch: a fresh session (nothing
    remembered) sending a tool loop without reasoning to a break_tool_loop target gets
    the notice."""
    h.upstream.script("b", Reply(content="answer-b"))
    history = [Q1, TOOL_TURN, TOOL_RESULT]
    headers, _ = ask(h, history, group="loop-first", session="fresh-loop")
    body, raw = sent_to(h, "b")
    assert body["messages"] == [*history, {"role": "user", "content": TOOL_LOOP_NOTICE}]
    for message in history:
        assert_untouched(message, raw)
    assert headers["x-switchyard-rewrites"] == "tool-loop-notice"
    # the same without a session key at all
    h.upstream.script("b", Reply(content="answer-b"))
    headers, _ = ask(h, history, group="loop-first", session=None)
    assert sent_to(h, "b")[0]["messages"][-1] == {"role": "user", "content": TOOL_LOOP_NOTICE}
    assert headers["x-switchyard-rewrites"] == "tool-loop-notice"


def test_a_session_that_never_switched_keeps_its_tool_loop_byte_for_byte(h: Harness) -> None:
    """b with the switch on served every turn, each with its reasoning: nothing to do."""
    h.upstream.script(
        "b", Reply(content="", reasoning="think-b", tool_call=True, finish_reason="tool_calls")
    )
    _headers, completion = ask(h, [Q1], group="loop-first")
    call = completion.choices[0].message.tool_calls[0]
    turn = {
        "role": "assistant",
        "content": None,
        "reasoning_content": "think-b",
        "tool_calls": [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.function.name, "arguments": call.function.arguments},
            }
        ],
    }
    result = {"role": "tool", "tool_call_id": call.id, "content": '{"temp": 21}'}
    h.upstream.script("b", Reply(content="answer-b"))
    headers, _ = ask(h, [Q1, turn, result], group="loop-first")
    body, raw = sent_to(h, "b")
    assert body["messages"] == [Q1, turn, result]
    assert raw == orjson.dumps({**body, "messages": [Q1, turn, result]})
    assert "x-switchyard-rewrites" not in headers


def test_a_target_without_the_switch_gets_a_tool_loop_byte_for_byte(h: Harness) -> None:
    h.upstream.script("a", Reply(content="answer-a"))
    history = [Q1, TOOL_TURN, TOOL_RESULT]
    headers, _ = ask(h, history, session="fresh-plain")
    body, raw = sent_to(h, "a")
    assert body["messages"] == history
    assert raw == orjson.dumps({**body, "messages": history})
    assert "x-switchyard-rewrites" not in headers


# --- row: no provenance at all: nothing is rewritten -----------------------------------


def test_without_provenance_the_outbound_body_is_the_clients(h: Harness) -> None:
    turn = {"role": "assistant", "content": "never served here", "reasoning_content": "x"}
    h.upstream.script("a", GONE)
    h.upstream.script("b", Reply(content="answer-b"))
    headers, _ = ask(h, [Q1, turn, Q2], session="fresh")
    body, raw = sent_to(h, "b")
    assert body["messages"] == [Q1, turn, Q2] and body["model"] == "b"
    assert orjson.dumps(body) == raw
    assert "x-switchyard-rewrites" not in headers


# --- reasoning effort policy, per target and on a switch -------------------------------


def test_unsupported_effort_is_dropped_on_the_switch(h: Harness) -> None:
    h.upstream.script("a", GONE)
    h.upstream.script("b", Reply(content="answer-b"))
    headers, completion = ask(h, [Q1], group="effort", reasoning_effort="high")
    assert completion.choices[0].message.content == "answer-b"
    a_body, _ = sent_to(h, "a")
    b_body, _ = sent_to(h, "b")
    assert a_body["reasoning_effort"] == "high"  # inherit, no efforts list: passed on
    assert "reasoning_effort" not in b_body  # b accepts low/medium only
    assert headers["x-switchyard-rewrites"] == "effort:high->dropped(unsupported)"
    h.upstream.script("a", GONE)
    ask(h, [Q1], group="effort", reasoning_effort="medium")
    assert sent_to(h, "b")[0]["reasoning_effort"] == "medium"


def test_effort_max_and_drop(h: Harness) -> None:
    h.upstream.script("a", GONE)
    h.upstream.script("b", Reply(content="answer-b"))
    headers, _ = ask(h, [Q1], group="effort-max", reasoning_effort="low")
    assert "reasoning_effort" not in sent_to(h, "a")[0]
    assert sent_to(h, "b")[0]["reasoning_effort"] == "high"
    assert headers["x-switchyard-rewrites"] == "effort:low->high"
    record = h.events(CallRecord, at_least=1)[-1]
    assert record.attempts[0].rewrites == ("effort:low->dropped",)


# --- declared context windows ---------------------------------------------------------


def test_models_declare_the_window_by_precedence(h: Harness) -> None:
    h.configure(
        CONFIG
        + """
  - name: compacting
    compact_window: 500000
    targets:
      - {provider: p1, model: a, context_window: 200000}
  - name: narrowest
    targets:
      - {provider: p1, model: a, context_window: 200000}
      - {provider: p2, model: b, context_window: 128000}
"""
    )
    models = {m.id: m.model_extra["context_window"] for m in h.client().models.list()}
    assert models["compacting"] == 625_000  # max(ceil(T·1.25), T + 65536)
    assert models["narrowest"] == 128_000  # the smallest its targets declare
    assert models["auto"] == 65_536  # nothing declared anywhere


def test_rewrites_are_kept_in_the_call_records_api(h: Harness) -> None:
    from routing.audit import writer

    serve_first_turn(h, Reply(content="answer-a", reasoning="think-a"))
    turn = {"role": "assistant", "content": "answer-a", "reasoning_content": "think-a"}
    h.upstream.script("a", GONE)
    h.upstream.script("b", Reply(content="answer-b"))
    headers, _ = ask(h, [Q1, turn, Q2])
    writer.flush(10)
    _, admin = generate_key(name="ops", kind="admin")
    calls = httpx.get(
        h.gateway.url + "/api/v1/calls", headers={"authorization": f"Bearer {admin}"}
    ).json()
    call = next(c for c in calls if c["call_id"] == headers["x-switchyard-request-id"])
    assert [a["rewrites"] for a in call["attempts"]] == [
        [],
        ["strip-reasoning:1", "model-changed-notice"],
    ]
