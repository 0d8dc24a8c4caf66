"""Three front doors × three upstream kinds (SPEC §12), end to end over real sockets:
the official ``openai`` SDK (chat and ``responses``) and ``anthropic`` SDK → Switchyard →
the simulator speaking Chat Completions, Anthropic Messages or OpenAI Responses.

Each group's first target is of one kind and fails over to a target of another kind, so
the matrix also covers failover across kinds. The door adapters below turn each SDK's
answer into the same ``Seen`` facts so every cell asserts the same things.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import anthropic
import httpx
import openai
import pytest

from routing.gateway.events import CallRecord
from routing.simulator.script import DropAfter, Fail, Reply
from tests.conftest import Harness

THREE_KINDS = """
providers:
  - name: chat
    kind: openai
    base_url: {upstream}
    api_key: upstream-key-chat
  - name: claude
    kind: anthropic
    base_url: {upstream}
    api_key: upstream-key-claude
  - name: resp
    kind: openai-responses
    base_url: {upstream}
    api_key: upstream-key-resp
groups:
  - name: via-openai
    targets:
      - {provider: chat, model: c-model}
      - {provider: claude, model: a-model}
  - name: via-anthropic
    targets:
      - {provider: claude, model: a-model}
      - {provider: resp, model: r-model}
  - name: via-openai-responses
    targets:
      - {provider: resp, model: r-model}
      - {provider: chat, model: c-model}
  - name: anthropic-then-openai
    targets:
      - {provider: claude, model: a-model}
      - {provider: chat, model: c-model}
  - name: openai-then-responses
    targets:
      - {provider: chat, model: c-model}
      - {provider: resp, model: r-model}
  - name: responses-then-anthropic
    targets:
      - {provider: resp, model: r-model}
      - {provider: claude, model: a-model}
"""
# Every ordered pair of kinds: (group, its first target's model, its second's).
PAIRS = [
    ("via-openai", "c-model", "a-model"),
    ("via-anthropic", "a-model", "r-model"),
    ("via-openai-responses", "r-model", "c-model"),
    ("anthropic-then-openai", "a-model", "c-model"),  # Claude Code → DeepSeek
    ("openai-then-responses", "c-model", "r-model"),
    ("responses-then-anthropic", "r-model", "a-model"),
]
GROUPS = [group for group, _, _ in PAIRS]

# kind -> (first target's model, its failover's model, the upstream path the kind posts to)
KINDS = {
    "openai": ("c-model", "a-model", "/v1/chat/completions"),
    "anthropic": ("a-model", "r-model", "/v1/messages"),
    "openai-responses": ("r-model", "c-model", "/v1/responses"),
}
PATH_OF_MODEL = {
    "c-model": "/v1/chat/completions",
    "a-model": "/v1/messages",
    "r-model": "/v1/responses",
}
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
ANSWER = Reply(
    "Sunny in Paris.",
    reasoning="Need the weather tool.",
    tool_call=True,
    finish_reason="tool_calls",
)


@dataclass
class Seen:
    """What a client got, in protocol-neutral terms."""

    text: str = ""
    reasoning: str = ""
    tool_name: str | None = None
    tool_args: dict[str, Any] | None = None
    stop: str | None = None
    model: str | None = None
    models: set[str] = field(default_factory=set)  # every streamed event's (SPEC §3.11)
    usage_out: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    events: list[str] = field(default_factory=list)


class ChatDoor:
    name = "chat"
    stop_for_tools = "tool_calls"

    def __init__(self, h: Harness) -> None:
        self.client = h.client()

    def call(self, model: str, *, stream: bool) -> Seen:
        kwargs: dict[str, Any] = {
            "model": model,
            "messages": [{"role": "user", "content": "weather in Paris?"}],
            "tools": [
                {
                    "type": "function",
                    "function": {"name": "get_weather", "parameters": SCHEMA},
                }
            ],
            "reasoning_effort": "low",
        }
        seen = Seen()
        if not stream:
            raw = self.client.chat.completions.with_raw_response.create(**kwargs)
            reply = raw.parse()
            message = reply.choices[0].message
            seen.text = message.content or ""
            seen.reasoning = (message.model_extra or {}).get("reasoning_content") or ""
            if message.tool_calls:
                seen.tool_name = message.tool_calls[0].function.name
                seen.tool_args = _json(message.tool_calls[0].function.arguments)
            seen.stop, seen.model = reply.choices[0].finish_reason, reply.model
            seen.usage_out = reply.usage.completion_tokens if reply.usage else None
            seen.headers = dict(raw.headers)
            return seen
        args = ""
        for chunk in self.client.chat.completions.create(
            **kwargs, stream=True, stream_options={"include_usage": True}
        ):
            seen.model = chunk.model
            seen.models.add(chunk.model)
            if chunk.usage:
                seen.usage_out = chunk.usage.completion_tokens
            if not chunk.choices:
                continue
            delta = chunk.choices[0].delta
            if delta.role:
                seen.events.append("role")
            seen.text += delta.content or ""
            seen.reasoning += (delta.model_extra or {}).get("reasoning_content") or ""
            for call in delta.tool_calls or ():
                if call.function and call.function.name:
                    seen.tool_name = call.function.name
                args += (call.function.arguments or "") if call.function else ""
            seen.stop = chunk.choices[0].finish_reason or seen.stop
        seen.tool_args = _json(args) if args else None
        return seen

    def cut_after_commit(self, model: str) -> tuple[str, Exception | None]:
        text, error = "", None
        try:
            for chunk in self.client.chat.completions.create(
                model=model, messages=[{"role": "user", "content": "hi"}], stream=True
            ):
                if chunk.choices:
                    text += chunk.choices[0].delta.content or ""
        except openai.APIError as exc:
            error = exc
        return text, error

    def exhausted(
        self, model: str, *, stream: bool = False
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        with pytest.raises(openai.APIStatusError) as info:
            self.client.chat.completions.create(
                model=model, messages=[{"role": "user", "content": "hi"}], stream=stream
            )
        response = info.value.response
        return response.status_code, response.json(), dict(response.headers)


class MessagesDoor:
    name = "messages"
    stop_for_tools = "tool_use"

    def __init__(self, h: Harness) -> None:
        self.client = anthropic.Anthropic(base_url=h.gateway.url, api_key=h.key, max_retries=0)

    def _kwargs(self, model: str) -> dict[str, Any]:
        return {
            "model": model,
            "max_tokens": 4096,
            "system": "You are terse.",
            "messages": [{"role": "user", "content": "weather in Paris?"}],
            "tools": [{"name": "get_weather", "input_schema": SCHEMA}],
            "thinking": {"type": "enabled", "budget_tokens": 2048},
        }

    def call(self, model: str, *, stream: bool) -> Seen:
        seen = Seen()
        if stream:
            with self.client.messages.stream(**self._kwargs(model)) as events:
                for event in events:
                    seen.events.append(event.type)
                    if event.type == "message_start":
                        seen.models.add(event.message.model)
                message = events.get_final_message()
        else:
            raw = self.client.messages.with_raw_response.create(**self._kwargs(model))
            message = raw.parse()
            seen.headers = dict(raw.headers)
        for block in message.content:
            if block.type == "text":
                seen.text += block.text
            elif block.type == "thinking":
                seen.reasoning += block.thinking
            elif block.type == "tool_use":
                seen.tool_name, seen.tool_args = block.name, dict(block.input)  # type: ignore[arg-type]
        seen.stop, seen.model = message.stop_reason, message.model
        seen.usage_out = message.usage.output_tokens
        return seen

    def cut_after_commit(self, model: str) -> tuple[str, Exception | None]:
        text, error = "", None
        try:
            with self.client.messages.stream(
                model=model, max_tokens=100, messages=[{"role": "user", "content": "hi"}]
            ) as events:
                for event in events:
                    if event.type == "text":
                        text += event.text
        except anthropic.APIError as exc:
            error = exc
        return text, error

    def exhausted(
        self, model: str, *, stream: bool = False
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        kwargs: dict[str, Any] = {
            "model": model,
            "max_tokens": 100,
            "messages": [{"role": "user", "content": "hi"}],
        }
        with pytest.raises(anthropic.APIStatusError) as info:
            if stream:
                with self.client.messages.stream(**kwargs) as events:
                    list(events)
            else:
                self.client.messages.create(**kwargs)
        response = info.value.response
        return response.status_code, response.json(), dict(response.headers)


class ResponsesDoor:
    name = "responses"
    stop_for_tools = "completed"

    def __init__(self, h: Harness) -> None:
        self.client = h.client()

    def _kwargs(self, model: str) -> dict[str, Any]:
        return {
            "model": model,
            "instructions": "You are terse.",
            "input": [{"role": "user", "content": "weather in Paris?"}],
            "tools": [{"type": "function", "name": "get_weather", "parameters": SCHEMA}],
            "reasoning": {"effort": "low"},
            "store": False,
        }

    def call(self, model: str, *, stream: bool) -> Seen:
        seen = Seen()
        if stream:
            with self.client.responses.stream(**self._kwargs(model)) as events:
                for event in events:
                    seen.events.append(event.type)
                    if hasattr(event, "response"):  # response.created, .in_progress, ...
                        seen.models.add(event.response.model)
                response = events.get_final_response()
        else:
            raw = self.client.responses.with_raw_response.create(**self._kwargs(model))
            response = raw.parse()
            seen.headers = dict(raw.headers)
        for item in response.output:
            if item.type == "message":
                seen.text += "".join(p.text for p in item.content if p.type == "output_text")
            elif item.type == "reasoning":
                seen.reasoning += "".join(s.text for s in item.summary)
            elif item.type == "function_call":
                seen.tool_name, seen.tool_args = item.name, _json(item.arguments)
        seen.stop, seen.model = response.status, response.model
        seen.usage_out = response.usage.output_tokens if response.usage else None
        return seen

    def cut_after_commit(self, model: str) -> tuple[str, Exception | None]:
        text, error = "", None
        try:
            with self.client.responses.stream(model=model, input="hi") as events:
                for event in events:
                    if event.type == "response.output_text.delta":
                        text += event.delta
                    elif event.type == "response.failed":
                        error = RuntimeError(event.response.error.message)  # type: ignore[union-attr]
                    elif event.type == "response.completed":
                        raise AssertionError("a cut stream must not complete")
        except openai.APIError as exc:
            error = exc
        return text, error

    def exhausted(
        self, model: str, *, stream: bool = False
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        with pytest.raises(openai.APIStatusError) as info:
            if stream:
                with self.client.responses.stream(model=model, input="hi") as events:
                    list(events)
            else:
                self.client.responses.create(model=model, input="hi")
        response = info.value.response
        return response.status_code, response.json(), dict(response.headers)


DOORS = [ChatDoor, MessagesDoor, ResponsesDoor]
Door = ChatDoor | MessagesDoor | ResponsesDoor


def _json(text: str) -> dict[str, Any]:
    import json

    return dict(json.loads(text))


@pytest.fixture
def h(harness: Harness) -> Harness:
    harness.configure(THREE_KINDS)
    return harness


def _cells() -> list[Any]:
    return [
        pytest.param(door, kind, id=f"{door.name}-door-{kind}") for door in DOORS for kind in KINDS
    ]


def _check_answer(seen: Seen, door: Door, asked: str) -> None:
    assert seen.text == "Sunny in Paris."
    assert seen.reasoning == "Need the weather tool."
    assert seen.tool_name == "get_weather" and seen.tool_args == {"city": "Paris"}
    assert seen.stop == door.stop_for_tools
    # The name the client asked for, in the body and in every streamed event that names
    # one (SPEC §3, step 11); the concrete model is on x-switchyard-target.
    assert seen.model == asked and seen.models <= {asked}
    assert seen.usage_out and seen.usage_out > 0


def _check_upstream_request(h: Harness, kind: str) -> None:
    """The target got the request in its own protocol: tools, system prompt, reasoning."""
    sent = h.upstream.requests[-1]
    assert sent.path == KINDS[kind][2]
    body = sent.body
    if kind == "openai":
        assert body["tools"][0]["function"]["name"] == "get_weather"
        assert body["messages"][0]["role"] in ("system", "user")
        assert body["reasoning_effort"] == "low"
    elif kind == "anthropic":
        assert body["tools"][0] == {"name": "get_weather", "input_schema": SCHEMA}
        assert body["max_tokens"] > body["thinking"]["budget_tokens"] == 2048
        assert sent.headers["x-api-key"] == "upstream-key-claude"
        assert sent.headers["anthropic-version"]
    else:
        assert body["tools"][0]["name"] == "get_weather" and body["store"] is False
        assert body["reasoning"]["effort"] == "low"
        assert body["input"][-1]["role"] == "user"


@pytest.mark.parametrize(("door_cls", "kind"), _cells())
def test_non_streaming_answer_with_tools_and_thinking(
    h: Harness, door_cls: type, kind: str
) -> None:
    door = door_cls(h)
    model = KINDS[kind][0]
    h.upstream.script(model, ANSWER)
    seen = door.call(f"via-{kind}", stream=False)
    _check_answer(seen, door, f"via-{kind}")
    _check_upstream_request(h, kind)
    assert seen.headers["x-switchyard-target"].endswith("/" + model)
    assert seen.headers["x-switchyard-attempts"] == "1"


@pytest.mark.parametrize(("door_cls", "kind"), _cells())
def test_streaming_answer_with_tools_and_thinking(h: Harness, door_cls: type, kind: str) -> None:
    door = door_cls(h)
    model = KINDS[kind][0]
    h.upstream.script(model, ANSWER)
    seen = door.call(f"via-{kind}", stream=True)
    _check_answer(seen, door, f"via-{kind}")
    assert seen.models == {f"via-{kind}"}
    _check_upstream_request(h, kind)
    if door.name == "messages":
        assert seen.events[0] == "message_start" and seen.events[-1] == "message_stop"
    if door.name == "responses":
        assert seen.events[:2] == ["response.created", "response.in_progress"]
        assert seen.events[-1] == "response.completed"
        assert "response.function_call_arguments.delta" in seen.events


PREAMBLE = {"chat": "role", "messages": "message_start", "responses": "response.created"}
FRONT_DOOR = {"chat": "openai", "messages": "anthropic", "responses": "openai-responses"}


def _pairs() -> list[Any]:
    return [
        pytest.param(door, group, first, second, id=f"{door.name}-door-{group}")
        for door in DOORS
        for group, first, second in PAIRS
    ]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize(("door_cls", "group", "first", "second"), _pairs())
def test_failover_across_kinds_is_one_valid_answer(
    h: Harness, door_cls: type, group: str, first: str, second: str, stream: bool
) -> None:
    """Every ordered pair of kinds, at every door, streaming and not: the first target
    fails before any content (401: switched at once), the second answers with tools and
    thinking, and the client reads one answer in its own protocol."""
    door = door_cls(h)
    h.upstream.script(first, Fail(401, "bad key"))
    h.upstream.script(second, ANSWER)
    seen = door.call(group, stream=stream)
    _check_answer(seen, door, group)
    assert h.upstream.count(first) == 1 and h.upstream.count(second) == 1
    assert h.upstream.requests[-1].path == PATH_OF_MODEL[second]
    if stream:
        assert seen.events.count(PREAMBLE[door.name]) == 1
    else:
        assert seen.headers["x-switchyard-target"].endswith("/" + second)
        assert seen.headers["x-switchyard-attempts"] == "2"
    [record] = h.events(CallRecord, at_least=1)
    assert record.front_door == FRONT_DOOR[door.name]
    assert [a.kind for a in record.attempts] == [_kind_of(first), _kind_of(second)]
    assert record.outcome == "ok"


@pytest.mark.parametrize(("door_cls", "group", "first", "second"), _pairs())
def test_a_preamble_sent_before_a_switch_across_kinds_is_held_back(
    h: Harness, door_cls: type, group: str, first: str, second: str
) -> None:
    """The first target sends its preamble (``message_start``; ``response.created``; the
    role chunk) and a usage event, then fails before any content; with no retries the
    call switches to a target of another kind. The client sees one preamble — the
    answer's — and one answer."""
    from routing.simulator.script import UsageThenError

    h.configure(
        THREE_KINDS.replace("    targets:\n", "    retry: {max_retries: 0}\n    targets:\n")
    )
    door = door_cls(h)
    h.upstream.script(first, UsageThenError())
    h.upstream.script(second, ANSWER)
    seen = door.call(group, stream=True)
    _check_answer(seen, door, group)
    assert seen.events.count(PREAMBLE[door.name]) == 1
    [record] = h.events(CallRecord, at_least=1)
    assert [(a.kind, a.code) for a in record.attempts] == [
        (_kind_of(first), "SERVER"),
        (_kind_of(second), None),
    ]


@pytest.mark.parametrize(("door_cls", "kind"), _cells())
def test_failure_after_commit_is_the_doors_error_event(
    h: Harness, door_cls: type, kind: str
) -> None:
    door = door_cls(h)
    first, second, _ = KINDS[kind]
    h.upstream.script(first, DropAfter(2, content="one two "))
    text, error = door.cut_after_commit(f"via-{kind}")
    assert text == "one two "
    assert error is not None  # never a clean end
    assert h.upstream.count(second) == 0  # never a switch after the commit point
    [record] = h.events(CallRecord, at_least=1)
    assert record.outcome == "failed" and record.error_code == "TRANSPORT"


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize(("door_cls", "kind"), _cells())
def test_exhaustion_in_the_doors_shape(h: Harness, door_cls: type, kind: str, stream: bool) -> None:
    """Every target fails before content: a 502 in the door's error shape, for a stream
    too (nothing was committed, so the reply is still an HTTP error)."""
    door = door_cls(h)
    first, second, _ = KINDS[kind]
    h.upstream.script(first, Fail(400, "nope", code="invalid_request_error"))
    h.upstream.script(second, then=Fail(403, "not for you"))
    harness_config_switch_on_bad_request(h)
    status, body, headers = door.exhausted(f"via-{kind}", stream=stream)
    assert status == 502
    assert headers["x-should-retry"] == "false"
    if door.name == "messages":
        assert body["type"] == "error" and body["error"]["type"] == "api_error"
        message = body["error"]["message"]
    else:
        assert body["error"]["code"] == "ROUTES_EXHAUSTED"
        message = body["error"]["message"]
    assert f"/{first} → BAD_REQUEST (HTTP 400)" in message
    assert f"/{second} → FORBIDDEN (HTTP 403)" in message


@dataclass
class FakeClock:
    now: float

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(h: Harness) -> Iterator[FakeClock]:
    fake = FakeClock(1_800_000_000.0)
    h.runtime.clock = fake  # type: ignore[attr-defined]
    yield fake
    h.runtime.clock = time.time  # type: ignore[attr-defined]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("door_cls", DOORS, ids=lambda d: d.name)
def test_every_target_cooling_is_a_503_in_the_doors_shape(
    h: Harness, clock: FakeClock, door_cls: type, stream: bool
) -> None:
    """Both targets rate limited for 30 s: the next call tries nothing and answers 503
    with ``Retry-After`` (the earliest revival) and ``x-should-retry: false`` — Anthropic
    ``overloaded_error`` at the Messages door, OpenAI's shape at the others."""
    door = door_cls(h)
    for model in ("a-model", "r-model"):
        h.upstream.script(model, then=Fail(429, "slow down", headers={"retry-after": "30"}))
    status, _, headers = door.exhausted("via-anthropic", stream=stream)
    assert status == 502 and headers["retry-after"] == "30"
    tried = h.upstream.count()
    clock.now += 10
    status, body, headers = door.exhausted("via-anthropic", stream=stream)
    assert status == 503
    assert headers["retry-after"] == "20" and headers["x-should-retry"] == "false"
    if door.name == "messages":
        assert body["type"] == "error" and body["error"]["type"] == "overloaded_error"
        message = body["error"]["message"]
    else:
        assert body["error"]["code"] == "ROUTES_EXHAUSTED"
        message = body["error"]["message"]
    assert "claude/a-model → cooling for 20 s" in message
    assert "resp/r-model → cooling for 20 s" in message
    assert h.upstream.count() == tried  # nothing was even tried


def harness_config_switch_on_bad_request(h: Harness) -> None:
    """Switch on BAD_REQUEST too, so both targets are tried with plain, fast failures."""
    h.configure(
        THREE_KINDS.replace(
            "    targets:\n",
            "    switch_codes: [BAD_REQUEST, FORBIDDEN, SERVER]\n    targets:\n",
        )
    )


def _kind_of(model: str) -> str:
    return {"c-model": "openai", "a-model": "anthropic", "r-model": "openai-responses"}[model]


# ------------------------------------------------------------------ each kind's failures
@pytest.mark.parametrize("door_cls", DOORS, ids=lambda d: d.name)
def test_anthropic_overloaded_529_is_retried_in_place(h: Harness, door_cls: type) -> None:
    h.upstream.script("a-model", Fail(529, "Overloaded"), ANSWER)
    seen = door_cls(h).call("via-anthropic", stream=False)
    assert seen.text == "Sunny in Paris."
    assert seen.headers["x-switchyard-trail"] == "claude/a-model:SERVER:529,claude/a-model:ok"
    assert h.sleeps.delays == [pytest.approx(0.5, rel=0.11)]


def test_anthropic_rate_limit_keeps_retry_after(h: Harness) -> None:
    h.upstream.script(
        "a-model", Fail(429, "slow down", headers={"retry-after": "1"}), Reply("later")
    )  # within switch_after_ms (2 s), waits included: retried in place, not switched
    raw = h.client().chat.completions.with_raw_response.create(
        model="via-anthropic", messages=[{"role": "user", "content": "hi"}]
    )
    assert raw.parse().choices[0].message.content == "later"
    assert h.sleeps.delays == [1.0]
    assert raw.headers["x-switchyard-trail"].startswith("claude/a-model:RATE_LIMIT:429")


def test_anthropic_authentication_error_disables_the_provider(h: Harness) -> None:
    h.upstream.script("a-model", Fail(401, "invalid x-api-key"))
    raw = h.client().chat.completions.with_raw_response.create(
        model="via-anthropic", messages=[{"role": "user", "content": "hi"}]
    )
    assert raw.headers["x-switchyard-target"] == "resp/r-model"
    assert raw.headers["x-switchyard-trail"].startswith("claude/a-model:AUTH:401")


def test_anthropic_prompt_too_long_is_a_context_window_failure(h: Harness) -> None:
    from routing.simulator.script import ContextLength

    h.upstream.script("a-model", ContextLength())
    raw = h.client().chat.completions.with_raw_response.create(
        model="via-anthropic", messages=[{"role": "user", "content": "hi"}]
    )
    assert raw.headers["x-switchyard-trail"].startswith(
        "claude/a-model:CONTEXT_WINDOW_EXCEEDED:400"
    )
    assert raw.headers["x-switchyard-target"] == "resp/r-model"


def test_anthropic_error_event_before_content_switches_invisibly(h: Harness) -> None:
    """An Anthropic ``event: error`` (overloaded) before any content is a SERVER failure
    retried in place; the client sees one clean Messages stream."""
    from routing.simulator.script import UsageThenError

    h.upstream.script("a-model", UsageThenError(), ANSWER)
    seen = MessagesDoor(h).call("via-anthropic", stream=True)
    assert seen.text == "Sunny in Paris."
    assert seen.events.count("message_start") == 1


def test_responses_failed_event_before_content_switches_invisibly(h: Harness) -> None:
    from routing.simulator.script import UsageThenError

    h.upstream.script("r-model", UsageThenError(), ANSWER)
    seen = ResponsesDoor(h).call("via-openai-responses", stream=True)
    assert seen.text == "Sunny in Paris."
    assert seen.events.count("response.created") == 1


# ------------------------------------------------------------------------- honest limits
def _refused_at_messages(h: Harness) -> httpx.Response:
    # MCP servers the provider would call, for a group of openai-responses and openai targets.
    return httpx.post(
        h.gateway.url + "/v1/messages",
        json={
            "model": "via-openai-responses",
            "max_tokens": 100,
            "messages": [{"role": "user", "content": "json please"}],
            "mcp_servers": [{"type": "url", "url": "https://mcp.example", "name": "x"}],
        },
        headers={"x-api-key": h.key, "anthropic-version": "2023-06-01"},
    )


def _refused_at_responses(h: Harness) -> httpx.Response:
    # A background response for a group of openai and anthropic targets.
    return httpx.post(
        h.gateway.url + "/v1/responses",
        json={"model": "via-openai", "input": "later", "background": True},
        headers={"authorization": f"Bearer {h.key}"},
    )


def _refused_at_chat(h: Harness) -> httpx.Response:
    # A provider-run web search for a group of anthropic and openai-responses targets.
    return httpx.post(
        h.gateway.url + "/v1/chat/completions",
        json={
            "model": "via-anthropic",
            "messages": [{"role": "user", "content": "news?"}],
            "web_search_options": {},
        },
        headers={"authorization": f"Bearer {h.key}"},
    )


@pytest.mark.parametrize(
    ("send", "param"),
    [
        (_refused_at_messages, "mcp_servers"),
        (_refused_at_responses, "background"),
        (_refused_at_chat, "web_search_options"),
    ],
    ids=["messages", "responses", "chat"],
)
def test_a_field_no_target_of_the_group_can_take_is_a_400_before_any_upstream(
    h: Harness, send: Any, param: str
) -> None:
    """Every target would need a translation that loses what the field asks for: a 400 in
    the door's own shape naming the field, and no upstream hears of the request."""
    response = send(h)
    assert response.status_code == 400
    assert response.headers["x-should-retry"] == "false"
    body = response.json()
    if param == "mcp_servers":
        assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
        message = body["error"]["message"]
    else:
        error = body["error"]
        assert (error["code"], error["param"]) == ("unsupported_for_target", param)
        message = error["message"]
    assert message.startswith(f"'{param}' asks for")
    assert h.upstream.count() == 0


def test_a_server_tool_is_served_by_the_groups_anthropic_target_and_skips_the_others(
    h: Harness,
) -> None:
    """Claude Code's server tool in a mixed group: the anthropic target gets it as sent;
    the openai-responses target, which would ignore it, is never tried, and an exhaustion
    says why."""
    client = anthropic.Anthropic(base_url=h.gateway.url, api_key=h.key, max_retries=0)
    kwargs: dict[str, Any] = {
        "model": "via-anthropic",
        "max_tokens": 100,
        "messages": [{"role": "user", "content": "search"}],
        "tools": [{"type": "web_search_20250305", "name": "web_search"}],
    }
    h.upstream.script("a-model", Reply("found it"))
    assert client.messages.create(**kwargs).content[0].text == "found it"  # type: ignore[union-attr]
    assert h.upstream.requests[-1].body["tools"] == kwargs["tools"]
    h.upstream.script("a-model", Fail(401, "bad key"))
    with pytest.raises(anthropic.APIStatusError) as info:
        client.messages.create(**kwargs)
    assert info.value.status_code == 502
    message = info.value.response.json()["error"]["message"]
    assert (
        "resp/r-model → skipped: kind 'openai-responses' cannot take this request: "
        "'tools[0]' is the Anthropic server tool 'web_search_20250305'" in message
    )
    assert h.upstream.count("r-model") == 0


def test_dropped_fields_are_noted_even_when_the_history_is_rewritten(h: Harness) -> None:
    """A target effort policy rewrites the translated request per attempt: the door's
    own notes (``dropped top_k``, …) still reach ``x-switchyard-rewrites``."""
    h.configure(
        THREE_KINDS.replace(
            "      - {provider: chat, model: c-model}\n      - {provider: claude",
            "      - {provider: chat, model: c-model, reasoning_effort: drop}\n"
            "      - {provider: claude",
            1,
        )
    )
    client = anthropic.Anthropic(base_url=h.gateway.url, api_key=h.key, max_retries=0)
    h.upstream.script("c-model", Reply("ok"))
    raw = client.messages.with_raw_response.create(
        model="via-openai",
        max_tokens=100,
        thinking={"type": "enabled", "budget_tokens": 2048},
        extra_body={"top_k": 5, "context_management": {"edits": []}},
        messages=[{"role": "user", "content": "hi"}],
    )
    notes = raw.headers["x-switchyard-rewrites"].split(",")
    assert "dropped top_k" in notes and "dropped context_management" in notes
    assert "reasoning_effort" not in h.upstream.requests[-1].body  # the policy ran too
    assert len(notes) > 2


def test_responses_door_refuses_previous_response_id_clearly(h: Harness) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        h.client().responses.create(
            model="via-openai-responses", input="and then?", previous_response_id="resp_123"
        )
    error = info.value.response.json()["error"]
    assert error["param"] == "previous_response_id"
    assert "send the whole conversation in 'input'" in error["message"]
    assert h.upstream.count() == 0


def test_dropped_fields_are_noted_in_the_rewrites_header(h: Harness) -> None:
    client = anthropic.Anthropic(base_url=h.gateway.url, api_key=h.key, max_retries=0)
    h.upstream.script("c-model", Reply("ok"))
    raw = client.messages.with_raw_response.create(
        model="via-openai",
        max_tokens=100,
        extra_body={"top_k": 5},
        messages=[{"role": "user", "content": "hi"}],
    )
    assert raw.parse().content[0].text == "ok"  # type: ignore[union-attr]
    assert "dropped top_k" in raw.headers["x-switchyard-rewrites"]
    assert "top_k" not in h.upstream.requests[-1].body


def test_pass_through_sends_the_body_with_only_the_model_rewritten(h: Harness) -> None:
    body = {
        "model": "via-anthropic",
        "max_tokens": 50,
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}],
            }
        ],
        "metadata": {"user_id": "u1"},
        "top_k": 3,
    }
    response = httpx.post(
        h.gateway.url + "/v1/messages",
        json=body,
        headers={"x-api-key": h.key, "anthropic-version": "2023-06-01"},
    )
    assert response.status_code == 200, response.text
    assert h.upstream.requests[-1].body == {**body, "model": "a-model"}
    assert "x-switchyard-rewrites" not in response.headers


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    ("path", "body", "shape"),
    [
        ("/v1/messages", b"{not json", "anthropic"),
        ("/v1/messages", b'{"model": "via-openai", "messages": []}', "anthropic"),
        (
            "/v1/messages",
            b'{"model": "via-openai", "messages": [{"role": "user", "content": "x"}]}',
            "anthropic",
        ),
        ("/v1/responses", b"[1, 2]", "openai"),
        ("/v1/responses", b'{"model": "via-openai"}', "openai"),
        ("/v1/responses", b'{"model": "via-openai", "input": "x", "stream": "yes"}', "openai"),
        ("/v1/embeddings", b'{"model": "via-openai"}', "openai"),
    ],
)
def test_malformed_bodies_get_the_doors_400_and_reach_no_upstream(
    h: Harness, path: str, body: bytes, shape: str
) -> None:
    response = httpx.post(
        h.gateway.url + path,
        content=body,
        headers={"authorization": f"Bearer {h.key}", "content-type": "application/json"},
    )
    assert response.status_code == 400
    assert response.headers["x-should-retry"] == "false"
    data = response.json()
    if shape == "anthropic":
        assert data["type"] == "error" and data["error"]["type"] == "invalid_request_error"
    else:
        assert data["error"]["message"]
    assert h.upstream.count() == 0


def test_messages_door_accepts_x_api_key_and_refuses_a_bad_one_in_its_shape(h: Harness) -> None:
    good = anthropic.Anthropic(base_url=h.gateway.url, api_key=h.key, max_retries=0)
    h.upstream.script("a-model", Reply("hi back"))
    reply = good.messages.create(
        model="via-anthropic", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
    )
    assert reply.content[0].text == "hi back"  # type: ignore[union-attr]
    bad = anthropic.Anthropic(base_url=h.gateway.url, api_key="sk-wrong", max_retries=0)
    with pytest.raises(anthropic.AuthenticationError) as info:
        bad.messages.create(
            model="via-anthropic", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
        )
    assert info.value.response.json()["error"]["type"] == "authentication_error"
    assert h.upstream.count() == 1


def test_unknown_model_at_the_messages_door(h: Harness) -> None:
    client = anthropic.Anthropic(base_url=h.gateway.url, api_key=h.key, max_retries=0)
    with pytest.raises(anthropic.NotFoundError) as info:
        client.messages.create(
            model="nope", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
        )
    assert info.value.response.json()["error"]["type"] == "not_found_error"


# ---------------------------------------------------------------------- models, embeddings
def test_models_in_anthropic_shape_for_anthropic_clients(h: Harness) -> None:
    client = anthropic.Anthropic(base_url=h.gateway.url, api_key=h.key, max_retries=0)
    page = client.models.list()
    ids = [m.id for m in page.data]
    assert sorted(ids) == sorted(GROUPS)
    assert all(m.type == "model" and m.display_name == m.id for m in page.data)
    openai_ids = {m.id for m in h.client().models.list()}
    assert openai_ids == set(ids)


def test_models_raw_anthropic_listing_has_its_paging_fields(h: Harness) -> None:
    """What the SDK's pager reads (``has_more``, ``first_id``, ``last_id``) and each
    model's ``created_at`` as an RFC 3339 time, in the raw JSON."""
    response = httpx.get(
        h.gateway.url + "/v1/models",
        headers={"x-api-key": h.key, "anthropic-version": "2023-06-01"},
    )
    assert response.status_code == 200
    listing = response.json()
    assert set(listing) == {"data", "has_more", "first_id", "last_id"}
    ids = [m["id"] for m in listing["data"]]
    assert listing["has_more"] is False
    assert (listing["first_id"], listing["last_id"]) == (ids[0], ids[-1])
    assert sorted(ids) == sorted(GROUPS)
    for model in listing["data"]:
        assert set(model) == {"type", "id", "display_name", "created_at"}
        assert datetime.fromisoformat(model["created_at"]).tzinfo is not None


def test_embeddings_are_routed_through_groups_and_skip_anthropic_targets(h: Harness) -> None:
    raw = h.client().embeddings.with_raw_response.create(
        model="via-anthropic", input=["one", "two words"]
    )
    reply = raw.parse()
    assert [len(d.embedding) for d in reply.data] == [4, 4]
    assert raw.headers["x-switchyard-target"] == "resp/r-model"  # claude/a-model skipped
    assert reply.model == "via-anthropic"  # the name asked for, as every answer's
    assert [r.path for r in h.upstream.requests] == ["/v1/embeddings"]
    h.upstream.script("r-model", Fail(404, "no such model"))
    with pytest.raises(openai.APIStatusError) as info:
        h.client().embeddings.create(model="via-anthropic", input="x")
    assert info.value.status_code == 502
    message = info.value.response.json()["error"]["message"]
    assert "claude/a-model → skipped: kind 'anthropic' has no embeddings endpoint" in message
    assert "resp/r-model → UNKNOWN_MODEL (HTTP 404)" in message


@pytest.mark.parametrize("door_cls", DOORS, ids=lambda d: d.name)
@pytest.mark.parametrize("kind", ["anthropic", "openai-responses"])
def test_a_clean_close_before_the_final_event_is_a_cut(
    h: Harness, door_cls: type, kind: str
) -> None:
    """A Messages stream without ``message_stop`` (a Responses stream without
    ``response.completed``) that closes cleanly is a cut: the door's error event, TRANSPORT,
    never a clean end — whatever the door."""
    from routing.simulator.script import EndBeforeFinish

    first = KINDS[kind][0]
    h.upstream.script(first, EndBeforeFinish(chunks=2, content="one two "))
    text, error = door_cls(h).cut_after_commit(f"via-{kind}")
    assert text == "one two " and error is not None
    [record] = h.events(CallRecord, at_least=1)
    assert record.outcome == "failed" and record.error_code == "TRANSPORT"


def test_the_readme_front_door_example_runs(h: Harness) -> None:
    from tests.test_readme_examples import readme_example

    code = readme_example("front-doors").replace("http://127.0.0.1:8000", h.gateway.url)
    h.configure(THREE_KINDS.replace("via-openai\n", "auto\n", 1))
    h.upstream.script("c-model", Reply("one"), Reply("two"))
    exec(compile(code, "docs/front-doors.md", "exec"), {"KEY": h.key})  # noqa: S102
    assert [r.path for r in h.upstream.requests] == ["/v1/chat/completions"] * 2


# ------------------------------------------------------------- continuity at every door
NOTICE = (
    "[model changed: assistant turns above this point were generated by {src}; "
    "the session continues with {dst}]"
)


def _messages_client(h: Harness) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        base_url=h.gateway.url,
        api_key=h.key,
        max_retries=0,
        default_headers={"x-session-id": "s-continuity"},
    )


def test_messages_pass_through_history_is_rewritten_in_its_own_shape(h: Harness) -> None:
    """A Claude Code session served by a chat target, then by an Anthropic one: the
    Anthropic target gets the door's own Messages body with the other target's thinking
    stripped and the model-changed notice appended."""
    client = _messages_client(h)
    h.upstream.script("c-model", Reply("from r", reasoning="r thinks"))
    first = client.messages.create(
        model="via-openai", max_tokens=100, messages=[{"role": "user", "content": "hi"}]
    )
    history = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
        {"role": "user", "content": "and now?"},
    ]
    assert [b["type"] for b in history[1]["content"]] == ["thinking", "text"]
    h.upstream.script("a-model", Reply("from a"))
    raw = client.messages.with_raw_response.create(
        model="via-anthropic", max_tokens=100, messages=history
    )
    assert raw.parse().content[0].text == "from a"  # type: ignore[union-attr]
    sent = h.upstream.requests[-1]
    assert sent.path == "/v1/messages"
    messages = sent.body["messages"]
    assert messages[1]["content"] == [{"type": "text", "text": "from r"}]  # thinking stripped
    assert messages[-1] == {
        "role": "user",
        "content": [
            {"type": "text", "text": NOTICE.format(src="chat/c-model", dst="claude/a-model")}
        ],
    }
    assert raw.headers["x-switchyard-rewrites"]


def test_translated_history_is_rewritten_for_the_target(h: Harness) -> None:
    """A session moving from a Responses target to a chat target through the
    Messages door: the chat target gets the translated history, rewritten."""
    client = _messages_client(h)
    h.upstream.script("r-model", Reply("from a", reasoning="a thinks"))
    first = client.messages.create(
        model="via-openai-responses", max_tokens=100, messages=[{"role": "user", "content": "hi"}]
    )
    history = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
        {"role": "user", "content": "and now?"},
    ]
    h.upstream.script("c-model", Reply("from c"))
    client.messages.create(model="via-openai", max_tokens=100, messages=history)
    sent = h.upstream.requests[-1]
    assert sent.path == "/v1/chat/completions"
    assistant = sent.body["messages"][1]
    assert assistant["role"] == "assistant" and assistant["content"] == "from a"
    assert "reasoning_content" not in assistant
    assert sent.body["messages"][-1] == {
        "role": "user",
        "content": NOTICE.format(src="resp/r-model", dst="chat/c-model"),
    }


def test_anthropic_beta_reaches_anthropic_targets_only(h: Harness) -> None:
    """Claude Code's ``anthropic-beta`` (interleaved thinking, …) is part of the Messages
    protocol: an anthropic target gets it as sent; a translated target does not."""
    client = anthropic.Anthropic(
        base_url=h.gateway.url,
        api_key=h.key,
        max_retries=0,
        default_headers={
            "anthropic-beta": "interleaved-thinking-2025-05-14",
            "anthropic-version": "2023-06-01",
        },
    )
    h.upstream.script("a-model", Fail(503, "down"), then=Fail(503, "down"))
    h.upstream.script("r-model", Reply("from r"))
    h.configure(
        THREE_KINDS.replace(
            "  - name: via-anthropic\n", "  - name: via-anthropic\n    retry: {max_retries: 0}\n"
        )
    )
    reply = client.messages.create(
        model="via-anthropic", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
    )
    assert reply.content[0].text == "from r"  # type: ignore[union-attr]
    to_claude, to_responses = h.upstream.requests
    assert to_claude.headers["anthropic-beta"] == "interleaved-thinking-2025-05-14"
    assert to_claude.headers["anthropic-version"] == "2023-06-01"
    assert "anthropic-beta" not in to_responses.headers


def test_the_demo_claude_group_fails_over_across_clouds(
    h: Harness, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``make run``'s demo, with its own simulator preset and file: Anthropic's API answers
    529, so the same Claude on Bedrock (SigV4 checked) takes the turn; with Bedrock down
    too, the same Claude on Vertex AI (a token from the demo's key file) does. The client
    is the ``anthropic`` SDK on the Messages door, asking for Claude Code's model name."""
    from routing.simulator import presets

    upstream = presets.demo("127.0.0.1", 0).start()
    try:
        account = presets.write_demo_google_account(tmp_path, upstream.token_uri)
        upstream.google.register_file(str(account))
        monkeypatch.setenv("SWITCHYARD_DEMO_PORT", str(upstream.port))
        monkeypatch.setenv("SWITCHYARD_DEMO_GOOGLE_ACCOUNT", str(account))
        h.configure(presets.DEMO_CONFIG.read_text())
        client = anthropic.Anthropic(base_url=h.gateway.url, api_key=h.key, max_retries=0)

        def ask() -> Any:
            return client.messages.with_raw_response.create(
                model="claude-opus-4-8",
                max_tokens=50,
                messages=[{"role": "user", "content": "hi"}],
            )

        raw = ask()
        assert raw.parse().model == "claude-opus-4-8" and raw.parse().content[0].type == "text"
        bedrock = f"claude-bedrock/{presets.DEMO_BEDROCK_MODEL}"
        assert raw.headers["x-switchyard-target"] == bedrock
        assert raw.headers["x-switchyard-trail"] == (
            f"sim-claude/{presets.DEMO_CLAUDE}:SERVER:529,"
            f"sim-claude/{presets.DEMO_CLAUDE}:SERVER:529,{bedrock}:ok"
        )
        upstream.script(presets.DEMO_BEDROCK_MODEL, then=Fail(503, "simulated outage"))
        raw = ask()
        assert raw.headers["x-switchyard-target"] == f"claude-vertex/{presets.DEMO_VERTEX_MODEL}"
        signed = [r for r in upstream.requests if r.path.startswith("/model/")]
        assert signed and all(
            r.headers["authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIASWITCHYARD")
            for r in signed
        )
        [vertex] = [r for r in upstream.requests if "/publishers/anthropic/" in r.path]
        assert vertex.path == (
            "/v1/projects/switchyard-demo/locations/us-east5/publishers/anthropic/models/"
            "claude-opus-4-8@20251101:rawPredict"
        )
        assert vertex.headers["authorization"].startswith("Bearer ")
    finally:
        upstream.stop()


def test_responses_pass_through_history_is_rewritten_in_its_own_shape(h: Harness) -> None:
    """A Codex session served by an Anthropic target, then by a Responses one: the Responses
    target gets the door's own items with the other target's reasoning item removed and
    the model-changed notice appended."""
    client = h.client(default_headers={"x-session-id": "s-codex"})
    h.upstream.script("a-model", Reply("from c", reasoning="c thinks"))
    first = client.responses.create(model="via-anthropic", input="hi", store=False)
    assert [item.type for item in first.output] == ["reasoning", "message"]
    history = [
        {"role": "user", "content": "hi"},
        *[item.model_dump(exclude_none=True) for item in first.output],
        {"role": "user", "content": "and now?"},
    ]
    h.upstream.script("r-model", Reply("from r"))
    raw = client.responses.with_raw_response.create(
        model="via-openai-responses", input=history, store=False
    )
    assert raw.parse().output_text == "from r"
    sent = h.upstream.requests[-1]
    assert sent.path == "/v1/responses"
    kinds = [item.get("type", "message") for item in sent.body["input"]]
    assert kinds == ["message", "message", "message", "message"]  # reasoning item removed
    assert sent.body["input"][1]["content"][0]["text"] == "from c"
    assert sent.body["input"][-1] == {
        "role": "user",
        "content": NOTICE.format(src="claude/a-model", dst="resp/r-model"),
    }
    assert raw.headers["x-switchyard-rewrites"]


@pytest.mark.parametrize(
    ("path", "anthropic_shape"),
    [("/v1/messages", True), ("/v1/responses", False), ("/v1/embeddings", False)],
)
def test_wrong_method_is_a_405_in_the_doors_shape(
    h: Harness, path: str, anthropic_shape: bool
) -> None:
    response = httpx.get(h.gateway.url + path, headers={"authorization": f"Bearer {h.key}"})
    assert response.status_code == 405 and response.headers["allow"] == "POST"
    body = response.json()
    if anthropic_shape:
        assert body["type"] == "error" and body["error"]["message"].startswith("GET")
    else:
        assert body["error"]["code"] == "method_not_allowed"


# ------------------------------------------------------------------------- small holes
def _usage_seen(h: Harness, door: str, group: str) -> dict[str, int]:
    """(input incl. cache, cache read, cache write) as a streaming client of ``door`` reads
    them, whatever its protocol calls them."""
    hi = [{"role": "user", "content": "hi"}]
    if door == "chat":
        chunks = list(
            h.client().chat.completions.create(
                model=group, messages=hi, stream=True, stream_options={"include_usage": True}
            )  # type: ignore[arg-type]
        )
        [usage] = [c.usage for c in chunks if c.usage]
        details = usage.prompt_tokens_details
        return {
            "input": usage.prompt_tokens,
            "read": details.cached_tokens or 0 if details else 0,
            "write": (usage.model_extra or {}).get("cache_creation_input_tokens", 0),
        }
    if door == "responses":
        with h.client().responses.stream(model=group, input="hi") as events:
            answer = events.get_final_response()
        assert answer.usage is not None
        return {
            "input": answer.usage.input_tokens,
            "read": answer.usage.input_tokens_details.cached_tokens,
            "write": 0,  # Responses has no field for cache writes
        }
    client = anthropic.Anthropic(base_url=h.gateway.url, api_key=h.key, max_retries=0)
    with client.messages.stream(model=group, max_tokens=50, messages=hi) as stream:  # type: ignore[arg-type]
        usage = stream.get_final_message().usage
    read = usage.cache_read_input_tokens or 0
    write = usage.cache_creation_input_tokens or 0
    return {"input": usage.input_tokens + read + write, "read": read, "write": write}


@pytest.mark.parametrize(
    ("door", "group", "model", "write"),
    [
        ("chat", "via-anthropic", "a-model", 5),
        ("responses", "via-anthropic", "a-model", 0),
        ("messages", "via-openai", "c-model", 5),
        ("messages", "via-openai-responses", "r-model", 0),
    ],
    ids=["anthropic-to-chat", "anthropic-to-responses", "chat-to-messages", "resp-to-messages"],
)
def test_cache_tokens_survive_a_translated_stream(
    h: Harness, door: str, group: str, model: str, write: int
) -> None:
    """Prompt-cache reads (and writes, where the door has a field for them) reach the
    client of another protocol: Anthropic counts cached input apart from
    ``input_tokens``, the OpenAI protocols inside it."""
    h.upstream.script(model, Reply("cached answer", cache_read=100, cache_write=write))
    assert _usage_seen(h, door, group) == {"input": 1 + 100 + write, "read": 100, "write": write}


def test_an_anthropic_base_url_without_v1_gets_v1_messages(h: Harness) -> None:
    """SPEC §12: ``kind: anthropic`` takes the base Anthropic documents for its SDK
    (``https://api.anthropic.com``, no ``/v1``); the gateway posts ``<base>/v1/messages``."""
    root = h.upstream.base_url.removesuffix("/v1")
    assert root != h.upstream.base_url
    h.configure(
        THREE_KINDS.replace(
            "kind: anthropic\n    base_url: {upstream}", f"kind: anthropic\n    base_url: {root}"
        )
    )
    client = anthropic.Anthropic(base_url=h.gateway.url, api_key=h.key, max_retries=0)
    h.upstream.script("a-model", Reply("from the root"), Reply("translated"))
    reply = client.messages.create(
        model="via-anthropic", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
    )
    assert reply.content[0].text == "from the root"  # type: ignore[union-attr]
    chat = h.client().chat.completions.create(
        model="via-anthropic", messages=[{"role": "user", "content": "hi"}]
    )
    assert chat.choices[0].message.content == "translated"
    assert [r.path for r in h.upstream.requests] == ["/v1/messages", "/v1/messages"]


def test_the_anthropic_sdk_auth_token_is_accepted(h: Harness) -> None:
    """``ANTHROPIC_AUTH_TOKEN`` (Claude Code's setting) is the SDK's ``auth_token``: sent as
    ``Authorization: Bearer``, with no ``x-api-key``."""
    client = anthropic.Anthropic(base_url=h.gateway.url, auth_token=h.key, max_retries=0)
    assert client.api_key is None
    h.upstream.script("a-model", Reply("by token"))
    with client.messages.stream(
        model="via-anthropic", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
    ) as stream:
        assert stream.get_final_text() == "by token"
    wrong = anthropic.Anthropic(base_url=h.gateway.url, auth_token="sk-wrong", max_retries=0)
    with pytest.raises(anthropic.AuthenticationError):
        wrong.messages.create(
            model="via-anthropic", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
        )
    assert h.upstream.count() == 1


@pytest.mark.parametrize(
    ("fault", "code"),
    [("malformed", "TRANSPORT"), ("empty", "EMPTY_RESPONSE"), ("stall", "TIMEOUT")],
)
@pytest.mark.parametrize(
    ("door_cls", "kind"),
    [(MessagesDoor, "anthropic"), (ResponsesDoor, "openai-responses")],
    ids=["messages-door-anthropic", "responses-door-openai-responses"],
)
def test_a_broken_stream_of_each_kind_switches_before_content(
    h: Harness, door_cls: type, kind: str, fault: str, code: str
) -> None:
    """The simulator's Malformed (no parseable event), Empty (a finished answer with no
    content) and StallAfter (the preamble, then silence past ``first_token_s``) in the
    Anthropic and Responses protocols: each is its failure code, and the call switches to
    the next target before anything reached the client."""
    from routing.simulator.script import Empty, Malformed, StallAfter

    behaviour = {"malformed": Malformed(), "empty": Empty(), "stall": StallAfter(0)}[fault]
    h.configure(
        THREE_KINDS.replace("    targets:\n", "    retry: {max_retries: 0}\n    targets:\n")
        .replace(
            "api_key: upstream-key-claude",
            "api_key: upstream-key-claude\n    timeouts: {first_token_s: 0.3}",
        )
        .replace(
            "api_key: upstream-key-resp",
            "api_key: upstream-key-resp\n    timeouts: {first_token_s: 0.3}",
        )
    )
    first, second, _ = KINDS[kind]
    h.upstream.script(first, behaviour)
    h.upstream.script(second, ANSWER)
    seen = door_cls(h).call(f"via-{kind}", stream=True)
    _check_answer(seen, door_cls(h), f"via-{kind}")
    assert seen.events.count(PREAMBLE[door_cls.name]) == 1
    [record] = h.events(CallRecord, at_least=1)
    assert [a.code for a in record.attempts] == [code, None]
