"""The simulator speaks Gemini (generateContent, streamGenerateContent?alt=sse) over real
loopback sockets: its shapes, its key header and its faults. No Django here."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from routing.simulator import FakeUpstream, Reply
from routing.simulator.script import Fail, UsageThenError

KEY = "sim-gemini-key-123456"
BODY = {"contents": [{"role": "user", "parts": [{"text": "say hello there"}]}]}


@pytest.fixture
def upstream() -> Iterator[FakeUpstream]:
    with FakeUpstream(api_key=KEY) as up:
        yield up


def _root(upstream: FakeUpstream) -> str:
    return upstream.base_url.removesuffix("/v1")


def _post(
    upstream: FakeUpstream, action: str, headers: dict[str, str] | None = None
) -> httpx.Response:
    url = f"{_root(upstream)}/v1beta/models/gemini-2.5-flash:{action}"
    return httpx.post(
        url, json=BODY, headers={"x-goog-api-key": KEY} if headers is None else headers, timeout=30
    )


def _lines(response: httpx.Response) -> list[dict[str, Any]]:
    text = response.text
    assert "event:" not in text and "[DONE]" not in text
    return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]


def test_generate_content_answers_and_records_the_body_without_a_model(
    upstream: FakeUpstream,
) -> None:
    upstream.script("gemini-2.5-flash", Reply(content="hi there", reasoning="hmm"))
    response = _post(upstream, "generateContent")
    assert response.status_code == 200
    answer = response.json()
    parts = answer["candidates"][0]["content"]["parts"]
    assert parts == [{"text": "hmm", "thought": True}, {"text": "hi there"}]
    assert answer["candidates"][0]["finishReason"] == "STOP"
    assert answer["usageMetadata"]["promptTokenCount"] == 3  # the words of the contents
    [record] = upstream.requests
    assert record.model == "gemini-2.5-flash" and record.body == BODY


def test_a_stream_is_data_lines_with_the_call_whole_and_usage_last(upstream: FakeUpstream) -> None:
    call = {"name": "shell", "arguments": {"cmd": "ls"}}
    upstream.script("gemini-2.5-flash", Reply(content="one two", chunks=2, tool_call=call))
    response = _post(upstream, "streamGenerateContent?alt=sse")
    assert response.status_code == 200
    lines = _lines(response)
    parts = [p for line in lines for p in line["candidates"][0]["content"]["parts"]]
    calls = [p for p in parts if "functionCall" in p]
    assert len(calls) == 1 and calls[0]["functionCall"]["args"] == {"cmd": "ls"}
    assert calls[0]["thoughtSignature"]
    assert lines[-1]["candidates"][0]["finishReason"] == "STOP"
    assert lines[-1]["usageMetadata"]["totalTokenCount"] > 0


def test_a_stream_without_alt_sse_is_refused(upstream: FakeUpstream) -> None:
    assert _post(upstream, "streamGenerateContent").status_code == 400


def test_faults_come_in_googles_shape(upstream: FakeUpstream) -> None:
    upstream.script("gemini-2.5-flash", Fail(503, "The model is overloaded."), UsageThenError())
    response = _post(upstream, "generateContent")
    assert response.status_code == 503
    assert response.json() == {
        "error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}
    }
    streamed = _post(upstream, "streamGenerateContent?alt=sse")
    assert _lines(streamed)[-1]["error"]["status"] == "UNAVAILABLE"


def test_the_key_goes_in_x_goog_api_key_never_authorization(upstream: FakeUpstream) -> None:
    bearer = _post(
        upstream, "generateContent", {"authorization": f"Bearer {KEY}", "x-goog-api-key": KEY}
    )
    assert bearer.status_code == 401 and bearer.json()["error"]["status"] == "UNAUTHENTICATED"
    wrong = _post(upstream, "generateContent", {"x-goog-api-key": "nope-nope-nope"})
    assert wrong.status_code == 400 and "API key not valid" in wrong.json()["error"]["message"]
