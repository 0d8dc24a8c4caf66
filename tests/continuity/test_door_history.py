"""History rules at the Messages and Responses doors (SPEC §12–13), over real sockets: the
``anthropic`` SDK and the ``openai`` SDK's ``responses`` client → Switchyard → the
simulator, which records the exact body each attempt sent.

A Messages or Responses request passed through to a target of its own kind is rewritten
in its own shape: a request ending with a ``tool_result`` block / a
``function_call_output`` item gets the tool-loop notice from a ``break_tool_loop``
target (no switch needed), and a history the view cannot read goes out untouched and
counted.
"""

from __future__ import annotations

from typing import Any

import anthropic
import pytest

from routing.continuity.rewrite import TOOL_LOOP_NOTICE
from routing.gateway.continuity import STATS
from routing.simulator.script import Fail, Reply
from tests.conftest import Harness

CONFIG = """
providers:
  - {name: claude, kind: anthropic, base_url: "{upstream}", api_key: upstream-key-claude}
  - {name: resp, kind: openai-responses, base_url: "{upstream}", api_key: upstream-key-resp}
  - {name: chat, kind: openai, base_url: "{upstream}", api_key: upstream-key-chat}
groups:
  - name: claude-loop
    targets: [{provider: claude, model: a-loop, break_tool_loop: true}]
  - name: claude-plain
    targets: [{provider: claude, model: a-plain}]
  - name: chat-loop
    targets: [{provider: chat, model: c-loop, break_tool_loop: true}]
  - name: resp-loop
    targets: [{provider: resp, model: r-loop, break_tool_loop: true}]
  - name: resp-plain
    targets: [{provider: resp, model: r-plain}]
  - name: resp-switch
    retry: {max_retries: 0}
    targets:
      - {provider: resp, model: r1}
      - {provider: resp, model: r2}
"""
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}}
ANTHROPIC_TOOLS: Any = [{"name": "get_weather", "input_schema": SCHEMA}]
RESPONSES_TOOLS: Any = [{"type": "function", "name": "get_weather", "parameters": SCHEMA}]
MESSAGES_LOOP: Any = [
    {"role": "user", "content": "weather in Paris?"},
    {
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}
        ],
    },
    {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "21"}],
    },
]
RESPONSES_LOOP: Any = [
    {"role": "user", "content": "weather in Paris?"},
    {
        "type": "function_call",
        "call_id": "call_1",
        "name": "get_weather",
        "arguments": '{"city": "Paris"}',
    },
    {"type": "function_call_output", "call_id": "call_1", "output": "21"},
]


@pytest.fixture
def h(harness: Harness) -> Harness:
    harness.configure(CONFIG)
    return harness


def sent_to(h: Harness, model: str) -> dict[str, Any]:
    return dict([r for r in h.upstream.requests if r.model == model][-1].body)


def claude(h: Harness, session: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        base_url=h.gateway.url,
        api_key=h.key,
        max_retries=0,
        default_headers={"x-session-id": session},
    )


@pytest.mark.parametrize(
    ("group", "model", "notice"),
    [
        ("claude-loop", "a-loop", [{"type": "text", "text": TOOL_LOOP_NOTICE}]),
        ("claude-plain", "a-plain", None),
    ],
)
def test_messages_door_tool_loop_ending_with_a_tool_result(
    h: Harness, group: str, model: str, notice: Any
) -> None:
    """A fresh Claude Code session (nothing remembered) whose request ends with a
    ``tool_result``: a break_tool_loop target gets the notice; another, the body as is."""
    h.upstream.script(model, Reply("done"))
    raw = claude(h, f"fresh-{model}").messages.with_raw_response.create(
        model=group, max_tokens=100, tools=ANTHROPIC_TOOLS, messages=MESSAGES_LOOP
    )
    assert raw.parse().content[0].text == "done"  # type: ignore[union-attr]
    messages = sent_to(h, model)["messages"]
    if notice is None:
        assert messages == MESSAGES_LOOP
        assert "x-switchyard-rewrites" not in raw.headers
    else:
        assert messages == [*MESSAGES_LOOP, {"role": "user", "content": notice}]
        assert raw.headers["x-switchyard-rewrites"] == "tool-loop-notice"


def test_messages_door_tool_loop_to_a_translated_target(h: Harness) -> None:
    """Claude Code to a chat target with the switch (DeepSeek's case): the notice is
    appended in the translated (chat) body."""
    h.upstream.script("c-loop", Reply("done"))
    raw = claude(h, "fresh-chat").messages.with_raw_response.create(
        model="chat-loop", max_tokens=100, tools=ANTHROPIC_TOOLS, messages=MESSAGES_LOOP
    )
    messages = sent_to(h, "c-loop")["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "user"]
    assert messages[-1] == {"role": "user", "content": TOOL_LOOP_NOTICE}
    assert raw.headers["x-switchyard-rewrites"] == "tool-loop-notice"


@pytest.mark.parametrize(
    ("group", "model", "looping"), [("resp-loop", "r-loop", True), ("resp-plain", "r-plain", False)]
)
def test_responses_door_tool_loop_ending_with_a_function_call_output(
    h: Harness, group: str, model: str, looping: bool
) -> None:
    h.upstream.script(model, Reply("done"))
    client = h.client(default_headers={"x-session-id": f"fresh-{model}"})
    raw = client.responses.with_raw_response.create(
        model=group, input=RESPONSES_LOOP, tools=RESPONSES_TOOLS, store=False
    )
    assert raw.parse().output_text == "done"
    items = sent_to(h, model)["input"]
    if looping:
        assert items == [*RESPONSES_LOOP, {"role": "user", "content": TOOL_LOOP_NOTICE}]
        assert raw.headers["x-switchyard-rewrites"] == "tool-loop-notice"
    else:
        assert items == RESPONSES_LOOP
        assert "x-switchyard-rewrites" not in raw.headers


def test_responses_door_unknown_shape_passes_through_counted(h: Harness) -> None:
    """A Codex session moved from r1 to r2 with a reasoning item whose ``summary`` is
    ``true``: r2 gets the input untouched, the call succeeds, the rewrite says why, and
    the count goes up (it used to fail the call with a TypeError)."""
    client = h.client(default_headers={"x-session-id": "s-odd-codex"})
    h.upstream.script("r1", Reply("from r1", reasoning="r1 thinks"))
    first = client.responses.create(model="resp-switch", input="hi", store=False)
    output = [item.model_dump(exclude_none=True) for item in first.output]
    assert [item["type"] for item in output] == ["reasoning", "message"]
    output[0]["summary"] = True
    history = [{"role": "user", "content": "hi"}, *output, {"role": "user", "content": "and?"}]
    h.upstream.script("r1", Fail(503, "down"))
    h.upstream.script("r2", Reply("from r2"))
    before = STATS.unrewritable
    raw = client.responses.with_raw_response.create(model="resp-switch", input=history, store=False)
    assert raw.parse().output_text == "from r2"
    assert sent_to(h, "r2")["input"] == history
    assert raw.headers["x-switchyard-rewrites"] == "history-unrewritable"
    assert STATS.unrewritable == before + 1
