"""The Gemini codec: generateContent bodies, answers and streams <-> the canonical view,
and round trips gemini ↔ chat ↔ messages (table-driven)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from routing.protocols import Unmappable
from routing.protocols import messages as messages_codec
from routing.protocols.gemini import reply, request, stream
from routing.protocols.gemini.schema import to_json_schema
from routing.protocols.responses.tools import HostedTools

SIG = "c2lnbmF0dXJlLW9mLWEtY2FsbA=="

# A tool loop as Gemini CLI sends it: a model turn with a thought, a signed call, the result.
TOOL_LOOP: dict[str, Any] = {
    "model": "gemini-2.5-pro",
    "systemInstruction": {"parts": [{"text": "You are terse."}]},
    "contents": [
        {"role": "user", "parts": [{"text": "list files"}]},
        {
            "role": "model",
            "parts": [
                {"text": "I should run ls.", "thought": True},
                {
                    "functionCall": {"id": "c1", "name": "shell", "args": {"cmd": "ls"}},
                    "thoughtSignature": SIG,
                },
            ],
        },
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"id": "c1", "name": "shell", "response": {"output": "a.txt"}}}
            ],
        },
    ],
    "tools": [
        {
            "functionDeclarations": [
                {
                    "name": "shell",
                    "description": "run a command",
                    "parameters": {
                        "type": "OBJECT",
                        "properties": {"cmd": {"type": "STRING", "nullable": True}},
                        "required": ["cmd"],
                        "propertyOrdering": ["cmd"],
                    },
                }
            ]
        }
    ],
    "toolConfig": {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["shell"]}},
    "generationConfig": {
        "temperature": 0.2,
        "topP": 0.9,
        "maxOutputTokens": 512,
        "stopSequences": ["END"],
        "thinkingConfig": {"includeThoughts": True, "thinkingBudget": 8192},
    },
}


def test_tool_loop_to_canonical() -> None:
    canonical, notes = request.to_canonical(TOOL_LOOP)
    assert notes == []
    system, user, assistant, result = canonical["messages"]
    assert system == {"role": "system", "content": "You are terse."}
    assert user == {"role": "user", "content": "list files"}
    assert assistant["reasoning_content"] == "I should run ls."
    [call] = assistant["tool_calls"]
    assert call["id"] == "c1" and call["function"]["name"] == "shell"
    assert orjson.loads(call["function"]["arguments"]) == {"cmd": "ls"}
    assert call["extra_content"] == {"google": {"thought_signature": SIG}}
    assert result == {"role": "tool", "tool_call_id": "c1", "content": "a.txt"}
    [tool] = canonical["tools"]
    assert tool["function"]["parameters"] == {
        "type": "object",
        "properties": {"cmd": {"type": ["string", "null"]}},
        "required": ["cmd"],
    }
    assert canonical["tool_choice"] == {"type": "function", "function": {"name": "shell"}}
    assert canonical["temperature"] == 0.2 and canonical["top_p"] == 0.9
    assert canonical["max_tokens"] == 512 and canonical["stop"] == ["END"]
    assert canonical["reasoning_effort"] == "medium"


def test_tool_loop_back_to_gemini_keeps_the_signature_and_the_call() -> None:
    canonical, _ = request.to_canonical(TOOL_LOOP)
    body, notes = request.from_canonical(canonical, "gemini-2.5-pro")
    assert "model" not in body  # Google names the model in the URL
    assert body["systemInstruction"] == {"parts": [{"text": "You are terse."}]}
    user, model, result = body["contents"]
    assert model["role"] == "model"
    assert model["parts"] == [
        {
            "functionCall": {"name": "shell", "args": {"cmd": "ls"}, "id": "c1"},
            "thoughtSignature": SIG,
        }
    ]
    assert result["parts"][0]["functionResponse"] == {
        "id": "c1",
        "name": "shell",
        "response": {"result": "a.txt"},
    }
    assert body["toolConfig"] == {
        "functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["shell"]}
    }
    config = body["generationConfig"]
    assert config["thinkingConfig"] == {"includeThoughts": True, "thinkingBudget": 8192}
    assert config["maxOutputTokens"] == 512 and config["stopSequences"] == ["END"]
    assert any("dropped reasoning" in note for note in notes)


def test_ids_missing_from_gemini_2_calls_are_matched_by_name_in_order() -> None:
    body = {
        "contents": [
            {"role": "user", "parts": [{"text": "two"}]},
            {
                "role": "model",
                "parts": [
                    {"functionCall": {"name": "f", "args": {"n": 1}}},
                    {"functionCall": {"name": "f", "args": {"n": 2}}},
                ],
            },
            {
                "role": "user",
                "parts": [
                    {"functionResponse": {"name": "f", "response": {"r": 1}}},
                    {"functionResponse": {"name": "f", "response": {"r": 2}}},
                ],
            },
        ]
    }
    canonical, _ = request.to_canonical(body)
    calls = canonical["messages"][1]["tool_calls"]
    results = canonical["messages"][2:]
    assert [r["tool_call_id"] for r in results] == [c["id"] for c in calls]
    assert len({c["id"] for c in calls}) == 2
    assert orjson.loads(results[1]["content"]) == {"r": 2}


def test_a_foreign_history_gets_the_placeholder_signature_on_gemini_3_only() -> None:
    canonical = {
        "messages": [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "t1", "type": "function", "function": {"name": "f", "arguments": "{}"}},
                    {"id": "t2", "type": "function", "function": {"name": "g", "arguments": "{}"}},
                ],
            },
            {"role": "tool", "tool_call_id": "t1", "content": "1"},
            {"role": "tool", "tool_call_id": "t2", "content": "2"},
        ]
    }
    body3, _ = request.from_canonical(canonical, "gemini-3-pro-preview")
    first, second = body3["contents"][1]["parts"]
    assert first["thoughtSignature"] == request.PLACEHOLDER_SIGNATURE
    assert "thoughtSignature" not in second
    results = body3["contents"][2]["parts"]  # both results in one user turn, names found
    assert [p["functionResponse"]["name"] for p in results] == ["f", "g"]
    body25, _ = request.from_canonical(canonical, "gemini-2.5-flash")
    assert all("thoughtSignature" not in p for p in body25["contents"][1]["parts"])


def test_images_both_ways() -> None:
    body = {
        "contents": [
            {
                "role": "user",
                "parts": [
                    {"text": "what is this"},
                    {"inlineData": {"mimeType": "image/png", "data": "iVBORw0"}},
                ],
            }
        ]
    }
    canonical, _ = request.to_canonical(body)
    parts = canonical["messages"][0]["content"]
    assert parts[1] == {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0"}}
    back, _ = request.from_canonical(canonical, "gemini-2.5-flash")
    assert back["contents"][0]["parts"] == body["contents"][0]["parts"]
    with pytest.raises(Unmappable):
        request.to_canonical(
            {
                "contents": [
                    {
                        "role": "user",
                        "parts": [{"inlineData": {"mimeType": "audio/wav", "data": "x"}}],
                    }
                ]
            }
        )


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (
            {
                "responseMimeType": "application/json",
                "responseJsonSchema": {"type": "object", "properties": {"a": {"type": "string"}}},
            },
            {"type": "object", "properties": {"a": {"type": "string"}}},
        ),
        (
            {
                "responseMimeType": "application/json",
                "responseSchema": {"type": "ARRAY", "items": {"type": "INTEGER"}},
            },
            {"type": "array", "items": {"type": "integer"}},
        ),
        (  # Gemini CLI 0.61.0's classifier: JSON Schema, upper-case types
            {
                "responseMimeType": "application/json",
                "responseJsonSchema": {
                    "type": "OBJECT",
                    "properties": {"score": {"type": "INTEGER", "description": "1-100"}},
                    "required": ["score"],
                },
            },
            {
                "type": "object",
                "properties": {"score": {"type": "integer", "description": "1-100"}},
                "required": ["score"],
            },
        ),
    ],
)
def test_structured_output_to_json_schema_and_back(config: dict[str, Any], expected: Any) -> None:
    body = {"contents": [{"role": "user", "parts": [{"text": "x"}]}], "generationConfig": config}
    canonical, _ = request.to_canonical(body)
    assert canonical["response_format"]["json_schema"]["schema"] == expected
    back, _ = request.from_canonical(canonical, "gemini-2.5-flash")
    assert back["generationConfig"]["responseMimeType"] == "application/json"
    assert back["generationConfig"]["responseJsonSchema"] == expected
    messages_body, _ = messages_codec.from_canonical(canonical, "claude")
    assert messages_body["output_config"]["format"]["schema"] == expected


def test_json_mime_alone_is_json_object() -> None:
    body = {"contents": [], "generationConfig": {"responseMimeType": "application/json"}}
    canonical, _ = request.to_canonical(body)
    assert canonical["response_format"] == {"type": "json_object"}
    back, _ = request.from_canonical(canonical, "g")
    assert back["generationConfig"] == {"responseMimeType": "application/json"}


def test_schema_normalisation_reaches_nested_schemas() -> None:
    schema = {
        "type": "OBJECT",
        "properties": {
            "xs": {
                "type": "ARRAY",
                "items": {"anyOf": [{"type": "STRING"}, {"type": "NUMBER", "nullable": True}]},
            }
        },
    }
    assert to_json_schema(schema) == {
        "type": "object",
        "properties": {
            "xs": {
                "type": "array",
                "items": {"anyOf": [{"type": "string"}, {"type": ["number", "null"]}]},
            }
        },
    }


@pytest.mark.parametrize(
    ("thinking", "model", "effort", "written"),
    [
        ({"thinkingLevel": "high"}, "gemini-3-pro-preview", "high", {"thinkingLevel": "high"}),
        ({"thinkingLevel": "low"}, "gemini-3-flash", "low", {"thinkingLevel": "low"}),
        ({"thinkingBudget": 2048}, "gemini-2.5-flash", "low", {"thinkingBudget": 2048}),
        ({"thinkingBudget": 30000}, "gemini-2.5-pro", "high", {"thinkingBudget": 16384}),
        ({"thinkingBudget": 0}, "gemini-2.5-pro", None, None),
        ({"thinkingBudget": -1}, "gemini-2.5-pro", None, None),
    ],
)
def test_thinking_config_maps_onto_the_effort_policy(
    thinking: dict[str, Any], model: str, effort: str | None, written: dict[str, Any] | None
) -> None:
    body = {"contents": [], "generationConfig": {"thinkingConfig": thinking}}
    canonical, _ = request.to_canonical(body)
    assert canonical.get("reasoning_effort") == effort
    back, _ = request.from_canonical(canonical, model)
    got = (back.get("generationConfig") or {}).get("thinkingConfig")
    assert got == (None if written is None else {"includeThoughts": True, **written})


def test_field_tables_drop_refuse_and_follow_hosted_tools() -> None:
    body = {
        "contents": [{"role": "user", "parts": [{"text": "x"}]}],
        "safetySettings": [{"category": "HARM_CATEGORY_HATE_SPEECH", "threshold": "BLOCK_NONE"}],
        "tools": [{"googleSearch": {}}],
        "generationConfig": {"topK": 40, "candidateCount": 1},
    }
    canonical, notes = request.to_canonical(body)
    assert "dropped safetySettings" in notes and "dropped generationConfig.topK" in notes
    assert "dropped hosted tool googleSearch" in notes and "tools" not in canonical
    with pytest.raises(Unmappable) as skip:
        request.to_canonical(body, HostedTools.SKIP)
    assert skip.value.param == "tools"
    with pytest.raises(Unmappable) as cached:
        request.to_canonical({**body, "cachedContent": "cachedContents/abc"})
    assert cached.value.param == "cachedContent"
    with pytest.raises(Unmappable):
        request.to_canonical({**body, "generationConfig": {"candidateCount": 2}})
    with pytest.raises(Unmappable) as role:
        request.to_canonical({"contents": [{"role": "system", "parts": [{"text": "x"}]}]})
    assert role.value.param == "contents[0]"
    _, out_notes = request.from_canonical(
        {"messages": [{"role": "user", "content": "x"}], "user": "u", "parallel_tool_calls": False},
        "g",
    )
    assert sorted(out_notes) == ["dropped parallel_tool_calls", "dropped user"]
    with pytest.raises(Unmappable):
        request.from_canonical({"messages": [], "n": 3}, "g")


# ------------------------------------------------------------------------------ answers
ANSWER: dict[str, Any] = {
    "candidates": [
        {
            "content": {
                "role": "model",
                "parts": [
                    {"text": "thinking…", "thought": True},
                    {"text": "Running it."},
                    {
                        "functionCall": {"name": "shell", "args": {"cmd": "ls"}},
                        "thoughtSignature": SIG,
                    },
                ],
            },
            "finishReason": "STOP",
            "index": 0,
        }
    ],
    "usageMetadata": {
        "promptTokenCount": 100,
        "candidatesTokenCount": 20,
        "thoughtsTokenCount": 30,
        "cachedContentTokenCount": 40,
        "totalTokenCount": 150,
    },
    "modelVersion": "gemini-2.5-pro",
    "responseId": "resp-1",
}


def test_answer_to_canonical_and_back() -> None:
    canonical = reply.completion_to_canonical(ANSWER)
    [choice] = canonical["choices"]
    assert choice["finish_reason"] == "tool_calls"  # STOP with a call
    message = choice["message"]
    assert message["content"] == "Running it." and message["reasoning_content"] == "thinking…"
    [call] = message["tool_calls"]
    assert (
        call["id"].startswith("call_")
        and call["extra_content"]["google"]["thought_signature"] == SIG
    )
    assert canonical["usage"] == {
        "prompt_tokens": 100,
        "completion_tokens": 50,
        "total_tokens": 150,
        "prompt_tokens_details": {"cached_tokens": 40},
        "completion_tokens_details": {"reasoning_tokens": 30},
    }
    assert canonical["id"] == "resp-1" and canonical["model"] == "gemini-2.5-pro"
    back = reply.completion_from_canonical(canonical)
    assert back["usageMetadata"] == ANSWER["usageMetadata"]
    parts = back["candidates"][0]["content"]["parts"]
    assert parts[0] == {"text": "thinking…", "thought": True}
    assert parts[2]["functionCall"]["id"] == call["id"] and parts[2]["thoughtSignature"] == SIG
    assert back["candidates"][0]["finishReason"] == "STOP"


@pytest.mark.parametrize(
    ("gemini", "chat", "back"),
    [
        ("STOP", "stop", "STOP"),
        ("MAX_TOKENS", "length", "MAX_TOKENS"),
        ("SAFETY", "content_filter", "SAFETY"),
        ("RECITATION", "content_filter", "SAFETY"),
        ("PROHIBITED_CONTENT", "content_filter", "SAFETY"),
        ("MALFORMED_FUNCTION_CALL", "stop", "STOP"),
        ("OTHER", "stop", "STOP"),
    ],
)
def test_finish_reasons(gemini: str, chat: str, back: str) -> None:
    answer = {"candidates": [{"content": {"parts": [{"text": "x"}]}, "finishReason": gemini}]}
    canonical = reply.completion_to_canonical(answer)
    assert canonical["choices"][0]["finish_reason"] == chat
    assert reply.completion_from_canonical(canonical)["candidates"][0]["finishReason"] == back
    assert messages_codec.completion_from_canonical(canonical)["stop_reason"]


def test_a_blocked_prompt_is_a_content_filter_finish() -> None:
    canonical = reply.completion_to_canonical({"promptFeedback": {"blockReason": "SAFETY"}})
    assert canonical["choices"][0]["finish_reason"] == "content_filter"


def test_error_body_is_googles_shape() -> None:
    assert orjson.loads(reply.error_body("no such model", status=404)) == {
        "error": {"code": 404, "message": "no such model", "status": "NOT_FOUND"}
    }
    assert orjson.loads(reply.error_body("gone", status=503))["error"]["status"] == "UNAVAILABLE"


# ------------------------------------------------------------------------------ streams
def _sse(payloads: list[dict[str, Any]]) -> list[dict[str, Any]]:
    decoder = stream.StreamDecoder()
    chunks = [c for p in payloads for c in decoder.decode(p)]
    assert decoder.finished
    return chunks


STREAM: list[dict[str, Any]] = [
    {
        "candidates": [{"content": {"role": "model", "parts": [{"text": "hmm", "thought": True}]}}],
        "responseId": "r9",
        "modelVersion": "gemini-2.5-flash",
    },
    {
        "candidates": [{"content": {"role": "model", "parts": [{"text": "Hel"}]}}],
        "usageMetadata": {"promptTokenCount": 5},
    },
    {"candidates": [{"content": {"role": "model", "parts": [{"text": "lo"}]}}]},
    {
        "candidates": [
            {
                "content": {
                    "role": "model",
                    "parts": [
                        {
                            "functionCall": {"id": "k", "name": "f", "args": {"a": 1}},
                            "thoughtSignature": SIG,
                        }
                    ],
                },
                "finishReason": "STOP",
            }
        ],
        "usageMetadata": {
            "promptTokenCount": 5,
            "candidatesTokenCount": 7,
            "thoughtsTokenCount": 2,
            "totalTokenCount": 14,
        },
    },
]


def test_stream_decodes_to_canonical_chunks() -> None:
    chunks = _sse(STREAM)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert chunks[0]["id"] == "r9" and chunks[0]["model"] == "gemini-2.5-flash"
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    assert deltas[1] == {"reasoning_content": "hmm"}
    assert [d.get("content") for d in deltas[2:4]] == ["Hel", "lo"]
    [call] = deltas[4]["tool_calls"]
    assert call["id"] == "k" and orjson.loads(call["function"]["arguments"]) == {"a": 1}
    assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 9


def test_a_stream_without_finish_reason_is_not_finished() -> None:
    decoder = stream.StreamDecoder()
    decoder.decode(STREAM[1])
    assert not decoder.finished


def _lines(raw: bytes) -> list[dict[str, Any]]:
    out = []
    for block in raw.split(b"\r\n\r\n"):
        if block:
            assert block.startswith(b"data: ") and b"event:" not in block
            out.append(orjson.loads(block[6:]))
    return out


def test_stream_round_trip_through_the_encoder() -> None:
    encoder = stream.StreamEncoder()
    lines = _lines(encoder.encode(_sse(STREAM)) + encoder.end())
    assert b"[DONE]" not in encoder.end()
    texts = [p for line in lines for p in line["candidates"][0]["content"]["parts"]]
    assert texts[0] == {"text": "hmm", "thought": True}
    assert texts[1:3] == [{"text": "Hel"}, {"text": "lo"}]
    last = lines[-1]
    assert last["candidates"][0]["finishReason"] == "STOP"
    assert last["candidates"][0]["content"]["parts"] == [
        {"functionCall": {"name": "f", "args": {"a": 1}, "id": "k"}, "thoughtSignature": SIG}
    ]
    assert last["usageMetadata"] == STREAM[-1]["usageMetadata"]
    assert last["responseId"] == "r9"


def test_a_call_streamed_in_pieces_goes_out_whole() -> None:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": "x",
            "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    pieces = [
        chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "t",
                        "type": "function",
                        "function": {"name": "f", "arguments": ""},
                    }
                ]
            }
        ),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"q": '}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"z"}'}}]}),
        chunk({}, "tool_calls"),
    ]
    encoder = stream.StreamEncoder()
    assert encoder.encode(pieces) == b""  # nothing before the call is whole
    [last] = _lines(encoder.end())
    assert last["candidates"][0]["content"]["parts"] == [
        {"functionCall": {"name": "f", "args": {"q": "z"}, "id": "t"}}
    ]


def test_error_event_is_a_last_data_line() -> None:
    [line] = _lines(stream.error_event("upstream cut", status=502))
    assert line == {"error": {"code": 502, "message": "upstream cut", "status": "UNAVAILABLE"}}


# ---------------------------------------------------------------- gemini ↔ chat ↔ messages
ROUND_TRIPS = [
    pytest.param(
        {
            "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
            "generationConfig": {"maxOutputTokens": 64},
        },
        id="text",
    ),
    pytest.param(
        {
            "systemInstruction": {"parts": [{"text": "be brief"}]},
            "contents": [
                {"role": "user", "parts": [{"text": "q"}]},
                {"role": "model", "parts": [{"text": "a"}]},
                {"role": "user", "parts": [{"text": "q2"}]},
            ],
            "generationConfig": {
                "temperature": 0.5,
                "maxOutputTokens": 100,
                "stopSequences": ["x"],
            },
        },
        id="multi-turn",
    ),
    pytest.param(
        {
            "contents": [
                {"role": "user", "parts": [{"text": "run"}]},
                {
                    "role": "model",
                    "parts": [
                        {"functionCall": {"id": "c9", "name": "shell", "args": {"cmd": "pwd"}}}
                    ],
                },
                {
                    "role": "user",
                    "parts": [
                        {
                            "functionResponse": {
                                "id": "c9",
                                "name": "shell",
                                "response": {"result": "/tmp"},
                            }
                        }
                    ],
                },
            ],
            "tools": [
                {
                    "functionDeclarations": [
                        {
                            "name": "shell",
                            "parametersJsonSchema": {
                                "type": "object",
                                "properties": {"cmd": {"type": "string"}},
                            },
                        }
                    ]
                }
            ],
            "toolConfig": {"functionCallingConfig": {"mode": "AUTO"}},
            "generationConfig": {"maxOutputTokens": 100},
        },
        id="function-call-loop",
    ),
]


@pytest.mark.parametrize("body", ROUND_TRIPS)
def test_gemini_to_chat_to_messages_and_back(body: dict[str, Any]) -> None:
    canonical, _ = request.to_canonical(body)
    direct, _ = request.from_canonical(canonical, "gemini-2.5-flash")
    assert direct == body  # gemini → chat → gemini: the same request
    messages_body, _ = messages_codec.from_canonical(canonical, "claude")
    again, _ = messages_codec.to_canonical(messages_body)
    via_messages, _ = request.from_canonical(again, "gemini-2.5-flash")
    assert via_messages == body  # gemini → chat → messages → chat → gemini


def test_a_gemini_answer_reaches_the_messages_door_with_thinking_and_the_call() -> None:
    out = messages_codec.completion_from_canonical(reply.completion_to_canonical(ANSWER))
    assert [b["type"] for b in out["content"]] == ["thinking", "text", "tool_use"]
    assert out["content"][2]["input"] == {"cmd": "ls"} and out["stop_reason"] == "tool_use"
    assert out["usage"]["cache_read_input_tokens"] == 40 and out["usage"]["input_tokens"] == 60


def test_a_signature_only_part_in_history_is_gemini_s_own_and_left_out() -> None:
    body = {
        "contents": [
            {"role": "user", "parts": [{"text": "hi"}]},
            {"role": "model", "parts": [{"text": "hello"}, {"thoughtSignature": "c2ln"}]},
            {"role": "user", "parts": [{"text": "again"}]},
        ]
    }
    canonical, _ = request.to_canonical(body)
    assert canonical["messages"][1] == {"role": "assistant", "content": "hello"}


def test_proto_field_names_are_read_like_json_names() -> None:
    config = {
        "thinkingConfig": {"include_thoughts": True, "thinking_budget": 20000},
        "responseSchema": {"type": "OBJECT", "property_ordering": ["a"], "any_of": []},
    }
    canonical, _ = request.to_canonical({"contents": [], "generationConfig": config})
    assert canonical["reasoning_effort"] == "high"
    schema = canonical["response_format"]["json_schema"]["schema"]
    assert schema == {"type": "object", "anyOf": []}
