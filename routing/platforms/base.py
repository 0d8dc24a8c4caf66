"""What every platform is (SPEC §19): where and how a protocol is reached.

A :class:`PlatformSpec` says a request's URL, how its body differs from the protocol's own
(Bedrock's and Vertex's Anthropic bodies name no model), its credential (fixed headers, or
an :class:`Authenticator` that signs each request or keeps a token fresh), how a stream is
framed and how an error answer is read. It wraps a protocol and never re-translates it:
whatever a platform receives it hands back as the protocol's own bytes (a Bedrock
event-stream re-framed as the Messages SSE), so the codecs above do not change.

``direct`` (the vendor's own API at ``base_url``) is this class as it is
(``routing.protocols.registry.DIRECT``); the others live in a module each beside this one
and are listed in ``routing.protocols.registry.PLATFORMS``.
A platform module imports this one and protocol codecs, never the registry (which imports
them).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Protocol

from routing.engine.failures import Failure, classify_http

if TYPE_CHECKING:
    from routing.protocols import Protocol as Kind
    from routing.protocols.registry import ProtocolSpec
    from routing.upstream.transport import BodyReader, UpstreamResponse


@dataclass(frozen=True, slots=True)
class PlatformSettings:
    """A provider's platform fields (SPEC §19). The AWS keys are secrets: write-only,
    encrypted at rest like ``api_key``, never in a repr, record, page or export."""

    region: str = ""
    project: str = ""
    credentials_file: str = ""
    entra: bool = False
    aws_access_key_id: str = field(default="", repr=False)
    aws_secret_access_key: str = field(default="", repr=False)
    aws_session_token: str = field(default="", repr=False)

    @property
    def secrets(self) -> tuple[str, ...]:
        """What upstream text is scrubbed of, besides the provider's API key."""
        return tuple(
            value
            for value in (
                self.aws_access_key_id,
                self.aws_secret_access_key,
                self.aws_session_token,
            )
            if value
        )


# The plain fields a provider row stores in a column each, and the secret ones it stores
# encrypted (``Provider.platform_secrets_encrypted``).
PLAIN_FIELDS: tuple[str, ...] = ("region", "project", "credentials_file", "entra")
SECRET_FIELDS: tuple[str, ...] = ("aws_access_key_id", "aws_secret_access_key", "aws_session_token")
assert set(PLAIN_FIELDS + SECRET_FIELDS) == {f.name for f in fields(PlatformSettings)}


class Authenticator(Protocol):
    """Per-request credentials: a SigV4 signature, an OAuth access token kept fresh. Built
    once per pooled client (a token serves many calls)."""

    async def headers(
        self, method: str, url: str, body: bytes, headers: Mapping[str, str]
    ) -> Mapping[str, str]:
        """The headers to add to this request. ``headers`` are those it already carries
        (for a signer that signs them). Raises ``UpstreamFailure`` (``AUTH``, naming the
        provider and what to fix, never a secret) when no credential can be had."""
        ...

    async def aclose(self) -> None: ...


class StreamReader(Protocol):
    """A streamed body as the protocol's own bytes: ``b""`` at the end, ``UpstreamFailure``
    on a cut (``routing.upstream.transport.BodyReader`` is the direct one)."""

    async def read(self) -> bytes: ...


@dataclass(frozen=True, slots=True)
class PlatformSpec:
    """Where and how a protocol is reached: the URLs, the credential's headers, how a
    stream is framed and how an error answer is read. A platform overrides what differs."""

    name: str
    label: str
    kinds: frozenset[Kind]  # the protocols it can carry
    classify: Callable[..., Failure] = classify_http  # (status, body, headers, *, now)
    fields: tuple[str, ...] = ()  # the PlatformSettings fields it reads (the form shows them)
    required: tuple[str, ...] = ()  # of those, the ones it cannot do without
    model_in_url: bool = False  # its endpoint names the model (Bedrock, Vertex)
    # What its regions look like ("us-east-1", "europe-west4"): a region that cannot be
    # one is refused at load, not discovered as a DNS failure on the first call.
    region_pattern: str = ""

    def check(
        self, kind: str, base_url: str, api_key: str, settings: PlatformSettings
    ) -> dict[str, str]:
        """Field -> why a provider of ``kind`` cannot be reached on this platform as
        configured; the same check for the file, the API, the page and the admin."""
        problems: dict[str, str] = {}
        if kind not in {k.value for k in self.kinds}:
            carried = ", ".join(sorted(k.value for k in self.kinds))
            problems["kind"] = f"platform '{self.name}' carries {carried}, not '{kind}'"
        for name in self.required:
            if not getattr(settings, name):
                problems[name] = f"platform '{self.name}' needs a {name}"
        region = settings.region
        if region and self.region_pattern and not re.fullmatch(self.region_pattern, region):
            problems["region"] = f"'{region[:64]}' is not a region of platform '{self.name}'"
        if not base_url and not self.has_default_endpoint:
            problems["base_url"] = f"platform '{self.name}' needs a base_url"
        return problems

    @property
    def has_default_endpoint(self) -> bool:
        """Whether ``base_url`` may be left empty (the platform's endpoint is then built
        from its fields)."""
        return False

    def schema_rules(self) -> list[dict[str, Any]]:
        """What :meth:`check` adds to the shared rules, as JSON Schema for the API's
        document (applied when ``platform`` is this one): a pattern, fields that go
        together. The shared ones (kinds, required fields, ``region_pattern``) are
        derived by ``routing.config.schema.providers``."""
        return []

    def default_base_url(self, protocol: ProtocolSpec, settings: PlatformSettings) -> str:
        """The endpoint when ``base_url`` is empty ("": none, ``base_url`` required)."""
        return ""

    def resolve_base_url(
        self, protocol: ProtocolSpec, base_url: str, settings: PlatformSettings
    ) -> str:
        """The base a provider's client sends under: its ``base_url`` (overriding the
        platform's endpoint), else :meth:`default_base_url`. A platform whose paths carry
        its fields (Vertex's project and region) adds them to an override here."""
        return base_url or self.default_base_url(protocol, settings)

    def base(self, protocol: ProtocolSpec, base_url: str) -> str:
        """The base the protocol's paths go under: a documented base without a version
        (Anthropic's, Gemini's) gets the protocol's, unless one is there already."""
        base = base_url.rstrip("/")
        if protocol.versioned_base and not base.endswith(("/v1", protocol.version)):
            return base + protocol.version
        return base

    def endpoint_url(
        self, protocol: ProtocolSpec, base_url: str, model: str = "", stream: bool = False
    ) -> str:
        """Where a request goes; ``model`` and ``stream`` matter to a protocol whose URL
        names them (``model_path``) and to a platform that does (``model_in_url``)."""
        if protocol.model_path is not None:
            return self.base(protocol, base_url) + protocol.model_path(model, stream)
        return self.base(protocol, base_url) + protocol.path

    def models_url(self, protocol: ProtocolSpec, base_url: str) -> str | None:
        """The model list's URL (None: the platform lists no models)."""
        return self.base(protocol, base_url) + "/models"

    def count_tokens_url(self, protocol: ProtocolSpec, base_url: str, model: str) -> str | None:
        """Where a token count goes (None: it cannot count, SPEC §15)."""
        if not protocol.count_tokens:
            return None
        return self.endpoint_url(protocol, base_url, model) + "/count_tokens"

    def prepare_body(self, protocol: ProtocolSpec, body: bytes, model: str, stream: bool) -> bytes:
        """The protocol's body as this platform wants it (direct: as it is)."""
        return body

    def headers_into_body(
        self, protocol: ProtocolSpec, body: bytes, headers: Mapping[str, str] | None
    ) -> tuple[bytes, Mapping[str, str] | None]:
        """A request's own headers this platform carries in the body instead (Bedrock's
        ``anthropic_beta``): the body with them and the headers without (direct: as they
        are). Runs after :meth:`prepare_body`, before signing."""
        return body, headers

    def count_tokens_body(self, protocol: ProtocolSpec, body: bytes) -> bytes:
        """A token count's body (naming its model) as this platform wants it (direct: as
        it is)."""
        return body

    def count_tokens_answer(self, payload: bytes) -> bytes:
        """The count endpoint's answer as the protocol's own (``{"input_tokens": n}``)."""
        return payload

    def auth_headers(self, protocol: ProtocolSpec, api_key: str) -> dict[str, str]:
        """The headers carrying a fixed credential (the API key)."""
        if protocol.auth_header == "authorization":
            return {"authorization": f"Bearer {api_key}"}
        return {protocol.auth_header: api_key}

    def authenticator(
        self,
        provider: str,
        protocol: ProtocolSpec,
        api_key: str,
        settings: PlatformSettings,
        clock: Callable[[], float],
    ) -> Authenticator | None:
        """The per-request credential of a provider named ``provider`` (None: the fixed
        :meth:`auth_headers` are all it sends)."""
        return None

    def reader(self, response: UpstreamResponse) -> StreamReader | BodyReader:
        """A streamed body as the protocol's own bytes (direct: as they arrive). A failure
        it raises from a failure frame (not ``TRANSPORT``) is upstream text: the attempt's
        reader scrubs it (``routing.gateway.attempt.EventReader``)."""
        return response.reader()
