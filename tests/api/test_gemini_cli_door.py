"""What Gemini CLI 0.61.0 really sends (``tests/agents/recorded/gemini_cli_*.json``) at the
Gemini door, over real sockets to the simulator: every recorded request — a turn, the
``auto`` model's classifier, the shell tool's result, a resumed turn — is accepted and
answered in Gemini's shape by each kind; a gemini target gets the CLI's body as it was
sent, the others get its function calls, results and JSON schema in their own shapes.
No CLI needed: the recorded requests are replayed with their own paths and headers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from routing.gateway.events import CallOutcome, CallRecord
from routing.simulator.script import Reply
from tests.conftest import Harness

RECORDED = Path(__file__).parents[1] / "agents" / "recorded"
CONFIG = """
providers:
  - {name: anthropic, kind: anthropic, base_url: "{upstream}", api_key: upstream-key-a}
  - {name: chat, kind: openai, base_url: "{upstream}", api_key: upstream-key-chat}
  - {name: gem, kind: gemini, base_url: "{root}", api_key: upstream-key-gemini}
groups:
  - {name: via-anthropic, targets: [{provider: anthropic, model: a-model}]}
  - {name: via-chat, targets: [{provider: chat, model: c-model}]}
  - {name: via-gemini, targets: [{provider: gem, model: g-model}]}
"""
GROUPS = {"via-anthropic": "a-model", "via-chat": "c-model", "via-gemini": "g-model"}
NAMES = ["first_turn", "tool_result", "resume", "classifier", "resume_classifier"]
SCORED = json.dumps({"complexity_reasoning": "One explicit command.", "complexity_score": 10})
CAPTURED_SIGNATURE = "c2lnbmF0dXJl"  # what the capturing server signed its call with


@pytest.fixture
def h(harness: Harness) -> Harness:
    harness.configure(CONFIG.replace("{root}", harness.upstream.base_url.removesuffix("/v1")))
    return harness


def recorded(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((RECORDED / f"gemini_cli_{name}.json").read_text())
    return data


def replay(h: Harness, name: str, group: str) -> httpx.Response:
    """The recorded request, its model swapped for ``group`` and its key for the test's."""
    capture = recorded(name)
    path = capture["path"].replace(capture["path"].split("/")[-1].split(":")[0], group)
    headers = {**capture["headers"], "x-goog-api-key": h.key}
    headers.pop("accept-encoding", None)
    query = f"?{capture['query']}" if capture["query"] else ""
    return httpx.post(
        h.gateway.url + path + query,
        content=json.dumps(capture["body"]),
        headers=headers,
        timeout=60,
    )


def answers(response: httpx.Response) -> list[dict[str, Any]]:
    """A ``generateContent`` answer, or each ``data:`` line of a stream."""
    if response.headers["content-type"].startswith("text/event-stream"):
        lines = response.text.splitlines()
        return [json.loads(line[6:]) for line in lines if line.startswith("data: ")]
    return [response.json()]


def text_of(chunks: list[dict[str, Any]]) -> str:
    parts = [p for c in chunks for p in c["candidates"][0]["content"].get("parts", [])]
    return "".join(p.get("text", "") for p in parts if not p.get("thought"))


def upstream_body(h: Harness, group: str) -> dict[str, Any]:
    [seen] = [r for r in h.upstream.requests if r.model == GROUPS[group]]
    return dict(seen.body)


@pytest.mark.parametrize("group", list(GROUPS))
@pytest.mark.parametrize("name", NAMES)
def test_each_recorded_request_is_served_by_each_kind(h: Harness, name: str, group: str) -> None:
    h.upstream.set_default(Reply(SCORED if "classifier" in name else "Served."))
    response = replay(h, name, group)
    assert response.status_code == 200, response.text
    chunks = answers(response)
    assert text_of(chunks) == (SCORED if "classifier" in name else "Served.")
    assert chunks[-1]["candidates"][0]["finishReason"] == "STOP"
    assert set(chunks[-1]["usageMetadata"]) >= {"promptTokenCount", "totalTokenCount"}
    streamed = recorded(name)["query"] == "alt=sse"
    assert response.headers["content-type"].startswith(
        "text/event-stream" if streamed else "application/json"
    )
    [record] = h.events(CallRecord, at_least=1, timeout=10)
    assert (record.door, record.outcome, record.stream) == ("gemini", CallOutcome.OK, streamed)
    assert record.served_by is not None and record.served_by.endswith(GROUPS[group])


@pytest.mark.parametrize("name", NAMES)
def test_a_gemini_target_gets_the_body_the_cli_sent(h: Harness, name: str) -> None:
    """Same kind: contents, systemInstruction, tools with ``parametersJsonSchema``, the
    generationConfig (thinkingConfig, the classifier's upper-case schema) pass as sent,
    and the function call keeps its signature."""
    h.upstream.set_default(Reply("Served."))
    assert replay(h, name, "via-gemini").status_code == 200
    [seen] = [r for r in h.upstream.requests if r.model == "g-model"]
    assert seen.body == recorded(name)["body"]
    assert seen.headers["x-goog-api-key"] == "upstream-key-gemini"  # never the client's key
    assert seen.path.endswith("/models/g-model:" + recorded(name)["path"].split(":")[-1])


def test_the_shell_result_reaches_an_anthropic_target_as_a_tool_result(h: Harness) -> None:
    h.upstream.set_default(Reply("Served."))
    assert replay(h, "tool_result", "via-anthropic").status_code == 200
    body = upstream_body(h, "via-anthropic")
    call, result = body["messages"][-2:]
    [use] = [b for b in call["content"] if b["type"] == "tool_use"]
    assert use["name"] == "run_shell_command"
    assert use["input"] == {"command": "echo capture-ok", "description": "Print"}
    [output] = result["content"]
    assert output["type"] == "tool_result" and output["tool_use_id"] == use["id"]
    assert "capture-ok" in json.dumps(output["content"])
    assert CAPTURED_SIGNATURE not in json.dumps(body)  # Gemini's opaque signature stays behind
    tools = {t["name"] for t in body["tools"]}
    assert {"run_shell_command", "read_file", "write_file"} <= tools
    assert body["stream"] is True


def test_the_shell_result_reaches_a_chat_target_as_a_tool_message(h: Harness) -> None:
    h.upstream.set_default(Reply("Served."))
    assert replay(h, "tool_result", "via-chat").status_code == 200
    messages = upstream_body(h, "via-chat")["messages"]
    call, result = messages[-2:]
    [tool_call] = call["tool_calls"]
    assert tool_call["function"]["name"] == "run_shell_command"
    assert json.loads(tool_call["function"]["arguments"])["command"] == "echo capture-ok"
    assert result["role"] == "tool" and result["tool_call_id"] == tool_call["id"]
    assert "capture-ok" in json.dumps(result["content"])
    assert messages[0]["role"] == "system"  # systemInstruction, first


@pytest.mark.parametrize("group", ["via-anthropic", "via-chat"])
def test_the_classifier_schema_reaches_other_kinds_in_lower_case(h: Harness, group: str) -> None:
    """The CLI writes ``responseJsonSchema`` with the OpenAPI subset's upper-case types
    (``OBJECT``, ``STRING``, ``INTEGER``); JSON Schema wants them lower-case."""
    h.upstream.set_default(Reply(SCORED))
    assert replay(h, "classifier", group).status_code == 200
    body = upstream_body(h, group)
    if group == "via-anthropic":
        fmt = body["output_config"]["format"]
        assert fmt["type"] == "json_schema"
        schema = fmt["schema"]
    else:
        fmt = body["response_format"]
        assert fmt["type"] == "json_schema"
        schema = fmt["json_schema"]["schema"]
    assert schema["type"] == "object"
    assert schema["properties"]["complexity_reasoning"]["type"] == "string"
    assert schema["properties"]["complexity_score"]["type"] == "integer"
    assert schema["required"] == ["complexity_reasoning", "complexity_score"]
    assert body.get("stream") in (None, False)
