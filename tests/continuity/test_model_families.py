"""The same Claude on the Anthropic API, Bedrock and Vertex is one model family (SPEC §13,
§19): its signed thinking carries over between them; another model still loses it.

The names are each cloud's own; the platform a provider is reached on does not enter into
it (the model's name does), so these targets are Anthropic-kind providers on the simulator.
The loop goes over real sockets: the Messages door → Switchyard → the simulator, which
records the exact body each attempt sent.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from routing.continuity.family import Family, model_family, same_family
from routing.continuity.provenance import Producer
from routing.simulator.script import Fail, Reply
from tests.conftest import Harness

OPUS = "claude-opus-4-8"
BEDROCK = "us.anthropic.claude-opus-4-8-v1:0"
VERTEX = "claude-opus-4-8@20251101"
SONNET = "claude-sonnet-4-6"


@pytest.mark.parametrize(
    "name",
    [
        "claude-opus-4-8",
        "Claude-Opus-4-8",
        "anthropic.claude-opus-4-8-v1:0",
        "anthropic.claude-opus-4-8-v1",
        "us.anthropic.claude-opus-4-8-v1:0",
        "global.anthropic.claude-opus-4-8-v1:0",
        "eu.anthropic.claude-opus-4-8-20251101-v1:0",
        "us-gov.anthropic.claude-opus-4-8-v1:0",
        "arn:aws:bedrock:us-east-1::foundation-model/anthropic.claude-opus-4-8-v1:0",
        "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-opus-4-8-v1:0",
        "claude-opus-4-8@20251101",
        "claude-opus-4-8-20251101",
        "projects/p/locations/global/publishers/anthropic/models/claude-opus-4-8@20251101",
    ],
)
def test_every_clouds_name_for_one_claude_is_one_family(name: str) -> None:
    assert model_family(name) is not None and model_family(name).base == "claude-opus-4-8"  # type: ignore[union-attr]
    assert same_family(name, OPUS) and same_family(VERTEX, name)


@pytest.mark.parametrize(
    ("one", "other"),
    [
        (OPUS, SONNET),  # another model
        (OPUS, "claude-opus-4-7"),  # another version
        ("claude-opus-4-8@20251101", "anthropic.claude-opus-4-8-20260101-v1:0"),  # snapshots
        ("claude-3-5-sonnet-latest", "claude-3-5-sonnet-latest"),  # a moving alias
        ("gpt-5", "gpt-5"),  # not a Claude: the strict rule (same provider and model)
        (OPUS, "arn:aws:bedrock:us-east-1:1:application-inference-profile/abc123"),  # opaque
        (OPUS, "anthropic.claude-opus-4-8-v1:0:200k"),  # a suffix this reader does not know
        (OPUS, "anthropic/claude-opus-4-8"),  # another gateway: what serves it is unknown
    ],
)
def test_other_models_and_unknowable_names_are_not_one_family(one: str, other: str) -> None:
    assert not same_family(one, other) and not same_family(other, one)


def test_same_target_is_the_one_place_that_decides() -> None:
    api, bedrock = Producer("anthropic", OPUS), Producer("aws", BEDROCK)
    assert api.same_target(bedrock) and bedrock.same_target(Producer("gcp", VERTEX))
    assert not api.same_target(Producer("anthropic", SONNET))
    # not a Claude: the strict rule, as before
    assert Producer("p1", "gpt-5").same_target(Producer("p1", "gpt-5"))
    assert not Producer("p1", "gpt-5").same_target(Producer("p2", "gpt-5"))
    assert Producer(None, "gpt-5").same_target(Producer("p2", "gpt-5"))
    assert model_family("anthropic.claude-opus-4-5-20251101-v1:0") == Family(
        "claude-opus-4-5", "20251101"
    )


CONFIG = f"""
providers:
  - {{name: anthropic, kind: anthropic, base_url: "{{upstream}}", api_key: upstream-key-api}}
  - {{name: aws, kind: anthropic, base_url: "{{upstream}}", api_key: upstream-key-aws}}
  - {{name: gcp, kind: anthropic, base_url: "{{upstream}}", api_key: upstream-key-gcp}}
groups:
  - name: claude
    retry: {{max_retries: 0}}
    targets:
      - {{provider: anthropic, model: "{OPUS}"}}
      - {{provider: aws, model: "{BEDROCK}"}}
  - name: on-vertex
    targets: [{{provider: gcp, model: "{VERTEX}"}}]
  - name: to-sonnet
    retry: {{max_retries: 0}}
    targets:
      - {{provider: anthropic, model: "{OPUS}"}}
      - {{provider: anthropic, model: "{SONNET}"}}
"""
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}}
TOOLS = [{"name": "get_weather", "input_schema": SCHEMA}]
CALL = {"name": "get_weather", "arguments": {"city": "Paris"}}


@pytest.fixture
def h(harness: Harness) -> Harness:
    harness.configure(CONFIG)
    harness.runtime.rand = lambda: 0.5  # type: ignore[attr-defined]
    return harness


def turn(h: Harness, group: str, messages: list[dict[str, Any]]) -> httpx.Response:
    response = httpx.post(
        h.gateway.url + "/v1/messages",
        json={"model": group, "max_tokens": 4096, "tools": TOOLS, "messages": messages},
        headers={"x-api-key": h.key, "x-session-id": f"loop-{group}", "anthropic-version": "1"},
        timeout=10,
    )
    assert response.status_code == 200, response.text
    return response


def sent_to(h: Harness, model: str) -> list[dict[str, Any]]:
    return list([r for r in h.upstream.requests if r.model == model][-1].body["messages"])


def tool_result(answer: httpx.Response, text: str) -> dict[str, Any]:
    [use] = [b for b in answer.json()["content"] if b["type"] == "tool_use"]
    return {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": use["id"], "content": text}],
    }


def test_a_tool_loop_moving_between_clouds_keeps_its_signed_thinking(h: Harness) -> None:
    """Turn 1 on Anthropic's API; turn 2: the API answers 529 and Bedrock takes it; turn 3
    on Vertex. Each target receives every earlier turn byte for byte — its thinking block
    and signature — and no model-changed notice: to Claude it is its own conversation."""
    h.upstream.script(OPUS, Reply("", reasoning="plan-1", tool_call=CALL))
    history: list[dict[str, Any]] = [{"role": "user", "content": "weather in Paris?"}]
    first = turn(h, "claude", history)
    assert first.json()["content"][0] == {
        "type": "thinking",
        "thinking": "plan-1",
        "signature": "sim-signature",
    }
    history += [{"role": "assistant", "content": first.json()["content"]}]
    history += [tool_result(first, "21")]

    h.upstream.script(OPUS, Fail(529, "Overloaded", type="overloaded_error"))
    h.upstream.script(BEDROCK, Reply("", reasoning="plan-2", tool_call=CALL))
    second = turn(h, "claude", history)
    assert sent_to(h, BEDROCK) == history  # the API's signed thinking, as the API wrote it
    assert "x-switchyard-rewrites" not in second.headers
    history += [{"role": "assistant", "content": second.json()["content"]}]
    history += [tool_result(second, "sunny")]

    h.upstream.script(VERTEX, Reply("21 and sunny"))
    third = turn(h, "on-vertex", history)
    assert sent_to(h, VERTEX) == history  # both clouds' turns kept, thinking and all
    assert "x-switchyard-rewrites" not in third.headers
    assert third.json()["content"][-1]["text"] == "21 and sunny"


def test_a_switch_to_another_model_strips_the_thinking_as_before(h: Harness) -> None:
    h.upstream.script(OPUS, Reply("", reasoning="plan-1", tool_call=CALL))
    history: list[dict[str, Any]] = [{"role": "user", "content": "weather in Paris?"}]
    first = turn(h, "to-sonnet", history)
    history += [{"role": "assistant", "content": first.json()["content"]}]
    history += [tool_result(first, "21")]

    h.upstream.script(OPUS, Fail(529, "Overloaded", type="overloaded_error"))
    h.upstream.script(SONNET, Reply("21"))
    second = turn(h, "to-sonnet", history)
    sent = sent_to(h, SONNET)
    assert [b["type"] for b in sent[1]["content"]] == ["tool_use"]  # thinking stripped
    assert "signature" not in str(sent)
    assert f"generated by {OPUS}; the session continues with {SONNET}]" in str(sent[-1])
    rewrites = second.headers["x-switchyard-rewrites"]
    assert "strip-reasoning:1" in rewrites and "model-changed-notice" in rewrites
