"""Microsoft Entra ID tokens for Azure OpenAI (routing.platforms.azure.EntraToken): one
fetch serves many calls, refreshed before expiry, and a failure is an AUTH failure that
names the provider and what to fix.

Two seams: the real azure-identity ``DefaultAzureCredential`` fetching from the simulator's
managed-identity endpoint over loopback (what the gateway runs), and a credential object
the test provides, whose tokens' lifetimes the test sets, with the clock moved by hand —
azure-identity keeps its own cache on the wall clock, so only a provided credential lets a
test walk a token through its expiry without waiting for it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from azure.core.credentials import AccessTokenInfo
from azure.core.exceptions import ClientAuthenticationError

from routing.engine.failures import FailureCode
from routing.platforms.azure import REFRESH_MARGIN_S, SCOPE, EntraToken, classify_azure
from routing.simulator import FakeUpstream
from routing.upstream.base import UpstreamFailure

NOW = 1_800_000_000.0


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


class Credential:
    """An async token credential as azure-identity's are: ``get_token_info`` and
    ``close``; each fetch a new token living ``lifetime`` seconds, or ``error``."""

    def __init__(self, clock: Clock, lifetime: float = 3600.0) -> None:
        self.clock, self.lifetime = clock, lifetime
        self.scopes: list[tuple[str, ...]] = []
        self.error: Exception | None = None
        self.refresh_in: float | None = None
        self.closed = False
        self.gate: asyncio.Event | None = None

    async def get_token_info(self, *scopes: str, options: Any = None) -> AccessTokenInfo:
        self.scopes.append(scopes)
        if self.gate is not None:
            await self.gate.wait()
        if self.error is not None:
            raise self.error
        now = self.clock()
        refresh_on = int(now + self.refresh_in) if self.refresh_in is not None else None
        return AccessTokenInfo(
            f"entra-token-{len(self.scopes)}", int(now + self.lifetime), refresh_on=refresh_on
        )

    async def close(self) -> None:
        self.closed = True


def entra(clock: Clock, credential: Credential) -> EntraToken:
    return EntraToken("az-east", clock=clock, credential=lambda: credential)  # type: ignore[arg-type, return-value]


async def bearer(token: EntraToken) -> str:
    return (await token.headers("POST", "https://x/openai/v1/chat/completions", b"{}", {}))[
        "authorization"
    ]


async def test_one_fetch_serves_many_concurrent_calls() -> None:
    clock = Clock()
    credential = Credential(clock)
    credential.gate = asyncio.Event()
    token = entra(clock, credential)
    calls = [asyncio.create_task(bearer(token)) for _ in range(50)]
    await asyncio.sleep(0)
    credential.gate.set()
    assert set(await asyncio.gather(*calls)) == {"Bearer entra-token-1"}
    assert credential.scopes == [(SCOPE,)] and token.fetches == 1
    for _ in range(100):
        assert await bearer(token) == "Bearer entra-token-1"
    assert token.fetches == 1


# (lifetime of the tokens the identity platform gives, its refresh_in, then each step:
# seconds the clock moves, the token sent after it)
REFRESHES = [
    # refreshed REFRESH_MARGIN_S before expiry: fresh one second before, new at the margin
    (3600, None, [(0, 1), (3600 - REFRESH_MARGIN_S - 1, 1), (1, 2)]),
    # the platform's refresh_on, when sooner than the margin
    (3600, 600, [(0, 1), (599, 1), (1, 2)]),
    # a token too short-lived for the margin: refreshed halfway through its life
    (120, None, [(0, 1), (59, 1), (1, 2), (59, 2), (1, 3)]),
]


@pytest.mark.parametrize(("lifetime", "refresh_in", "steps"), REFRESHES)
async def test_refreshed_before_expiry_and_at_the_platforms_refresh_on(
    lifetime: float, refresh_in: float | None, steps: list[tuple[float, int]]
) -> None:
    clock = Clock()
    credential = Credential(clock, lifetime=lifetime)
    credential.refresh_in = refresh_in
    token = entra(clock, credential)
    for seconds, expected in steps:
        clock.now += seconds
        assert await bearer(token) == f"Bearer entra-token-{expected}", clock.now - NOW
    assert token.fetches == steps[-1][1]


async def test_a_failed_refresh_keeps_the_token_while_it_holds_then_is_auth() -> None:
    clock = Clock()
    credential = Credential(clock)
    token = entra(clock, credential)
    await bearer(token)
    credential.error = ClientAuthenticationError("AADSTS700016: application not found")
    clock.now = NOW + 3600 - 100  # due, not expired: the old token still goes out
    assert await bearer(token) == "Bearer entra-token-1"
    clock.now += 10  # tried again only after RETRY_S
    assert await bearer(token) == "Bearer entra-token-1" and len(credential.scopes) == 2
    clock.now = NOW + 3600  # expired: nothing to send
    with pytest.raises(UpstreamFailure) as raised:
        await bearer(token)
    failure = raised.value.failure
    assert failure.code is FailureCode.AUTH
    assert "provider az-east" in failure.message and "AADSTS700016" in failure.message
    assert "entra: false and an api_key" in failure.message
    assert "entra-token" not in failure.message
    credential.error = None  # the identity is fixed: the next call fetches again
    assert await bearer(token) == "Bearer entra-token-4"
    await token.aclose()
    assert credential.closed


async def test_no_credential_at_all_is_auth_naming_the_provider() -> None:
    def unavailable() -> Any:
        raise ValueError("Workload identity was selected but no client ID was provided.")

    token = EntraToken("az-west", clock=Clock(), credential=unavailable)
    with pytest.raises(UpstreamFailure) as raised:
        await bearer(token)
    assert raised.value.failure.code is FailureCode.AUTH
    assert raised.value.failure.message.startswith(
        "no Microsoft Entra ID token for provider az-west"
    )
    await token.aclose()  # nothing was built: nothing to close


@pytest.fixture
def up(upstream: FakeUpstream, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeUpstream]:
    """The simulator as App Service's managed-identity endpoint, where azure-identity's
    DefaultAzureCredential finds it (IDENTITY_ENDPOINT / IDENTITY_HEADER)."""
    upstream.reset()
    monkeypatch.setenv("IDENTITY_ENDPOINT", upstream.root_url + "/msi/token")
    monkeypatch.setenv("IDENTITY_HEADER", upstream.azure.identity_header)
    yield upstream
    upstream.reset()


async def test_the_real_library_fetches_once_for_many_calls(up: FakeUpstream) -> None:
    import time

    token = EntraToken("az-east", clock=time.time)  # DefaultAzureCredential
    headers = await asyncio.gather(*(token.headers("POST", "u", b"", {}) for _ in range(20)))
    headers += [await token.headers("POST", "u", b"", {}) for _ in range(20)]
    assert up.azure.token_requests == 1 and token.fetches == 1
    [value] = {h["authorization"] for h in headers}
    async with httpx.AsyncClient() as client:
        answer = await client.post(
            up.root_url + "/openai/v1/chat/completions",
            json={"model": "gpt-deploy", "messages": [{"role": "user", "content": "hi"}]},
            headers={"authorization": value},
        )
    assert answer.status_code == 200
    await token.aclose()


async def test_the_real_library_failing_is_auth(
    up: FakeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    monkeypatch.setenv("AZURE_TOKEN_CREDENTIALS", "ManagedIdentityCredential")  # just this one
    monkeypatch.setenv("IDENTITY_HEADER", "not-the-identity-header")
    token = EntraToken("az-east", clock=time.time)
    with pytest.raises(UpstreamFailure) as raised:
        await token.headers("POST", "u", b"", {})
    failure = raised.value.failure
    assert failure.code is FailureCode.AUTH and "provider az-east" in failure.message
    assert "not-the-identity-header" not in failure.message
    assert up.azure.token_requests == 0
    await token.aclose()


@pytest.mark.parametrize(
    ("status", "body", "code"),
    [
        (404, {"error": {"code": "DeploymentNotFound", "message": "no"}}, "UNKNOWN_MODEL"),
        (400, {"error": {"code": "DeploymentNotFound", "message": "no"}}, "UNKNOWN_MODEL"),
        (
            400,
            {
                "error": {
                    "code": "content_filter",
                    "innererror": {"code": "ResponsibleAIPolicyViolation"},
                }
            },
            "CONTENT_FILTER",
        ),
        (
            400,
            {"error": {"code": "x", "innererror": {"code": "ResponsibleAIPolicyViolation"}}},
            "CONTENT_FILTER",
        ),
        (
            401,
            {"error": {"code": "401", "message": "Access denied due to invalid subscription key"}},
            "AUTH",
        ),
        (
            403,
            {
                "error": {
                    "code": "AuthenticationTypeDisabled",
                    "message": "Key based authentication is disabled",
                }
            },
            "AUTH",
        ),
        (
            401,
            {"error": {"code": "PermissionDenied", "message": "Principal does not have access"}},
            "AUTH",
        ),
        (
            403,
            {
                "error": {
                    "code": "403",
                    "message": "Access denied due to Virtual Network/Firewall rules.",
                }
            },
            "FORBIDDEN",
        ),
        (
            429,
            {"error": {"code": "429", "message": "Requests ... have exceeded token rate limit"}},
            "RATE_LIMIT",
        ),
        (
            400,
            {"error": {"code": "context_length_exceeded", "message": "maximum context length"}},
            "CONTEXT_WINDOW_EXCEEDED",
        ),
        (
            500,
            {"error": {"code": "InternalServerError", "message": "The server had an error"}},
            "SERVER",
        ),
        (503, {"error": {"code": "ServiceUnavailable", "message": "busy"}}, "SERVER"),
        (
            400,
            {"error": {"code": "BadRequest", "message": "Invalid value for 'temperature'"}},
            "BAD_REQUEST",
        ),
    ],
)
def test_azure_error_bodies_in_the_taxonomy(status: int, body: Any, code: str) -> None:
    import orjson

    failure = classify_azure(status, orjson.dumps(body), {}, now=NOW)
    assert failure.code == code and failure.status == status


def test_azures_retry_after_ms_is_kept() -> None:
    failure = classify_azure(
        429, b'{"error": {"code": "429"}}', {"retry-after-ms": "1500", "retry-after": "2"}, now=NOW
    )
    assert failure.code is FailureCode.RATE_LIMIT and failure.retry_after_s == 1.5
