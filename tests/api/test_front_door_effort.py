"""The per-target reasoning-effort policy (SPEC §13) at the Messages and Responses doors,
end to end over real sockets: the official ``anthropic`` SDK and the ``openai`` SDK's
``responses`` client → Switchyard → the simulator speaking each protocol.

A pass-through (the door's protocol = the target's kind) gets the policy in the door's own
fields: ``thinking`` / ``output_config.effort`` for Anthropic, ``reasoning.effort`` for
Responses; each change is in ``x-switchyard-rewrites`` and the attempt record. A call that
fails over inside itself applies each target's own policy to the client's request.
"""

from __future__ import annotations

from typing import Any

import anthropic
import pytest

from routing.gateway.events import CallRecord
from routing.simulator.script import Fail, Reply
from tests.conftest import Harness

EFFORTS = """
providers:
  - name: claude
    kind: anthropic
    base_url: {upstream}
    api_key: upstream-key-claude
  - name: resp
    kind: openai-responses
    base_url: {upstream}
    api_key: upstream-key-resp
  - name: chat
    kind: openai
    base_url: {upstream}
    api_key: upstream-key-chat
groups:
  - name: claude-effort
    retry: {max_retries: 0}
    targets:
      - {provider: claude, model: a-drop, reasoning_effort: drop}
      - {provider: claude, model: a-max, reasoning_effort: max, efforts: [low, medium, high]}
  - name: claude-picky
    targets:
      - {provider: claude, model: a-picky, efforts: [low, high]}
  - name: resp-effort
    retry: {max_retries: 0}
    targets:
      - {provider: resp, model: r-drop, reasoning_effort: drop}
      - {provider: resp, model: r-max, reasoning_effort: max, efforts: [low, xhigh]}
  - name: resp-picky
    targets:
      - {provider: resp, model: r-picky, efforts: [low, medium]}
  - name: chat-plain
    targets:
      - {provider: chat, model: c-plain}
"""
USER = [{"role": "user", "content": "hi"}]


@pytest.fixture
def h(harness: Harness) -> Harness:
    harness.configure(EFFORTS)
    return harness


def sent_to(h: Harness, model: str) -> dict[str, Any]:
    [record] = [r for r in h.upstream.requests if r.model == model]
    return dict(record.body)


def _claude(h: Harness) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=h.gateway.url, api_key=h.key, max_retries=0)


# --------------------------------------------------------------------------- Messages
@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_messages_pass_through_drops_then_maxes_the_thinking_budget(
    h: Harness, stream: bool
) -> None:
    """``a-drop`` (drop) fails with a 503 and the call moves to ``a-max`` (max of low,
    medium, high): each got the client's request with its own policy applied."""
    h.upstream.script("a-drop", Fail(503, "overloaded"))
    h.upstream.script("a-max", Reply("thought hard", reasoning="deeply"))
    request: dict[str, Any] = {
        "model": "claude-effort",
        "max_tokens": 4096,
        "messages": USER,
        "thinking": {"type": "enabled", "budget_tokens": 2048},
        "metadata": {"user_id": "u1"},
    }
    client = _claude(h)
    if stream:
        with client.messages.with_streaming_response.create(**request, stream=True) as raw:
            assert "event: message_stop" in "".join(raw.iter_text())
            headers = raw.headers
    else:
        raw = client.messages.with_raw_response.create(**request)
        message = raw.parse()
        assert [b.type for b in message.content] == ["thinking", "text"]
        headers = raw.headers

    dropped = sent_to(h, "a-drop")
    assert "thinking" not in dropped
    assert dropped == {k: v for k, v in request.items() if k != "thinking"} | {
        "model": "a-drop"
    } | ({"stream": True} if stream else {})
    maxed = sent_to(h, "a-max")
    assert maxed["thinking"] == {"type": "enabled", "budget_tokens": 16384}
    assert maxed["max_tokens"] == 16384 + 4096
    assert maxed["metadata"] == {"user_id": "u1"} and maxed["messages"] == USER
    assert headers["x-switchyard-target"] == "claude/a-max"
    assert headers["x-switchyard-rewrites"] == (
        "effort:low(budget 2048)->high(budget 16384),"
        "max_tokens raised to 20480 above the thinking budget"
    )
    [record] = h.events(CallRecord, at_least=1)
    assert record.front_door == "anthropic"
    assert [(a.target, a.kind, a.rewrites) for a in record.attempts] == [
        ("claude/a-drop", "anthropic", ("effort:low(budget 2048)->dropped",)),
        (
            "claude/a-max",
            "anthropic",
            (
                "effort:low(budget 2048)->high(budget 16384)",
                "max_tokens raised to 20480 above the thinking budget",
            ),
        ),
    ]


def test_messages_max_turns_thinking_on_and_removes_what_thinking_refuses(h: Harness) -> None:
    h.upstream.script("a-drop", Fail(503, "overloaded"))
    raw = _claude(h).messages.with_raw_response.create(
        model="claude-effort",
        max_tokens=20000,
        messages=USER,
        extra_body={"temperature": 0.3},  # this SDK no longer has the argument; clients send it
    )
    assert raw.parse().content[-1].text  # type: ignore[union-attr]
    assert "thinking" not in sent_to(h, "a-drop")  # drop: nothing to remove, nothing noted
    assert sent_to(h, "a-drop")["temperature"] == 0.3
    maxed = sent_to(h, "a-max")
    assert maxed["thinking"] == {"type": "enabled", "budget_tokens": 16384}
    assert "temperature" not in maxed and maxed["max_tokens"] == 20000
    assert raw.headers["x-switchyard-rewrites"] == (
        "effort:-->high(budget 16384),dropped temperature (not allowed with thinking)"
    )


def test_messages_inherit_drops_an_unsupported_effort_level_and_budget(h: Harness) -> None:
    """``a-picky`` accepts low and high: an 8192 budget (medium) and ``output_config``
    effort ``medium`` are dropped, not sent to fail; a 2048 budget (low) passes."""
    client = _claude(h)
    raw = client.messages.with_raw_response.create(
        model="claude-picky",
        max_tokens=10000,
        messages=USER,
        thinking={"type": "enabled", "budget_tokens": 8192},
        output_config={"effort": "medium"},
    )
    assert raw.parse().content
    sent = sent_to(h, "a-picky")
    assert "thinking" not in sent and "output_config" not in sent
    assert raw.headers["x-switchyard-rewrites"] == (
        "effort:medium(budget 8192)->dropped(unsupported),effort:medium->dropped(unsupported)"
    )
    h.upstream.reset()
    raw = client.messages.with_raw_response.create(
        model="claude-picky",
        max_tokens=10000,
        messages=USER,
        thinking={"type": "enabled", "budget_tokens": 2048},
        output_config={"effort": "high"},
    )
    sent = sent_to(h, "a-picky")
    assert sent["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert sent["output_config"] == {"effort": "high"}
    assert "x-switchyard-rewrites" not in raw.headers


def test_a_messages_effort_level_reaches_a_chat_target_as_reasoning_effort(h: Harness) -> None:
    raw = _claude(h).messages.with_raw_response.create(
        model="chat-plain", max_tokens=100, messages=USER, output_config={"effort": "max"}
    )
    assert raw.parse().content
    assert sent_to(h, "c-plain")["reasoning_effort"] == "xhigh"
    assert "effort:max->xhigh" in raw.headers["x-switchyard-rewrites"].split(",")


# --------------------------------------------------------------------------- Responses
@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_responses_pass_through_drops_then_maxes_reasoning_effort(h: Harness, stream: bool) -> None:
    h.upstream.script("r-drop", Fail(503, "overloaded"))
    h.upstream.script("r-max", Reply("thought hard", reasoning="deeply"))
    client = h.client()
    request: dict[str, Any] = {
        "model": "resp-effort",
        "input": "hi",
        "reasoning": {"effort": "medium", "summary": "auto"},
        "store": False,
    }
    if stream:
        with client.responses.with_streaming_response.create(**request, stream=True) as raw:
            assert "response.completed" in "".join(raw.iter_text())
            headers = raw.headers
    else:
        raw = client.responses.with_raw_response.create(**request)
        assert raw.parse().output_text == "thought hard"
        headers = raw.headers

    assert sent_to(h, "r-drop")["reasoning"] == {"summary": "auto"}  # the effort removed
    maxed = sent_to(h, "r-max")
    assert maxed["reasoning"] == {"effort": "xhigh", "summary": "auto"}
    assert maxed["input"] == "hi" and maxed["store"] is False
    assert headers["x-switchyard-target"] == "resp/r-max"
    assert headers["x-switchyard-rewrites"] == "effort:medium->xhigh"
    [record] = h.events(CallRecord, at_least=1)
    assert record.front_door == "openai-responses"
    assert [(a.kind, a.rewrites) for a in record.attempts] == [
        ("openai-responses", ("effort:medium->dropped",)),
        ("openai-responses", ("effort:medium->xhigh",)),
    ]


def test_responses_inherit_drops_an_unsupported_effort(h: Harness) -> None:
    client = h.client()
    raw = client.responses.with_raw_response.create(
        model="resp-picky", input="hi", reasoning={"effort": "high"}
    )
    assert raw.parse().output_text
    assert "reasoning" not in sent_to(h, "r-picky")
    assert raw.headers["x-switchyard-rewrites"] == "effort:high->dropped(unsupported)"
    h.upstream.reset()
    raw = client.responses.with_raw_response.create(
        model="resp-picky", input="hi", reasoning={"effort": "medium"}
    )
    assert sent_to(h, "r-picky")["reasoning"] == {"effort": "medium"}
    assert "x-switchyard-rewrites" not in raw.headers


def test_a_responses_request_without_reasoning_passes_through_untouched(h: Harness) -> None:
    raw = h.client().responses.with_raw_response.create(model="resp-picky", input="hi")
    assert raw.parse().output_text
    assert sent_to(h, "r-picky") == {"model": "r-picky", "input": "hi"}
    assert "x-switchyard-rewrites" not in raw.headers
