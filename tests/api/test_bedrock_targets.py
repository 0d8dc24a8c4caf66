"""Amazon Bedrock targets (SPEC §19) through the gateway over real sockets, against the
simulator's Bedrock routes: a Claude Code-style Messages request and a chat request on
an ``anthropic`` target reached through InvokeModel (streamed and not), a
``bedrock-converse`` target, SigV4 checked by the simulator (and refused with a wrong
secret), the credential chain from the environment, exception frames before and after
the commit point, Bedrock's errors in the one taxonomy, the failover from Anthropic's
API (529) to the same Claude on Bedrock, and no credential text anywhere."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import pytest

from routing.audit import writer
from routing.engine.health import EventKind, HealthEvent
from routing.models import Provider
from routing.simulator import FakeUpstream, Reply, StreamError
from routing.simulator.script import Fail
from tests.api.conftest import Api, database_dump
from tests.conftest import Harness

KEY_ID = "AKIACANARYKEYID00001"
SECRET = "bdrk/CANARY+secret/7f3e9a1c5b2d4e6f8a0b"
API_KEY = "ABSKQmVkcm9ja0NBTkFSWWtleTAxMjM0NTY3ODk="  # a Bedrock API key's shape
CLAUDE = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
CLAUDE_PATH = "/model/us.anthropic.claude-sonnet-4-5-20250929-v1:0"
LLAMA = "meta.llama3-70b-instruct-v1:0"
TOOLS: list[Any] = [
    {
        "name": "Bash",
        "description": "run a command",
        "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}},
    }
]


@pytest.fixture(scope="module")
def aws() -> Iterator[FakeUpstream]:
    with FakeUpstream(aws_keys={KEY_ID: SECRET}, api_key=API_KEY) as server:
        yield server


def _config(
    aws: FakeUpstream, *, secret: str = SECRET, keys: bool = True, name: str = "claude-bedrock"
) -> str:
    """``keys=False``: a provider without AWS keys (the credential chain signs); it gets a
    ``name`` of its own, since a file without the keys keeps a stored provider's."""
    credentials = (
        f"    aws_access_key_id: {KEY_ID}\n    aws_secret_access_key: '{secret}'\n" if keys else ""
    )
    return f"""
providers:
  - name: claude-direct
    kind: anthropic
    base_url: {{upstream}}
    api_key: sk-ant-direct-key
  - name: {name}
    kind: anthropic
    platform: bedrock
    region: us-east-1
    base_url: {aws.root_url}
{credentials}  - name: llama-bedrock
    kind: bedrock-converse
    platform: bedrock
    region: us-east-1
    base_url: {aws.root_url}
    api_key: '{API_KEY}'
groups:
  - name: claude
    targets:
      - {{provider: {name}, model: '{CLAUDE}'}}
  - name: claude-anywhere
    targets:
      - {{provider: claude-direct, model: claude-down}}
      - {{provider: {name}, model: '{CLAUDE}'}}
  - name: llama
    targets:
      - {{provider: llama-bedrock, model: '{LLAMA}'}}
  - name: claude-then-llama
    targets:
      - {{provider: {name}, model: '{CLAUDE}'}}
      - {{provider: llama-bedrock, model: '{LLAMA}'}}
"""


@pytest.fixture
def h(harness: Harness, aws: FakeUpstream) -> Iterator[Harness]:
    aws.reset()
    harness.configure(_config(aws))
    yield harness
    aws.reset()


def _messages(h: Harness) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=h.gateway.url, api_key=h.key, max_retries=0)


def _claude_code_turn(h: Harness, *, stream: bool, model: str = "claude") -> Any:
    """What Claude Code sends: a system prompt, tools, a beta header, thinking."""
    client = _messages(h)
    kwargs: dict[str, Any] = {
        "model": model,
        "max_tokens": 2048,
        "system": [{"type": "text", "text": "You are Claude Code."}],
        "tools": TOOLS,
        "messages": [{"role": "user", "content": "list the files"}],
        "extra_headers": {"anthropic-beta": "interleaved-thinking-2025-05-14"},
    }
    if stream:
        with client.messages.stream(**kwargs) as events:
            return events.get_final_message()
    return client.messages.create(**kwargs)


@pytest.mark.parametrize("stream", [False, True], ids=["invoke", "stream"])
def test_a_claude_code_request_reaches_claude_on_bedrock(
    h: Harness, aws: FakeUpstream, stream: bool
) -> None:
    aws.script(CLAUDE, Reply("", tool_call={"name": "Bash", "arguments": {"command": "ls"}}))
    answer = _claude_code_turn(h, stream=stream)
    assert answer.stop_reason == "tool_use"
    [use] = [b for b in answer.content if b.type == "tool_use"]
    assert use.name == "Bash" and use.input == {"command": "ls"}
    [record] = aws.requests
    action = "invoke-with-response-stream" if stream else "invoke"
    assert record.path == f"{CLAUDE_PATH}/{action}"
    assert "model" not in record.body and "stream" not in record.body
    assert record.body["anthropic_version"] == "bedrock-2023-05-31"
    assert record.body["anthropic_beta"] == ["interleaved-thinking-2025-05-14"]
    assert record.body["tools"][0]["name"] == "Bash"
    assert record.headers["authorization"].startswith(f"AWS4-HMAC-SHA256 Credential={KEY_ID}/")
    assert "anthropic-beta" not in record.headers and "x-api-key" not in record.headers


def _chat_text(h: Harness, model: str, content: str, *, stream: bool) -> str:
    """The answer's text through the chat door, streamed (with usage) or not."""
    messages: Any = [{"role": "user", "content": content}]
    chat = h.client().chat.completions
    if not stream:
        return chat.create(model=model, messages=messages).choices[0].message.content or ""
    chunks = list(
        chat.create(
            model=model,
            messages=messages,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


@pytest.mark.parametrize("stream", [False, True], ids=["invoke", "stream"])
def test_a_chat_request_through_a_bedrock_claude(
    h: Harness, aws: FakeUpstream, stream: bool
) -> None:
    aws.script(CLAUDE, Reply("one two three", chunks=3))
    assert _chat_text(h, "claude", "count", stream=stream) == "one two three"
    [record] = aws.requests
    assert record.body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "count"}]}
    ]
    assert record.body["anthropic_version"] == "bedrock-2023-05-31" and "model" not in record.body


@pytest.mark.parametrize("stream", [False, True], ids=["converse", "stream"])
def test_a_converse_target_through_the_chat_and_messages_doors(
    h: Harness, aws: FakeUpstream, stream: bool
) -> None:
    aws.script(LLAMA, Reply("llama says hi", chunks=2), Reply("again", chunks=1))
    messages: Any = [{"role": "user", "content": "hi"}]
    assert _chat_text(h, "llama", "hi", stream=stream) == "llama says hi"
    door = _messages(h).messages.create(model="llama", max_tokens=10, messages=messages)
    assert door.content[0].type == "text" and door.content[0].text == "again"  # type: ignore[union-attr]
    first, _ = aws.requests
    action = "converse-stream" if stream else "converse"
    assert first.path == f"/model/meta.llama3-70b-instruct-v1:0/{action}"
    assert first.body["messages"] == [{"role": "user", "content": [{"text": "hi"}]}]
    assert first.headers["authorization"] == f"Bearer {API_KEY}"  # a Bedrock API key


def test_a_wrong_secret_is_refused_and_the_provider_disabled(h: Harness, aws: FakeUpstream) -> None:
    h.configure(_config(aws, secret="bdrk/not+the+secret/000000000000000"))
    failed = h.client().chat.completions.with_raw_response
    with pytest.raises(Exception) as caught:
        failed.create(model="claude", messages=[{"role": "user", "content": "hi"}])
    text = str(caught.value)
    assert "signature" in text.lower() and SECRET not in text
    assert aws.requests == []  # refused at the door, as AWS does
    [disabled] = [e for e in h.events(HealthEvent, at_least=1) if e.kind is EventKind.DISABLED]
    assert disabled.provider == "claude-bedrock" and disabled.code == "AUTH"


def test_the_credential_chain_reads_the_environment(
    h: Harness, aws: FakeUpstream, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    h.configure(_config(aws, keys=False, name="claude-env"))
    aws.script(CLAUDE, Reply("signed from the environment"))
    answer = h.client().chat.completions.create(
        model="claude", messages=[{"role": "user", "content": "hi"}]
    )
    assert answer.choices[0].message.content == "signed from the environment"
    assert KEY_ID in aws.requests[0].headers["authorization"]


def test_no_credentials_anywhere_is_an_auth_failure_naming_the_provider(
    h: Harness, aws: FakeUpstream, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    h.configure(_config(aws, keys=False, name="claude-nokeys"))
    response = httpx.post(
        f"{h.gateway.base_url}/chat/completions",
        json={"model": "claude", "messages": [{"role": "user", "content": "hi"}]},
        headers={"authorization": f"Bearer {h.key}"},
        timeout=30,
    )
    assert response.status_code >= 500
    assert "no AWS credentials found for provider claude-nokeys" in response.text
    assert aws.requests == []


@pytest.mark.parametrize("exception", ["serviceUnavailableException", "throttlingException"])
def test_an_exception_frame_before_the_commit_point_is_retried(
    h: Harness, aws: FakeUpstream, exception: str
) -> None:
    aws.script(CLAUDE, StreamError(chunks=0, exception=exception), Reply("after the retry"))
    chunks = list(
        h.client().chat.completions.create(
            model="claude", messages=[{"role": "user", "content": "hi"}], stream=True
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "after the retry" and aws.count(CLAUDE) == 2


def test_an_exception_frame_before_the_commit_point_switches(h: Harness, aws: FakeUpstream) -> None:
    failing = StreamError(chunks=0, exception="modelStreamErrorException")
    aws.script(CLAUDE, failing, then=failing)
    aws.script(LLAMA, Reply("the second target", chunks=2))
    chunks = list(
        h.client().chat.completions.create(
            model="claude-then-llama", messages=[{"role": "user", "content": "hi"}], stream=True
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "the second target"


def test_an_exception_frame_after_the_commit_point_is_the_doors_error_event(
    h: Harness, aws: FakeUpstream
) -> None:
    aws.script(CLAUDE, StreamError(chunks=2, exception="modelStreamErrorException"))
    response = httpx.post(
        f"{h.gateway.url}/v1/messages",
        json={
            "model": "claude",
            "max_tokens": 50,
            "stream": True,
            "messages": [{"role": "user", "content": "hi"}],
        },
        headers={"x-api-key": h.key, "anthropic-version": "2023-06-01"},
        timeout=30,
    )
    text = response.text
    assert "content_block_delta" in text  # committed: the client had content
    assert "event: error" in text and "message_stop" not in text


@pytest.mark.parametrize(
    ("fail", "code"),
    [
        (Fail(429, "Too many tokens, please wait."), "RATE_LIMIT"),
        (Fail(503, "Service unavailable"), "SERVER"),
        (Fail(429, "Model is not ready", type="ModelNotReadyException"), "SERVER"),
        (Fail(500, "internal"), "SERVER"),
        (Fail(403, "You don't have access to the model", type="AccessDeniedException"), "AUTH"),
        (Fail(400, "Malformed input request", type="ValidationException"), "BAD_REQUEST"),
    ],
)
def test_bedrocks_errors_are_classified_per_section_19(
    h: Harness, aws: FakeUpstream, fail: Fail, code: str
) -> None:
    from routing.gateway.events import CallRecord

    aws.script(CLAUDE, fail, then=fail)
    response = httpx.post(
        f"{h.gateway.base_url}/chat/completions",
        json={"model": "claude", "messages": [{"role": "user", "content": "hi"}]},
        headers={"authorization": f"Bearer {h.key}"},
        timeout=30,
    )
    assert response.status_code >= 400
    [call] = h.events(CallRecord, at_least=1)
    assert call.attempts[-1].code == code, call.attempts


def test_claude_fails_over_from_anthropics_api_to_bedrock(h: Harness, aws: FakeUpstream) -> None:
    overloaded = Fail(529, "Overloaded", type="overloaded_error")
    h.upstream.script("claude-down", overloaded, then=overloaded)
    aws.script(CLAUDE, Reply("the same Claude, on Bedrock"))
    answer = _claude_code_turn(h, stream=True, model="claude-anywhere")
    assert answer.content[0].text == "the same Claude, on Bedrock"  # type: ignore[union-attr]
    assert h.upstream.count("claude-down") >= 1 and aws.count(CLAUDE) == 1


def test_no_credential_text_in_the_ledger_events_logs_or_errors(
    h: Harness, aws: FakeUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    writer.attach(h.runtime.hub)  # type: ignore[attr-defined]
    aws.script(
        CLAUDE, Fail(403, f"The key {SECRET} {API_KEY} is refused", type="AccessDeniedException")
    )
    aws.script(LLAMA, StreamError(chunks=1, message=f"echo {API_KEY}"))
    seen = []
    for model, stream in (("claude", False), ("llama", True)):
        seen.append(
            httpx.post(
                f"{h.gateway.base_url}/chat/completions",
                json={
                    "model": model,
                    "stream": stream,
                    "messages": [{"role": "user", "content": "hi"}],
                },
                headers={"authorization": f"Bearer {h.key}"},
                timeout=30,
            ).text
        )
    assert writer.flush(10)
    texts = {
        "errors": "\n".join(seen),
        "events": "\n".join(repr(e) for e in h.runtime.hub.recent),  # type: ignore[attr-defined]
        "logs": "\n".join(f"{r.getMessage()} {r.exc_text or ''}" for r in caplog.records),
        "ledger": database_dump(),
    }
    assert "[redacted]" in texts["errors"]
    for where, text in texts.items():
        for secret in (SECRET, API_KEY, SECRET[5:20], API_KEY[6:20]):
            assert secret not in text, f"a credential leaked into {where}"


def test_count_tokens_asks_bedrocks_count_tokens(h: Harness, aws: FakeUpstream) -> None:
    response = httpx.post(
        f"{h.gateway.url}/v1/messages/count_tokens",
        json={"model": "claude", "messages": [{"role": "user", "content": "four words to count"}]},
        headers={"x-api-key": h.key, "anthropic-version": "2023-06-01"},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    assert response.json() == {"input_tokens": 4}  # the simulator's count, not an estimate
    assert "x-switchyard-estimate" not in response.headers
    assert response.headers["x-switchyard-target"] == f"claude-bedrock/{CLAUDE}"


def test_the_api_refuses_a_bedrock_provider_missing_what_it_needs(api: Api) -> None:
    base = {"name": "cb", "kind": "anthropic", "platform": "bedrock"}
    refused = api.post("/providers", base)
    assert refused.status_code == 422
    assert "region" in {e["loc"][-1] for e in refused.json()["detail"]}
    wrong = api.post("/providers", {**base, "region": "moon-base"})
    assert (
        wrong.status_code == 422
        and "is not a region of platform 'bedrock'" in wrong.content.decode()
    )
    half = api.post("/providers", {**base, "region": "us-east-1", "aws_access_key_id": KEY_ID})
    assert half.status_code == 422 and "aws_secret_access_key" in half.content.decode()
    chat = api.post("/providers", {**base, "kind": "openai", "region": "us-east-1"})
    assert chat.status_code == 422 and "kind" in chat.content.decode()
    assert not Provider.objects.exists()  # bad input changes nothing


def test_the_test_button_signs_its_ping_and_no_secret_is_shown(api: Api, aws: FakeUpstream) -> None:
    aws.reset()
    made = api.post(
        "/providers",
        {
            "name": "claude-bedrock",
            "kind": "anthropic",
            "platform": "bedrock",
            "region": "us-east-1",
            "base_url": aws.root_url,
            "aws_access_key_id": KEY_ID,
            "aws_secret_access_key": SECRET,
            "models": [CLAUDE],
        },
    )
    assert made.status_code == 201, made.content
    assert SECRET not in made.content.decode() and KEY_ID not in made.content.decode()
    result = api.post("/providers/claude-bedrock/test").json()
    assert result["ok"] is True and result["status"] == 200, result
    [record] = aws.requests
    assert record.path == f"{CLAUDE_PATH}/invoke" and record.body["max_tokens"] == 1
    assert "model" not in record.body
    exported = api.get("/config/export").content.decode()
    assert SECRET not in exported and "${CLAUDE_BEDROCK_AWS_SECRET_ACCESS_KEY}" in exported
