"""The simulator speaks Vertex AI: Claude's rawPredict / streamRawPredict / count-tokens and
Gemini's generateContent under ``/v1/projects/…``, only with a Bearer token its own token
endpoint issued, refusing what Vertex refuses, failing on demand."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from routing.platforms.google_auth import GoogleTokens
from routing.simulator import Fail, FakeUpstream, Reply
from tests.platforms.accounts import write_service_account

ROOT = "/v1/projects/sim-project/locations/us-east5/publishers"


@pytest.fixture
async def bearer(fake_upstream: FakeUpstream, tmp_path: Path) -> AsyncIterator[str]:
    tokens = GoogleTokens(
        "sim", str(write_service_account(fake_upstream, tmp_path)), clock=lambda: 0.0
    )
    yield f"Bearer {await tokens.token()}"
    await tokens.aclose()


async def _post(up: FakeUpstream, path: str, body: object, bearer: str = "") -> httpx.Response:
    headers = {"authorization": bearer} if bearer else {}
    async with httpx.AsyncClient(base_url=up.root_url) as client:
        return await client.post(path, json=body, headers=headers)


CLAUDE = {
    "anthropic_version": "vertex-2023-10-16",
    "max_tokens": 20,
    "messages": [{"role": "user", "content": "hi"}],
}


async def test_claude_raw_predict_answers_in_anthropic_shape(
    fake_upstream: FakeUpstream, bearer: str
) -> None:
    fake_upstream.script("claude-x@1", Reply("hello"))
    answer = await _post(
        fake_upstream, f"{ROOT}/anthropic/models/claude-x@1:rawPredict", CLAUDE, bearer
    )
    assert answer.status_code == 200
    assert answer.json()["content"] == [{"type": "text", "text": "hello"}]
    [record] = fake_upstream.requests
    assert record.model == "claude-x@1" and "model" not in record.body


async def test_claude_stream_raw_predict_streams_anthropic_events(
    fake_upstream: FakeUpstream, bearer: str
) -> None:
    fake_upstream.script("claude-x@1", Reply("one two", chunks=2))
    body = {**CLAUDE, "stream": True}
    answer = await _post(
        fake_upstream, f"{ROOT}/anthropic/models/claude-x@1:streamRawPredict", body, bearer
    )
    assert answer.status_code == 200
    assert "event: message_start" in answer.text and "event: message_stop" in answer.text


async def test_gemini_generate_content_on_vertex(fake_upstream: FakeUpstream, bearer: str) -> None:
    fake_upstream.script("gemini-x", Reply("hi from gemini"))
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    answer = await _post(
        fake_upstream, f"{ROOT}/google/models/gemini-x:generateContent", body, bearer
    )
    assert answer.json()["candidates"][0]["content"]["parts"] == [{"text": "hi from gemini"}]
    streamed = await _post(
        fake_upstream, f"{ROOT}/google/models/gemini-x:streamGenerateContent?alt=sse", body, bearer
    )
    assert streamed.text.startswith("data: {")


async def test_count_tokens_on_vertex(fake_upstream: FakeUpstream, bearer: str) -> None:
    body = {**CLAUDE, "model": "claude-x@1"}
    answer = await _post(
        fake_upstream, f"{ROOT}/anthropic/models/count-tokens:rawPredict", body, bearer
    )
    assert answer.status_code == 200 and answer.json()["input_tokens"] >= 1


async def test_no_issued_token_is_unauthenticated(fake_upstream: FakeUpstream, bearer: str) -> None:
    path = f"{ROOT}/anthropic/models/claude-x@1:rawPredict"
    for presented in ("", "Bearer ya29.made-up", "Bearer upstream-key"):
        answer = await _post(fake_upstream, path, CLAUDE, presented)
        assert answer.status_code == 401
        assert answer.json()["error"]["status"] == "UNAUTHENTICATED"
    fake_upstream.google.revoke_all()
    assert (await _post(fake_upstream, path, CLAUDE, bearer)).status_code == 401


async def test_what_vertex_refuses_in_a_claude_body(
    fake_upstream: FakeUpstream, bearer: str
) -> None:
    path = f"{ROOT}/anthropic/models/claude-x@1:rawPredict"
    with_model = await _post(fake_upstream, path, {**CLAUDE, "model": "claude-x@1"}, bearer)
    assert with_model.status_code == 400 and "model" in with_model.json()["error"]["message"]
    unversioned = {k: v for k, v in CLAUDE.items() if k != "anthropic_version"}
    answer = await _post(fake_upstream, path, unversioned, bearer)
    assert answer.json()["error"]["status"] == "INVALID_ARGUMENT"


async def test_failures_on_demand(fake_upstream: FakeUpstream, bearer: str) -> None:
    google = json.dumps(
        {"error": {"code": 429, "message": "Quota exceeded.", "status": "RESOURCE_EXHAUSTED"}}
    )
    fake_upstream.script("claude-x@1", Fail(429, body=google), Fail(529, "Overloaded"))
    path = f"{ROOT}/anthropic/models/claude-x@1:rawPredict"
    first = await _post(fake_upstream, path, CLAUDE, bearer)
    assert first.status_code == 429 and first.json()["error"]["status"] == "RESOURCE_EXHAUSTED"
    second = await _post(fake_upstream, path, CLAUDE, bearer)
    assert second.status_code == 529 and second.json()["error"]["type"] == "overloaded_error"
    fake_upstream.script("gemini-x", Fail(503, "busy"))
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    third = await _post(
        fake_upstream, f"{ROOT}/google/models/gemini-x:generateContent", body, bearer
    )
    assert third.status_code == 503 and third.json()["error"]["status"] == "UNAVAILABLE"


async def test_an_unknown_vertex_path_is_not_found(fake_upstream: FakeUpstream) -> None:
    answer = await _post(fake_upstream, f"{ROOT}/meta/models/llama:rawPredict", CLAUDE)
    assert answer.status_code == 404 and answer.json()["error"]["status"] == "NOT_FOUND"


async def test_a_key_file_can_be_trusted_from_the_file_itself(
    fake_upstream: FakeUpstream, tmp_path: Path
) -> None:
    path = write_service_account(fake_upstream, tmp_path, email="demo@d.iam", register=False)
    assert fake_upstream.google.register_file(str(path)) == "demo@d.iam"
    tokens = GoogleTokens("demo", str(path), clock=lambda: 0.0)
    assert (await tokens.token()).startswith("ya29.sim-")
    await tokens.aclose()
