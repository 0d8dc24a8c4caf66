"""The simulator speaks Azure OpenAI (routing.simulator.azure): the resource's v1 API with
its ``api-key`` or an Entra token, and a managed identity's token endpoint that the real
azure-identity library fetches from over loopback."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest
from azure.identity.aio import DefaultAzureCredential, ManagedIdentityCredential

from routing.simulator import FakeUpstream, Reply
from routing.simulator.azure import COGNITIVE_SERVICES, content_filter_fail


@pytest.fixture
def up(upstream: FakeUpstream) -> Iterator[FakeUpstream]:
    upstream.reset()
    yield upstream
    upstream.reset()


def azure(up: FakeUpstream) -> str:
    return up.root_url + "/openai/v1"


def test_chat_and_responses_answer_with_the_api_key(up: FakeUpstream) -> None:
    up.azure.api_key = "azure-key-1"
    chat = httpx.post(
        azure(up) + "/chat/completions",
        json={"model": "gpt-deploy", "messages": [{"role": "user", "content": "hi"}]},
        headers={"api-key": "azure-key-1"},
    )
    assert chat.status_code == 200 and chat.json()["object"] == "chat.completion"
    responses = httpx.post(
        azure(up) + "/responses",
        json={"model": "gpt-deploy", "input": "hi"},
        headers={"api-key": "azure-key-1"},
    )
    assert responses.status_code == 200 and responses.json()["object"] == "response"
    assert [r.path for r in up.requests] == ["/openai/v1/chat/completions", "/openai/v1/responses"]
    embeddings = httpx.post(
        azure(up) + "/embeddings",
        json={"model": "emb", "input": ["a", "b"]},
        headers={"api-key": "azure-key-1"},
    )
    assert len(embeddings.json()["data"]) == 2


@pytest.mark.parametrize(
    "headers",
    [
        {"api-key": "not-my-key-42"},
        {"api-key": ""},
        {"Authorization": "Bearer azure-key-1"},  # a key is not a token
        {},
    ],
)
def test_anything_but_the_key_or_an_issued_token_is_azures_401(
    up: FakeUpstream, headers: dict[str, str]
) -> None:
    up.azure.api_key = "azure-key-1"
    answer = httpx.post(
        azure(up) + "/chat/completions",
        json={"model": "gpt-deploy", "messages": [{"role": "user", "content": "hi"}]},
        headers=headers,
    )
    assert answer.status_code == 401
    assert answer.json()["error"]["code"] == "401"
    assert "not-my-key-42" not in answer.text and "azure-key-1" not in answer.text  # no echo
    assert up.count("gpt-deploy") == 1  # recorded like any request


def test_an_unknown_deployment_and_a_content_filter_in_azures_shapes(up: FakeUpstream) -> None:
    up.azure.deployments = {"gpt-deploy"}
    body = {"model": "other", "messages": [{"role": "user", "content": "hi"}]}
    gone = httpx.post(azure(up) + "/chat/completions", json=body, headers={"api-key": "k"})
    assert gone.status_code == 404 and gone.json()["error"]["code"] == "DeploymentNotFound"
    up.script("gpt-deploy", content_filter_fail())
    body["model"] = "gpt-deploy"
    refused = httpx.post(azure(up) + "/chat/completions", json=body, headers={"api-key": "k"})
    error = refused.json()["error"]
    assert refused.status_code == 400 and error["code"] == "content_filter"
    assert error["innererror"]["code"] == "ResponsibleAIPolicyViolation"


def test_azure_identity_fetches_tokens_from_the_simulator(
    up: FakeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real library, pointed at the simulator the way App Service points it at its
    managed-identity endpoint: its token opens the v1 API; expired, it does not."""
    monkeypatch.setenv("IDENTITY_ENDPOINT", up.root_url + "/msi/token")
    monkeypatch.setenv("IDENTITY_HEADER", up.azure.identity_header)

    async def fetch() -> tuple[str, int]:
        async with DefaultAzureCredential() as credential:
            token = await credential.get_token(COGNITIVE_SERVICES + "/.default")
        return token.token, token.expires_on

    token, expires_on = asyncio.run(fetch())
    assert up.azure.token_requests == 1 and token in up.azure.issued
    assert expires_on == up.azure.issued[token]
    body = {"model": "gpt-deploy", "messages": [{"role": "user", "content": "hi"}]}
    bearer = {"Authorization": f"Bearer {token}"}
    assert httpx.post(azure(up) + "/chat/completions", json=body, headers=bearer).is_success
    up.azure.clock = lambda: expires_on + 1.0
    assert httpx.post(azure(up) + "/chat/completions", json=body, headers=bearer).status_code == 401


def test_a_wrong_identity_header_is_refused(
    up: FakeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    from azure.core.exceptions import ClientAuthenticationError

    monkeypatch.setenv("IDENTITY_ENDPOINT", up.root_url + "/msi/token")
    monkeypatch.setenv("IDENTITY_HEADER", "not-the-header")

    async def fetch() -> None:
        async with ManagedIdentityCredential() as credential:
            await credential.get_token(COGNITIVE_SERVICES + "/.default")

    with pytest.raises(ClientAuthenticationError):
        asyncio.run(fetch())
    assert up.azure.token_requests == 0


def test_azure_streams_chat_and_responses(up: FakeUpstream) -> None:
    up.script("gpt-deploy", Reply("one two three"), Reply("four"))
    with httpx.stream(
        "POST",
        azure(up) + "/chat/completions",
        json={
            "model": "gpt-deploy",
            "stream": True,
            "messages": [{"role": "user", "content": "x"}],
        },
        headers={"api-key": "k"},
    ) as chat:
        assert "chat.completion.chunk" in chat.read().decode()
    with httpx.stream(
        "POST",
        azure(up) + "/responses",
        json={"model": "gpt-deploy", "stream": True, "input": "x"},
        headers={"api-key": "k"},
    ) as responses:
        assert "event: response.completed" in responses.read().decode()


def test_another_process_sets_azure_through_the_control_api(up: FakeUpstream) -> None:
    control = up.root_url + "/_control/azure"
    set_ = httpx.post(control, json={"api_key": "k2", "deployments": ["d1"]})
    assert set_.json() == {"api_key_set": True, "deployments": ["d1"], "token_requests": 0}
    body = {"model": "d1", "messages": [{"role": "user", "content": "hi"}]}
    assert httpx.post(
        azure(up) + "/chat/completions", json=body, headers={"api-key": "k2"}
    ).is_success
    assert httpx.post(control, json={"api_key": 5}).status_code == 400
    assert httpx.post(control, json={"tenant": "x"}).status_code == 400
    assert httpx.post(control, json=["x"]).status_code == 400
    httpx.post(up.root_url + "/_control/reset")
    assert httpx.get(control).json()["api_key_set"] is False
