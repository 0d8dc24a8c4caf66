"""The Converse codec (``kind: bedrock-converse``): canonical requests as Converse bodies,
Converse answers and stream events back as the canonical view — against the simulator's
independent Converse shapes (``routing.simulator.bedrock.ConverseWire``)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from routing.protocols import Unmappable
from routing.protocols.converse import StreamDecoder, completion_to_canonical, from_canonical
from routing.simulator.bedrock import ConverseWire
from routing.simulator.payloads import tool_specs

WEATHER = {
    "type": "function",
    "function": {
        "name": "weather",
        "description": "the weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def test_a_tool_loop_becomes_converse_turns() -> None:
    body = {
        "model": "mistral.mistral-large",
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "weather in Paris?"},
            {
                "role": "assistant",
                "content": None,
                "reasoning_content": "I should call the tool",
                "tool_calls": [
                    {
                        "id": "tooluse_1",
                        "type": "function",
                        "function": {"name": "weather", "arguments": '{"city":"Paris"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "tooluse_1", "content": "sunny"},
            {"role": "user", "content": "and tomorrow?"},
            {"role": "developer", "content": "answer in French"},
        ],
        "tools": [WEATHER],
        "tool_choice": "required",
        "max_tokens": 300,
        "temperature": 0.2,
        "stop": "END",
        "reasoning_effort": "low",
        "seed": 3,
    }
    out, notes = from_canonical(body, "us.anthropic.claude-3-7-sonnet-20250219-v1:0")
    assert "model" not in out and "stream" not in out
    assert out["system"] == [{"text": "be brief"}, {"text": "answer in French"}]
    assert out["messages"] == [
        {"role": "user", "content": [{"text": "weather in Paris?"}]},
        {
            "role": "assistant",
            "content": [
                {
                    "toolUse": {
                        "toolUseId": "tooluse_1",
                        "name": "weather",
                        "input": {"city": "Paris"},
                    }
                }
            ],
        },
        {
            "role": "user",  # the result and the next question: one user turn
            "content": [
                {"toolResult": {"toolUseId": "tooluse_1", "content": [{"text": "sunny"}]}},
                {"text": "and tomorrow?"},
            ],
        },
    ]
    assert out["toolConfig"]["tools"][0]["toolSpec"] == {
        "name": "weather",
        "inputSchema": {"json": WEATHER["function"]["parameters"]},  # type: ignore[index]
        "description": "the weather in a city",
    }
    assert out["toolConfig"]["toolChoice"] == {"any": {}}
    assert out["inferenceConfig"] == {
        "maxTokens": 300,
        "temperature": 0.2,
        "stopSequences": ["END"],
    }
    thinking = out["additionalModelRequestFields"]["thinking"]
    assert thinking["type"] == "enabled" and thinking["budget_tokens"] > 0
    assert "dropped seed" in notes
    assert any("reasoning from history" in note for note in notes)


def test_tool_choice_none_keeps_tools_only_when_the_history_uses_them() -> None:
    plain = {
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [WEATHER],
        "tool_choice": "none",
    }
    out, notes = from_canonical(plain, "m")
    assert "toolConfig" not in out and notes == ["dropped tools (tool_choice none)"]
    named, _ = from_canonical(
        {**plain, "tool_choice": {"type": "function", "function": {"name": "weather"}}}, "m"
    )
    assert named["toolConfig"]["toolChoice"] == {"tool": {"name": "weather"}}


def test_images_go_as_bytes_and_an_image_url_is_refused() -> None:
    data = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
    out, _ = from_canonical({"messages": [{"role": "user", "content": [data]}]}, "m")
    image = out["messages"][0]["content"][0]["image"]
    assert image == {"format": "png", "source": {"bytes": "iVBORw0KGgo="}}
    remote = {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}
    with pytest.raises(Unmappable):
        from_canonical({"messages": [{"role": "user", "content": [remote]}]}, "m")
    with pytest.raises(Unmappable):
        from_canonical({"messages": [], "response_format": {"type": "json_object"}}, "m")


def test_an_answer_reads_back_as_the_canonical_completion() -> None:
    wire = ConverseWire("m")
    usage = {"prompt_tokens": 10, "completion_tokens": 4, "total_tokens": 14}
    answer = wire.body(
        content="it is sunny",
        reasoning="thinking",
        tool_calls=tool_specs({"name": "weather", "arguments": {"city": "Paris"}}),
        finish_reason="tool_calls",
        usage=usage,
    )
    canonical = completion_to_canonical(answer)
    message = canonical["choices"][0]["message"]
    assert message["content"] == "it is sunny" and message["reasoning_content"] == "thinking"
    [call] = message["tool_calls"]
    assert call["function"]["name"] == "weather"
    assert orjson.loads(call["function"]["arguments"]) == {"city": "Paris"}
    assert canonical["choices"][0]["finish_reason"] == "tool_calls"
    assert canonical["usage"]["prompt_tokens"] == 10
    assert canonical["usage"]["completion_tokens"] == 4


def _decode(
    events: list[tuple[str | None, dict[str, Any]]],
) -> tuple[list[dict[str, Any]], StreamDecoder]:
    decoder = StreamDecoder()
    chunks: list[dict[str, Any]] = []
    for name, payload in events:
        chunks += decoder.decode({str(name): payload})
    return chunks, decoder


def test_a_stream_decodes_text_reasoning_a_call_finish_and_usage() -> None:
    wire = ConverseWire("m")
    spec = tool_specs({"name": "weather", "arguments": {"city": "Paris"}})[0]
    usage = {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}
    events = [
        *wire.preamble(),
        *wire.reasoning("hmm"),
        *wire.content("Hello"),
        *wire.content(" there"),
        *wire.tool_call(spec, 0),
        *wire.finish("tool_calls", usage),
    ]
    chunks, decoder = _decode(events)
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    assert deltas[0] == {"role": "assistant", "content": ""}
    text = "".join(d.get("content") or "" for d in deltas)
    assert text == "Hello there"
    assert "".join(d.get("reasoning_content") or "" for d in deltas) == "hmm"
    calls = [d["tool_calls"][0] for d in deltas if d.get("tool_calls")]
    assert calls[0]["function"]["name"] == "weather" and calls[0]["index"] == 0
    arguments = "".join(c["function"]["arguments"] for c in calls)
    assert orjson.loads(arguments) == {"city": "Paris"}
    finishes = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
    assert finishes[-1] == "tool_calls"
    assert decoder.finished and decoder.usage is not None
    assert decoder.usage["prompt_tokens"] == 7 and chunks[-1]["choices"] == []


def test_a_stream_without_its_metadata_is_not_finished() -> None:
    wire = ConverseWire("m")
    _, decoder = _decode([*wire.preamble(), *wire.content("cut")])
    assert not decoder.finished


def test_reasoning_effort_becomes_each_models_own_setting() -> None:
    body = {"messages": [{"role": "user", "content": "hi"}], "reasoning_effort": "xhigh"}
    nova, _ = from_canonical(body, "us.amazon.nova-premier-v1:0")
    assert nova["additionalModelRequestFields"] == {
        "reasoningConfig": {"type": "enabled", "maxReasoningEffort": "high"}
    }
    other, notes = from_canonical(body, "meta.llama3-70b-instruct-v1:0")
    assert "additionalModelRequestFields" not in other
    assert any(note.startswith("dropped reasoning_effort") for note in notes)
