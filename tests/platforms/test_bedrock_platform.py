"""Amazon Bedrock's platform pieces against the libraries' own expectations: URLs with
model ids, profiles and ARNs, the InvokeModel body, SigV4 signatures the simulator
recomputes with botocore, the credential chain from the environment (no real AWS),
refreshes off the event loop one at a time, event-stream frames re-framed as SSE, and
SPEC §19's error table."""

from __future__ import annotations

import asyncio
import base64
import json
import threading
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from botocore.credentials import RefreshableCredentials

from routing.engine.failures import FailureCode
from routing.platforms.base import PlatformSettings
from routing.platforms.bedrock import (
    BEDROCK,
    EventStreamReader,
    SigV4Signer,
    classify_bedrock,
)
from routing.protocols import Protocol
from routing.protocols.registry import PROTOCOLS
from routing.simulator import FakeUpstream, Reply
from routing.simulator import bedrock as simulated
from routing.upstream.base import UpstreamFailure
from routing.upstream.openai import OpenAIClient

MESSAGES = PROTOCOLS[Protocol.MESSAGES]
KEY_ID = "AKIATESTKEY000000001"
SECRET = "test/secret+key/0123456789abcdefghij"
TOKEN = "session-token-0123456789-abcdefghij"
CLAUDE_PROFILE = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
URL = "http://127.0.0.1:9/model/us.anthropic.claude-sonnet-4-5-20250929-v1:0/invoke"
AWS_ENV = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_ROLE_ARN",
)


@pytest.fixture
def no_aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> Iterator[None]:
    """An environment with no AWS credential anywhere (and no metadata service tried)."""
    for name in AWS_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    yield


# ------------------------------------------------------------------------------- URLs
@pytest.mark.parametrize(
    ("model", "segment"),
    [
        ("anthropic.claude-3-5-haiku-20241022-v1:0", "anthropic.claude-3-5-haiku-20241022-v1:0"),
        ("global.anthropic.claude-sonnet-4-5", "global.anthropic.claude-sonnet-4-5"),
        (
            "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-x",
            "arn:aws:bedrock:us-east-1:123456789012:inference-profile%2Fus.anthropic.claude-x",
        ),
    ],
)
def test_the_model_is_one_url_encoded_path_segment(model: str, segment: str) -> None:
    base = "https://bedrock-runtime.eu-west-1.amazonaws.com"
    assert BEDROCK.endpoint_url(MESSAGES, base, model) == f"{base}/model/{segment}/invoke"
    streamed = BEDROCK.endpoint_url(MESSAGES, base + "/", model, stream=True)
    assert streamed == f"{base}/model/{segment}/invoke-with-response-stream"
    assert simulated.model_and_action(streamed.removeprefix(base))[0] == model  # type: ignore[index]


def test_the_default_endpoint_is_the_regions_runtime() -> None:
    settings = PlatformSettings(region="ap-northeast-1")
    expected = "https://bedrock-runtime.ap-northeast-1.amazonaws.com"
    assert BEDROCK.default_base_url(MESSAGES, settings) == expected
    assert BEDROCK.models_url(MESSAGES, expected) is None


def test_count_tokens_takes_the_bare_model_id() -> None:
    base = "http://h"
    profile = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
    url = BEDROCK.count_tokens_url(MESSAGES, base, profile)
    assert url == "http://h/model/anthropic.claude-sonnet-4-5-20250929-v1:0/count-tokens"
    assert BEDROCK.count_tokens_url(MESSAGES, base, "arn:aws:bedrock:x") is None
    wrapped = orjson.loads(BEDROCK.count_tokens_body(MESSAGES, b'{"model":"m","messages":[]}'))
    inner = json.loads(base64.b64decode(wrapped["input"]["invokeModel"]["body"]))
    assert inner == {"messages": [], "anthropic_version": "bedrock-2023-05-31"}
    assert json.loads(BEDROCK.count_tokens_answer(b'{"inputTokens": 12}')) == {"input_tokens": 12}


def test_the_messages_body_loses_model_and_stream_and_carries_version_and_betas() -> None:
    body = orjson.dumps({"model": "claude", "stream": True, "max_tokens": 5, "messages": []})
    prepared = BEDROCK.prepare_body(MESSAGES, body, "m", True)
    headers = {
        "anthropic-beta": "interleaved-thinking-2025-05-14, context-1m-2025-08-07",
        "traceparent": "00-x",
    }
    moved, rest = BEDROCK.headers_into_body(MESSAGES, prepared, headers)
    assert orjson.loads(moved) == {
        "max_tokens": 5,
        "messages": [],
        "anthropic_version": "bedrock-2023-05-31",
        "anthropic_beta": ["interleaved-thinking-2025-05-14", "context-1m-2025-08-07"],
    }
    assert rest == {"traceparent": "00-x"}
    assert simulated.invalid_body("invoke", orjson.loads(moved)) is None  # Bedrock takes it
    assert BEDROCK.headers_into_body(MESSAGES, prepared, None) == (prepared, None)


@pytest.mark.parametrize(
    ("settings", "api_key", "field"),
    [
        (PlatformSettings(), "", "region"),
        (PlatformSettings(region="Mars"), "", "region"),
        (
            PlatformSettings(region="us-east-1", aws_access_key_id=KEY_ID),
            "",
            "aws_secret_access_key",
        ),
        (
            PlatformSettings(
                region="us-east-1", aws_access_key_id=KEY_ID, aws_secret_access_key="s"
            ),
            "brk-key",
            "api_key",
        ),
    ],
)
def test_a_provider_missing_what_bedrock_needs_is_refused_by_field(
    settings: PlatformSettings, api_key: str, field: str
) -> None:
    errors = BEDROCK.check("anthropic", "", api_key, settings)
    assert field in errors, errors
    assert BEDROCK.check("openai", "", "", PlatformSettings(region="us-east-1")).keys() == {"kind"}
    assert BEDROCK.check("anthropic", "", "", PlatformSettings(region="us-west-2")) == {}


# ---------------------------------------------------------------------------- signing
async def _signed(signer: SigV4Signer, body: bytes = b'{"a":1}') -> dict[str, str]:
    headers = {"content-type": "application/json", "accept": "application/json"}
    return {**headers, "host": "127.0.0.1:9", **await signer.headers("POST", URL, body, headers)}


def _verdict(headers: dict[str, str], body: bytes = b'{"a":1}', secret: str = SECRET) -> Any:
    path = URL.removeprefix("http://127.0.0.1:9")
    return simulated.auth_failure(
        "POST", path, headers, body, aws_keys={KEY_ID: secret}, api_key=None
    )


async def test_explicit_keys_sign_what_the_simulator_recomputes_with_botocore() -> None:
    settings = PlatformSettings(
        region="us-east-1", aws_access_key_id=KEY_ID, aws_secret_access_key=SECRET
    )
    signer = BEDROCK.authenticator("claude-bedrock", MESSAGES, "", settings, lambda: 0.0)
    assert isinstance(signer, SigV4Signer)
    headers = await _signed(signer)
    assert headers["authorization"].startswith(f"AWS4-HMAC-SHA256 Credential={KEY_ID}/")
    assert "/us-east-1/bedrock/aws4_request" in headers["authorization"]
    assert _verdict(headers) is None
    assert _verdict(headers, secret="another-secret")[1] == "InvalidSignatureException"
    assert _verdict(headers, body=b'{"a":2}')[1] == "InvalidSignatureException"
    assert SECRET not in json.dumps(headers)


async def test_a_session_token_travels_and_is_signed() -> None:
    settings = PlatformSettings(
        region="us-east-1",
        aws_access_key_id=KEY_ID,
        aws_secret_access_key=SECRET,
        aws_session_token=TOKEN,
    )
    signer = BEDROCK.authenticator("p", MESSAGES, "", settings, lambda: 0.0)
    assert signer is not None
    headers = await _signed(signer)  # type: ignore[arg-type]
    assert headers["x-amz-security-token"] == TOKEN
    assert "x-amz-security-token" in headers["authorization"]
    assert _verdict(headers) is None


def test_a_bedrock_api_key_is_a_bearer_token_and_needs_no_signer() -> None:
    settings = PlatformSettings(region="us-east-1")
    assert BEDROCK.authenticator("p", MESSAGES, "brk-key", settings, lambda: 0.0) is None
    assert BEDROCK.auth_headers(MESSAGES, "brk-key") == {"authorization": "Bearer brk-key"}


async def test_the_credential_chain_reads_the_environment(
    no_aws: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    signer = BEDROCK.authenticator("p", MESSAGES, "", PlatformSettings(region="us-east-1"), float)
    assert isinstance(signer, SigV4Signer)
    assert _verdict(await _signed(signer)) is None


async def test_the_credential_chain_reads_a_shared_profile(
    no_aws: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    (tmp_path / "credentials").write_text(
        f"[fleet]\naws_access_key_id = {KEY_ID}\naws_secret_access_key = {SECRET}\n"
    )
    monkeypatch.setenv("AWS_PROFILE", "fleet")
    signer = SigV4Signer("p", "us-east-1")
    assert _verdict(await _signed(signer)) is None


async def test_no_credentials_is_an_auth_failure_naming_the_provider(no_aws: None) -> None:
    signer = SigV4Signer("claude-bedrock", "us-east-1")
    with pytest.raises(UpstreamFailure) as caught:
        await signer.headers("POST", URL, b"{}", {})
    failure = caught.value.failure
    assert failure.code is FailureCode.AUTH
    assert failure.message.startswith("no AWS credentials found for provider claude-bedrock")
    assert "aws_access_key_id/aws_secret_access_key" in failure.message


async def test_a_profile_that_does_not_exist_is_an_auth_failure(
    no_aws: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_PROFILE", "nowhere")
    with pytest.raises(UpstreamFailure) as caught:
        await SigV4Signer("claude-bedrock", "us-east-1").headers("POST", URL, b"{}", {})
    assert caught.value.failure.code is FailureCode.AUTH
    assert "claude-bedrock" in caught.value.failure.message


async def test_refreshable_credentials_refresh_in_a_thread_one_at_a_time() -> None:
    loop_thread = threading.get_ident()
    refreshes: list[int] = []
    expiry = ["2000-01-01T00:00:00Z"]  # expired: the first use refreshes

    def refresh() -> dict[str, str]:
        refreshes.append(threading.get_ident())
        expiry[0] = "2999-01-01T00:00:00Z"
        return {
            "access_key": KEY_ID,
            "secret_key": SECRET,
            "token": TOKEN,
            "expiry_time": expiry[0],
        }

    credentials = RefreshableCredentials.create_from_metadata(
        {"access_key": KEY_ID, "secret_key": SECRET, "token": "old", "expiry_time": expiry[0]},
        refresh_using=refresh,
        method="test",
    )
    signer = SigV4Signer("p", "us-east-1", credentials)
    signed = await asyncio.gather(*(_signed(signer) for _ in range(8)))
    assert len(refreshes) == 1 and refreshes[0] != loop_thread  # once, off the loop
    assert all(h["x-amz-security-token"] == TOKEN for h in signed)
    assert all(_verdict(h) is None for h in signed)


# ---------------------------------------------------------------------------- streams
class _Body:
    """A response body delivered in given network reads."""

    def __init__(self, reads: list[bytes]) -> None:
        self._reads = list(reads)

    async def read(self) -> bytes:
        return self._reads.pop(0) if self._reads else b""


def _chunk(event: dict[str, Any]) -> bytes:
    return simulated.chunk_frame(json.dumps(event).encode())


async def _drain(reader: EventStreamReader) -> tuple[bytes, UpstreamFailure | None]:
    out = b""
    try:
        while data := await reader.read():
            out += data
    except UpstreamFailure as exc:
        return out, exc
    return out, None


async def test_chunk_frames_become_the_anthropic_events_they_carry() -> None:
    start = {"type": "message_start", "message": {"id": "msg_1", "model": "claude"}}
    stop = {"type": "message_stop"}
    raw = _chunk(start) + _chunk(stop)
    cut = len(raw) // 3  # a frame split across reads
    out, failure = await _drain(EventStreamReader(_Body([raw[:cut], raw[cut:]])))
    assert failure is None
    assert out == (
        b"event: message_start\ndata: " + json.dumps(start).encode() + b"\n\n"
        b"event: message_stop\ndata: " + json.dumps(stop).encode() + b"\n\n"
    )


async def test_converse_frames_become_named_events_wrapped_by_their_type() -> None:
    raw = simulated.event_frame(
        "contentBlockDelta", b'{"contentBlockIndex":0,"delta":{"text":"hi"}}'
    )
    out, _ = await _drain(EventStreamReader(_Body([raw])))
    assert out == (
        b'event: contentBlockDelta\ndata: {"contentBlockDelta":'
        b'{"contentBlockIndex":0,"delta":{"text":"hi"}}}\n\n'
    )


async def test_an_exception_frame_fails_after_the_events_before_it() -> None:
    raw = _chunk({"type": "ping"}) + simulated.exception_frame(
        "throttlingException", "Too many tokens, please wait before trying again."
    )
    out, failure = await _drain(EventStreamReader(_Body([raw])))
    assert out.startswith(b"event: ping\n")  # handed out first
    assert failure is not None and failure.failure.code is FailureCode.RATE_LIMIT
    assert failure.failure.message == "Too many tokens, please wait before trying again."
    assert failure.failure.status == 429


async def test_a_corrupt_frame_is_a_transport_failure() -> None:
    raw = bytearray(_chunk({"type": "ping"}))
    raw[-1] ^= 0xFF  # the message CRC no longer matches
    out, failure = await _drain(EventStreamReader(_Body([bytes(raw)])))
    assert out == b"" and failure is not None
    assert failure.failure.code is FailureCode.TRANSPORT


# ----------------------------------------------------------------------------- errors
@pytest.mark.parametrize(
    ("status", "kind", "message", "code"),
    [
        (429, "ThrottlingException", "Too many requests", FailureCode.RATE_LIMIT),
        (503, "ServiceUnavailableException", "Service unavailable", FailureCode.SERVER),
        (429, "ModelNotReadyException", "Model not ready", FailureCode.SERVER),
        (500, "InternalServerException", "Internal error", FailureCode.SERVER),
        (424, "ModelStreamErrorException", "Stream failed", FailureCode.SERVER),
        (403, "AccessDeniedException", "You don't have access", FailureCode.AUTH),
        (403, "UnrecognizedClientException", "The security token is invalid", FailureCode.AUTH),
        (403, "ExpiredTokenException", "The security token included has expired", FailureCode.AUTH),
        (403, "InvalidSignatureException", "signature mismatch", FailureCode.AUTH),
        (
            400,
            "ValidationException",
            "extraneous key [x] is not permitted",
            FailureCode.BAD_REQUEST,
        ),
        (
            400,
            "ValidationException",
            "Input is too long for requested model. prompt is too long",
            FailureCode.CONTEXT_WINDOW_EXCEEDED,
        ),
        (404, "ResourceNotFoundException", "Model not found", FailureCode.UNKNOWN_MODEL),
    ],
)
def test_bedrocks_errors_map_into_the_one_taxonomy(
    status: int, kind: str, message: str, code: FailureCode
) -> None:
    header = {"x-amzn-errortype": f"{kind}:http://internal.amazon.com/coral/com.amazon.bedrock/"}
    failure = classify_bedrock(status, orjson.dumps({"message": message}), header, now=0.0)
    assert failure.code is code and failure.message == message and failure.status == status
    typed = {"__type": f"com.amazon.bedrock#{kind}", "Message": message}  # the body's form
    assert classify_bedrock(status, orjson.dumps(typed), {}, now=0.0).code is code


def test_a_throttle_keeps_its_retry_after_and_an_unknown_type_falls_back() -> None:
    header = {"x-amzn-errortype": "ThrottlingException", "retry-after": "3"}
    assert classify_bedrock(429, b'{"message":"slow"}', header, now=0.0).retry_after_s == 3.0
    unknown = classify_bedrock(502, b"<html>bad gateway</html>", {}, now=0.0)
    assert unknown.code is FailureCode.SERVER


# ------------------------------------------------------------- the client, end to end
ARN = "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/abc123"


@pytest.fixture
def aws() -> Iterator[FakeUpstream]:
    with FakeUpstream(aws_keys={KEY_ID: SECRET}) as server:
        yield server


def _client(aws: FakeUpstream, protocol: Any = MESSAGES) -> OpenAIClient:
    settings = PlatformSettings(
        region="us-east-1", aws_access_key_id=KEY_ID, aws_secret_access_key=SECRET
    )
    return OpenAIClient(
        base_url=aws.root_url,
        api_key="",
        protocol=protocol,
        platform=BEDROCK,
        settings=settings,
        provider="claude-bedrock",
    )


async def test_an_arn_in_the_path_is_signed_as_sent_and_streams_as_sse(aws: FakeUpstream) -> None:
    aws.script(ARN, Reply("streamed from an ARN", chunks=2))
    client = _client(aws)
    body = orjson.dumps({"model": ARN, "stream": True, "max_tokens": 9, "messages": []})
    try:
        response = await client.send(body, model=ARN, stream=True)
        reader = client.reader(response)
        out = b""
        while data := await reader.read():
            out += data
        await response.aclose()
    finally:
        await client.aclose()
    assert out.startswith(b"event: message_start\ndata: ") and b"event: message_stop" in out
    assert b'"text":"streamed from an ARN"' not in out  # in two deltas
    [record] = aws.requests
    assert record.model == ARN and record.path.endswith("/invoke-with-response-stream")


async def test_count_tokens_goes_to_countTokens_and_answers_in_anthropics_shape(
    aws: FakeUpstream,
) -> None:
    client = _client(aws)
    url = client.count_tokens_url(CLAUDE_PROFILE)
    assert url is not None and "/model/anthropic.claude" in url
    request = {
        "model": CLAUDE_PROFILE,
        "messages": [{"role": "user", "content": "three words here"}],
    }
    body = client.count_tokens_body(orjson.dumps(request))
    try:
        response = await client.send(body, path=url)
        payload = await response.read()
        await response.aclose()
    finally:
        await client.aclose()
    assert orjson.loads(client.count_tokens_answer(payload)) == {"input_tokens": 3}


async def test_a_converse_client_posts_the_codecs_body_to_converse(aws: FakeUpstream) -> None:
    aws.script("meta.llama3-70b-instruct-v1:0", Reply("hi from llama"))
    client = _client(aws, PROTOCOLS[Protocol.CONVERSE])
    body = orjson.dumps({"messages": [{"role": "user", "content": [{"text": "hi"}]}]})
    try:
        response = await client.send(body, model="meta.llama3-70b-instruct-v1:0")
        answer = orjson.loads(await response.read())
        await response.aclose()
    finally:
        await client.aclose()
    assert answer["output"]["message"]["content"] == [{"text": "hi from llama"}]
    assert aws.requests[0].path == "/model/meta.llama3-70b-instruct-v1:0/converse"


def test_betas_join_betas_the_body_already_names() -> None:
    body = orjson.dumps({"messages": [], "anthropic_beta": ["a"]})
    headers = {"Anthropic-Beta": "a,b"}
    moved, rest = BEDROCK.headers_into_body(MESSAGES, body, headers)
    assert orjson.loads(moved)["anthropic_beta"] == ["a", "b"] and rest == {}


def test_aws_keys_win_over_an_api_key_set_beside_them() -> None:
    settings = PlatformSettings(
        region="us-east-1", aws_access_key_id=KEY_ID, aws_secret_access_key=SECRET
    )
    client = OpenAIClient(
        base_url="http://127.0.0.1:9",
        api_key="brk-key",
        protocol=MESSAGES,
        platform=BEDROCK,
        settings=settings,
        provider="p",
    )
    assert isinstance(client._auth, SigV4Signer)
    assert "authorization" not in client._headers  # no Bearer beside the signature


@pytest.mark.parametrize(
    "url",
    [
        "https://bedrock-runtime.us-east-1.amazonaws.com/model/x/invoke",
        "http://127.0.0.1:44471/model/x/invoke",
        "https://vpce-1.bedrock-runtime.us-east-1.vpce.amazonaws.com:8443/model/x/invoke",
        "https://h:443/model/x/invoke",
    ],
)
def test_the_signed_host_is_the_one_botocore_would_work_out(url: str) -> None:
    from botocore.auth import _host_from_url

    from routing.platforms.bedrock import _host

    assert _host(url) == _host_from_url(url)
