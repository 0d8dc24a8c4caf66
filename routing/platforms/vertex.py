"""Google Vertex AI (SPEC §19): Claude (``kind: anthropic``) and Gemini (``kind: gemini``)
in a Google Cloud project, reached with OAuth tokens from google-auth.

URLs. The base is ``https://{region}-aiplatform.googleapis.com/v1/projects/{project}/
locations/{region}`` (``global``: ``https://aiplatform.googleapis.com/…``; the multi-regions
``us`` and ``eu``: ``https://aiplatform.{us|eu}.rep.googleapis.com/…``, as Anthropic's Vertex
SDK has them). A provider's ``base_url`` replaces the scheme and host (a private or
Private Service Connect endpoint, a proxy, the simulator); the ``/v1/projects/…`` path is
still added, unless the ``base_url`` already names a project. Under it:

- Claude: ``/publishers/anthropic/models/{model}:rawPredict`` and ``:streamRawPredict``;
  the Messages body without ``model`` (the URL names it), with ``anthropic_version:
  vertex-2023-10-16`` and its own ``stream``; betas stay in the ``anthropic-beta`` header,
  as Anthropic's Vertex SDK sends them (Bedrock is the platform that wants them in the
  body). Token counting: ``/publishers/anthropic/models/count-tokens:rawPredict``, whose
  body keeps ``model``;
- Gemini: ``/publishers/google/models/{model}:generateContent`` and
  ``:streamGenerateContent?alt=sse``, the generateContent body unchanged (the Gemini codec
  of ``routing.protocols.gemini`` serves both platforms).

Streams are plain SSE on both (Claude's events as Anthropic sends them, Gemini's ``data:``
lines): the protocol's own decoder reads them.

Failures: Google's ``{"error": {"code", "message", "status"}}`` (sometimes inside a JSON
list) by its status name — ``RESOURCE_EXHAUSTED`` → RATE_LIMIT (QUOTA when the message
says the quota is spent), ``UNAVAILABLE`` → SERVER, ``PERMISSION_DENIED`` /
``UNAUTHENTICATED`` → AUTH (``routing.engine.failures``); Claude's own errors pass through
Vertex in Anthropic's shape (``overloaded_error``…) and are read as on the Anthropic API.
An access token an error echoes is cut from its message.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import orjson

from routing.engine.failures import Failure, classify_http
from routing.platforms.base import Authenticator, PlatformSettings, PlatformSpec
from routing.platforms.google_auth import GoogleTokens, check_credentials_file
from routing.protocols import Protocol

if TYPE_CHECKING:
    from routing.protocols.registry import ProtocolSpec

ANTHROPIC_VERSION = "vertex-2023-10-16"
PUBLISHERS = {"anthropic": "anthropic", "gemini": "google"}  # kind -> Vertex publisher
MULTI_REGIONS = frozenset({"us", "eu"})
# A Google Cloud location: ``global``, a multi-region, or ``us-central1``, ``europe-west4``…
REGION = re.compile(r"global|us|eu|[a-z]+(-[a-z]+)+[0-9]+")
# A project id (6-30 lower-case letters, digits, hyphens) or a project number.
PROJECT = re.compile(r"[a-z][a-z0-9-]{4,28}[a-z0-9]|[0-9]{1,20}")
# An OAuth access token as Google issues them (``ya29.…``): never kept in a message.
_ACCESS_TOKEN = re.compile(r"ya29\.[A-Za-z0-9_\-.]+")


def host(region: str) -> str:
    """The default scheme and host of a region's Vertex AI endpoint."""
    if region == "global":
        return "https://aiplatform.googleapis.com"
    if region in MULTI_REGIONS:
        return f"https://aiplatform.{region}.rep.googleapis.com"
    return f"https://{region}-aiplatform.googleapis.com"


def vertex_base(project: str, region: str, override: str = "") -> str:
    """The base every model path goes under: ``override`` (a ``base_url``) or the region's
    host, then ``/v1/projects/{project}/locations/{region}`` unless the override has them."""
    root = override.rstrip("/") if override else host(region)
    if "/projects/" in root:
        return root
    root = root.removesuffix("/v1")
    return f"{root}/v1/projects/{project}/locations/{region}"


def model_url(base: str, kind: str, model: str, stream: bool) -> str:
    """A model's endpoint under ``base`` for a kind the platform carries."""
    publisher = PUBLISHERS[kind]
    name = quote(model.removeprefix("models/"), safe="@")
    if publisher == "anthropic":
        return f"{base}/publishers/anthropic/models/{name}:{'streamRawPredict' if stream else 'rawPredict'}"
    if stream:
        return f"{base}/publishers/google/models/{name}:streamGenerateContent?alt=sse"
    return f"{base}/publishers/google/models/{name}:generateContent"


def count_tokens_url(base: str) -> str:
    return f"{base}/publishers/anthropic/models/count-tokens:rawPredict"


def anthropic_body(body: bytes, *, count_tokens: bool = False) -> bytes:
    """The Messages body as Claude on Vertex takes it: ``anthropic_version`` added, ``model``
    taken out (the URL names it) except for token counting, whose URL does not."""
    data: dict[str, Any] = orjson.loads(body)
    if not count_tokens:
        data.pop("model", None)
    data["anthropic_version"] = ANTHROPIC_VERSION
    return orjson.dumps(data)


def scrub_tokens(text: str) -> str:
    return _ACCESS_TOKEN.sub("[token]", text)


def classify(
    status: int,
    body: bytes | str | Mapping[str, Any] | None,
    headers: Mapping[str, str],
    *,
    now: float,
) -> Failure:
    """A Vertex AI error answer: Google's error object (unwrapped from the JSON list Vertex
    sometimes sends), or Claude's Anthropic-shaped one, classified as everywhere
    (``classify_http``), with any access token cut from the message."""
    if isinstance(body, bytes | str):
        try:
            parsed = orjson.loads(body)
        except orjson.JSONDecodeError:
            parsed = None
        if isinstance(parsed, list) and parsed and isinstance(parsed[0], dict):
            body = parsed[0]
    failure = classify_http(status, body, headers, now=now)
    message = scrub_tokens(failure.message)
    if message == failure.message:
        return failure
    return Failure(failure.code, message, failure.status, failure.retry_after_s, failure.public)


@dataclass(frozen=True, slots=True)
class VertexPlatform(PlatformSpec):
    """Vertex AI as the registry's platform: the functions above behind its hooks."""

    @property
    def has_default_endpoint(self) -> bool:
        return True

    def check(
        self, kind: str, base_url: str, api_key: str, settings: PlatformSettings
    ) -> dict[str, str]:
        problems = PlatformSpec.check(self, kind, base_url, api_key, settings)
        if settings.project and not PROJECT.fullmatch(settings.project):
            problems["project"] = f"'{settings.project}' is not a Google Cloud project id"
        if settings.credentials_file:
            problem = check_credentials_file(settings.credentials_file)
            if problem is not None:
                problems["credentials_file"] = problem
        return problems

    def schema_rules(self) -> list[dict[str, Any]]:
        return [{"properties": {"project": {"pattern": f"^(?:{PROJECT.pattern})$"}}}]

    def default_base_url(self, protocol: ProtocolSpec, settings: PlatformSettings) -> str:
        return vertex_base(settings.project, settings.region)

    def resolve_base_url(
        self, protocol: ProtocolSpec, base_url: str, settings: PlatformSettings
    ) -> str:
        return vertex_base(settings.project, settings.region, base_url)

    def endpoint_url(
        self, protocol: ProtocolSpec, base_url: str, model: str = "", stream: bool = False
    ) -> str:
        return model_url(base_url.rstrip("/"), protocol.kind.value, model, stream)

    def models_url(self, protocol: ProtocolSpec, base_url: str) -> str | None:
        return None  # Model Garden's list is not the models a project may call

    def count_tokens_url(self, protocol: ProtocolSpec, base_url: str, model: str) -> str | None:
        if protocol.kind is not Protocol.MESSAGES:
            return None
        return count_tokens_url(base_url.rstrip("/"))

    def prepare_body(self, protocol: ProtocolSpec, body: bytes, model: str, stream: bool) -> bytes:
        if protocol.kind is Protocol.MESSAGES:
            return anthropic_body(body)
        return body  # Gemini's body names no model on either platform

    def count_tokens_body(self, protocol: ProtocolSpec, body: bytes) -> bytes:
        return anthropic_body(body, count_tokens=True)

    def auth_headers(self, protocol: ProtocolSpec, api_key: str) -> dict[str, str]:
        return {}  # the token is the authenticator's, per request

    def authenticator(
        self,
        provider: str,
        protocol: ProtocolSpec,
        api_key: str,
        settings: PlatformSettings,
        clock: Callable[[], float],
    ) -> Authenticator | None:
        return GoogleTokens(provider, settings.credentials_file, clock=clock)


VERTEX = VertexPlatform(
    "vertex",
    "Google Vertex AI",
    frozenset({Protocol.MESSAGES, Protocol.GEMINI}),
    classify=classify,
    fields=("region", "project", "credentials_file"),
    required=("project", "region"),
    model_in_url=True,
    region_pattern=REGION.pattern,
)
