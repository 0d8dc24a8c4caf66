"""What the Gemini door's requests become on targets of other kinds, and back (SPEC §12,
§20), over real sockets against the simulator: structured output (``responseSchema`` with
its upper-case types, ``responseJsonSchema``), thinking both ways, hosted tools under
``hosted_tools``, ``safetySettings`` and ``cachedContent`` (passed to gemini targets,
dropped with a note or skipped elsewhere), and continuity across a switch: history from
another target reaches a gemini target without foreign thought parts or signatures, and a
Gemini 3 target gets Google's placeholder signature on the calls that lost theirs."""

from __future__ import annotations

from typing import Any

import pytest

from routing.protocols.gemini.request import PLACEHOLDER_SIGNATURE
from routing.simulator import Reply
from routing.simulator.script import Fail
from tests.api import test_front_doors
from tests.api.test_front_doors import FakeClock
from tests.api.test_gemini_door import CONFIG as DOOR_CONFIG
from tests.api.test_gemini_door import configured, post, stream, text_of
from tests.conftest import Harness

clock = test_front_doors.clock  # the fake clock fixture, as the other doors' tests use it

CONFIG = (
    DOOR_CONFIG
    + """
  - name: claude-skips-hosted
    hosted_tools: skip
    targets:
      - {provider: claude, model: c-skip}
      - {provider: gem, model: g-hosted}
  - name: claude-then-gem
    targets:
      - {provider: claude, model: c-first}
      - {provider: gem, model: g-second}
  - name: gem3-then-claude
    retry: {max_retries: 0}
    targets:
      - {provider: gem, model: gemini-3-pro}
      - {provider: claude, model: c-backup}
"""
)
SCHEMA_OPENAPI = {
    "type": "OBJECT",
    "properties": {
        "model": {"type": "STRING", "enum": ["flash", "pro"]},
        "reason": {"type": "STRING", "nullable": True},
    },
    "required": ["model"],
    "propertyOrdering": ["model", "reason"],
}
SCHEMA_JSON = {
    "type": "object",
    "properties": {"model": {"type": "string", "enum": ["flash", "pro"]}},
    "required": ["model"],
}
ASK = [{"role": "user", "parts": [{"text": "which model?"}]}]


@pytest.fixture
def h(harness: Harness) -> Harness:
    return configured(harness, CONFIG)


def sent_to(h: Harness, model: str) -> dict[str, Any]:
    return dict([r for r in h.upstream.requests if r.model == model][-1].body)


# ---------------------------------------------------------------- structured output
def test_a_response_schema_reaches_a_chat_target_as_json_schema(h: Harness) -> None:
    h.upstream.script("o-model", Reply('{"model": "flash"}'))
    config = {"responseMimeType": "application/json", "responseSchema": SCHEMA_OPENAPI}
    response = post(h, "to-chat", body={"contents": ASK, "generationConfig": config})
    assert response.status_code == 200, response.text
    assert text_of([response.json()]) == '{"model": "flash"}'
    schema = sent_to(h, "o-model")["response_format"]["json_schema"]["schema"]
    assert schema == {  # the OpenAPI subset's upper-case types normalised
        "type": "object",
        "properties": {
            "model": {"type": "string", "enum": ["flash", "pro"]},
            "reason": {"type": ["string", "null"]},
        },
        "required": ["model"],
    }


def test_a_response_json_schema_reaches_an_anthropic_target_as_output_config(
    h: Harness,
) -> None:
    h.upstream.script("c-model", Reply('{"model": "pro"}'))
    config = {"responseMimeType": "application/json", "responseJsonSchema": SCHEMA_JSON}
    response = stream(h, "to-claude", body={"contents": ASK, "generationConfig": config})
    assert response.status_code == 200, response.text
    sent = sent_to(h, "c-model")
    assert sent["output_config"]["format"] == {"type": "json_schema", "schema": SCHEMA_JSON}


def test_other_doors_structured_output_reaches_a_gemini_target(h: Harness) -> None:
    h.upstream.script("g-model", Reply('{"model": "pro"}'))
    h.client().chat.completions.create(
        model="gemini-x",
        messages=[{"role": "user", "content": "which?"}],
        response_format={
            "type": "json_schema",
            "json_schema": {"name": "pick", "schema": SCHEMA_JSON},
        },
    )
    config = sent_to(h, "g-model")["generationConfig"]
    assert config["responseMimeType"] == "application/json"
    assert config["responseJsonSchema"] == SCHEMA_JSON


# ----------------------------------------------------------------------- thinking
def test_thinking_config_sets_an_anthropic_targets_thinking(h: Harness) -> None:
    h.upstream.script("c-model", Reply("answer", reasoning="deep thought"))
    config = {"thinkingConfig": {"includeThoughts": True, "thinkingLevel": "HIGH"}}
    response = post(h, "to-claude", body={"contents": ASK, "generationConfig": config})
    answer = response.json()
    assert answer["candidates"][0]["content"]["parts"][0] == {
        "text": "deep thought",
        "thought": True,
    }
    assert answer["usageMetadata"]["candidatesTokenCount"] >= 1
    assert sent_to(h, "c-model")["thinking"] == {"type": "enabled", "budget_tokens": 16384}


def test_history_thoughts_reach_other_kinds_as_reasoning_not_text(h: Harness) -> None:
    h.upstream.script("o-model", Reply("fine"))
    contents = [
        {"role": "user", "parts": [{"text": "hi"}]},
        {
            "role": "model",
            "parts": [
                {"text": "private musing", "thought": True},
                {"text": "hello", "thoughtSignature": "c2ln"},
            ],
        },
        {"role": "user", "parts": [{"text": "again"}]},
    ]
    assert post(h, "to-chat", body={"contents": contents}).status_code == 200
    messages = sent_to(h, "o-model")["messages"]
    assert messages[1]["content"] == "hello"
    assert messages[1]["reasoning_content"] == "private musing"
    assert "c2ln" not in str(messages)  # a text part's signature is Google's alone


# ------------------------------------------------------------------- hosted tools
def test_hosted_tools_are_dropped_with_a_note_for_other_kinds(h: Harness) -> None:
    h.upstream.script("c-model", Reply("searched nothing"))
    body = {"contents": ASK, "tools": [{"googleSearch": {}}, {"codeExecution": {}}]}
    response = post(h, "to-claude", body=body)
    assert response.status_code == 200, response.text
    rewrites = response.headers["x-switchyard-rewrites"]
    assert "dropped hosted tool googleSearch" in rewrites
    assert "tools" not in sent_to(h, "c-model")


def test_hosted_tools_skip_another_kind_and_reach_gemini(h: Harness) -> None:
    h.upstream.script("g-hosted", Reply("searched"))
    body = {"contents": ASK, "tools": [{"urlContext": {}}]}
    response = post(h, "claude-skips-hosted", body=body)
    assert response.status_code == 200, response.text
    assert response.headers["x-switchyard-target"] == "gem/g-hosted"
    assert sent_to(h, "g-hosted")["tools"] == [{"urlContext": {}}]
    assert not [r for r in h.upstream.requests if r.model == "c-skip"]


# ------------------------------------------------------ safety settings and caches
def test_safety_settings_pass_to_gemini_and_are_dropped_with_a_note_elsewhere(
    h: Harness,
) -> None:
    safety = [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}]
    h.upstream.script("c-model", Reply("ok"))
    response = post(h, "to-claude", body={"contents": ASK, "safetySettings": safety})
    assert response.status_code == 200
    assert "safetySettings" in response.headers["x-switchyard-rewrites"]
    h.upstream.script("g-hosted", Reply("ok"))
    h.upstream.script("c-skip", Fail(503, "down"))
    body = {"contents": ASK, "safetySettings": safety, "tools": [{"googleSearch": {}}]}
    post(h, "claude-skips-hosted", body=body)
    assert sent_to(h, "g-hosted")["safetySettings"] == safety


def test_a_cached_content_skips_other_kinds(h: Harness) -> None:
    body = {"contents": ASK, "cachedContent": "cachedContents/abc"}
    refused = post(h, "to-claude", body=body)
    assert refused.status_code == 400
    assert refused.json()["error"]["status"] == "INVALID_ARGUMENT"
    assert "cache" in refused.json()["error"]["message"]
    h.upstream.script("g-second", Reply("from the cache"))
    served = post(h, "claude-then-gem", body=body)
    assert served.status_code == 200, served.text
    assert served.headers["x-switchyard-target"] == "gem/g-second"
    assert sent_to(h, "g-second")["cachedContent"] == "cachedContents/abc"
    assert not [r for r in h.upstream.requests if r.model == "c-first"]


# --------------------------------------------------------- continuity across a switch
def test_a_gemini_3_target_gets_history_from_another_target_without_its_reasoning(
    h: Harness, clock: FakeClock
) -> None:
    h.upstream.script("gemini-3-pro", Fail(503, "overloaded"))
    h.upstream.script(
        "c-backup",
        Reply("", reasoning="claude thinks", tool_call={"name": "ls", "arguments": {}}),
    )
    tools = [{"functionDeclarations": [{"name": "ls", "parameters": {"type": "OBJECT"}}]}]
    first = post(h, "gem3-then-claude", body={"contents": ASK, "tools": tools})
    assert first.headers["x-switchyard-target"] == "claude/c-backup"
    model_turn = first.json()["candidates"][0]["content"]
    assert model_turn["parts"][0] == {"text": "claude thinks", "thought": True}
    [call] = [p for p in model_turn["parts"] if "functionCall" in p]
    assert "thoughtSignature" not in call  # Anthropic's signature is not Google's
    clock.now += 600  # the gemini target is revived
    h.upstream.script("gemini-3-pro", Reply("listed"))
    result = {"functionResponse": {"id": call["functionCall"]["id"], "name": "ls"}}
    history = [*ASK, model_turn, {"role": "user", "parts": [result]}]
    second = post(h, "gem3-then-claude", body={"contents": history, "tools": tools})
    assert second.headers["x-switchyard-target"] == "gem/gemini-3-pro"
    assert "thought-signature-placeholder:1" in second.headers["x-switchyard-rewrites"]
    sent = sent_to(h, "gemini-3-pro")["contents"]
    assert sent[1]["parts"] == [{**call, "thoughtSignature": PLACEHOLDER_SIGNATURE}]
    assert "claude thinks" not in str(sent)
    assert sent[-1]["parts"][0]["text"].startswith("[model changed:")
