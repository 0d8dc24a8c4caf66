"""Azure OpenAI (SPEC §19): the ``openai`` and ``openai-responses`` protocols on a
resource's v1 API, authenticated by its key or by Microsoft Entra ID.

- **Where**: ``base_url`` is the resource's v1 API, ``https://{resource}.openai.azure.com/
  openai/v1`` (required: Azure has no default host); chat goes to ``/chat/completions``,
  Responses to ``/responses``, embeddings to ``/embeddings`` — OpenAI's paths under it, as
  the direct platform sends them. The v1 API takes no ``api-version``. ``model`` is the
  *deployment* name; the body carries it as OpenAI's does. Azure lists base models, not
  deployments, so there is no model list to refresh.
- **Who**: ``api_key`` is sent as the ``api-key`` header. With ``entra: true`` (and no
  ``api_key``) each request carries ``Authorization: Bearer <token>`` for the scope
  ``https://cognitiveservices.azure.com/.default``, from azure-identity's
  ``DefaultAzureCredential`` (:class:`EntraToken`).
- **Failures**: Azure's error bodies are OpenAI-shaped (``{"error": {"code", "message"}}``,
  ``code`` often a status as text), so :func:`classify_azure` is the common classifier with
  Azure's own codes read first: ``DeploymentNotFound`` → ``UNKNOWN_MODEL``; a content-filter
  refusal (``content_filter`` / ``innererror.code: ResponsibleAIPolicyViolation``) →
  ``CONTENT_FILTER``, the client's bad request (not a switch code: it fails the same on every
  target); ``AuthenticationTypeDisabled`` / ``PermissionDenied`` / ``InvalidAuthenticationToken``
  → ``AUTH``.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson
from azure.core.credentials_async import AsyncTokenCredential
from azure.core.exceptions import AzureError, ServiceRequestError

from routing.engine.failures import Failure, FailureCode, classify_http
from routing.platforms.base import Authenticator, PlatformSettings, PlatformSpec
from routing.protocols import Protocol
from routing.upstream.base import UpstreamFailure

if TYPE_CHECKING:
    from routing.protocols.registry import ProtocolSpec

log = logging.getLogger(__name__)

SCOPE = "https://cognitiveservices.azure.com/.default"
# Refresh this long before a token expires (azure-identity's own margin): a call never
# carries a token that expires on its way, and the refresh has minutes to succeed.
REFRESH_MARGIN_S = 300.0
# After a failed refresh while the token still holds, try again this much later.
RETRY_S = 30.0
API_KEY_HEADER = "api-key"

CredentialFactory = Callable[[], AsyncTokenCredential]


def _default_credential() -> AsyncTokenCredential:
    # Imported on first use: building the chain reads the environment, and a provider
    # without Entra never needs it.
    from azure.identity.aio import DefaultAzureCredential

    return DefaultAzureCredential()


class EntraToken:
    """Per-request ``Authorization`` for Azure with Microsoft Entra ID: one token serves
    every call until :data:`REFRESH_MARGIN_S` before it expires (or the ``refresh_on``
    the identity platform gave), then one refresh serves them all again — concurrent calls
    wait for the same fetch, never start their own.

    States: *empty* (nothing fetched) → *fresh* (``clock() < refresh_at``: sent as is) →
    *due* (refreshed by the next call; a failed refresh while the token still holds keeps
    sending it and tries again in :data:`RETRY_S`) → *expired* with no token to be had:
    an ``AUTH`` failure naming the provider and what to fix.

    ``clock`` is wall time (tokens expire at an epoch second). ``credential`` builds the
    azure-identity credential on first use (``DefaultAzureCredential``: environment,
    workload identity, managed identity, the Azure CLIs; ``AZURE_TOKEN_CREDENTIALS``
    narrows the chain to one).
    """

    __slots__ = (
        "_credential",
        "_expires_on",
        "_factory",
        "_header",
        "_lock",
        "_provider",
        "_refresh_at",
        "clock",
        "fetches",
    )

    def __init__(
        self,
        provider: str,
        *,
        clock: Callable[[], float],
        credential: CredentialFactory = _default_credential,
    ) -> None:
        self._provider = provider
        self._factory = credential
        self._credential: AsyncTokenCredential | None = None
        self._header: dict[str, str] | None = None
        self._expires_on = 0.0
        self._refresh_at = 0.0
        self._lock: asyncio.Lock | None = None
        self.clock = clock
        self.fetches = 0  # tokens fetched (a test's and an operator's measure of caching)

    async def headers(
        self, method: str, url: str, body: bytes, headers: Mapping[str, str]
    ) -> Mapping[str, str]:
        header = self._header
        if header is not None and self.clock() < self._refresh_at:
            return header
        return await self._refresh()

    async def _refresh(self) -> Mapping[str, str]:
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            now = self.clock()
            if self._header is not None and now < self._refresh_at:
                return self._header  # refreshed by the call this one waited behind
            try:
                token, expires_on, refresh_on = await self._fetch()
            except (AzureError, ValueError, OSError) as exc:
                return self._failed(exc, now)
            self.fetches += 1
            self._header = {"authorization": f"Bearer {token}"}
            self._expires_on = expires_on
            self._refresh_at = _refresh_time(now, expires_on, refresh_on)
            return self._header

    async def _fetch(self) -> tuple[str, float, float | None]:
        if self._credential is None:
            self._credential = self._factory()
        credential: Any = self._credential
        if hasattr(credential, "get_token_info"):  # azure-core 1.31+: with refresh_on
            info = await credential.get_token_info(SCOPE)
            return info.token, float(info.expires_on), info.refresh_on
        token = await credential.get_token(SCOPE)
        return token.token, float(token.expires_on), None

    def _failed(self, exc: Exception, now: float) -> Mapping[str, str]:
        reason = _reason(exc)
        if self._header is not None and now < self._expires_on:
            log.warning(
                "Entra token refresh failed for provider %s (the current token holds "
                "for %.0f s more): %s",
                self._provider,
                self._expires_on - now,
                reason,
            )
            self._refresh_at = min(self._expires_on, now + RETRY_S)
            return self._header
        self._header = None
        if isinstance(exc, ServiceRequestError):  # the identity endpoint did not answer
            raise UpstreamFailure(
                Failure(
                    FailureCode.TRANSPORT,
                    f"no Microsoft Entra ID token for provider {self._provider}: the "
                    f"identity endpoint did not answer ({reason})",
                )
            ) from None
        raise UpstreamFailure(
            Failure(
                FailureCode.AUTH,
                f"no Microsoft Entra ID token for provider {self._provider} ({reason}); give "
                "the gateway an identity DefaultAzureCredential finds (AZURE_TENANT_ID / "
                "AZURE_CLIENT_ID with a secret, certificate or workload identity, a managed "
                "identity, or `az login`) holding the 'Cognitive Services OpenAI User' role "
                "on the resource — or set entra: false and an api_key",
            )
        ) from None

    async def aclose(self) -> None:
        credential, self._credential = self._credential, None
        self._header = None
        if credential is not None:
            await credential.close()


def _refresh_time(now: float, expires_on: float, refresh_on: float | None) -> float:
    """When a token fetched ``now`` is refreshed: the margin before it expires, or the
    identity platform's ``refresh_on`` if earlier; a token too short-lived for the margin,
    halfway through its life."""
    at = expires_on - REFRESH_MARGIN_S
    if refresh_on is not None:
        at = min(at, float(refresh_on))
    return at if at > now else now + max(0.0, expires_on - now) / 2


_SPACE = re.compile(r"\s+")


def _reason(exc: Exception) -> str:
    """The library's own account, on one line and bounded (it names the credentials tried
    and why each was unavailable; it never holds a token or a secret)."""
    text = _SPACE.sub(" ", str(exc)).strip() or type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."


# --- Azure's error bodies ---------------------------------------------------------------

_AUTH_CODES = frozenset(
    {"authenticationtypedisabled", "permissiondenied", "invalidauthenticationtoken"}
)
_FILTER_CODES = frozenset({"content_filter", "responsibleaipolicyviolation"})


def _azure_codes(body: bytes | str | Mapping[str, Any] | None) -> frozenset[str]:
    """``error.code`` and ``error.innererror.code`` of an Azure error body, lower-cased."""
    try:
        parsed = orjson.loads(body) if isinstance(body, (bytes, str)) else body
    except orjson.JSONDecodeError:
        return frozenset()
    error = parsed.get("error") if isinstance(parsed, Mapping) else None
    if not isinstance(error, Mapping):
        return frozenset()
    inner = error.get("innererror")
    codes = (error.get("code"), inner.get("code") if isinstance(inner, Mapping) else None)
    return frozenset(c.lower() for c in codes if isinstance(c, str))


def classify_azure(
    status: int,
    body: bytes | str | Mapping[str, Any] | None,
    headers: Mapping[str, str],
    *,
    now: float,
) -> Failure:
    """An Azure OpenAI error answer in the taxonomy: Azure's codes first, then the common
    classifier (status, OpenAI fields, ``retry-after-ms`` / ``retry-after``)."""
    failure = classify_http(status, body, headers, now=now)
    codes = _azure_codes(body)
    code = failure.code
    if "deploymentnotfound" in codes:
        code = FailureCode.UNKNOWN_MODEL
    elif codes & _FILTER_CODES and status < 500:
        code = FailureCode.CONTENT_FILTER
    elif codes & _AUTH_CODES:
        code = FailureCode.AUTH
    if code is failure.code:
        return failure
    return Failure(code, failure.message, failure.status, failure.retry_after_s)


# --- The platform ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AzurePlatform(PlatformSpec):
    """OpenAI's protocols at a resource's v1 API: OpenAI's paths and bodies (so the base
    class's endpoint and body hooks stand), the key as ``api-key`` or an Entra token, no
    model list, Azure's error codes."""

    def check(
        self, kind: str, base_url: str, api_key: str, settings: PlatformSettings
    ) -> dict[str, str]:
        problems = PlatformSpec.check(self, kind, base_url, api_key, settings)
        if settings.entra and api_key:
            problems["api_key"] = "set either entra: true (Entra ID tokens) or an api_key, not both"
        return problems

    def schema_rules(self) -> list[dict[str, Any]]:
        given = {"type": "string", "pattern": r"\S"}
        return [
            {
                "if": {"properties": {"entra": {"const": True}}, "required": ["entra"]},
                "then": {"properties": {"api_key": {"not": given}}},
            }
        ]

    def models_url(self, protocol: ProtocolSpec, base_url: str) -> str | None:
        return None  # /models lists the resource's base models, not its deployments

    def auth_headers(self, protocol: ProtocolSpec, api_key: str) -> dict[str, str]:
        return {API_KEY_HEADER: api_key}

    def authenticator(
        self,
        provider: str,
        protocol: ProtocolSpec,
        api_key: str,
        settings: PlatformSettings,
        clock: Callable[[], float],
    ) -> Authenticator | None:
        return EntraToken(provider, clock=clock) if settings.entra else None


AZURE = AzurePlatform(
    "azure",
    "Azure OpenAI (a resource's v1 API)",
    frozenset({Protocol.CHAT, Protocol.RESPONSES}),
    classify=classify_azure,
    fields=("entra",),
)
