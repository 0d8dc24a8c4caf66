"""What Codex 0.171 really sends (``tests/agents/recorded/codex_*.json``) at the Responses
door: passed through untouched to ``openai-responses`` targets, translated for the other
kinds (namespaces flattened, the custom ``exec`` tool as a one-string function, hosted
tools per ``hosted_tools``), and the answer mapped back to what Codex declared."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from routing.gateway.attempt import has_content
from routing.protocols import Protocol, Unmappable, legs, responses
from routing.protocols.responses.tools import HostedTools, tool_names

RECORDED = Path(__file__).parent.parent / "agents" / "recorded"
ALL_KINDS = [Protocol.RESPONSES, Protocol.CHAT, Protocol.MESSAGES]


def recorded(name: str) -> dict[str, Any]:
    body: dict[str, Any] = json.loads((RECORDED / f"codex_{name}.json").read_text())["body"]
    return body


def functions(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["function"]["name"]: t["function"] for t in body["tools"]}


def test_codex_first_turn_reaches_every_kind() -> None:
    body = recorded("first_turn")
    prepared = legs.translate_request(Protocol.RESPONSES, body, ALL_KINDS)
    assert prepared.refused == {}
    # Same kind: byte for byte what Codex sent, only ``model`` rewritten.
    assert orjson.loads(prepared.request(Protocol.RESPONSES, "m")) == {**body, "model": "m"}
    chat = orjson.loads(prepared.request(Protocol.CHAT, "m"))
    tools = functions(chat)
    # ``functions`` is the default namespace; the others are flattened.
    assert {"exec", "wait", "clock__sleep", "collaboration__spawn_agent"} <= set(tools)
    assert tools["exec"]["parameters"]["required"] == ["input"]
    assert tools["exec"]["parameters"]["properties"]["input"]["type"] == "string"
    assert "lark" in tools["exec"]["parameters"]["properties"]["input"]["description"]
    assert [m["role"] for m in chat["messages"]][-1] == "user"
    assert chat["messages"][-1]["content"] == "run echo"
    notes = prepared.notes[Protocol.CHAT]
    for dropped in ("prompt_cache_key", "include", "client_metadata", "reasoning.context"):
        assert f"dropped {dropped}" in notes
    messages_body = orjson.loads(prepared.request(Protocol.MESSAGES, "m"))
    assert {t["name"] for t in messages_body["tools"]} == set(tools)


def test_codex_tool_loop_history_becomes_a_call_and_its_result() -> None:
    canonical, _ = responses.to_canonical(recorded("tool_loop"))
    call_turn, result = canonical["messages"][-2:]
    call = call_turn["tool_calls"][0]
    assert call["id"] == "call_exec_1" and call["function"]["name"] == "exec"
    assert json.loads(call["function"]["arguments"])["input"].startswith(
        "const r = await tools.exec_command"
    )
    assert result["role"] == "tool" and result["tool_call_id"] == "call_exec_1"
    assert "switchyard-ok" in result["content"]


def test_a_namespaced_call_in_history_keeps_its_flat_name() -> None:
    canonical, _ = responses.to_canonical(recorded("namespace_call"))
    call = canonical["messages"][-2]["tool_calls"][0]
    assert call["function"]["name"] == "clock__sleep"


def canonical_answer(*calls: tuple[str, str]) -> dict[str, Any]:
    tool_calls = [
        {"id": f"call_{i}", "type": "function", "function": {"name": n, "arguments": a}}
        for i, (n, a) in enumerate(calls)
    ]
    return {
        "id": "chatcmpl-1",
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": None, "tool_calls": tool_calls},
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
    }


CALLS = (
    ("exec", '{"input": "text(1)"}'),
    ("clock__sleep", '{"duration_ms": 5}'),
    ("wait", '{"cell_id": "1"}'),
)


def check_mapped_back(output: list[dict[str, Any]]) -> None:
    exec_call, sleep, wait = output
    assert exec_call["type"] == "custom_tool_call" and exec_call["name"] == "exec"
    assert exec_call["input"] == "text(1)" and exec_call["call_id"] == "call_0"
    assert "namespace" not in exec_call
    assert sleep["type"] == "function_call"
    assert (sleep["namespace"], sleep["name"]) == ("clock", "sleep")
    assert sleep["arguments"] == '{"duration_ms": 5}'
    assert wait["type"] == "function_call" and wait["name"] == "wait"
    assert "namespace" not in wait


def test_a_translated_answer_maps_back_to_what_codex_declared() -> None:
    names = tool_names(recorded("first_turn"))
    body = responses.completion_from_canonical(canonical_answer(*CALLS), names)
    check_mapped_back(body["output"])


def test_a_translated_stream_maps_back_to_what_codex_declared() -> None:
    names = tool_names(recorded("first_turn"))
    encoder = responses.StreamEncoder(names)
    chunks = []
    for i, (name, arguments) in enumerate(CALLS):
        first = {"index": i, "id": f"call_{i}", "type": "function"}
        chunks.append(
            {
                "id": "c",
                "model": "m",
                "choices": [
                    {
                        "index": 0,
                        "delta": {
                            "tool_calls": [{**first, "function": {"name": name, "arguments": ""}}]
                        },
                    }
                ],
            }
        )
        for half in (arguments[:5], arguments[5:]):
            chunks.append(
                {
                    "id": "c",
                    "model": "m",
                    "choices": [
                        {
                            "index": 0,
                            "delta": {
                                "tool_calls": [{"index": i, "function": {"arguments": half}}]
                            },
                        }
                    ],
                }
            )
    wire = encoder.encode(chunks) + encoder.end()
    events = [orjson.loads(line[6:]) for line in wire.split(b"\n") if line.startswith(b"data: ")]
    done = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    check_mapped_back(done)
    assert events[-1]["type"] == "response.completed"
    check_mapped_back(events[-1]["response"]["output"])
    kinds = [e["type"] for e in events]
    assert "response.custom_tool_call_input.done" in kinds
    assert [e["sequence_number"] for e in events] == list(range(len(events)))


def responses_events(*items: dict[str, Any]) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": {"id": "resp_1", "model": "m"}}
    ]
    for item in items:
        added = {**item, "input": ""} if item["type"] == "custom_tool_call" else item
        events.append({"type": "response.output_item.added", "item": added})
        events.append({"type": "response.output_item.done", "item": item})
    done = {"id": "resp_1", "status": "completed", "output": list(items), "usage": {}}
    events.append({"type": "response.completed", "response": done})
    return events


CUSTOM_CALL = {
    "type": "custom_tool_call",
    "id": "ctc_1",
    "call_id": "call_1",
    "name": "exec",
    "input": "text(1)",
    "status": "completed",
}


@pytest.mark.parametrize(
    "item",
    [
        CUSTOM_CALL,
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "c",
            "namespace": "clock",
            "name": "sleep",
            "arguments": "{}",
        },
        {"type": "web_search_call", "id": "ws_1", "status": "completed"},
        {"type": "compaction", "id": "cmp_1", "encrypted_content": "opaque"},
    ],
    ids=lambda item: item["type"],
)
def test_a_tool_call_of_any_type_is_content_never_an_empty_response(
    item: dict[str, Any],
) -> None:
    decoder = responses.StreamDecoder()
    chunks = [c for event in responses_events(item) for c in decoder.decode(event)]
    assert any(has_content(c) for c in chunks)
    assert decoder.finished
    body = {"id": "resp_1", "model": "m", "status": "completed", "output": [item]}
    assert has_content(responses.completion_to_canonical(body))


def test_an_upstream_custom_call_decodes_to_the_canonical_one_string_function() -> None:
    decoder = responses.StreamDecoder()
    chunks = [c for event in responses_events(CUSTOM_CALL) for c in decoder.decode(event)]
    calls = [
        c
        for ch in chunks
        for choice in ch["choices"]
        for c in choice["delta"].get("tool_calls") or ()
    ]
    assert calls[0]["function"]["name"] == "exec" and calls[0]["id"] == "call_1"
    arguments = "".join(c["function"].get("arguments") or "" for c in calls)
    assert json.loads(arguments) == {"input": "text(1)"}
    finish = [choice["finish_reason"] for ch in chunks for choice in ch["choices"]]
    assert "tool_calls" in finish


WEB_SEARCH = {"model": "g", "input": "x", "tools": [{"type": "web_search"}]}


def test_hosted_tools_drop_gives_other_kinds_the_request_without_them_noted() -> None:
    prepared = legs.translate_request(Protocol.RESPONSES, WEB_SEARCH, ALL_KINDS)
    assert prepared.refused == {}
    assert "tools" not in orjson.loads(prepared.request(Protocol.CHAT, "m"))
    assert "dropped hosted tool web_search" in prepared.notes[Protocol.CHAT]
    assert "dropped hosted tool web_search" in prepared.notes[Protocol.MESSAGES]
    assert orjson.loads(prepared.request(Protocol.RESPONSES, "m"))["tools"] == WEB_SEARCH["tools"]


def test_hosted_tools_skip_skips_the_kinds_that_cannot_run_them() -> None:
    prepared = legs.translate_request(
        Protocol.RESPONSES, WEB_SEARCH, ALL_KINDS, hosted_tools=HostedTools.SKIP
    )
    assert set(prepared.refused) == {Protocol.CHAT, Protocol.MESSAGES}
    assert "hosted tool 'web_search'" in str(prepared.refused[Protocol.CHAT])
    with pytest.raises(Unmappable) as info:
        legs.translate_request(
            Protocol.RESPONSES, WEB_SEARCH, [Protocol.CHAT], hosted_tools=HostedTools.SKIP
        )
    assert info.value.param == "tools"


def test_remote_compaction_is_served_by_responses_targets_only() -> None:
    """Codex's remote compaction is a ``compaction_trigger`` item answered by one
    ``compaction`` item: no other kind can give it, so they are skipped."""
    body = recorded("compaction_trigger")
    prepared = legs.translate_request(Protocol.RESPONSES, body, ALL_KINDS)
    assert set(prepared.refused) == {Protocol.CHAT, Protocol.MESSAGES}
    assert "'compaction_trigger'" in str(prepared.refused[Protocol.CHAT])
    with pytest.raises(Unmappable):
        legs.translate_request(Protocol.RESPONSES, body, [Protocol.CHAT])


@pytest.mark.parametrize(
    "block",
    [
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}},
        {"type": "redacted_thinking", "data": "opaque"},
    ],
    ids=lambda block: block["type"],
)
def test_an_anthropic_answer_of_server_tool_use_or_redacted_thinking_is_content(
    block: dict[str, Any],
) -> None:
    from routing.protocols import messages

    decoder = messages.StreamDecoder()
    events = [
        {"type": "message_start", "message": {"id": "msg_1", "model": "m", "usage": {}}},
        {"type": "content_block_start", "index": 0, "content_block": block},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {}},
        {"type": "message_stop"},
    ]
    chunks = [c for event in events for c in decoder.decode(event)]
    assert any(has_content(c) for c in chunks)
    body = {"id": "msg_1", "model": "m", "content": [block], "stop_reason": "end_turn"}
    assert has_content(messages.completion_to_canonical(body))


def test_hosted_calls_in_history_follow_hosted_tools() -> None:
    body = {
        "model": "g",
        "input": [
            {"role": "user", "content": "search the web"},
            {"type": "web_search_call", "id": "ws_1", "status": "completed"},
            {"role": "assistant", "content": [{"type": "output_text", "text": "found"}]},
            {"role": "user", "content": "thanks"},
        ],
    }
    prepared = legs.translate_request(Protocol.RESPONSES, body, ALL_KINDS)
    chat = orjson.loads(prepared.request(Protocol.CHAT, "m"))
    assert [m["role"] for m in chat["messages"]] == ["user", "assistant", "user"]
    assert "dropped input web_search_call items" in prepared.notes[Protocol.CHAT]
    prepared = legs.translate_request(
        Protocol.RESPONSES, body, ALL_KINDS, hosted_tools=HostedTools.SKIP
    )
    assert set(prepared.refused) == {Protocol.CHAT, Protocol.MESSAGES}


def test_a_chat_client_never_sees_the_hosted_call_marker() -> None:
    item = {"type": "web_search_call", "id": "ws_1", "status": "completed"}
    decoder = responses.StreamDecoder()
    relay = legs.relay_for(Protocol.CHAT, Protocol.RESPONSES, {"stream": True})
    wire = relay.encode(
        [(b"", event, tuple(decoder.decode(event))) for event in responses_events(item)]
    )
    assert b"web_search_call" not in wire and b"finish_reason" in wire
    body = {"id": "resp_1", "model": "m", "status": "completed", "output": [item]}
    canonical = responses.completion_to_canonical(body)
    assert b"opaque" not in legs.completion_for_door(Protocol.CHAT, canonical)
