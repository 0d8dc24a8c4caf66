"""Azure OpenAI targets over real sockets (SPEC §19): the ``openai`` SDK → Switchyard → the
simulator's Azure routes (``/openai/v1/…``), which record what each attempt sent.

Chat and Responses through a deployment, streamed and not; a wrong key is AUTH and
disables the provider as any rejected key does; openai-direct's 500 fails over to Azure;
Entra ID tokens come from the real azure-identity library (the simulator is an App Service
managed-identity endpoint) and one fetch serves many calls; neither the key nor a token
reaches a reply, the ledger, an event, a log line or the export.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from io import StringIO

import httpx
import openai
import pytest
from django.core.management import call_command

from routing.audit import writer
from routing.simulator.script import Fail, KeyEcho, Reply
from tests.api.conftest import database_dump
from tests.api.test_credential_scan import _seen
from tests.conftest import Harness, off_loop

KEY = "azure-key-7c1e5a9d3b2f8e6a"
CONFIG = f"""
providers:
  - {{name: direct, kind: openai, base_url: "{{upstream}}", api_key: upstream-key-direct}}
  - name: az
    kind: openai
    platform: azure
    base_url: "{{root}}/openai/v1"
    api_key: {KEY}
    models: [gpt-deploy, gpt-deploy-f]  # its deployments (Azure lists none)
  - name: az-resp
    kind: openai-responses
    platform: azure
    base_url: "{{root}}/openai/v1"
    api_key: {KEY}
  - name: az-entra
    kind: openai
    platform: azure
    base_url: "{{root}}/openai/v1"
    entra: true
    models: [gpt-entra]
groups:
  - name: chat
    targets: [{{provider: az, model: gpt-deploy}}]
  - name: resp
    targets: [{{provider: az-resp, model: gpt-deploy-r}}]
  - name: failover
    retry: {{max_retries: 0}}
    targets:
      - {{provider: direct, model: gpt-direct}}
      - {{provider: az, model: gpt-deploy-f}}
  - name: entra
    targets: [{{provider: az-entra, model: gpt-entra}}]
"""
MESSAGES: list[dict[str, str]] = [{"role": "user", "content": "hi"}]


@pytest.fixture
def h(harness: Harness) -> Iterator[Harness]:
    harness.configure(CONFIG.replace("{root}", harness.upstream.root_url))
    harness.runtime.rand = lambda: 0.5  # type: ignore[attr-defined]
    yield harness
    runtime, loop = harness.runtime, harness.gateway.loop
    import asyncio

    asyncio.run_coroutine_threadsafe(runtime.aclose(), loop).result(timeout=10)  # type: ignore[attr-defined]


@pytest.fixture
def identity(h: Harness, monkeypatch: pytest.MonkeyPatch) -> Harness:
    """The simulator as the gateway's managed identity (App Service's endpoint), where
    DefaultAzureCredential finds it."""
    monkeypatch.setenv("AZURE_TOKEN_CREDENTIALS", "ManagedIdentityCredential")
    monkeypatch.setenv("IDENTITY_ENDPOINT", h.upstream.root_url + "/msi/token")
    monkeypatch.setenv("IDENTITY_HEADER", h.upstream.azure.identity_header)
    return h


def sent(h: Harness, model: str) -> tuple[str, dict[str, str], dict[str, object]]:
    [record] = [r for r in h.upstream.requests if r.model == model]
    return record.path, record.headers, record.body


@pytest.mark.parametrize("stream", [False, True])
def test_chat_through_an_azure_deployment(h: Harness, stream: bool) -> None:
    h.upstream.azure.api_key = KEY
    h.upstream.script("gpt-deploy", Reply("from azure"))
    if stream:
        chunks = list(
            h.client().chat.completions.create(model="chat", messages=MESSAGES, stream=True)
        )  # type: ignore[arg-type]
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    else:
        text = (
            h.client()
            .chat.completions.create(model="chat", messages=MESSAGES)
            .choices[0]
            .message.content
        )  # type: ignore[arg-type, assignment]
    assert text == "from azure"
    path, headers, body = sent(h, "gpt-deploy")
    assert path == "/openai/v1/chat/completions" and body["model"] == "gpt-deploy"
    assert headers["api-key"] == KEY and "authorization" not in headers
    assert "api-version" not in path


@pytest.mark.parametrize("stream", [False, True])
def test_responses_through_an_azure_deployment(h: Harness, stream: bool) -> None:
    h.upstream.azure.api_key = KEY
    h.upstream.script("gpt-deploy-r", Reply("from azure responses"))
    client = h.client()
    if stream:
        events = list(client.responses.create(model="resp", input="hi", stream=True))
        [done] = [e for e in events if e.type == "response.completed"]
        text = done.response.output_text
    else:
        text = client.responses.create(model="resp", input="hi").output_text
    assert text == "from azure responses"
    path, headers, _ = sent(h, "gpt-deploy-r")
    assert path == "/openai/v1/responses"
    assert headers["api-key"] == KEY


def test_a_wrong_key_is_auth_and_disables_the_provider(h: Harness) -> None:
    h.upstream.azure.api_key = "the-resources-real-key"
    with pytest.raises(openai.APIStatusError) as first:
        h.client().chat.completions.create(model="chat", messages=MESSAGES)  # type: ignore[arg-type]
    assert first.value.status_code == 502
    with pytest.raises(openai.APIStatusError) as second:
        h.client().chat.completions.create(model="chat", messages=MESSAGES)  # type: ignore[arg-type]
    assert second.value.status_code == 503
    assert "az/gpt-deploy → disabled: AUTH" in second.value.message
    assert KEY not in second.value.message
    assert h.upstream.count("gpt-deploy") == 1  # disabled: the second call never went


def test_openai_direct_500_fails_over_to_azure(h: Harness) -> None:
    h.upstream.script("gpt-direct", Fail(500, "The server had an error"))
    h.upstream.script("gpt-deploy-f", Reply("azure took it"))
    raw = h.client().chat.completions.with_raw_response.create(model="failover", messages=MESSAGES)  # type: ignore[arg-type]
    assert raw.parse().choices[0].message.content == "azure took it"
    assert raw.headers["x-switchyard-target"] == "az/gpt-deploy-f"
    assert sent(h, "gpt-direct")[1]["authorization"] == "Bearer upstream-key-direct"
    assert sent(h, "gpt-deploy-f")[1]["api-key"] == KEY


def test_entra_fetches_one_token_for_many_calls(identity: Harness) -> None:
    h = identity
    h.upstream.script("gpt-entra", then=Reply("entra ok"))
    for _ in range(8):
        answer = h.client().chat.completions.create(model="entra", messages=MESSAGES)  # type: ignore[arg-type]
        assert answer.choices[0].message.content == "entra ok"
    list(h.client().chat.completions.create(model="entra", messages=MESSAGES, stream=True))  # type: ignore[arg-type]
    assert h.upstream.azure.token_requests == 1
    [token] = h.upstream.azure.issued
    records = [r for r in h.upstream.requests if r.model == "gpt-entra"]
    assert len(records) == 9
    assert {r.headers["authorization"] for r in records} == {f"Bearer {token}"}
    assert not any("api-key" in r.headers for r in records)


def test_entra_without_an_identity_is_auth_naming_the_provider(
    identity: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    h = identity
    monkeypatch.setenv("IDENTITY_HEADER", "not-the-identity-header")
    with pytest.raises(openai.APIStatusError) as failed:
        h.client().chat.completions.create(model="entra", messages=MESSAGES)  # type: ignore[arg-type]
    assert failed.value.status_code == 502
    assert h.upstream.count("gpt-entra") == 0  # nothing was sent without a token
    with pytest.raises(openai.APIStatusError) as again:
        h.client().chat.completions.create(model="entra", messages=MESSAGES)  # type: ignore[arg-type]
    assert "az-entra/gpt-entra → disabled: AUTH" in again.value.message
    assert "no Microsoft Entra ID token for provider az-entra" in again.value.message


def test_neither_key_nor_token_leaves_the_gateway(
    identity: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    from routing.services.api_keys import generate_key
    from tests.api.conftest import API

    h = identity
    caplog.set_level(logging.DEBUG)
    writer.attach(h.runtime.hub)  # type: ignore[attr-defined]
    h.upstream.script("gpt-deploy", KeyEcho(header="api-key"), then=Reply("ok"))
    h.upstream.script("gpt-entra", Fail(401, "Unauthorized"), then=Reply("ok"))
    seen: list[str] = []
    _, admin = generate_key(name="ops", kind="admin")
    with (
        httpx.Client(
            base_url=h.gateway.base_url, headers={"authorization": f"Bearer {h.key}"}, timeout=10
        ) as v1,
        httpx.Client(
            base_url=h.gateway.url + API, headers={"authorization": f"Bearer {admin}"}, timeout=10
        ) as api,
    ):
        for group in ("chat", "entra", "chat", "entra"):
            seen.append(
                _seen(v1.post("/chat/completions", json={"model": group, "messages": MESSAGES}))
            )
        assert "Incorrect API key provided: [redacted]" in seen[0]  # the echo was there
        for path in (
            "/status",
            "/calls",
            "/events",
            "/providers",
            "/providers/az",
            "/config/export",
        ):
            seen.append(_seen(api.get(path)))
    [token] = h.upstream.azure.issued
    assert off_loop(lambda: writer.flush(10))
    exported = StringIO()
    call_command("exportconfig", stdout=exported)
    texts = {
        "responses": "\n".join(seen),
        "events": "\n".join(repr(e) for e in h.runtime.hub.recent),  # type: ignore[attr-defined]
        "logs": "\n".join(f"{r.name} {r.getMessage()} {r.exc_text or ''}" for r in caplog.records),
        "database": off_loop(database_dump),
        "export": exported.getvalue(),
    }
    secrets = (KEY, token.removeprefix("sim-entra-"))  # the token's random part
    pieces = {s[i : i + 8] for s in secrets for i in range(len(s) - 7)}
    for where, text in texts.items():
        assert not {p for p in pieces if p in text}, f"a key or token piece leaked into {where}"
    assert "entra: true" in texts["export"]


@pytest.mark.django_db
def test_a_file_names_what_an_azure_provider_lacks() -> None:
    from routing.config.errors import ConfigError
    from routing.config.yaml import load_text

    with pytest.raises(ConfigError) as refused:
        load_text(
            "providers:\n"
            "  - {name: az, kind: anthropic, platform: azure, region: eastus}\n"
            "  - {name: az2, kind: openai, platform: azure, base_url: 'http://x.test/openai/v1', entra: true}\n"
        )
    messages = {str(error) for error in refused.value.errors}
    assert messages == {
        "providers.0.kind: platform 'azure' carries openai, openai-responses, not 'anthropic'",
        "providers.0.base_url: platform 'azure' needs a base_url",
        "providers.0.region: platform 'azure' does not use region",
    }


def test_the_test_button_reaches_azure_as_calls_do(identity: Harness) -> None:
    """The operator's "test" and "refresh models" build the provider's client with its
    platform: the key as api-key, a token for Entra; Azure lists no deployments."""
    from routing.services.api_keys import generate_key
    from tests.api.conftest import API

    h = identity
    h.upstream.azure.api_key = KEY
    _, admin = generate_key(name="ops", kind="admin")
    with httpx.Client(
        base_url=h.gateway.url + API, headers={"authorization": f"Bearer {admin}"}, timeout=10
    ) as api:
        for provider in ("az", "az-entra"):
            tested = api.post(f"/providers/{provider}/test").json()
            assert tested["ok"] is True, tested
        refreshed = api.post("/providers/az/refresh-models")
    assert refreshed.status_code >= 400 and "lists no models" in refreshed.text
    paths = [
        (r.path, "api-key" in r.headers, "authorization" in r.headers) for r in h.upstream.requests
    ]
    assert paths == [
        ("/openai/v1/chat/completions", True, False),
        ("/openai/v1/chat/completions", False, True),
    ]
