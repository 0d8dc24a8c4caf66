"""Vertex AI targets (SPEC §19) through the gateway's doors, against the simulator over real
sockets: Claude on Vertex streamed and not, Gemini on Vertex, count tokens, one token for
many calls, a credential that cannot be had, each §19 error mapped, a failover from
Anthropic's API answering 529 to the same Claude on Vertex, and no token or key in what
the gateway keeps or says."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from pathlib import Path
from typing import Any

import anthropic
import httpx
import pytest

from routing.audit import writer
from routing.gateway.events import CallRecord
from routing.platforms.google_auth import MUST_REFRESH_S
from routing.simulator import Fail, Reply
from tests.api.conftest import database_dump
from tests.conftest import Harness
from tests.platforms.accounts import private_pem, write_service_account

CLAUDE = "claude-sonnet-4-5@20250929"
PREFIX = "/v1/projects/sim-project/locations/us-east5/publishers"
CONFIG = """
providers:
  - name: claude-api
    kind: anthropic
    base_url: {root}
    api_key: anthropic-direct-key-5d1c
  - name: claude-vertex
    kind: anthropic
    platform: vertex
    base_url: {root}
    project: sim-project
    region: us-east5
    credentials_file: {account}
    models: [CLAUDE]
  - name: gemini-vertex
    kind: gemini
    platform: vertex
    base_url: {root}
    project: sim-project
    region: global
    credentials_file: {account}
groups:
  - name: claude
    targets:
      - {provider: claude-api, model: claude-sonnet-4-5}
      - {provider: claude-vertex, model: CLAUDE}
  - name: claude-on-vertex
    targets:
      - {provider: claude-vertex, model: CLAUDE}
  - name: gemini-on-vertex
    targets:
      - {provider: gemini-vertex, model: gemini-2.5-pro}
""".replace("CLAUDE", CLAUDE)


def _configure(h: Harness, account: Path) -> None:
    root = h.upstream.root_url
    h.configure(CONFIG.replace("{root}", root).replace("{account}", str(account)))


@pytest.fixture
def h(harness: Harness, tmp_path: Path) -> Harness:
    _configure(harness, write_service_account(harness.upstream, tmp_path))
    return harness


def _messages(h: Harness) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=h.gateway.url, api_key=h.key, max_retries=0)


def _vertex_records(h: Harness) -> list[Any]:
    return [r for r in h.upstream.requests if r.path.startswith("/v1/projects/")]


def test_claude_on_vertex_answers_the_messages_door(h: Harness) -> None:
    h.upstream.script(CLAUDE, Reply("hello from vertex"))
    reply = _messages(h).messages.create(
        model="claude-on-vertex",
        max_tokens=50,
        messages=[{"role": "user", "content": "hi"}],
        extra_headers={"anthropic-beta": "context-1m-2025-08-07"},
    )
    assert reply.content[0].text == "hello from vertex"  # type: ignore[union-attr]
    [record] = h.upstream.requests
    assert record.path == f"{PREFIX}/anthropic/models/{CLAUDE}:rawPredict"
    assert "model" not in record.body
    assert record.body["anthropic_version"] == "vertex-2023-10-16"
    assert record.body["messages"] == [{"role": "user", "content": "hi"}]
    assert record.headers["authorization"].startswith("Bearer ya29.sim-")
    assert "x-api-key" not in record.headers
    assert record.headers["anthropic-beta"] == "context-1m-2025-08-07"  # betas as a header


def test_claude_on_vertex_streams(h: Harness) -> None:
    h.upstream.script(CLAUDE, Reply("one two three", chunks=3))
    with _messages(h).messages.stream(
        model="claude-on-vertex", max_tokens=50, messages=[{"role": "user", "content": "hi"}]
    ) as stream:
        text = "".join(stream.text_stream)
    assert text == "one two three"
    [record] = h.upstream.requests
    assert record.path == f"{PREFIX}/anthropic/models/{CLAUDE}:streamRawPredict"
    assert record.body["stream"] is True and "model" not in record.body


def test_gemini_on_vertex_through_the_chat_door(h: Harness) -> None:
    h.upstream.script("gemini-2.5-pro", Reply("hi from gemini"), Reply("a b", chunks=2))
    answer = h.client().chat.completions.create(
        model="gemini-on-vertex", messages=[{"role": "user", "content": "hi"}]
    )
    assert answer.choices[0].message.content == "hi from gemini"
    chunks = list(
        h.client().chat.completions.create(
            model="gemini-on-vertex", messages=[{"role": "user", "content": "hi"}], stream=True
        )
    )
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "a b"
    first, second = h.upstream.requests
    google = "/v1/projects/sim-project/locations/global/publishers/google/models/gemini-2.5-pro"
    assert first.path == f"{google}:generateContent"
    assert second.path == f"{google}:streamGenerateContent"
    assert first.body["contents"] == [{"role": "user", "parts": [{"text": "hi"}]}]
    assert first.headers["authorization"].startswith("Bearer ya29.sim-")
    assert "x-goog-api-key" not in first.headers


def test_count_tokens_on_vertex(h: Harness) -> None:
    counted = _messages(h).messages.count_tokens(
        model="claude-on-vertex", messages=[{"role": "user", "content": "hello there"}]
    )
    assert counted.input_tokens >= 1
    [record] = h.upstream.requests
    assert record.path == f"{PREFIX}/anthropic/models/count-tokens:rawPredict"
    assert record.body["model"] == CLAUDE
    assert record.body["anthropic_version"] == "vertex-2023-10-16"


def test_one_token_serves_many_calls(h: Harness) -> None:
    async def many() -> None:
        client = anthropic.AsyncAnthropic(base_url=h.gateway.url, api_key=h.key, max_retries=0)
        await asyncio.gather(
            *(
                client.messages.create(
                    model="claude-on-vertex",
                    max_tokens=10,
                    messages=[{"role": "user", "content": f"call {n}"}],
                )
                for n in range(12)
            )
        )
        await client.close()

    asyncio.run(many())
    assert h.upstream.count(CLAUDE) == 12
    assert h.upstream.google.fetches == 1
    assert len({r.headers["authorization"] for r in h.upstream.requests}) == 1


def test_the_token_is_refreshed_before_it_expires_on_the_runtimes_clock(h: Harness) -> None:
    h.upstream.google.expires_in = 3600
    now = [time.time()]
    wall = h.runtime.clock  # type: ignore[attr-defined]
    h.runtime.clock = lambda: now[0]  # type: ignore[attr-defined]
    try:
        assert _ask_vertex(h).status_code == 200
        now[0] += 3600 - MUST_REFRESH_S + 20  # 40 s left: the next call waits for a new one
        assert _ask_vertex(h).status_code == 200
        assert _ask_vertex(h).status_code == 200  # the new one, cached
    finally:
        h.runtime.clock = wall  # type: ignore[attr-defined]
    first, second, third = (r.headers["authorization"] for r in _vertex_records(h))
    assert first != second == third
    assert h.upstream.google.fetches == 2


def test_anthropic_529_fails_over_to_the_same_claude_on_vertex(h: Harness) -> None:
    h.upstream.script("claude-sonnet-4-5", then=Fail(529, "Overloaded"))  # and its retry
    h.upstream.script(CLAUDE, Reply("vertex took the turn"))
    raw = _messages(h).messages.with_raw_response.create(
        model="claude", max_tokens=50, messages=[{"role": "user", "content": "hi"}]
    )
    assert raw.parse().content[0].text == "vertex took the turn"  # type: ignore[union-attr]
    *direct, on_vertex = h.upstream.requests
    assert direct and {(r.path, r.body["model"]) for r in direct} == {
        ("/v1/messages", "claude-sonnet-4-5")
    }
    assert on_vertex.path == f"{PREFIX}/anthropic/models/{CLAUDE}:rawPredict"
    assert "model" not in on_vertex.body and "anthropic-version" not in on_vertex.body
    trail = raw.headers["x-switchyard-trail"]
    assert "SERVER:529" in trail and trail.endswith(":ok")


def _ask_vertex(h: Harness) -> httpx.Response:
    """A plain Messages call to the group of Claude on Vertex (the trail header read)."""
    return httpx.post(
        f"{h.gateway.url}/v1/messages",
        headers={"x-api-key": h.key, "anthropic-version": "2023-06-01"},
        json={
            "model": "claude-on-vertex",
            "max_tokens": 5,
            "messages": [{"role": "user", "content": "hi"}],
        },
        timeout=10,
    )


def _google(status: int, name: str, message: str) -> str:
    return json.dumps({"error": {"code": status, "message": message, "status": name}})


@pytest.mark.parametrize(
    ("status", "name", "message", "code"),
    [
        (
            429,
            "RESOURCE_EXHAUSTED",
            "Quota exceeded for online_prediction_requests_per_base_model.",
            "RATE_LIMIT",
        ),
        (
            429,
            "RESOURCE_EXHAUSTED",
            "The billing account's prepayment credits are depleted.",
            "QUOTA",
        ),
        (503, "UNAVAILABLE", "The service is currently unavailable.", "SERVER"),
        (403, "PERMISSION_DENIED", "Permission 'aiplatform.endpoints.predict' denied.", "AUTH"),
        (401, "UNAUTHENTICATED", "Request had invalid authentication credentials.", "AUTH"),
    ],
)
def test_each_section_19_error_is_mapped(
    h: Harness, status: int, name: str, message: str, code: str
) -> None:
    h.upstream.script(CLAUDE, then=Fail(status, body=_google(status, name, message)))
    response = _ask_vertex(h)
    assert response.status_code >= 400
    assert f"{code}:{status}" in response.headers["x-switchyard-trail"]


def test_claudes_own_error_through_vertex_is_read_as_anthropics(h: Harness) -> None:
    h.upstream.script(CLAUDE, then=Fail(529, "Overloaded"))  # {"type": "error", ...}
    response = _ask_vertex(h)
    assert response.status_code >= 500
    assert "SERVER:529" in response.headers["x-switchyard-trail"]
    assert response.json()["type"] == "error"  # the Messages door's own shape


def test_a_credential_that_cannot_be_had_is_auth_naming_the_provider(
    harness: Harness, tmp_path: Path
) -> None:
    unknown = write_service_account(
        harness.upstream,
        tmp_path,
        email="stranger@sim-project.iam.gserviceaccount.com",
        register=False,
    )
    _configure(harness, unknown)
    response = _ask_vertex(harness)
    assert response.status_code >= 500
    assert "AUTH" in response.headers["x-switchyard-trail"]
    message = response.json()["error"]["message"]
    assert "claude-vertex" in message and "invalid_grant" in message
    assert _vertex_records(harness) == []  # no model call without a token
    assert harness.upstream.google.refusals == 1


def test_no_token_or_key_text_is_kept_or_said(h: Harness, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    writer.attach(h.runtime.hub)  # type: ignore[attr-defined]
    seen: list[str] = []
    h.upstream.script(CLAUDE, Reply("fine"))
    ok = _ask_vertex(h)
    assert ok.status_code == 200
    h.upstream.google.revoke_all()  # the next call presents a dead token: Vertex echoes it
    refused = _ask_vertex(h)
    seen += [ok.text, str(ok.headers), refused.text, str(refused.headers)]
    assert refused.status_code >= 400 and "AUTH:401" in refused.headers["x-switchyard-trail"]
    echoed = [r for r in h.upstream.requests if r.path.startswith("/v1/projects/")]
    assert len(echoed) == 2
    assert writer.flush(10)
    texts = {
        "responses": "\n".join(seen),
        "events": "\n".join(repr(e) for e in h.runtime.hub.recent),  # type: ignore[attr-defined]
        "logs": "\n".join(f"{r.name} {r.getMessage()} {r.exc_text or ''}" for r in caplog.records),
        "database": database_dump(),
    }
    assert h.events(CallRecord, at_least=2)
    assert "[token]" in texts["responses"] or "[token]" in texts["events"]  # a scrub happened
    tokens = h.upstream.google.issued()
    assert tokens
    key_body = private_pem().splitlines()[5]
    for where, text in texts.items():
        assert "ya29." not in text, f"an access token leaked into {where}"
        for token in tokens:
            assert token[5:] not in text, f"an access token leaked into {where}"
        assert key_body not in text, f"the private key leaked into {where}"


def _refusals(text: str) -> set[str]:
    from routing.config.errors import ConfigError
    from routing.config.yaml import load_text

    with pytest.raises(ConfigError) as refused:
        load_text(text)
    return {str(error) for error in refused.value.errors}


@pytest.mark.django_db
def test_a_vertex_provider_is_refused_at_load_with_the_field_named(tmp_path: Path) -> None:
    head = "providers:\n  - {name: v, kind: anthropic, platform: vertex"
    assert _refusals(head + "}\n") == {
        "providers.0.project: platform 'vertex' needs a project",
        "providers.0.region: platform 'vertex' needs a region",
    }
    assert _refusals(head + ", project: my-proj, region: moon-base}\n") == {
        "providers.0.region: 'moon-base' is not a region of platform 'vertex'"
    }
    missing = tmp_path / "absent.json"
    unreadable = _refusals(
        head + f", project: my-proj, region: us-east5, credentials_file: {missing}}}\n"
    )
    assert unreadable == {f"providers.0.credentials_file: {missing} does not exist"}
    openai = "providers:\n  - {name: v, kind: openai, platform: vertex, project: p-roj1, region: global}\n"
    assert _refusals(openai) == {
        "providers.0.kind: platform 'vertex' carries anthropic, gemini, not 'openai'"
    }
    from routing.models import Provider

    assert not Provider.objects.exists()  # nothing applied


@pytest.mark.django_db
def test_a_vertex_provider_loads_without_a_base_url_and_exports_back(tmp_path: Path) -> None:
    from routing.config.export import export_config
    from routing.config.yaml import load_text
    from routing.services.config_file import config_apply

    account = tmp_path / "sa.json"
    info = {"type": "service_account", "client_email": "a@b.iam", "token_uri": "http://t/token"}
    account.write_text(json.dumps({**info, "private_key": private_pem()}))
    config_apply(
        load_text(
            "providers:\n  - {name: v, kind: gemini, platform: vertex, project: my-proj,"
            f" region: europe-west4, credentials_file: {account}}}\n"
        ),
        source="test",
    )
    exported = export_config()
    assert "platform: vertex" in exported and "region: europe-west4" in exported
    assert "PRIVATE KEY" not in exported
    [provider] = load_text(exported).providers
    assert provider.platform == "vertex" and provider.credentials_file == str(account)


def test_the_test_button_reaches_claude_on_vertex(h: Harness) -> None:
    from routing.services.api_keys import generate_key
    from tests.api.conftest import API

    _, admin = generate_key(name="ops", kind="admin")
    tested = httpx.post(
        f"{h.gateway.url}{API}/providers/claude-vertex/test",
        headers={"authorization": f"Bearer {admin}"},
        timeout=10,
    )
    assert tested.status_code == 200 and tested.json()["ok"] is True, tested.text
    [record] = h.upstream.requests
    assert record.path == f"{PREFIX}/anthropic/models/{CLAUDE}:rawPredict"
    assert record.body["anthropic_version"] == "vertex-2023-10-16" and "model" not in record.body
    assert record.headers["authorization"].startswith("Bearer ya29.sim-")
