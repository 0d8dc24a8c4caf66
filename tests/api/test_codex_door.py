"""Codex's own requests (``tests/agents/recorded/codex_*.json``) at the Responses door,
through the gateway over real sockets to the simulator: a custom tool call is an answer,
a chat target gets Codex's tools as functions and its answer comes back as Codex declared
them, hosted tools follow the group's ``hosted_tools``, and Codex's history keeps its
bytes on the same target and loses another target's encrypted reasoning on a switch."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from routing.gateway.events import CallRecord
from routing.simulator.script import Fail, Reply
from tests.conftest import Harness

RECORDED = Path(__file__).parents[1] / "agents" / "recorded"
CONFIG = """
providers:
  - {name: resp, kind: openai-responses, base_url: "{upstream}", api_key: upstream-key-resp}
  - {name: chat, kind: openai, base_url: "{upstream}", api_key: upstream-key-chat}
  - {name: claude, kind: anthropic, base_url: "{upstream}", api_key: upstream-key-claude}
groups:
  - name: codex
    retry: {max_retries: 0}
    targets:
      - {provider: resp, model: r1}
      - {provider: chat, model: c1}
  - name: codex-claude
    retry: {max_retries: 0}
    targets:
      - {provider: resp, model: r1}
      - {provider: claude, model: a1}
  - name: chat-only
    targets: [{provider: chat, model: c1}]
  - name: chat-only-skip
    hosted_tools: skip
    targets: [{provider: chat, model: c1}]
  - name: resp-switch
    retry: {max_retries: 0}
    targets:
      - {provider: resp, model: r1}
      - {provider: resp, model: r2}
"""
EXEC = {"name": "exec", "input": "const r = await tools.exec_command({cmd: 'ls'});"}


@pytest.fixture
def h(harness: Harness) -> Harness:
    harness.configure(CONFIG)
    return harness


def recorded(name: str, model: str, **changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = json.loads((RECORDED / f"codex_{name}.json").read_text())["body"]
    return {**body, "model": model, **changes}


def post(h: Harness, body: dict[str, Any], session: str = "s-codex") -> httpx.Response:
    return httpx.post(
        h.gateway.url + "/v1/responses",
        json=body,
        headers={"authorization": f"Bearer {h.key}", "session-id": session},
        timeout=30,
    )


def events(response: httpx.Response) -> list[dict[str, Any]]:
    return [
        json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: ")
    ]


def output_items(response: httpx.Response) -> list[dict[str, Any]]:
    return [e["item"] for e in events(response) if e["type"] == "response.output_item.done"]


def sent_to(h: Harness, model: str) -> dict[str, Any]:
    return dict([r for r in h.upstream.requests if r.model == model][-1].body)


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
def test_a_custom_tool_call_alone_is_an_answer_not_an_empty_response(
    h: Harness, stream: bool
) -> None:
    h.upstream.script("r1", Reply("", tool_call=EXEC))
    response = post(h, recorded("first_turn", "codex", stream=stream))
    assert response.status_code == 200, response.text
    items = output_items(response) if stream else response.json()["output"]
    calls = [i for i in items if i["type"] == "custom_tool_call"]
    assert calls and calls[0]["input"] == EXEC["input"]
    assert h.upstream.count("r1") == 1 and h.upstream.count("c1") == 0  # no retry, no switch


def test_codex_fails_over_to_a_chat_target_and_gets_its_own_tools_back(h: Harness) -> None:
    h.upstream.script("r1", Fail(500, "down"))
    h.upstream.script(
        "c1",
        Reply(
            "",
            tool_call=[
                {"name": "exec", "arguments": {"input": "text(1)"}},
                {"name": "clock__sleep", "arguments": {"duration_ms": 5}},
            ],
        ),
    )
    response = post(h, recorded("first_turn", "codex"))
    assert response.status_code == 200, response.text
    exec_call, sleep = [i for i in output_items(response) if i["type"] != "message"]
    assert exec_call["type"] == "custom_tool_call" and exec_call["input"] == "text(1)"
    assert sleep["type"] == "function_call"
    assert (sleep.get("namespace"), sleep["name"]) == ("clock", "sleep")
    chat = sent_to(h, "c1")
    names = {t["function"]["name"] for t in chat["tools"]}
    assert {"exec", "clock__sleep", "collaboration__spawn_agent"} <= names
    assert "prompt_cache_key" not in chat and "client_metadata" not in chat
    rewrites = response.headers["x-switchyard-rewrites"]
    assert "dropped prompt_cache_key" in rewrites and "dropped client_metadata" in rewrites


def test_codex_tool_loop_fails_over_to_an_anthropic_target(h: Harness) -> None:
    h.upstream.script("r1", Fail(500, "down"))
    h.upstream.script("a1", Reply("It printed switchyard-ok."))
    response = post(h, recorded("tool_loop", "codex-claude"))
    assert response.status_code == 200, response.text
    assert events(response)[-1]["type"] == "response.completed"
    sent = sent_to(h, "a1")["messages"]
    tool_use = sent[-2]["content"][-1]
    assert tool_use["type"] == "tool_use" and tool_use["name"] == "exec"
    assert tool_use["input"]["input"].startswith("const r = await tools.exec_command")
    result = sent[-1]["content"][0]
    assert result["type"] == "tool_result" and result["tool_use_id"] == "call_exec_1"


WEB_SEARCH = [{"type": "web_search"}, {"type": "function", "name": "f", "parameters": {}}]


def test_hosted_tools_are_dropped_with_a_note_by_default(h: Harness) -> None:
    h.upstream.script("c1", Reply("no search needed"))
    response = post(h, {"model": "chat-only", "input": "hi", "tools": WEB_SEARCH})
    assert response.status_code == 200, response.text
    assert [t["function"]["name"] for t in sent_to(h, "c1")["tools"]] == ["f"]
    assert "dropped hosted tool web_search" in response.headers["x-switchyard-rewrites"]


def test_hosted_tools_skip_refuses_when_no_target_runs_them(h: Harness) -> None:
    response = post(h, {"model": "chat-only-skip", "input": "hi", "tools": WEB_SEARCH})
    assert response.status_code == 400
    assert "hosted tool 'web_search'" in response.json()["error"]["message"]
    assert h.upstream.count("c1") == 0


def test_codex_history_is_byte_identical_on_its_target_and_loses_its_reasoning_elsewhere(
    h: Harness,
) -> None:
    """Turn 1 served by r1: a reasoning item and Codex's exec call. Codex keeps the items
    as it got them, adds ``encrypted_content`` and its tool output. Turn 2 on r1 again:
    sent as is. Turn 3 after a switch to r2: r1's reasoning (opaque to r2) is left out,
    the call and its result stay, and the model-changed notice ends the input."""
    h.upstream.script("r1", Reply("", reasoning="run it", tool_call=EXEC))
    first = post(h, {**recorded("first_turn", "resp-switch"), "stream": False})
    assert first.status_code == 200, first.text
    output = first.json()["output"]
    assert [i["type"] for i in output] == ["reasoning", "custom_tool_call"]
    output[0]["encrypted_content"] = "gAAAAA-r1-only"
    call_id = output[1]["call_id"]
    result = {
        "type": "custom_tool_call_output",
        "call_id": call_id,
        "output": [{"type": "input_text", "text": "Script completed"}],
    }
    body = recorded("first_turn", "resp-switch", stream=False)
    body["input"] = [*body["input"], *output, result]
    h.upstream.script("r1", Reply("listed"))
    assert post(h, body).status_code == 200
    assert sent_to(h, "r1")["input"] == body["input"]  # same target: untouched
    h.upstream.script("r1", Fail(500, "down"))
    h.upstream.script("r2", Reply("listed, on r2"))
    switched = post(h, body)
    assert switched.status_code == 200, switched.text
    sent = sent_to(h, "r2")["input"]
    assert not any(i.get("type") == "reasoning" for i in sent)
    assert "gAAAAA-r1-only" not in json.dumps(sent)
    assert [i.get("type") for i in sent[-3:-1]] == ["custom_tool_call", "custom_tool_call_output"]
    assert "[model changed:" in json.dumps(sent[-1])


def compact(h: Harness, model: str) -> httpx.Response:
    body = {"model": model, "input": [{"role": "user", "content": "a long conversation"}]}
    return httpx.post(
        h.gateway.url + "/v1/responses/compact",
        json=body,
        headers={"authorization": f"Bearer {h.key}"},
        timeout=30,
    )


def test_the_compaction_endpoint_is_served_by_a_responses_target(h: Harness) -> None:
    h.upstream.script("r1", Reply("summary of the conversation"))
    response = compact(h, "codex")
    assert response.status_code == 200, response.text
    assert response.json()["output"][0]["content"][0]["text"] == "summary of the conversation"
    sent = [r for r in h.upstream.requests if r.model == "r1"][-1]
    assert sent.path == "/v1/responses/compact" and sent.body["stream"] is False
    assert h.upstream.count("c1") == 0


def test_the_compaction_endpoint_without_a_responses_target_is_the_doors_400(
    h: Harness,
) -> None:
    response = compact(h, "chat-only")
    assert response.status_code == 400
    assert response.headers["x-should-retry"] == "false"
    error = response.json()["error"]
    assert error["code"] == "unsupported_for_target" and "compact it locally" in error["message"]
    assert h.upstream.count("c1") == 0
    (record,) = h.events(CallRecord, at_least=1)
    assert record.outcome.value == "refused" and record.group == "chat-only"
    assert record.door == "responses"


def test_a_compaction_trigger_reaches_only_responses_targets(h: Harness) -> None:
    """Codex's remote compaction v2 (its built-in provider): a ``compaction_trigger`` item
    at ``/v1/responses``. A chat target could not answer the ``compaction`` item Codex
    expects, so a group without a Responses target refuses it in the door's shape."""
    body = recorded("compaction_trigger", "chat-only")
    response = post(h, body)
    assert response.status_code == 400
    assert "'compaction_trigger'" in response.json()["error"]["message"]
    assert h.upstream.count("c1") == 0
    h.upstream.script("r1", Fail(500, "down"))
    response = post(h, recorded("compaction_trigger", "codex"))
    assert response.status_code == 502  # c1 skipped: r1's failure is the answer
    assert "c1 → skipped" in response.text
    assert h.upstream.count("c1") == 0
