"""The Messages door with what Claude Code 2.1.197 really sends (tests/agents/recorded):
mid-conversation system messages, ``?beta=true``, its betas, ``output_config``,
``context_management``, cache hints; refusals on the record; ``count_tokens``; ``HEAD /``.
No CLI needed: the recorded bodies are replayed over real sockets."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from routing.engine.health import HealthEvent
from routing.gateway.events import CallOutcome, CallRecord
from routing.simulator.script import Fail, Reply, When
from tests.conftest import Harness

RECORDED = Path(__file__).parents[1] / "agents" / "recorded"

CONFIG = """
providers:
  - name: claude
    kind: anthropic
    base_url: {upstream}
    api_key: upstream-key-claude
    betas: {strip: [mid-conversation-system-2026-04-07]}
  - name: claude2
    kind: anthropic
    base_url: {upstream}
    api_key: upstream-key-claude2
  - name: chat
    kind: openai
    base_url: {upstream}
    api_key: upstream-key-chat
  - name: resp
    kind: openai-responses
    base_url: {upstream}
    api_key: upstream-key-resp
  - name: strict
    kind: openai
    base_url: {upstream}
    api_key: upstream-key-strict
groups:
  - name: one-system-only
    targets:
      - {provider: strict, model: c-model}
  - name: anthropic-only
    aliases: ["claude-*"]
    targets:
      - {provider: claude2, model: a-model}
  - name: stripping
    targets:
      - {provider: claude, model: s-model}
  - name: chat-only
    targets:
      - {provider: chat, model: c-model}
  - name: responses-only
    targets:
      - {provider: resp, model: r-model}
  - name: anthropic-pair
    retry: {max_retries: 0}
    targets:
      - {provider: claude2, model: a-model}
      - {provider: claude, model: s-model}
  - name: anthropic-then-chat
    retry: {max_retries: 0}
    targets:
      - {provider: claude2, model: a-model}
      - {provider: chat, model: c-model}
  - name: chat-then-anthropic
    targets:
      - {provider: chat, model: c-model}
      - {provider: resp, model: r-model}
      - {provider: claude2, model: a-model}
"""


def recorded(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((RECORDED / name).read_text())
    return data


def send(
    h: Harness,
    body: dict[str, Any],
    *,
    model: str,
    path: str = "/v1/messages?beta=true",
    headers: dict[str, str] | None = None,
    capture_name: str = "claude-code-tool-result.json",
) -> httpx.Response:
    capture = recorded(capture_name)
    sent = {k: v for k, v in capture["headers"].items() if k.startswith("anthropic-")}
    sent.update(headers or {})
    sent["x-api-key"] = h.key
    return httpx.post(h.gateway.url + path, json={**body, "model": model}, headers=sent, timeout=30)


def sse_text(response: httpx.Response) -> str:
    text = ""
    for line in response.text.splitlines():
        if line.startswith("data: "):
            event = json.loads(line[6:])
            delta = event.get("delta") or {}
            if delta.get("type") == "text_delta":
                text += delta["text"]
    return text


@pytest.fixture
def h(harness: Harness) -> Harness:
    harness.configure(CONFIG)
    return harness


@pytest.mark.parametrize("name", ["claude-code-tool-result.json", "claude-code-continue.json"])
def test_a_recorded_request_passes_to_an_anthropic_target_unchanged(h: Harness, name: str) -> None:
    body = recorded(name)["body"]
    assert any(m["role"] == "system" for m in body["messages"])  # the case of issue 22
    response = send(h, body, model="claude-opus-4-8", capture_name=name)  # via the alias
    assert response.status_code == 200, response.text
    assert sse_text(response) == "Hello from a-model."
    [seen] = h.upstream.requests
    assert seen.path == "/v1/messages"
    assert {**seen.body, "model": body["model"]} == body  # every field, system role included
    assert seen.headers["anthropic-beta"] == recorded(name)["headers"]["anthropic-beta"]
    assert seen.headers["anthropic-version"] == "2023-06-01"
    assert "x-switchyard-rewrites" not in response.headers


def test_a_provider_strips_the_betas_it_rejects_and_says_so(h: Harness) -> None:
    body = recorded("claude-code-tool-result.json")["body"]
    response = send(h, {**body, "stream": False}, model="stripping")
    assert response.status_code == 200, response.text
    [seen] = h.upstream.requests
    sent = recorded("claude-code-tool-result.json")["headers"]["anthropic-beta"].split(",")
    assert seen.headers["anthropic-beta"].split(",") == [
        b for b in sent if b != "mid-conversation-system-2026-04-07"
    ]
    assert "stripped beta mid-conversation-system-2026-04-07" in response.headers[
        "x-switchyard-rewrites"
    ].split(",")


def test_a_chat_target_gets_the_system_message_in_place(h: Harness) -> None:
    body = recorded("claude-code-tool-result.json")["body"]
    response = send(h, body, model="chat-only")
    assert response.status_code == 200, response.text
    assert sse_text(response) == "Hello from c-model."
    [seen] = h.upstream.requests
    roles = [m["role"] for m in seen.body["messages"]]
    # system prompt, the user turn, Claude Code's mid-conversation system message in its
    # place, then the assistant tool call and the tool result
    assert roles == ["system", "user", "system", "assistant", "tool"]
    assert seen.body["messages"][2]["content"] == body["messages"][1]["content"]
    assert seen.body["reasoning_effort"] == "high"  # output_config.effort
    notes = response.headers["x-switchyard-rewrites"].split(",")
    assert "dropped context_management" in notes and "dropped cache_control" in notes


@pytest.mark.parametrize("group", ["chat-only", "responses-only"])
def test_claude_codes_long_user_id_reaches_openai_targets_as_a_stable_short_user(
    h: Harness, group: str
) -> None:
    """OpenAI refuses a ``user`` over 64 characters; Claude Code's ``metadata.user_id`` is a
    ~150-character JSON string. A stable digest goes instead (the same user, call after
    call), and the rewrite says so."""
    body = recorded("claude-code-tool-result.json")["body"]
    assert len(body["metadata"]["user_id"]) > 64
    first, second = send(h, body, model=group), send(h, body, model=group)
    assert first.status_code == second.status_code == 200, first.text
    users = [r.body["user"] for r in h.upstream.requests]
    assert len(users) == 2 and users[0] == users[1] and 0 < len(users[0]) <= 64
    assert users[0] not in body["metadata"]["user_id"]  # a digest, not a cut
    note = "hashed metadata.user_id (over 64 characters) into user"
    assert note in first.headers["x-switchyard-rewrites"].split(",")
    h.upstream.reset()
    short = {**body, "metadata": {"user_id": "session-7"}}
    assert send(h, short, model=group).status_code == 200
    assert h.upstream.requests[-1].body["user"] == "session-7"  # one that fits goes as it is


def test_a_chat_target_that_refuses_a_mid_conversation_system_message_is_learned(
    h: Harness,
) -> None:
    """Many open models' chat templates take one leading system message only: their server
    answers Claude Code's mid-conversation one with a 400 about system messages. The target
    is learned (as a refused prefill is), the request goes again at once with the message
    folded into a user turn as a marked note, and nothing is charged to its health; the
    next call goes folded at once."""
    refusal = "System messages are only allowed at the beginning of the conversation"
    h.upstream.script(
        "c-model",
        then=When("[system message:", Reply("folded"), otherwise=Fail(400, refusal), scope="body"),
    )
    body = recorded("claude-code-tool-result.json")["body"]
    mid = body["messages"][1]
    assert mid["role"] == "system"
    try:
        response = send(h, {**body, "stream": False}, model="one-system-only")
        assert response.status_code == 200, response.text
        assert response.json()["content"][-1]["text"] == "folded"
        refused, folded = h.upstream.requests
        assert [m["role"] for m in refused.body["messages"]] == [
            "system",
            "user",
            "system",
            "assistant",
            "tool",
        ]
        assert [m["role"] for m in folded.body["messages"]] == [
            "system",
            "user",
            "assistant",
            "tool",
        ]
        user = folded.body["messages"][1]  # no user turn follows it: the one before
        content = user["content"]
        texts = [content] if isinstance(content, str) else [p.get("text", "") for p in content]
        assert any(f"[system message: {mid['content']}]" in text for text in texts)
        assert "folded mid-conversation system messages into user turns" in response.headers[
            "x-switchyard-rewrites"
        ].split(",")
        [record] = h.events(CallRecord, at_least=1)
        assert [a.code for a in record.attempts] == ["BAD_REQUEST", None]
        assert record.outcome is CallOutcome.OK
        assert not [e for e in h.events(HealthEvent) if e.target == "strict/c-model"]
        h.upstream.reset()
        h.upstream.script(
            "c-model",
            then=When(
                "[system message:", Reply("at once"), otherwise=Fail(400, refusal), scope="body"
            ),
        )
        again = send(h, {**body, "stream": False}, model="one-system-only")
        assert again.json()["content"][-1]["text"] == "at once"
        assert len(h.upstream.requests) == 1  # learned: folded from the first try
    finally:
        h.runtime.no_mid_system.discard("strict/c-model")  # type: ignore[attr-defined]


def test_a_responses_target_gets_a_developer_item_in_place(h: Harness) -> None:
    body = recorded("claude-code-tool-result.json")["body"]
    response = send(h, body, model="responses-only")
    assert response.status_code == 200, response.text
    [seen] = h.upstream.requests
    items = seen.body["input"]
    assert seen.body["instructions"].startswith("x-anthropic-billing-header")
    assert items[0]["role"] == "user"
    assert items[1]["role"] == "developer"
    assert items[1]["content"][0]["text"] == body["messages"][1]["content"]
    assert [i["type"] for i in items[2:]] == ["message", "function_call", "function_call_output"]


def test_output_config_format_becomes_a_json_schema_response_format(h: Harness) -> None:
    schema = {"type": "object", "properties": {"title": {"type": "string"}}}
    body = {
        "max_tokens": 100,
        "messages": [{"role": "user", "content": "title this"}],
        "output_config": {"format": {"type": "json_schema", "schema": schema}},
    }
    response = send(h, body, model="chat-only")
    assert response.status_code == 200, response.text
    [seen] = h.upstream.requests
    assert seen.body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "output", "schema": schema},
    }
    h.upstream.reset()
    send(h, body, model="responses-only")
    [seen] = h.upstream.requests
    assert seen.body["text"]["format"] == {
        "type": "json_schema",
        "name": "output",
        "schema": schema,
    }


def test_failover_from_anthropic_529_to_chat_with_claude_codes_history(h: Harness) -> None:
    h.upstream.script("a-model", Fail(529, "Overloaded", type="overloaded_error"))
    h.upstream.script("c-model", Reply("from chat"))
    body = recorded("claude-code-continue.json")["body"]
    response = send(h, body, model="anthropic-then-chat")
    assert response.status_code == 200, response.text
    assert sse_text(response) == "from chat"
    chat = [r for r in h.upstream.requests if r.model == "c-model"]
    assert len(chat) == 1
    # Claude Code's signed thinking never reaches the chat target as if it were its own.
    assert all("signature" not in json.dumps(m) for m in chat[0].body["messages"])


def test_garbage_is_still_the_doors_400_and_refusals_are_on_the_record(h: Harness) -> None:
    from routing.audit import writer
    from routing.audit.models import Call

    bad = httpx.post(
        h.gateway.url + "/v1/messages",
        content=b"[1, 2]",
        headers={"x-api-key": h.key, "content-type": "application/json"},
    )
    assert bad.status_code == 400 and bad.json()["type"] == "error"
    odd = send(
        h, {"max_tokens": 5, "messages": [{"role": "robot", "content": "x"}]}, model="chat-only"
    )
    assert odd.status_code == 400
    unknown = send(
        h, {"max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}, model="llama-3"
    )
    assert unknown.status_code == 404
    anonymous = httpx.post(h.gateway.url + "/v1/chat/completions", json={"model": "x"})
    assert anonymous.status_code == 401
    assert h.upstream.count() == 0
    records = h.events(CallRecord, at_least=4)
    assert [r.outcome for r in records] == [CallOutcome.REFUSED] * 4
    assert [r.error_code for r in records] == [
        "invalid_request",
        "invalid_request",
        "model_not_found",
        "missing_api_key",
    ]
    assert records[2].key_name == "test" and records[3].key_id is None
    assert "llama-3" in records[2].reason and records[2].group == ""
    writer.flush(10)
    rows = list(Call.objects.filter(outcome="refused").order_by("id"))
    assert [r.http_status for r in rows] == [400, 400, 404, 401]
    assert rows[2].reason == records[2].reason
    from routing.services.api_keys import generate_key

    _, admin = generate_key(name="ops", kind="admin")
    metrics = httpx.get(h.gateway.url + "/metrics", headers={"authorization": f"Bearer {admin}"})
    assert 'switchyard_calls_total{group="",outcome="refused"}' in metrics.text


def test_count_tokens_asks_an_anthropic_target_else_estimates(h: Harness) -> None:
    body = {"messages": [{"role": "user", "content": "three little words"}]}
    counted = send(h, body, model="anthropic-only", path="/v1/messages/count_tokens?beta=true")
    assert counted.status_code == 200 and counted.json() == {"input_tokens": 3}
    assert "x-switchyard-estimate" not in counted.headers
    [seen] = h.upstream.requests
    assert seen.path == "/v1/messages/count_tokens" and seen.body["model"] == "a-model"
    estimated = send(h, body, model="chat-only", path="/v1/messages/count_tokens")
    assert estimated.status_code == 200
    assert estimated.headers["x-switchyard-estimate"] == "true"
    assert estimated.json()["input_tokens"] > 0
    assert h.upstream.count() == 1


def test_count_tokens_skips_the_targets_whose_protocol_cannot_count(h: Harness) -> None:
    """The gateway's count (``routing.gateway.count``) asks only a target whose protocol
    has a count endpoint (the registry's ``count_tokens``), wherever it is in the chain."""
    body = {"messages": [{"role": "user", "content": "three little words"}]}
    counted = send(h, body, model="chat-then-anthropic", path="/v1/messages/count_tokens")
    assert counted.status_code == 200 and counted.json() == {"input_tokens": 3}
    assert "x-switchyard-estimate" not in counted.headers
    [seen] = h.upstream.requests  # neither the chat nor the Responses target was asked
    assert seen.path == "/v1/messages/count_tokens" and seen.body["model"] == "a-model"
    assert seen.headers["x-api-key"] == "upstream-key-claude2"


def test_count_tokens_answers_an_upstream_4xx_as_the_doors_and_names_itself(h: Harness) -> None:
    """An upstream's 4xx about the request is the door's 4xx in Anthropic's shape, not a
    200 estimate; every answer carries the x-switchyard-* headers a call's does."""
    path = "/v1/messages/count_tokens"
    bad = send(h, {"messages": []}, model="anthropic-only", path=path)
    assert bad.status_code == 400, bad.text
    assert bad.json()["type"] == "error"
    assert bad.json()["error"]["type"] == "invalid_request_error"
    assert "at least one message" in bad.json()["error"]["message"]
    assert "x-switchyard-estimate" not in bad.headers
    assert bad.headers["x-switchyard-trail"] == "claude2/a-model:BAD_REQUEST:400"
    one = {"messages": [{"role": "user", "content": "three little words"}]}
    counted = send(h, one, model="anthropic-only", path=path)
    assert counted.status_code == 200 and counted.json() == {"input_tokens": 3}
    assert counted.headers["x-switchyard-target"] == "claude2/a-model"
    assert counted.headers["x-switchyard-attempts"] == "1"
    estimated = send(h, one, model="chat-only", path=path)  # no target that counts
    assert estimated.headers["x-switchyard-estimate"] == "true"
    assert estimated.headers["x-switchyard-attempts"] == "0"
    ids = {r.headers["x-switchyard-request-id"] for r in (bad, counted, estimated)}
    assert len(ids) == 3


def test_head_and_get_root_answer_json_to_agents_and_redirect_browsers(h: Harness) -> None:
    head = httpx.head(h.gateway.url + "/")
    assert head.status_code == 200
    got = httpx.get(h.gateway.url + "/", headers={"accept": "*/*"})
    assert got.status_code == 200 and got.json() == {"service": "switchyard"}
    browser = httpx.get(h.gateway.url + "/", headers={"accept": "text/html,*/*"})
    assert browser.status_code == 302


def test_another_anthropic_targets_signed_thinking_is_never_sent_on(h: Harness) -> None:
    """Turn one is answered by one anthropic target with signed thinking (and Claude Code
    keeps a redacted block); turn two fails over to another anthropic target, which must
    not get the first one's signatures — while a retry of the same target would."""
    h.upstream.script("a-model", Reply("Turn one.", reasoning="private thoughts"))
    first = {
        "max_tokens": 100,
        "stream": False,
        "metadata": {"user_id": "session-7"},
        "messages": [{"role": "user", "content": "one"}],
    }
    answer = send(h, first, model="anthropic-pair", headers={"x-session-id": "s-7"}).json()
    assert [b["type"] for b in answer["content"]] == ["thinking", "text"]
    assert answer["content"][0]["signature"] == "sim-signature"
    history = [
        {"role": "user", "content": "one"},
        {
            "role": "assistant",
            "content": [
                {"type": "redacted_thinking", "data": "opaque"},
                *answer["content"],
            ],
        },
        {"role": "user", "content": "two"},
    ]
    h.upstream.script("a-model", Fail(529, "Overloaded", type="overloaded_error"))
    h.upstream.script("s-model", Reply("Turn two."))
    second = send(
        h, {**first, "messages": history}, model="anthropic-pair", headers={"x-session-id": "s-7"}
    )
    assert second.status_code == 200, second.text
    assert second.json()["content"][-1]["text"] == "Turn two."
    same, other = [r for r in h.upstream.requests if "two" in json.dumps(r.body)]
    assert same.model == "a-model" and other.model == "s-model"
    assert same.body["messages"] == history  # the target that wrote it gets it back intact
    sent = json.dumps(other.body["messages"])
    assert "sim-signature" not in sent and "redacted_thinking" not in sent
    assert "Turn one." in sent and "[model changed:" in sent
