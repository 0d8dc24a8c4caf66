"""The Gemini front door (SPEC §20) over real sockets against the simulator: both
endpoints and both versions, the key in ``x-goog-api-key`` or ``?key=``, the model from the
path through aliases, Google's error shapes and status names, refusals on the record, the
commit point and hold-back, a cut after the commit point as the last ``data:`` line, and
failovers gemini → anthropic and chat → gemini."""

from __future__ import annotations

from typing import Any

import httpx
import orjson
import pytest

from routing.gateway.events import CallOutcome, CallRecord
from routing.simulator import Reply
from routing.simulator.gemini import SIGNATURE
from routing.simulator.script import DropAfter, Fail, UsageThenError
from tests.api import test_front_doors
from tests.api.test_front_doors import FakeClock
from tests.conftest import Harness

clock = test_front_doors.clock  # the fake clock fixture, as the other doors' tests use it

PROVIDERS = """
providers:
  - name: gem
    kind: gemini
    base_url: {root}
    api_key: gemini-upstream-key
  - name: claude
    kind: anthropic
    base_url: {upstream}
    api_key: anthropic-upstream-key
  - name: chat
    kind: openai
    base_url: {upstream}
    api_key: chat-upstream-key
"""
CONFIG = (
    PROVIDERS
    + """
groups:
  - name: gem
    aliases: ["gemini-*"]
    targets:
      - {provider: gem, model: g-model}
  - name: to-claude
    targets:
      - {provider: claude, model: c-model}
  - name: to-chat
    targets:
      - {provider: chat, model: o-model}
  - name: gem-then-claude
    retry: {max_retries: 0}
    targets:
      - {provider: gem, model: g-down}
      - {provider: claude, model: c-up}
  - name: chat-then-gem
    retry: {max_retries: 0}
    targets:
      - {provider: chat, model: o-down}
      - {provider: gem, model: g-up}
"""
)
HELLO = {"contents": [{"role": "user", "parts": [{"text": "hi there"}]}]}


def configured(harness: Harness, config: str) -> Harness:
    """The harness with ``config`` loaded, ``{root}`` the simulator's (Gemini's base has no
    version: the gateway adds ``/v1beta``)."""
    harness.configure(config.replace("{root}", harness.upstream.base_url.removesuffix("/v1")))
    return harness


@pytest.fixture
def h(harness: Harness) -> Harness:
    return configured(harness, CONFIG)


def post(
    h: Harness,
    model: str,
    action: str = "generateContent",
    body: Any = None,
    *,
    version: str = "v1beta",
    key: str | None = None,
    query: str = "",
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    sent = {"x-goog-api-key": h.key if key is None else key, **(headers or {})}
    if key == "":
        sent.pop("x-goog-api-key")
    content = body if isinstance(body, bytes) else orjson.dumps(HELLO if body is None else body)
    url = f"{h.gateway.url}/{version}/models/{model}:{action}{query}"
    return httpx.post(url, content=content, headers=sent, timeout=30)


def stream(h: Harness, model: str, body: Any = None, **kwargs: Any) -> httpx.Response:
    return post(h, model, "streamGenerateContent", body, query="?alt=sse", **kwargs)


def lines(response: httpx.Response) -> list[dict[str, Any]]:
    """The ``data:`` lines of a Gemini stream, parsed (it names no events)."""
    assert "event:" not in response.text
    return [
        orjson.loads(line.removeprefix("data: "))
        for line in response.text.splitlines()
        if line.startswith("data: ")
    ]


def text_of(chunks: list[dict[str, Any]], *, thought: bool = False) -> str:
    return "".join(
        part.get("text", "")
        for chunk in chunks
        for part in chunk["candidates"][0]["content"]["parts"]
        if bool(part.get("thought")) is thought
    )


def records(h: Harness, at_least: int = 1) -> list[CallRecord]:
    return h.events(CallRecord, at_least=at_least)


# ------------------------------------------------------------------ the two endpoints
@pytest.mark.parametrize("version", ["v1beta", "v1"])
def test_generate_content_through_a_gemini_target(h: Harness, version: str) -> None:
    h.upstream.script("g-model", Reply("hello from gemini", reasoning="hmm"))
    response = post(h, "gem", version=version)
    assert response.status_code == 200, response.text
    answer = response.json()
    parts = answer["candidates"][0]["content"]["parts"]
    assert parts[0] == {"text": "hmm", "thought": True}
    assert parts[1]["text"] == "hello from gemini"
    assert answer["candidates"][0]["finishReason"] == "STOP"
    assert answer["modelVersion"] == "gem"  # the name asked for (SPEC 3.11)
    assert answer["usageMetadata"]["promptTokenCount"] == 2
    assert response.headers["x-switchyard-target"] == "gem/g-model"
    [sent] = h.upstream.requests
    assert sent.path == "/v1beta/models/g-model:generateContent"
    assert sent.body == HELLO  # passed through: no model, no stream in the body
    assert sent.headers["x-goog-api-key"] == "gemini-upstream-key"
    [record] = records(h)
    assert record.outcome is CallOutcome.OK and record.front_door == "gemini"


def test_stream_generate_content_through_a_gemini_target(h: Harness) -> None:
    h.upstream.script("g-model", Reply("one two three", chunks=3))
    response = stream(h, "gemini-2.5-pro")  # an alias of the group
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    chunks = lines(response)
    assert text_of(chunks) == "one two three"
    assert chunks[-1]["candidates"][0]["finishReason"] == "STOP"
    assert chunks[-1]["usageMetadata"]["candidatesTokenCount"] == 3
    assert {c["modelVersion"] for c in chunks} == {"gemini-2.5-pro"}
    [sent] = h.upstream.requests
    assert sent.path == "/v1beta/models/g-model:streamGenerateContent"
    assert "stream" not in sent.body and "model" not in sent.body


# ------------------------------------------------------------------------- the key
def test_the_key_as_a_query_parameter_is_taken_and_never_recorded(h: Harness) -> None:
    h.upstream.script("g-model", Reply("ok"))
    response = post(h, "gem", key="", query=f"?key={h.key}")
    assert response.status_code == 200, response.text
    [record] = records(h)
    assert h.key not in repr(record)
    [sent] = h.upstream.requests
    assert h.key not in sent.path and h.key not in repr(sent.headers)


@pytest.mark.parametrize("key", ["", "not-a-key"], ids=["missing", "wrong"])
def test_a_request_without_a_valid_key_is_googles_401(h: Harness, key: str) -> None:
    response = post(h, "gem", key=key)
    assert response.status_code == 401
    error = response.json()["error"]
    assert error["code"] == 401 and error["status"] == "UNAUTHENTICATED"
    assert "x-goog-api-key" in error["message"] or "revoked" in error["message"]
    assert h.upstream.requests == []


# --------------------------------------------------------------------------- errors
def test_an_unknown_model_is_googles_404_on_the_record(h: Harness) -> None:
    response = post(h, "no-such-model")
    assert response.status_code == 404
    assert response.json()["error"]["status"] == "NOT_FOUND"
    assert response.headers["x-should-retry"] == "false"
    [record] = records(h)
    assert record.outcome is CallOutcome.REFUSED and record.front_door == "gemini"


@pytest.mark.parametrize(
    "body",
    [
        b"{not json",
        {"generationConfig": {}},
        {"contents": [{"role": "assistant", "parts": [{"text": "x"}]}]},
    ],
    ids=["not-json", "no-contents", "wrong-role"],
)
def test_bad_input_is_invalid_argument_and_changes_nothing(h: Harness, body: Any) -> None:
    response = post(h, "gem", body=body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error == {"code": 400, "message": error["message"], "status": "INVALID_ARGUMENT"}
    assert h.upstream.requests == []
    [record] = records(h)
    assert record.outcome is CallOutcome.REFUSED


def test_exhaustion_is_unavailable_in_googles_shape(h: Harness, clock: FakeClock) -> None:
    h.upstream.script("g-model", then=Fail(429, "slow down", headers={"retry-after": "30"}))
    response = post(h, "gem")
    assert response.status_code == 502
    error = response.json()["error"]
    assert error["status"] == "UNAVAILABLE" and "gem/g-model" in error["message"]
    assert response.headers["x-should-retry"] == "false"
    tried = h.upstream.count()
    clock.now += 10
    again = stream(h, "gem")  # the target is cooling now: nothing tried
    assert again.status_code == 503
    assert again.json()["error"] == {
        "code": 503,
        "message": again.json()["error"]["message"],
        "status": "UNAVAILABLE",
    }
    assert again.headers["retry-after"] == "20"
    assert h.upstream.count() == tried


def test_stream_without_alt_sse_is_refused_clearly(h: Harness) -> None:
    response = post(h, "gem", "streamGenerateContent")
    assert response.status_code == 400
    assert "alt=sse" in response.json()["error"]["message"]


# ------------------------------------------------------- commit point and hold-back
def test_a_failure_before_the_commit_point_switches_invisibly(h: Harness) -> None:
    """Hold-back: the gemini target's first line (usage, no content) is not written, so
    its in-stream error before any content is a switch nobody sees."""
    h.upstream.script("g-down", UsageThenError())
    h.upstream.script("c-up", Reply("from claude", reasoning="think"))
    response = stream(h, "gem-then-claude")
    assert response.status_code == 200, response.text
    chunks = lines(response)
    assert text_of(chunks) == "from claude"
    assert text_of(chunks, thought=True) == "think"
    assert "error" not in response.text and "overloaded" not in response.text
    assert [c for c in chunks if "usageMetadata" in c] == chunks[-1:]  # claude's, once
    assert response.headers["x-switchyard-target"] == "claude/c-up"
    assert response.headers["x-switchyard-attempts"] == "2"
    assert {c["modelVersion"] for c in chunks} == {"gem-then-claude"}


@pytest.mark.parametrize(
    ("group", "model"), [("gem", "g-model"), ("to-claude", "c-model"), ("to-chat", "o-model")]
)
def test_a_cut_after_the_commit_point_ends_with_an_error_line(
    h: Harness, group: str, model: str
) -> None:
    h.upstream.script(model, DropAfter(chunks=2, content="one two three four"))
    response = stream(h, group)
    assert response.status_code == 200
    chunks = lines(response)
    assert text_of(chunks[:-1])  # what was committed went out
    error = chunks[-1]["error"]
    assert error["code"] == 502 and error["status"] == "UNAVAILABLE"
    assert all("finishReason" not in c["candidates"][0] for c in chunks[:-1])
    [record] = records(h)
    assert record.outcome is not CallOutcome.OK


# ----------------------------------------------------------------------- failovers
def test_gemini_503_fails_over_to_anthropic(h: Harness) -> None:
    h.upstream.script("g-down", Fail(503, "overloaded"))
    h.upstream.script("c-up", Reply("claude answers"))
    response = post(h, "gem-then-claude")
    assert response.status_code == 200, response.text
    answer = response.json()
    assert text_of([answer]) == "claude answers"
    assert answer["modelVersion"] == "gem-then-claude"
    claude = [r for r in h.upstream.requests if r.model == "c-up"][0]
    assert claude.body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "hi there"}]}
    ]


def test_chat_500_fails_over_to_gemini_from_the_chat_door(h: Harness) -> None:
    h.upstream.script("o-down", Fail(500, "boom"))
    h.upstream.script("g-up", Reply("gemini answers", tool_call={"name": "ls", "arguments": {}}))
    answer = h.client().chat.completions.create(
        model="chat-then-gem",
        messages=[{"role": "user", "content": "list"}],
        tools=[{"type": "function", "function": {"name": "ls", "parameters": {}}}],
    )
    [call] = answer.choices[0].message.tool_calls or []
    assert call.function.name == "ls"
    extra = (call.model_extra or {}).get("extra_content")
    assert extra == {"google": {"thought_signature": SIGNATURE}}
    assert answer.model == "chat-then-gem"


# ------------------------------------------------------------ countTokens and models
def test_count_tokens_answers_an_upstreams_4xx_as_the_doors(h: Harness) -> None:
    counted = post(h, "gem", "countTokens")
    assert counted.status_code == 200, counted.text
    assert counted.json() == {"totalTokens": 2}
    assert counted.headers["x-switchyard-target"] == "gem/g-model"
    assert "model" not in h.upstream.requests[0].body
    refused = post(h, "gem", "countTokens", {"generateContentRequest": {"bad": True}})
    assert refused.status_code == 400
    assert refused.json()["error"]["status"] == "INVALID_ARGUMENT"
    assert refused.headers["x-switchyard-attempts"] == "1"


def test_count_tokens_is_an_estimate_only_when_no_target_can_count(h: Harness) -> None:
    counted = post(h, "to-chat", "countTokens")
    assert counted.status_code == 200
    assert counted.json()["totalTokens"] >= 1
    assert counted.headers["x-switchyard-estimate"] == "true"
    assert h.upstream.requests == []


@pytest.mark.parametrize("path", ["/v1beta/models", "/v1/models"])
def test_models_are_listed_in_googles_shape(h: Harness, path: str) -> None:
    listed = httpx.get(h.gateway.url + path, headers={"x-goog-api-key": h.key})
    assert listed.status_code == 200
    models = {m["name"]: m for m in listed.json()["models"]}
    assert "generateContent" in models["models/gem"]["supportedGenerationMethods"]
    one = httpx.get(f"{h.gateway.url}{path}/gemini-2.5-pro?key={h.key}")
    assert one.json()["name"] == "models/gemini-2.5-pro"
    missing = httpx.get(f"{h.gateway.url}{path}/nope", headers={"x-goog-api-key": h.key})
    assert missing.status_code == 404 and missing.json()["error"]["status"] == "NOT_FOUND"


def test_openai_clients_still_get_openais_model_list(h: Harness) -> None:
    listed = httpx.get(h.gateway.url + "/v1/models", headers={"authorization": f"Bearer {h.key}"})
    assert listed.json()["object"] == "list"
    assert "gem" in {m["id"] for m in listed.json()["data"]}


def test_a_get_on_an_action_is_405_and_an_unknown_path_googles_404(h: Harness) -> None:
    wrong = httpx.get(f"{h.gateway.url}/v1beta/models/gem:generateContent")
    assert wrong.status_code == 405 and wrong.headers["allow"] == "POST"
    assert wrong.json()["error"]["code"] == 405
    unknown = httpx.get(f"{h.gateway.url}/v1beta/files")
    assert unknown.status_code == 404 and unknown.json()["error"]["status"] == "NOT_FOUND"
    action = post(h, "gem", "embedContent")
    assert action.status_code == 404 and action.json()["error"]["status"] == "NOT_FOUND"


def test_the_model_list_refuses_other_methods_with_405(h: Harness) -> None:
    for method in ("POST", "TRACE"):
        wrong = httpx.request(method, f"{h.gateway.url}/v1/models")
        assert wrong.status_code == 405 and wrong.headers["allow"] == "GET"
        assert wrong.json()["error"]["code"] == "method_not_allowed"


def test_a_limit_is_googles_429_resource_exhausted(h: Harness, clock: FakeClock) -> None:
    h.configure(
        CONFIG.replace("{root}", h.upstream.base_url.removesuffix("/v1")).replace(
            "  - name: gem\n    aliases", "  - name: gem\n    limits: {rpm: 1}\n    aliases"
        )
    )
    h.upstream.script("g-model", Reply("ok"))
    assert post(h, "gem").status_code == 200
    limited = post(h, "gem")
    assert limited.status_code == 429
    error = limited.json()["error"]
    assert error["code"] == 429 and error["status"] == "RESOURCE_EXHAUSTED"
    assert int(limited.headers["retry-after"]) >= 1
    assert len(h.upstream.requests) == 1
