"""The protocol translations as pure functions (no Django, no sockets): what each side's
fields become on the other (SPEC §12's mapping list), and what is refused."""

from __future__ import annotations

from typing import Any

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


# ------------------------------------------------------------------------ honest limits
MESSAGES_BODY = {"model": "g", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}
RESPONSES_BODY = {"model": "g", "input": "x"}
CHAT_BODY = {"model": "g", "messages": [{"role": "user", "content": "x"}]}
DOOR_BODY: dict[Protocol, dict[str, Any]] = {
    Protocol.MESSAGES: MESSAGES_BODY,
    Protocol.RESPONSES: RESPONSES_BODY,
    Protocol.CHAT: CHAT_BODY,
}
TRANSLATED = {
    Protocol.MESSAGES: (Protocol.CHAT, Protocol.RESPONSES),
    Protocol.RESPONSES: (Protocol.CHAT, Protocol.MESSAGES),
    Protocol.CHAT: (Protocol.MESSAGES, Protocol.RESPONSES),
}


def _legs(cases: list[tuple[Protocol, dict, object]]) -> list[object]:
    """Each case once per kind its door translates to."""
    return [
        pytest.param(door, kind, extra, expected, id=f"{door.name}-{kind.name}-{'-'.join(extra)}")
        for door, extra, expected in cases
        for kind in TRANSLATED[door]
    ]


@pytest.mark.parametrize(
    ("door", "kind", "extra", "note"),
    _legs(
        [
            (
                Protocol.MESSAGES,
                {"context_management": {"edits": []}},
                "dropped context_management",
            ),
            (Protocol.MESSAGES, {"cache_control": {"type": "ephemeral"}}, "dropped cache_control"),
            (Protocol.MESSAGES, {"top_k": 5}, "dropped top_k"),
            (Protocol.MESSAGES, {"speed": "fast"}, "dropped speed"),
            (Protocol.MESSAGES, {"frobnicate": 1}, "dropped frobnicate"),  # unknown: noted
            (Protocol.RESPONSES, {"text": {"verbosity": "low"}}, "dropped text.verbosity"),
            (Protocol.RESPONSES, {"metadata": {"k": "v"}}, "dropped metadata"),
            (Protocol.RESPONSES, {"max_tool_calls": 3}, "dropped max_tool_calls"),
            (Protocol.RESPONSES, {"truncation": "auto"}, "dropped truncation"),
            (Protocol.RESPONSES, {"frobnicate": 1}, "dropped frobnicate"),
            (
                Protocol.CHAT,
                {"prediction": {"type": "content", "content": "x"}},
                "dropped prediction",
            ),
            (Protocol.CHAT, {"seed": 7}, "dropped seed"),
            (Protocol.CHAT, {"frobnicate": 1}, "dropped frobnicate"),
        ]
    ),
)
def test_a_harmless_field_is_dropped_with_a_note(
    door: Protocol, kind: Protocol, extra: dict, note: str
) -> None:
    body = {**DOOR_BODY[door], **extra}
    prepared = legs.translate_request(door, body, [kind])
    assert note in prepared.notes[kind]
    sent = orjson.loads(prepared.request(kind, "m"))
    assert not set(extra) & set(sent) - {"text"}  # gone from the target's body


@pytest.mark.parametrize(
    ("door", "kind", "extra", "param"),
    _legs(
        [
            (
                Protocol.MESSAGES,
                {"mcp_servers": [{"type": "url", "url": "https://mcp.example", "name": "x"}]},
                "mcp_servers",
            ),
            (Protocol.RESPONSES, {"background": True}, "background"),
            (Protocol.RESPONSES, {"prompt": {"id": "pmpt_1"}}, "prompt"),
            (Protocol.RESPONSES, {"top_logprobs": 3}, "top_logprobs"),
            (Protocol.CHAT, {"web_search_options": {}}, "web_search_options"),
            (Protocol.CHAT, {"n": 2}, "n"),
            (Protocol.CHAT, {"modalities": ["text", "audio"]}, "modalities"),
            (Protocol.CHAT, {"functions": [{"name": "f"}]}, "functions"),
        ]
    ),
)
def test_a_field_that_changes_the_answer_is_refused(
    door: Protocol, kind: Protocol, extra: dict, param: str
) -> None:
    with pytest.raises(Unmappable) as info:
        legs.translate_request(door, {**DOOR_BODY[door], **extra}, [kind])
    assert info.value.param == param
    assert f"'{param}' asks for" in str(info.value)


@pytest.mark.parametrize(
    ("door", "kind", "extra", "_"),
    _legs(
        [
            (Protocol.MESSAGES, {"output_config": {"effort": "high"}}, None),
            (Protocol.MESSAGES, {"mcp_servers": []}, None),
            (Protocol.MESSAGES, {"metadata": {"user_id": "u"}, "top_p": 0.9}, None),
            (Protocol.RESPONSES, {"background": False, "store": False}, None),
            (Protocol.RESPONSES, {"reasoning": {"effort": "low", "summary": "auto"}}, None),
            (Protocol.RESPONSES, {"text": {"format": {"type": "text"}}}, None),
            (Protocol.CHAT, {"n": 1, "logprobs": False, "modalities": ["text"]}, None),
            (Protocol.CHAT, {"stream": True, "stream_options": {"include_usage": True}}, None),
            (Protocol.CHAT, {"web_search_options": None}, None),  # null asks for nothing
        ]
    ),
)
def test_harmless_values_and_mapped_fields_pass_without_a_note(
    door: Protocol, kind: Protocol, extra: dict, _: None
) -> None:
    prepared = legs.translate_request(door, {**DOOR_BODY[door], **extra}, [kind])
    assert not [n for n in prepared.notes[kind] if n.startswith("dropped")]


def test_block_cache_breakpoints_are_noted_once() -> None:
    body = {
        **MESSAGES_BODY,
        "system": [{"type": "text", "text": "s", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}}],
            }
        ],
    }
    prepared = legs.translate_request(Protocol.MESSAGES, body, [Protocol.CHAT])
    assert prepared.notes[Protocol.CHAT] == ("dropped cache_control",)


def test_chat_fields_with_a_responses_counterpart_are_mapped_not_dropped() -> None:
    body = {
        **CHAT_BODY,
        "verbosity": "low",
        "metadata": {"k": "v"},
        "service_tier": "flex",
        "prompt_cache_key": "pck",
        "response_format": {"type": "json_schema", "json_schema": {"name": "o", "schema": {}}},
    }
    out, notes = responses.from_canonical(body, "m")
    assert notes == []
    assert out["text"] == {
        "format": {"type": "json_schema", "name": "o", "schema": {}},
        "verbosity": "low",
    }
    assert (out["metadata"], out["service_tier"], out["prompt_cache_key"]) == (
        {"k": "v"},
        "flex",
        "pck",
    )


@pytest.mark.parametrize("door", [Protocol.MESSAGES, Protocol.RESPONSES])
def test_every_field_a_door_puts_in_the_canonical_view_is_mapped_by_every_kind(
    door: Protocol,
) -> None:
    """The door tables and the target tables agree: a rich request translated door → kind
    loses nothing on the way out but what the target's protocol lacks (Responses has no
    stop sequences)."""
    rich = (
        {
            **TOOL_USE_HISTORY,
            "temperature": 0.5,
            "top_p": 0.9,
            "stream": True,
            "metadata": {"user_id": "u"},
            "tool_choice": {"type": "auto", "disable_parallel_tool_use": True},
        }
        if door is Protocol.MESSAGES
        else {
            "model": "g",
            "instructions": "i",
            "input": "x",
            "stream": True,
            "temperature": 0.5,
            "top_p": 0.9,
            "parallel_tool_calls": False,
            "max_output_tokens": 10,
            "tools": [{"type": "function", "name": "f", "parameters": {}}],
            "tool_choice": "auto",
            "reasoning": {"effort": "low"},
            "text": {"format": {"type": "json_object"}},
            "user": "u",
        }
    )
    canonical, door_notes = (messages if door is Protocol.MESSAGES else responses).to_canonical(
        rich
    )
    for kind in TRANSLATED[door]:
        if kind is Protocol.CHAT:
            continue
        if kind is Protocol.MESSAGES:  # a JSON object format is refused there: leave it out
            canonical = {k: v for k, v in canonical.items() if k != "response_format"}
        module = messages if kind is Protocol.MESSAGES else responses
        _, notes = module.from_canonical(canonical, "m")
        dropped = [n for n in notes if n.startswith("dropped ") and "history" not in n]
        assert dropped == (["dropped stop"] if kind is Protocol.RESPONSES else [])


def test_a_mixed_group_skips_the_kinds_that_cannot_take_the_request() -> None:
    """A server tool from Claude Code: the group's anthropic targets take it as sent; its
    chat targets are skipped with the reason instead of refusing the whole request."""
    body = {**MESSAGES_BODY, "tools": [{"type": "web_search_20250305", "name": "web_search"}]}
    prepared = legs.translate_request(Protocol.MESSAGES, body, [Protocol.MESSAGES, Protocol.CHAT])
    assert set(prepared.refused) == {Protocol.CHAT}
    assert orjson.loads(prepared.request(Protocol.MESSAGES, "m"))["tools"] == body["tools"]
    skipped = legs.skipped_targets(prepared, [("a/x", "anthropic"), ("c/y", "openai")])
    assert list(skipped) == ["c/y"]
    assert skipped["c/y"].startswith("kind 'openai' cannot take this request: 'tools[0]'")
    with pytest.raises(Unmappable):  # no kind of the group can: refused
        legs.translate_request(Protocol.MESSAGES, body, [Protocol.CHAT, Protocol.RESPONSES])


def test_a_kind_refused_only_on_the_way_out_is_skipped_the_others_serve() -> None:
    body = {**CHAT_BODY, "n": 2}
    prepared = legs.translate_request(Protocol.CHAT, body, [Protocol.MESSAGES, Protocol.CHAT])
    assert set(prepared.refused) == {Protocol.MESSAGES}
    assert "(a target of kind 'anthropic')" in str(prepared.refused[Protocol.MESSAGES])
    with pytest.raises(Unmappable) as info:
        legs.translate_request(Protocol.CHAT, body, [Protocol.MESSAGES, Protocol.RESPONSES])
    assert info.value.param == "n" and "anthropic" in str(info.value)  # the first kind's
