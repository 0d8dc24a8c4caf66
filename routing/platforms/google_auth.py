"""Google OAuth access tokens for Vertex AI (SPEC §19), through google-auth: a
``credentials_file`` (a service-account key, or an authorized-user file as ``gcloud auth
application-default login`` writes; loaded by type, as google-auth recommends, so a file of
another type is refused rather than run) or Application Default Credentials
(``google.auth.default``), scope ``cloud-platform``. The only module that imports
google-auth.

A token is fetched once and serves every call until it nears its end:

- **cached**: the token and the moment it expires, on the injected clock (``clock``, the
  runtime's wall time): the expiry is the token's remaining lifetime when it arrived,
  counted from the clock's reading when the fetch began, so a test moves the clock by hand
  and never sleeps;
- **refreshed before it expires**: from ``REFRESH_AHEAD_S`` before its end a call starts
  a refresh and still goes out with the current token; from ``MUST_REFRESH_S`` before its
  end (or with none yet) a call waits for the new one;
- **single-flight**: one refresh at a time per provider; every call that needs it awaits
  the same task (shielded: a cancelled caller does not cancel it for the others);
- **off the event loop**: google-auth's credentials are blocking (file reads, the token
  endpoint's HTTP exchange through its ``requests`` transport), so a refresh runs in a
  worker thread (``asyncio.to_thread``). The token endpoint is reached with google-auth's
  own transport, not the gateway's upstream pool: Application Default Credentials on a
  Google Cloud machine come from the metadata server, an address the upstream pool refuses
  to connect to (``routing.upstream.transport.MetadataRefusingResolver``), rightly for
  ``base_url``s and wrongly for this.

A credential that cannot be had is an ``AUTH`` failure (``UpstreamFailure``) naming the
provider and what to fix (a token endpoint that cannot be reached, or fails for a moment,
is ``TRANSPORT`` / ``SERVER`` instead: :func:`refresh_failure`); the message never holds a
secret (no key, no assertion, no
token: google-auth's own exception text is not passed on, only the token endpoint's
OAuth ``error`` code).
"""

from __future__ import annotations

import asyncio
import datetime
import json
import os
from collections.abc import Callable, Mapping
from typing import Any

import google.auth
import google.auth.exceptions
import google.auth.transport
import google.auth.transport.requests
import google.oauth2.credentials
from google.auth.credentials import Credentials
from google.oauth2 import service_account

from routing.engine.failures import Failure, FailureCode
from routing.upstream.base import UpstreamFailure

SCOPES = ("https://www.googleapis.com/auth/cloud-platform",)
REFRESH_AHEAD_S = 300.0  # start a refresh this long before the token ends
MUST_REFRESH_S = 60.0  # closer than this to its end a token is not sent: calls wait
TOKEN_TIMEOUT_S = 10.0  # one HTTP exchange with the token endpoint (google-auth's is 120 s)
UNKNOWN_LIFETIME_S = 3600.0  # a token answer without expires_in (Google's are one hour)
# An OAuth error code as token endpoints give it ("invalid_grant"): the only part of a
# refusal passed on, so no description an endpoint chose to echo reaches a message.
_OAUTH_ERROR_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz_")


class Unusable(Exception):
    """A credentials file google-auth cannot use; the message says why (never its content)."""


def load_credentials_file(path: str) -> Credentials:
    """The credentials a ``credentials_file`` holds (no network), or ``Unusable``."""
    if not os.path.exists(path):
        raise Unusable(f"{path} does not exist")
    try:
        with open(path, encoding="utf-8") as file:
            info = json.load(file)
    except OSError:
        raise Unusable(f"{path} cannot be read by the gateway") from None
    except ValueError:
        raise Unusable(f"{path} is not JSON") from None
    kind = info.get("type") if isinstance(info, dict) else None
    try:
        if kind == "service_account":
            found: Credentials = service_account.Credentials.from_service_account_info(
                info, scopes=SCOPES
            )
            return found
        if kind == "authorized_user":
            found = google.oauth2.credentials.Credentials.from_authorized_user_info(info, SCOPES)
            return found
    except (ValueError, KeyError, google.auth.exceptions.GoogleAuthError):
        raise Unusable(f"{path} is not a complete {kind} file") from None
    raise Unusable(
        f"{path} is not a Google credentials file the gateway takes "
        "(a service-account key or an authorized-user file)"
    )


def check_credentials_file(path: str) -> str | None:
    """What is wrong with a ``credentials_file`` (None: google-auth can use it). Reads
    the file (no network): used where configuration is validated, so a bad path is
    refused at load with the field named."""
    try:
        load_credentials_file(path)
    except Unusable as exc:
        return str(exc)
    return None


class _Bounded(google.auth.transport.Request):
    """google-auth's requests transport (its own session) with a bounded wait (its
    default is 120 s)."""

    def __init__(self) -> None:
        self._inner = google.auth.transport.requests.Request()

    def close(self) -> None:
        self._inner.session.close()

    def __call__(
        self,
        url: str,
        method: str = "GET",
        body: Any = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
        **kwargs: Any,
    ) -> google.auth.transport.Response:
        response: google.auth.transport.Response = self._inner(
            url, method=method, body=body, headers=headers, timeout=timeout or TOKEN_TIMEOUT_S
        )
        return response


class GoogleTokens:
    """The ``Authenticator`` of a Vertex AI provider: ``Authorization: Bearer <token>``.

    Built once per pooled client; one refresh in flight at most. ``fetches`` counts the
    tokens it obtained (the token endpoint's own counter is the test's witness)."""

    def __init__(self, provider: str, credentials_file: str, *, clock: Callable[[], float]) -> None:
        self._provider = provider
        self._file = credentials_file
        self._clock = clock
        self._credentials: Credentials | None = None
        self._transport: _Bounded | None = None
        self._token = ""
        self._expires_at = 0.0
        self._refresh: asyncio.Task[None] | None = None
        self.fetches = 0

    async def headers(
        self, method: str, url: str, body: bytes, headers: Mapping[str, str]
    ) -> Mapping[str, str]:
        return {"authorization": f"Bearer {await self.token()}"}

    async def token(self) -> str:
        """A token good for this call: the cached one, or the one the refresh brings."""
        left = self._expires_at - self._clock()
        if self._token and left > REFRESH_AHEAD_S:
            return self._token
        refresh = self._start_refresh()
        if self._token and left > MUST_REFRESH_S:
            return self._token  # the refresh goes on without this call waiting for it
        await asyncio.shield(refresh)
        return self._token

    async def refresh(self) -> None:
        """Wait for the refresh in flight, or start one and wait for it."""
        await asyncio.shield(self._start_refresh())

    def _start_refresh(self) -> asyncio.Task[None]:
        if self._refresh is None:
            self._refresh = asyncio.ensure_future(self._refreshed())
            self._refresh.add_done_callback(self._refresh_done)
        return self._refresh

    def _refresh_done(self, task: asyncio.Task[None]) -> None:
        self._refresh = None
        if not task.cancelled():
            task.exception()  # retrieved here: a waiter re-raises it, a background one drops it

    async def _refreshed(self) -> None:
        started = self._clock()
        token, lifetime = await asyncio.to_thread(self._fetch)
        self._token, self._expires_at = token, started + lifetime
        self.fetches += 1

    def _fetch(self) -> tuple[str, float]:
        """In a worker thread: load the credentials once, then one token exchange."""
        if self._credentials is None:
            self._credentials = self._load()
        if self._transport is None:
            self._transport = _Bounded()
        try:
            self._credentials.refresh(self._transport)
        except google.auth.exceptions.GoogleAuthError as exc:
            raise refresh_failure(self._provider, exc) from None
        token = self._credentials.token
        if not isinstance(token, str) or not token:
            raise self._failure(f"Google returned no access token for provider {self._provider}")
        return token, _lifetime(self._credentials.expiry)

    def _load(self) -> Credentials:
        if self._file:
            try:
                return load_credentials_file(self._file)
            except Unusable as exc:
                raise self._failure(
                    f"cannot use the credentials_file of provider {self._provider}: {exc}; "
                    "set credentials_file to a service-account key the gateway can read"
                ) from None
        try:
            credentials, _ = google.auth.default(scopes=SCOPES)
        except google.auth.exceptions.DefaultCredentialsError:
            raise self._failure(
                f"no Google credentials found for provider {self._provider}: set its "
                "credentials_file, or GOOGLE_APPLICATION_CREDENTIALS, or run where "
                "Application Default Credentials exist"
            ) from None
        return credentials

    def _failure(self, message: str) -> UpstreamFailure:
        return UpstreamFailure(Failure(FailureCode.AUTH, message))

    async def aclose(self) -> None:
        task, self._refresh = self._refresh, None
        if task is not None and not task.done():
            task.cancel()
        transport, self._transport = self._transport, None
        if transport is not None:
            transport.close()


def refresh_failure(provider: str, exc: google.auth.exceptions.GoogleAuthError) -> UpstreamFailure:
    """A token exchange that failed, classified: the endpoint unreachable is ``TRANSPORT``
    and its own passing trouble (a 5xx, ``temporarily_unavailable``: google-auth marks it
    retryable, after retrying itself) is ``SERVER`` — the target cools and the call moves
    on, where ``AUTH`` would disable the provider until an operator acts; a refusal of
    the credentials themselves is ``AUTH``."""
    if isinstance(exc, google.auth.exceptions.TransportError):
        return UpstreamFailure(
            Failure(
                FailureCode.TRANSPORT,
                f"cannot reach Google's token endpoint for provider {provider}: check "
                "the gateway's network path to the credentials' token_uri",
            )
        )
    if exc.retryable:
        return UpstreamFailure(
            Failure(
                FailureCode.SERVER,
                f"Google's token endpoint failed for provider {provider}"
                f"{_oauth_error(exc)}; the next call asks again",
            )
        )
    return UpstreamFailure(
        Failure(
            FailureCode.AUTH,
            f"Google's token endpoint refused the credentials of provider {provider}"
            f"{_oauth_error(exc)}: check that the service account's key is current and "
            "enabled, and that it may use Vertex AI",
        )
    )


def _lifetime(expiry: datetime.datetime | None) -> float:
    """Seconds the token has left, by google-auth's own reading (a naive UTC datetime)."""
    if expiry is None:
        return UNKNOWN_LIFETIME_S
    now = datetime.datetime.now(datetime.UTC).replace(tzinfo=None)
    return max(0.0, (expiry - now).total_seconds())


def _oauth_error(exc: google.auth.exceptions.GoogleAuthError) -> str:
    """`` (invalid_grant)`` from the endpoint's answer, when it gave a plain OAuth code."""
    answer = exc.args[1] if len(exc.args) > 1 else None
    code = answer.get("error") if isinstance(answer, Mapping) else None
    if isinstance(code, str) and 0 < len(code) <= 40 and set(code) <= _OAUTH_ERROR_CHARS:
        return f" ({code})"
    return ""
