"""The simulator speaks Amazon Bedrock over real loopback sockets: its paths, its AWS
event-stream frames (parsed here by botocore's own decoder), SigV4 recomputed with the
configured secret, Bedrock API keys, its error shapes and faults on demand. No Django."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.eventstream import EventStreamBuffer

from routing.simulator import FakeUpstream, Reply, StreamError
from routing.simulator.bedrock import event_frame, frame, model_and_action
from routing.simulator.script import Fail

KEY_ID = "AKIASIMULATEDKEY0001"
SECRET = "sim/secret+key/for-bedrock-0123456789"
API_KEY = "bedrock-api-key-sim-0123456789"
MODEL = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
INVOKE = {
    "anthropic_version": "bedrock-2023-05-31",
    "max_tokens": 64,
    "messages": [{"role": "user", "content": "say hello there"}],
}
CONVERSE = {"messages": [{"role": "user", "content": [{"text": "say hello there"}]}]}


@pytest.fixture
def upstream() -> Iterator[FakeUpstream]:
    with FakeUpstream(aws_keys={KEY_ID: SECRET}, api_key=API_KEY) as up:
        yield up


def _url(upstream: FakeUpstream, action: str, model: str = MODEL) -> str:
    from urllib.parse import quote

    return f"{upstream.root_url}/model/{quote(model, safe='')}/{action}"


def _signed(url: str, body: bytes, secret: str = SECRET, key_id: str = KEY_ID) -> dict[str, str]:
    request = AWSRequest(
        method="POST", url=url, data=body, headers={"content-type": "application/json"}
    )
    SigV4Auth(Credentials(key_id, secret), "bedrock", "us-east-1").add_auth(request)
    return dict(request.headers)


def _post(
    upstream: FakeUpstream,
    action: str,
    body: dict[str, Any],
    *,
    secret: str = SECRET,
    key_id: str = KEY_ID,
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    url = _url(upstream, action)
    raw = json.dumps(body).encode()
    sent = _signed(url, raw, secret, key_id) if headers is None else headers
    return httpx.post(url, content=raw, headers=sent, timeout=30)


def _frames(raw: bytes) -> list[tuple[dict[str, Any], bytes]]:
    buffer = EventStreamBuffer()
    buffer.add_data(raw)
    return [(dict(message.headers), message.payload) for message in buffer]


def test_frames_parse_with_botocores_decoder() -> None:
    raw = frame({":event-type": "chunk", ":message-type": "event"}, b'{"a":1}')
    raw += event_frame("messageStop", b'{"stopReason":"end_turn"}')
    [(first, payload), (second, last)] = _frames(raw)
    assert first == {":event-type": "chunk", ":message-type": "event"} and payload == b'{"a":1}'
    assert second[":event-type"] == "messageStop" and json.loads(last)["stopReason"] == "end_turn"


def test_the_path_names_a_model_id_a_profile_or_an_arn() -> None:
    arn = "arn:aws:bedrock:us-east-1:123:inference-profile/us.anthropic.claude-x-v1:0"
    encoded = "/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A123%3Ainference-profile%2Fus.anthropic.claude-x-v1%3A0/invoke"
    assert model_and_action(encoded) == (arn, "invoke")
    assert model_and_action(f"/model/{MODEL}/converse-stream") == (MODEL, "converse-stream")
    assert model_and_action("/model/x/unknown") is None and model_and_action("/v1/messages") is None


def test_invoke_answers_a_signed_request_in_messages_shape(upstream: FakeUpstream) -> None:
    upstream.script(MODEL, Reply(content="hi there"))
    response = _post(upstream, "invoke", INVOKE)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["content"] == [{"type": "text", "text": "hi there"}]
    [record] = upstream.requests
    assert record.model == MODEL and record.body == INVOKE


def test_a_stream_is_chunk_frames_holding_anthropic_events(upstream: FakeUpstream) -> None:
    upstream.script(MODEL, Reply(content="one two three", chunks=3))
    response = _post(upstream, "invoke-with-response-stream", INVOKE)
    assert response.headers["content-type"] == "application/vnd.amazon.eventstream"
    frames = _frames(response.content)
    assert {headers[":event-type"] for headers, _ in frames} == {"chunk"}
    events = [json.loads(base64.b64decode(json.loads(payload)["bytes"])) for _, payload in frames]
    kinds = [event["type"] for event in events]
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    text = "".join(e["delta"]["text"] for e in events if e["type"] == "content_block_delta")
    assert text == "one two three"


def test_converse_stream_frames_are_named_events(upstream: FakeUpstream) -> None:
    upstream.script(MODEL, Reply(content="hello world", tool_call={"name": "f", "arguments": {}}))
    response = _post(upstream, "converse-stream", CONVERSE)
    frames = _frames(response.content)
    names = [headers[":event-type"] for headers, _ in frames]
    assert names[0] == "messageStart" and names[-2:] == ["messageStop", "metadata"]
    assert "contentBlockStart" in names  # the tool call's
    metadata = json.loads(frames[-1][1])
    assert metadata["usage"]["inputTokens"] == 3


def test_converse_answers_json(upstream: FakeUpstream) -> None:
    upstream.script(MODEL, Reply(content="hi", reasoning="hmm"))
    answer = _post(upstream, "converse", CONVERSE).json()
    blocks = answer["output"]["message"]["content"]
    assert blocks[1] == {"text": "hi"} and blocks[0]["reasoningContent"]["reasoningText"]["text"]
    assert answer["stopReason"] == "end_turn"


def test_a_wrong_secret_or_an_unknown_key_is_refused_as_aws_does(upstream: FakeUpstream) -> None:
    wrong = _post(upstream, "invoke", INVOKE, secret="not-the-secret")
    assert wrong.status_code == 403
    assert wrong.headers["x-amzn-errortype"] == "InvalidSignatureException"
    unknown = _post(upstream, "invoke", INVOKE, key_id="AKIAUNKNOWNKEY000000")
    assert unknown.status_code == 403
    assert unknown.headers["x-amzn-errortype"] == "UnrecognizedClientException"
    unsigned = _post(upstream, "invoke", INVOKE, headers={"content-type": "application/json"})
    assert unsigned.headers["x-amzn-errortype"] == "MissingAuthenticationTokenException"
    assert upstream.requests == []  # refused before anything was served


def test_a_tampered_body_fails_the_signature(upstream: FakeUpstream) -> None:
    url = _url(upstream, "invoke")
    headers = _signed(url, json.dumps(INVOKE).encode())
    tampered = json.dumps({**INVOKE, "max_tokens": 65}).encode()
    response = httpx.post(url, content=tampered, headers=headers, timeout=30)
    assert response.headers["x-amzn-errortype"] == "InvalidSignatureException"


def test_a_bedrock_api_key_is_a_bearer_token(upstream: FakeUpstream) -> None:
    ok = _post(upstream, "invoke", INVOKE, headers={"authorization": f"Bearer {API_KEY}"})
    assert ok.status_code == 200
    bad = _post(upstream, "invoke", INVOKE, headers={"authorization": "Bearer nope"})
    assert bad.status_code == 403 and "UnrecognizedClient" in bad.headers["x-amzn-errortype"]


def test_an_invoke_body_naming_a_model_is_refused(upstream: FakeUpstream) -> None:
    response = _post(upstream, "invoke", {**INVOKE, "model": MODEL})
    assert response.status_code == 400
    assert response.headers["x-amzn-errortype"] == "ValidationException"
    assert "extraneous key [model]" in response.json()["message"]


def test_failures_carry_bedrocks_error_type(upstream: FakeUpstream) -> None:
    upstream.script(
        MODEL,
        Fail(429, "Too many requests, please wait before trying again."),
        Fail(400, "bad", type="ModelNotReadyException"),
    )
    throttled = _post(upstream, "invoke", INVOKE)
    assert throttled.status_code == 429
    assert throttled.headers["x-amzn-errortype"].startswith("ThrottlingException:")
    assert throttled.json() == {"message": "Too many requests, please wait before trying again."}
    typed = _post(upstream, "converse", CONVERSE)
    assert typed.headers["x-amzn-errortype"].startswith("ModelNotReadyException:")


@pytest.mark.parametrize("chunks", [0, 2])
def test_an_exception_frame_ends_a_stream_on_demand(upstream: FakeUpstream, chunks: int) -> None:
    upstream.script(MODEL, StreamError(chunks=chunks, exception="throttlingException"))
    frames = _frames(_post(upstream, "invoke-with-response-stream", INVOKE).content)
    headers, payload = frames[-1]
    assert headers[":message-type"] == "exception"
    assert headers[":exception-type"] == "throttlingException"
    assert json.loads(payload) == {"message": "The model stream failed."}
    texts = [f for f in frames[:-1] if b"text_delta" in base64.b64decode(json.loads(f[1])["bytes"])]
    assert len(texts) == chunks


def test_count_tokens_counts_the_wrapped_invoke_body(upstream: FakeUpstream) -> None:
    wrapped = {
        "input": {"invokeModel": {"body": base64.b64encode(json.dumps(INVOKE).encode()).decode()}}
    }
    response = _post(upstream, "count-tokens", wrapped)
    assert response.status_code == 200 and response.json() == {"inputTokens": 3}
