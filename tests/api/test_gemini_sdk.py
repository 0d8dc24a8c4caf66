"""The ``google-genai`` Python SDK pointed at the gateway (``http_options`` base_url), as a
Gemini-native application uses it (SPEC §20): generate, stream, count tokens, list models
and a function call round trip — through a gemini target and across kinds."""

from __future__ import annotations

from typing import Any

import pytest
from google import genai
from google.genai import errors, types

from routing.simulator import Reply
from routing.simulator.gemini import SIGNATURE
from routing.simulator.script import DropAfter
from tests.api.test_gemini_door import CONFIG, configured
from tests.conftest import Harness

KINDS = {"gemini-2.5-flash": "g-model", "to-claude": "c-model", "to-chat": "o-model"}
LS = types.FunctionDeclaration(
    name="ls",
    description="list files",
    parameters=types.Schema(
        type=types.Type.OBJECT, properties={"dir": types.Schema(type=types.Type.STRING)}
    ),
)


@pytest.fixture
def h(harness: Harness) -> Harness:
    return configured(harness, CONFIG)


def client(h: Harness, version: str = "v1beta") -> genai.Client:
    """Kept in a variable by each test: a client closes its connections when collected."""
    options = types.HttpOptions(base_url=h.gateway.url, api_version=version)
    return genai.Client(api_key=h.key, http_options=options)


@pytest.mark.parametrize("model", list(KINDS))
def test_generate(h: Harness, model: str) -> None:
    h.upstream.script(KINDS[model], Reply("hello from upstream", reasoning="let me see"))
    sdk = client(h)
    answer = sdk.models.generate_content(
        model=model,
        contents="hi",
        config=types.GenerateContentConfig(
            thinking_config=types.ThinkingConfig(include_thoughts=True, thinking_budget=2048)
        ),
    )
    assert answer.text == "hello from upstream"
    parts = answer.candidates[0].content.parts  # type: ignore[index, union-attr]
    assert [p.text for p in parts if p.thought] == ["let me see"]  # type: ignore[union-attr]
    assert answer.model_version == model
    assert answer.usage_metadata is not None and answer.usage_metadata.prompt_token_count == 1
    [sent] = h.upstream.requests
    if KINDS[model] == "c-model":  # thinkingConfig -> the effort policy, in Anthropic's terms
        assert sent.body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    elif KINDS[model] == "o-model":
        assert sent.body["reasoning_effort"] == "low"


@pytest.mark.parametrize("model", list(KINDS))
def test_stream(h: Harness, model: str) -> None:
    h.upstream.script(KINDS[model], Reply("one two three four", chunks=4))
    sdk = client(h, "v1")
    chunks = list(sdk.models.generate_content_stream(model=model, contents="hi"))
    assert "".join(c.text or "" for c in chunks) == "one two three four"
    assert chunks[-1].candidates[0].finish_reason == types.FinishReason.STOP  # type: ignore[index]
    assert chunks[-1].usage_metadata.candidates_token_count == 4  # type: ignore[union-attr]


@pytest.mark.parametrize("model", ["gemini-2.5-flash", "to-claude", "to-chat"])
def test_count_tokens(h: Harness, model: str) -> None:
    sdk = client(h)
    counted = sdk.models.count_tokens(model=model, contents="one two three")
    assert counted.total_tokens == 3 if model != "to-chat" else (counted.total_tokens or 0) > 0
    if model == "to-chat":  # no target can count: an estimate (no upstream request)
        assert h.upstream.requests == []
    else:
        [sent] = h.upstream.requests
        assert sent.path.endswith(":countTokens" if model != "to-claude" else "/count_tokens")


def test_models_are_listed_and_fetched(h: Harness) -> None:
    sdk = client(h)
    names = [m.name for m in sdk.models.list()]
    assert {"models/gem", "models/to-claude", "models/to-chat"} <= set(names)
    model = sdk.models.get(model="gemini-2.5-flash")
    assert model.name == "models/gemini-2.5-flash" and model.input_token_limit
    with pytest.raises(errors.ClientError) as caught:
        sdk.models.get(model="nope")
    assert caught.value.code == 404 and caught.value.status == "NOT_FOUND"


def test_errors_reach_the_sdk_in_googles_shape(h: Harness) -> None:
    sdk = client(h)
    with pytest.raises(errors.ClientError) as caught:
        sdk.models.generate_content(model="no-such-group", contents="hi")
    assert caught.value.code == 404 and caught.value.status == "NOT_FOUND"
    bad = genai.Client(api_key="wrong", http_options=types.HttpOptions(base_url=h.gateway.url))
    with pytest.raises(errors.ClientError) as refused:
        bad.models.generate_content(model="gem", contents="hi")
    assert refused.value.code == 401 and refused.value.status == "UNAUTHENTICATED"


@pytest.mark.parametrize("model", list(KINDS))
@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_a_function_call_round_trip(h: Harness, model: str, stream: bool) -> None:
    upstream = KINDS[model]
    h.upstream.script(
        upstream,
        Reply("", tool_call={"name": "ls", "arguments": {"dir": "."}}),
        Reply("two files"),
    )
    sdk = client(h)
    config = types.GenerateContentConfig(tools=[types.Tool(function_declarations=[LS])])
    history: list[Any] = [types.Content(role="user", parts=[types.Part(text="list files")])]
    if stream:
        chunks = list(
            sdk.models.generate_content_stream(model=model, contents=history, config=config)
        )
        calls = [c for chunk in chunks for c in chunk.function_calls or ()]
        parts = [p for chunk in chunks for p in chunk.candidates[0].content.parts or ()]  # type: ignore[index, union-attr]
    else:
        first = sdk.models.generate_content(model=model, contents=history, config=config)
        calls = first.function_calls or []
        parts = first.candidates[0].content.parts or []  # type: ignore[index, union-attr]
    [call] = calls
    assert call.name == "ls" and call.args == {"dir": "."} and call.id
    called = [p for p in parts if p.function_call is not None]
    if upstream == "g-model":  # Gemini's own signature comes back to the client
        assert called[0].thought_signature is not None
    history += [
        types.Content(role="model", parts=called),
        types.Content(
            role="user",
            parts=[
                types.Part(
                    function_response=types.FunctionResponse(
                        id=call.id, name="ls", response={"output": "a.txt b.txt"}
                    )
                )
            ],
        ),
    ]
    second = sdk.models.generate_content(model=model, contents=history, config=config)
    assert second.text == "two files"
    sent = h.upstream.requests[-1].body
    if upstream == "g-model":  # passed through: the call and its signature as they were
        model_turn = sent["contents"][1]["parts"][0]
        assert model_turn["functionCall"]["id"] == call.id
        assert model_turn["thoughtSignature"] == SIGNATURE
        assert sent["contents"][2]["parts"][0]["functionResponse"]["id"] == call.id
    elif upstream == "c-model":
        [use] = [b for b in sent["messages"][1]["content"] if b["type"] == "tool_use"]
        [result] = sent["messages"][2]["content"]
        assert use["id"] == call.id and use["input"] == {"dir": "."}
        assert result["tool_use_id"] == call.id and "a.txt b.txt" in str(result["content"])
    else:
        assert sent["messages"][1]["tool_calls"][0]["id"] == call.id
        assert sent["messages"][2] == {
            "role": "tool",
            "tool_call_id": call.id,
            "content": "a.txt b.txt",
        }


def test_a_cut_after_the_commit_point_reaches_the_sdk_as_an_error(h: Harness) -> None:
    h.upstream.script("g-model", DropAfter(chunks=2, content="one two three four"))
    sdk = client(h)
    seen: list[str] = []
    with pytest.raises(errors.APIError) as caught:
        for chunk in sdk.models.generate_content_stream(model="gem", contents="hi"):
            seen.append(chunk.text or "")
    assert "".join(seen)  # the committed text came first
    assert caught.value.code == 502 and caught.value.status == "UNAVAILABLE"


def test_the_docs_gemini_example_runs(h: Harness) -> None:
    from tests.test_readme_examples import readme_example

    code = readme_example("gemini-door").replace("http://127.0.0.1:8000", h.gateway.url)
    h.upstream.script("g-model", Reply("hello"))
    exec(compile(code, "docs/front-doors.md", "exec"), {"KEY": h.key})  # noqa: S102
    [sent] = h.upstream.requests
    assert sent.path == "/v1beta/models/g-model:generateContent"
