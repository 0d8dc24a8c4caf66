"""The simulator's scripted tool calls and ``When``, read back by the official SDKs of all
three protocols (chat, Anthropic Messages, Responses), stream and non-stream."""

from __future__ import annotations

import json
from collections.abc import Iterator

import anthropic
import openai
import pytest

from routing.simulator import FakeUpstream, Reply, When, behaviour_from_dict, to_dict

BASH = {"name": "Bash", "arguments": {"command": "echo hi"}}
EXEC = {"name": "exec", "input": "ls -la"}


@pytest.fixture
def upstream() -> Iterator[FakeUpstream]:
    with FakeUpstream() as up:
        yield up


def oai(up: FakeUpstream) -> openai.OpenAI:
    return openai.OpenAI(base_url=up.base_url, api_key="k", max_retries=0, timeout=5)


def ant(up: FakeUpstream) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=up.root_url, api_key="k", max_retries=0, timeout=5)


def test_chat_named_and_custom_calls_non_stream(upstream: FakeUpstream) -> None:
    upstream.script("m", Reply("", tool_call=[BASH, EXEC]))
    done = oai(upstream).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "x"}]
    )
    choice = done.choices[0]
    assert choice.finish_reason == "tool_calls"
    calls = choice.message.tool_calls or []
    assert [c.type for c in calls] == ["function", "custom"]
    assert calls[0].function.name == "Bash"  # type: ignore[union-attr]
    assert json.loads(calls[0].function.arguments) == {"command": "echo hi"}  # type: ignore[union-attr]
    assert calls[1].custom.input == "ls -la"  # type: ignore[union-attr]
    assert calls[0].id != calls[1].id


def test_chat_stream_named_call(upstream: FakeUpstream) -> None:
    upstream.script("m", Reply("", tool_call=BASH))
    stream = oai(upstream).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "x"}], stream=True
    )
    name, args, finish = "", "", None
    for chunk in stream:
        for choice in chunk.choices:
            for call in choice.delta.tool_calls or []:
                if call.function is not None:
                    name += call.function.name or ""
                    args += call.function.arguments or ""
            finish = choice.finish_reason or finish
    assert (name, json.loads(args), finish) == ("Bash", {"command": "echo hi"}, "tool_calls")


@pytest.mark.parametrize("stream", [False, True])
def test_messages_named_call(upstream: FakeUpstream, stream: bool) -> None:
    upstream.script("m", Reply("ok", tool_call=[BASH, EXEC]))
    client = ant(upstream)
    messages: list[anthropic.types.MessageParam] = [{"role": "user", "content": "x"}]
    if stream:
        with client.messages.stream(model="m", max_tokens=10, messages=messages) as s:
            message = s.get_final_message()
    else:
        message = client.messages.create(model="m", max_tokens=10, messages=messages)
    uses = [b for b in message.content if b.type == "tool_use"]
    assert [(u.name, u.input) for u in uses] == [
        ("Bash", {"command": "echo hi"}),
        ("exec", {"input": "ls -la"}),
    ]
    assert message.stop_reason == "tool_use"
    assert uses[0].id != uses[1].id


@pytest.mark.parametrize("stream", [False, True])
def test_responses_function_and_custom_calls(upstream: FakeUpstream, stream: bool) -> None:
    upstream.script("m", Reply("", tool_call=[BASH, EXEC]))
    client = oai(upstream)
    if stream:
        with client.responses.stream(model="m", input="x") as s:
            response = s.get_final_response()
    else:
        response = client.responses.create(model="m", input="x")
    kinds = [(item.type, getattr(item, "name", None)) for item in response.output]
    assert kinds == [("function_call", "Bash"), ("custom_tool_call", "exec")]
    assert json.loads(response.output[0].arguments) == {"command": "echo hi"}  # type: ignore[union-attr]
    assert response.output[1].input == "ls -la"  # type: ignore[union-attr]


def test_old_tool_call_true_is_still_get_weather(upstream: FakeUpstream) -> None:
    upstream.script("m", Reply("", tool_call=True))
    done = oai(upstream).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "x"}]
    )
    call = (done.choices[0].message.tool_calls or [])[0]
    assert call.function.name == "get_weather"  # type: ignore[union-attr]
    assert done.choices[0].finish_reason == "stop"  # True keeps its old pairing


def test_when_answers_a_tool_loop(upstream: FakeUpstream) -> None:
    loop = When('"tool_result"', Reply("done."), otherwise=Reply("", tool_call=BASH))
    upstream.script("m", then=loop)
    client = ant(upstream)
    first = client.messages.create(
        model="m", max_tokens=10, messages=[{"role": "user", "content": "run it"}]
    )
    use = first.content[0]
    assert use.type == "tool_use"
    history: list[anthropic.types.MessageParam] = [
        {"role": "user", "content": "run it"},
        {"role": "assistant", "content": [use.model_dump()]},  # type: ignore[list-item]
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "hi"}],
        },
    ]
    second = client.messages.create(model="m", max_tokens=10, messages=history)
    assert second.content[0].type == "text" and second.content[0].text == "done."
    third = client.messages.create(
        model="m",
        max_tokens=10,
        messages=[
            *history,
            {"role": "assistant", "content": "done."},
            {"role": "user", "content": "again"},
        ],
    )
    assert third.content[0].type == "tool_use"


def test_scripts_round_trip_and_bad_tool_calls_are_refused() -> None:
    loop = When("x", Reply(tool_call=[BASH, EXEC]), otherwise=Reply(), scope="body")
    assert behaviour_from_dict(json.loads(json.dumps(to_dict(loop)))) == loop
    with pytest.raises(ValueError):
        Reply(tool_call={"arguments": {}})
    with pytest.raises(ValueError):
        When("x", Reply(), scope="everywhere")


def test_count_tokens_answers_and_is_recorded(upstream: FakeUpstream) -> None:
    client = ant(upstream)
    counted = client.messages.count_tokens(
        model="m", messages=[{"role": "user", "content": "three little words"}]
    )
    assert counted.input_tokens == 3
    assert [r.path for r in upstream.requests] == ["/v1/messages/count_tokens"]
