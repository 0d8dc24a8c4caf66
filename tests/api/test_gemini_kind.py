"""A ``kind: gemini`` target (SPEC §19, §20) behind the chat and Messages doors, against
the simulator's Gemini routes over real sockets: the URL names the model and the stream,
the key goes in ``x-goog-api-key``, the body has no ``model``, answers and streams come
back translated, a function call round-trips with its signature, and a 503 fails over to
another kind."""

from __future__ import annotations

from typing import Any

import anthropic
import httpx
import pytest

from routing.simulator import Reply
from routing.simulator.gemini import SIGNATURE
from routing.simulator.script import EndBeforeFinish, Fail, UsageThenError
from tests.conftest import Harness

GEMINI_KEY = "gemini-upstream-key-7f3a9c"
CONFIG = """
providers:
  - name: gem
    kind: gemini
    base_url: {root}
    api_key: GEMINI_KEY
  - name: chat
    kind: openai
    base_url: {upstream}
    api_key: upstream-key-chat
groups:
  - name: via-gemini
    targets:
      - {provider: gem, model: g-model}
  - name: gemini-first
    targets:
      - {provider: gem, model: g-down}
      - {provider: chat, model: c-model}
""".replace("GEMINI_KEY", GEMINI_KEY)
CALL = {"name": "shell", "arguments": {"cmd": "ls"}}


@pytest.fixture
def h(harness: Harness) -> Harness:
    root = harness.upstream.base_url.removesuffix("/v1")
    harness.configure(CONFIG.replace("{root}", root))
    return harness


def _gemini_records(h: Harness) -> list[Any]:
    return [r for r in h.upstream.requests if r.model.startswith("g-")]


def test_a_chat_door_call_reaches_generate_content(h: Harness) -> None:
    h.upstream.script("g-model", Reply("hello from gemini", reasoning="thinking"))
    raw = h.client().chat.completions.with_raw_response.create(
        model="via-gemini", messages=[{"role": "user", "content": "hi"}], max_tokens=50
    )
    answer = raw.parse()
    assert answer.choices[0].message.content == "hello from gemini"
    assert answer.choices[0].finish_reason == "stop"
    assert answer.usage is not None and answer.usage.prompt_tokens == 1
    [record] = _gemini_records(h)
    assert record.path == "/v1beta/models/g-model:generateContent"
    assert "model" not in record.body and "messages" not in record.body
    assert record.body["contents"] == [{"role": "user", "parts": [{"text": "hi"}]}]
    assert record.body["generationConfig"] == {"maxOutputTokens": 50}
    assert record.headers["x-goog-api-key"] == GEMINI_KEY
    assert "authorization" not in record.headers


def test_a_chat_door_stream_from_a_gemini_target(h: Harness) -> None:
    h.upstream.script("g-model", Reply("one two three", chunks=3))
    stream = h.client().chat.completions.create(
        model="via-gemini",
        messages=[{"role": "user", "content": "hi"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "one two three"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 3
    [record] = _gemini_records(h)
    assert record.path == "/v1beta/models/g-model:streamGenerateContent"


def _messages(h: Harness) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=h.gateway.url, api_key=h.key, max_retries=0)


TOOLS: list[Any] = [
    {
        "name": "shell",
        "description": "run",
        "input_schema": {"type": "object", "properties": {"cmd": {"type": "string"}}},
    }
]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_a_function_call_round_trip_through_the_messages_door(h: Harness, stream: bool) -> None:
    h.upstream.script("g-model", Reply("", tool_call=CALL), Reply("done: a.txt"))
    client = _messages(h)
    first_turn: list[Any] = [{"role": "user", "content": "list files"}]
    kwargs: dict[str, Any] = {"model": "via-gemini", "max_tokens": 100, "tools": TOOLS}
    if stream:
        with client.messages.stream(messages=first_turn, **kwargs) as events:
            first = events.get_final_message()
    else:
        first = client.messages.create(messages=first_turn, **kwargs)
    assert first.stop_reason == "tool_use"
    [use] = [b for b in first.content if b.type == "tool_use"]
    assert use.name == "shell" and use.input == {"cmd": "ls"}
    second = client.messages.create(
        messages=[
            *first_turn,
            {"role": "assistant", "content": [b.model_dump() for b in first.content]},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "a.txt"}],
            },
        ],
        **kwargs,
    )
    assert second.content[0].text == "done: a.txt"  # type: ignore[union-attr]
    sent = _gemini_records(h)[1].body
    assert sent["tools"][0]["functionDeclarations"][0]["name"] == "shell"
    model_turn, result_turn = sent["contents"][1], sent["contents"][2]
    assert model_turn["role"] == "model"
    [call] = [p for p in model_turn["parts"] if "functionCall" in p]
    assert call["functionCall"]["id"] == use.id and call["functionCall"]["args"] == {"cmd": "ls"}
    # Anthropic's history has no place for Gemini's signature (a thinking block's is
    # Anthropic's own), and a Gemini 2.x target needs none: it goes without.
    assert "thoughtSignature" not in call
    [result] = result_turn["parts"]
    assert result["functionResponse"] == {
        "id": use.id,
        "name": "shell",
        "response": {"result": "a.txt"},
    }


def test_a_gemini_503_fails_over_to_another_kind(h: Harness) -> None:
    down = Fail(503, "The model is overloaded.")
    h.upstream.script("g-down", down, then=down)
    h.upstream.script("c-model", Reply("chat took the turn"))
    raw = h.client().chat.completions.with_raw_response.create(
        model="gemini-first", messages=[{"role": "user", "content": "hi"}]
    )
    assert raw.parse().choices[0].message.content == "chat took the turn"
    assert raw.headers["x-switchyard-target"].endswith("/c-model")
    reply = _messages(h).messages.create(
        model="gemini-first", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
    )
    assert reply.content[0].text  # type: ignore[union-attr]
    downs = [r for r in _gemini_records(h) if r.model == "g-down"]
    assert downs and all(r.path.endswith("/g-down:generateContent") for r in downs)


def test_the_gemini_key_never_reaches_the_client_or_the_record(h: Harness) -> None:
    h.upstream.script(
        "g-model", Fail(400, f"API key not valid. Please pass a valid API key. ({GEMINI_KEY})")
    )
    response = httpx.post(
        f"{h.gateway.base_url}/chat/completions",
        json={"model": "via-gemini", "messages": [{"role": "user", "content": "hi"}]},
        headers={"authorization": f"Bearer {h.key}"},
        timeout=60,
    )
    assert response.status_code >= 400
    assert GEMINI_KEY[:8] not in response.text and GEMINI_KEY[-8:] not in response.text


def test_the_chat_door_carries_the_signature_back_to_the_gemini_target(h: Harness) -> None:
    h.upstream.script("g-model", Reply("", tool_call=CALL), Reply("ok"))
    url = f"{h.gateway.base_url}/chat/completions"
    auth = {"authorization": f"Bearer {h.key}"}
    turn: list[Any] = [{"role": "user", "content": "list files"}]
    first = httpx.post(
        url, json={"model": "via-gemini", "messages": turn}, headers=auth, timeout=60
    )
    message = first.json()["choices"][0]["message"]
    [call] = message["tool_calls"]
    assert call["extra_content"] == {"google": {"thought_signature": SIGNATURE}}
    history = [*turn, message, {"role": "tool", "tool_call_id": call["id"], "content": "a.txt"}]
    second = httpx.post(
        url, json={"model": "via-gemini", "messages": history}, headers=auth, timeout=60
    )
    assert second.json()["choices"][0]["message"]["content"] == "ok"
    parts = _gemini_records(h)[1].body["contents"][1]["parts"]
    assert parts == [
        {
            "functionCall": {"name": "shell", "args": {"cmd": "ls"}, "id": call["id"]},
            "thoughtSignature": SIGNATURE,
        }
    ]


def test_a_gemini_stream_error_before_content_fails_over_and_a_cut_after_it_is_an_error(
    h: Harness,
) -> None:
    h.upstream.script("g-down", UsageThenError(), then=UsageThenError())
    h.upstream.script("c-model", Reply("chat streamed it"))
    stream = h.client().chat.completions.create(
        model="gemini-first", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text == "chat streamed it"

    # Content, then the body ends without a finishReason: a cut, never a clean end.
    h.upstream.script("g-model", EndBeforeFinish(), then=EndBeforeFinish())
    with _messages(h).messages.stream(
        model="via-gemini", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
    ) as events:
        with pytest.raises(anthropic.APIStatusError):
            events.get_final_message()


def test_thinking_reaches_gemini_as_thinking_config_and_thoughts_come_back(h: Harness) -> None:
    h.upstream.script("g-model", Reply("42", reasoning="let me think"))
    reply = _messages(h).messages.create(
        model="via-gemini",
        max_tokens=4000,
        thinking={"type": "enabled", "budget_tokens": 2048},
        messages=[{"role": "user", "content": "answer"}],
    )
    assert [b.type for b in reply.content] == ["thinking", "text"]
    assert reply.content[0].thinking == "let me think"  # type: ignore[union-attr]
    config = _gemini_records(h)[0].body["generationConfig"]
    assert config == {
        "maxOutputTokens": 4000,
        "thinkingConfig": {"includeThoughts": True, "thinkingBudget": 2048},
    }
