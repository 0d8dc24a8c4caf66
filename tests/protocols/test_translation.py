"""The protocol translations as pure functions (no Django, no sockets): what each side's
fields become on the other (SPEC §12's mapping list), and what is refused."""

from __future__ import annotations

import orjson
import pytest

from routing.protocols import Protocol, Unmappable, legs, messages, responses

TOOL_USE_HISTORY = {
    "model": "g",
    "max_tokens": 100,
    "system": [{"type": "text", "text": "Be brief."}],
    "messages": [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look"},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": "AAA="},
                },
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "use the tool", "signature": "sig"},
                {"type": "text", "text": "Checking."},
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "get_weather",
                    "input": {"city": "Paris"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"},
                {"type": "text", "text": "thanks"},
            ],
        },
    ],
    "tools": [
        {"name": "get_weather", "description": "weather", "input_schema": {"type": "object"}}
    ],
    "tool_choice": {"type": "any"},
    "stop_sequences": ["END"],
    "thinking": {"type": "enabled", "budget_tokens": 10000},
}


def test_messages_history_becomes_the_canonical_chat_history() -> None:
    chat, notes = messages.to_canonical(TOOL_USE_HISTORY)
    assert notes == []
    assert chat["messages"] == [
        {"role": "system", "content": "Be brief."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAA="}},
            ],
        },
        {
            "role": "assistant",
            "content": "Checking.",
            "reasoning_content": "use the tool",
            "tool_calls": [
                {
                    "id": "toolu_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "toolu_1", "content": "sunny"},
        {"role": "user", "content": "thanks"},
    ]
    assert chat["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "parameters": {"type": "object"},
                "description": "weather",
            },
        }
    ]
    assert chat["tool_choice"] == "required"
    assert chat["stop"] == ["END"]
    assert chat["reasoning_effort"] == "medium"


def test_canonical_history_becomes_a_messages_request_again() -> None:
    chat, _ = messages.to_canonical(TOOL_USE_HISTORY)
    out, notes = messages.from_canonical(chat, "claude-x")
    assert out["system"] == "Be brief."
    assert out["messages"][1]["content"] == [
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
    ]  # the other protocol's reasoning cannot carry a signature: dropped, and said so
    assert any("reasoning" in n for n in notes)
    assert out["messages"][2] == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"},
            {"type": "text", "text": "thanks"},
        ],
    }
    assert out["messages"][0]["content"][1] == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "AAA="},
    }
    assert out["thinking"] == {"type": "enabled", "budget_tokens": 8192}
    assert out["max_tokens"] > 8192 and out["tool_choice"] == {"type": "any"}


def test_chat_history_becomes_responses_items() -> None:
    chat, _ = messages.to_canonical(TOOL_USE_HISTORY)
    out, _ = responses.from_canonical(chat, "gpt-x")
    assert out["instructions"] == "Be brief." and out["store"] is False
    kinds = [item.get("type") for item in out["input"]]
    assert kinds == ["message", "message", "function_call", "function_call_output", "message"]
    assert out["input"][2] == {
        "type": "function_call",
        "call_id": "toolu_1",
        "name": "get_weather",
        "arguments": '{"city":"Paris"}',
    }
    assert out["input"][3] == {
        "type": "function_call_output",
        "call_id": "toolu_1",
        "output": "sunny",
    }
    assert out["tools"] == [
        {
            "type": "function",
            "name": "get_weather",
            "parameters": {"type": "object"},
            "description": "weather",
        }
    ]
    assert out["reasoning"]["effort"] == "medium"


def test_responses_items_become_the_canonical_history() -> None:
    body = {
        "model": "g",
        "instructions": "Be brief.",
        "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "look"}]},
            {"type": "reasoning", "summary": [{"type": "summary_text", "text": "think"}]},
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "done"},
        ],
        "max_output_tokens": 50,
        "reasoning": {"effort": "high"},
    }
    chat, _ = responses.to_canonical(body)
    assert chat["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "look"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
            "reasoning_content": "think",
        },
        {"role": "tool", "tool_call_id": "c1", "content": "done"},
    ]
    assert chat["max_tokens"] == 50 and chat["reasoning_effort"] == "high"


@pytest.mark.parametrize(
    ("door", "body", "kind", "param"),
    [
        (
            Protocol.MESSAGES,
            {
                "model": "g",
                "max_tokens": 5,
                "messages": [{"role": "user", "content": "x"}],
                "tools": [{"type": "web_search_20250305", "name": "web_search"}],
            },
            Protocol.CHAT,
            "tools",
        ),
        (
            Protocol.MESSAGES,
            {
                "model": "g",
                "max_tokens": 5,
                "messages": [
                    {
                        "role": "user",
                        "content": [{"type": "document", "source": {"type": "text", "data": "x"}}],
                    }
                ],
            },
            Protocol.RESPONSES,
            "messages[0]",
        ),
        (
            Protocol.RESPONSES,
            {"model": "g", "input": "x", "tools": [{"type": "web_search"}]},
            Protocol.MESSAGES,
            "tools",
        ),
        (
            Protocol.RESPONSES,
            {"model": "g", "input": [{"type": "item_reference", "id": "x"}]},
            Protocol.CHAT,
            "input",
        ),
        (
            Protocol.CHAT,
            {"model": "g", "messages": [{"role": "user", "content": "x"}], "n": 2},
            Protocol.MESSAGES,
            "n",
        ),
        (
            Protocol.CHAT,
            {"model": "g", "messages": [{"role": "user", "content": "x"}], "logprobs": True},
            Protocol.MESSAGES,
            "logprobs",
        ),
        (
            Protocol.RESPONSES,
            {"model": "g", "input": "x", "previous_response_id": "resp_1"},
            Protocol.RESPONSES,
            "previous_response_id",
        ),
    ],
)
def test_unmappable_fields_are_refused_naming_the_field(
    door: Protocol, body: dict, kind: Protocol, param: str
) -> None:
    with pytest.raises(Unmappable) as info:
        legs.translate_request(door, body, [kind])
    assert info.value.param == param


def test_same_protocol_needs_no_translation_and_keeps_every_field() -> None:
    body = {**TOOL_USE_HISTORY, "tools": [{"type": "web_search_20250305", "name": "web_search"}]}
    prepared = legs.translate_request(Protocol.MESSAGES, body, [Protocol.MESSAGES])
    assert orjson.loads(prepared.request(Protocol.MESSAGES, "claude-x")) == {
        **body,
        "model": "claude-x",
    }


def test_anthropic_answer_and_usage_with_cache_tokens() -> None:
    answer = {
        "id": "msg_1",
        "model": "claude-x",
        "stop_reason": "max_tokens",
        "content": [{"type": "text", "text": "hi"}],
        "usage": {
            "input_tokens": 10,
            "output_tokens": 3,
            "cache_read_input_tokens": 100,
            "cache_creation_input_tokens": 5,
        },
    }
    chat = messages.completion_to_canonical(answer)
    assert chat["choices"][0]["finish_reason"] == "length"
    assert chat["usage"] == {
        "prompt_tokens": 115,
        "completion_tokens": 3,
        "total_tokens": 118,
        "prompt_tokens_details": {"cached_tokens": 100},
        "cache_creation_input_tokens": 5,
    }
    back = messages.completion_from_canonical(chat)
    assert back["usage"] == answer["usage"] and back["stop_reason"] == "max_tokens"
    assert responses.completion_from_canonical(chat)["usage"]["input_tokens_details"] == {
        "cached_tokens": 100
    }


@pytest.mark.parametrize(
    ("reason", "anthropic"),
    [
        ("stop", "end_turn"),
        ("length", "max_tokens"),
        ("tool_calls", "tool_use"),
        ("content_filter", "refusal"),
    ],
)
def test_stop_reasons_map_both_ways(reason: str, anthropic: str) -> None:
    chat = {
        "id": "x",
        "model": "m",
        "choices": [{"message": {"role": "assistant", "content": "a"}, "finish_reason": reason}],
    }
    out = messages.completion_from_canonical(chat)
    assert out["stop_reason"] == anthropic
    assert messages.completion_to_canonical(out)["choices"][0]["finish_reason"] == reason


def test_anthropic_stream_decodes_to_canonical_and_encodes_back() -> None:
    events = [
        {
            "type": "message_start",
            "message": {"id": "msg_1", "model": "m", "usage": {"input_tokens": 4}},
        },
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "thinking", "thinking": ""},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "thinking_delta", "thinking": "hm"},
        },
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {"type": "tool_use", "id": "t1", "name": "f", "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": '{"a":'},
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": "1}"},
        },
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use"},
            "usage": {"output_tokens": 7},
        },
        {"type": "message_stop"},
    ]
    decoder = messages.StreamDecoder()
    chunks = [c for e in events for c in decoder.decode(e)]
    assert decoder.finished and decoder.usage == {
        "prompt_tokens": 4,
        "completion_tokens": 7,
        "total_tokens": 11,
    }
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    assert deltas[1] == {"reasoning_content": "hm"}
    assert deltas[2]["tool_calls"][0]["id"] == "t1"
    assert (
        "".join(d["tool_calls"][0]["function"]["arguments"] for d in deltas if d.get("tool_calls"))
        == '{"a":1}'
    )
    encoder = responses.StreamEncoder()
    wire = encoder.encode(chunks) + encoder.end()
    names = [line[7:] for line in wire.decode().splitlines() if line.startswith("event: ")]
    assert names[:2] == ["response.created", "response.in_progress"]
    assert "response.reasoning_summary_text.delta" in names
    assert "response.function_call_arguments.done" in names and names[-1] == "response.completed"
    numbers = [
        orjson.loads(line[6:])["sequence_number"]
        for line in wire.decode().splitlines()
        if line.startswith("data: ")
    ]
    assert numbers == list(range(len(numbers)))
