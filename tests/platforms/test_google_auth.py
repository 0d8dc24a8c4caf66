"""Vertex AI's OAuth tokens (``routing.platforms.google_auth``) against the simulator's token
endpoint over real sockets: the grant's JWT verified there with the service account's
public key, one fetch serving many concurrent calls, a refresh before expiry on an
injected clock, and each way of not getting a credential an AUTH failure naming the
provider with no secret in it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from google.auth.exceptions import GoogleAuthError, RefreshError, TransportError

from routing.engine.failures import FailureCode
from routing.platforms.google_auth import (
    MUST_REFRESH_S,
    REFRESH_AHEAD_S,
    GoogleTokens,
    check_credentials_file,
    refresh_failure,
)
from routing.simulator import FakeUpstream
from routing.upstream.base import UpstreamFailure
from tests.platforms.accounts import private_pem, write_service_account


class Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def account(fake_upstream: FakeUpstream, tmp_path: Path) -> Path:
    return write_service_account(fake_upstream, tmp_path)


@pytest.fixture
async def make() -> AsyncIterator[Callable[..., GoogleTokens]]:
    """GoogleTokens for provider ``claude-vertex``, closed after the test."""
    made: list[GoogleTokens] = []

    def tokens(path: object, clock: Clock | None = None) -> GoogleTokens:
        made.append(GoogleTokens("claude-vertex", str(path), clock=clock or Clock()))
        return made[-1]

    yield tokens
    for each in made:
        await each.aclose()


async def test_one_token_fetch_serves_many_concurrent_calls(
    fake_upstream: FakeUpstream, account: Path, make: Callable[..., GoogleTokens]
) -> None:
    tokens = make(account)
    headers = await asyncio.gather(
        *(tokens.headers("POST", "https://x", b"{}", {}) for _ in range(50))
    )
    assert fake_upstream.google.fetches == 1
    assert tokens.fetches == 1
    [only] = {h["authorization"] for h in headers}
    assert only.startswith("Bearer ya29.sim-")
    assert fake_upstream.google.valid(only.removeprefix("Bearer "))
    for _ in range(20):  # later calls: the cached token, no fetch
        assert (await tokens.headers("POST", "https://x", b"", {}))["authorization"] == only
    assert fake_upstream.google.fetches == 1


async def test_the_token_is_refreshed_before_it_expires(
    fake_upstream: FakeUpstream, account: Path, make: Callable[..., GoogleTokens]
) -> None:
    fake_upstream.google.expires_in = 3600
    clock = Clock()
    tokens = make(account, clock)
    first = await tokens.token()
    clock.now += 3600 - REFRESH_AHEAD_S - 1  # not yet near its end
    assert await tokens.token() == first
    assert fake_upstream.google.fetches == 1
    clock.now += 2  # inside the refresh window: this call still goes out with the old
    assert await tokens.token() == first
    for _ in range(100):  # the refresh started in the background lands
        if fake_upstream.google.fetches == 2 and tokens.fetches == 2:
            break
        await asyncio.sleep(0.01)  # yields to the worker thread; no clock is read
    assert fake_upstream.google.fetches == 2
    second = await tokens.token()
    assert second != first
    clock.now += 3600 - MUST_REFRESH_S + 1  # the second one nearly gone: calls wait
    third = await asyncio.gather(*(tokens.token() for _ in range(10)))
    assert set(third) != {second} and len(set(third)) == 1
    assert fake_upstream.google.fetches == 3


async def test_a_short_lived_token_is_counted_on_the_injected_clock(
    fake_upstream: FakeUpstream, account: Path, make: Callable[..., GoogleTokens]
) -> None:
    fake_upstream.google.expires_in = 30  # under MUST_REFRESH_S: every call must refresh
    clock = Clock()
    tokens = make(account, clock)
    await tokens.token()
    await tokens.token()
    assert fake_upstream.google.fetches == 2


async def test_application_default_credentials_come_from_the_environment(
    fake_upstream: FakeUpstream,
    account: Path,
    monkeypatch: pytest.MonkeyPatch,
    make: Callable[..., GoogleTokens],
) -> None:
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(account))
    tokens = make("")
    assert (await tokens.token()).startswith("ya29.sim-")
    assert fake_upstream.google.fetches == 1


async def _auth_failure(tokens: GoogleTokens) -> str:
    with pytest.raises(UpstreamFailure) as caught:
        await tokens.headers("POST", "https://x", b"", {})
    failure = caught.value.failure
    assert failure.code is FailureCode.AUTH
    assert "claude-vertex" in failure.message
    assert "PRIVATE KEY" not in failure.message and "ya29" not in failure.message
    return failure.message


async def test_a_missing_credentials_file_is_an_auth_failure(
    tmp_path: Path, make: Callable[..., GoogleTokens]
) -> None:
    missing = tmp_path / "nope.json"
    message = await _auth_failure(make(str(missing)))
    assert f"{missing} does not exist" in message and "credentials_file" in message


async def test_a_file_that_is_not_a_key_is_an_auth_failure(
    tmp_path: Path, make: Callable[..., GoogleTokens]
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"type": "service_account", "private_key": private_pem()}))
    message = await _auth_failure(make(str(bad)))
    assert f"{bad} is not a complete service_account file" in message
    garbage = tmp_path / "garbage.json"
    garbage.write_text("{not json")
    message = await _auth_failure(make(str(garbage)))
    assert f"{garbage} is not JSON" in message
    other = tmp_path / "external.json"
    other.write_text(json.dumps({"type": "external_account", "audience": "x"}))
    message = await _auth_failure(make(str(other)))
    assert "not a Google credentials file the gateway takes" in message


async def test_a_key_the_token_endpoint_refuses_is_an_auth_failure(
    fake_upstream: FakeUpstream, tmp_path: Path, make: Callable[..., GoogleTokens]
) -> None:
    unknown = write_service_account(fake_upstream, tmp_path, register=False, email="x@y.z")
    message = await _auth_failure(make(str(unknown)))
    assert "refused" in message and "(invalid_grant)" in message
    assert fake_upstream.google.refusals == 1 and fake_upstream.google.fetches == 0


async def test_a_key_signed_by_another_private_key_fails_verification(
    fake_upstream: FakeUpstream, tmp_path: Path, make: Callable[..., GoogleTokens]
) -> None:
    write_service_account(fake_upstream, tmp_path)  # registers the default key's public half
    forged = write_service_account(fake_upstream, tmp_path, key="other", register=False)
    message = await _auth_failure(make(str(forged)))
    assert "(invalid_grant)" in message
    assert fake_upstream.google.refusals == 1


async def test_no_application_default_credentials_is_an_auth_failure(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, make: Callable[..., GoogleTokens]
) -> None:
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path))  # no gcloud ADC file there
    monkeypatch.setenv("NO_GCE_CHECK", "True")  # not on Google Cloud: no metadata server
    message = await _auth_failure(make(""))
    assert "no Google credentials found" in message
    assert "GOOGLE_APPLICATION_CREDENTIALS" in message


async def test_an_unreachable_token_endpoint_is_a_transport_failure(
    fake_upstream: FakeUpstream, tmp_path: Path, make: Callable[..., GoogleTokens]
) -> None:
    path = write_service_account(fake_upstream, tmp_path)
    info = json.loads(path.read_text())
    info["token_uri"] = "http://127.0.0.1:9/token"  # discard port: nothing listens
    path.write_text(json.dumps(info))
    with pytest.raises(UpstreamFailure) as caught:
        await make(path).token()
    failure = caught.value.failure
    assert failure.code is FailureCode.TRANSPORT  # cools the target; AUTH would disable it
    assert "cannot reach Google's token endpoint for provider claude-vertex" in failure.message


@pytest.mark.parametrize(
    ("error", "code", "said"),
    [
        (
            RefreshError("x", {"error": "temporarily_unavailable"}, retryable=True),
            FailureCode.SERVER,
            "failed for provider p (temporarily_unavailable)",
        ),
        (
            RefreshError("x", {"error": "invalid_grant"}),
            FailureCode.AUTH,
            "refused the credentials of provider p (invalid_grant)",
        ),
        (
            RefreshError("eyJhbGciOi.leak.x", {"error": "Bad JWT eyJ..."}),
            FailureCode.AUTH,
            "refused the credentials of provider p:",
        ),
        (TransportError("connection refused"), FailureCode.TRANSPORT, "cannot reach"),
    ],
)
def test_how_a_failed_token_exchange_is_classified(
    error: GoogleAuthError, code: FailureCode, said: str
) -> None:
    failure = refresh_failure("p", error).failure
    assert failure.code is code and said in failure.message
    assert "eyJ" not in failure.message and "connection refused" not in failure.message


async def test_a_failed_refresh_is_retried_by_the_next_call(
    fake_upstream: FakeUpstream, account: Path, make: Callable[..., GoogleTokens]
) -> None:
    fake_upstream.google.refuse_next = 1
    tokens = make(account)
    with pytest.raises(UpstreamFailure):
        await tokens.token()
    assert (await tokens.token()).startswith("ya29.sim-")
    assert fake_upstream.google.fetches == 1 and fake_upstream.google.refusals == 1


def test_check_credentials_file_names_what_is_wrong(
    fake_upstream: FakeUpstream, account: Path, tmp_path: Path
) -> None:
    assert check_credentials_file(str(account)) is None
    missing = tmp_path / "missing.json"
    assert check_credentials_file(str(missing)) == f"{missing} does not exist"
    (tmp_path / "list.json").write_text("[1, 2]")
    assert "not a Google credentials file" in (
        check_credentials_file(str(tmp_path / "list.json")) or ""
    )
