"""The one seam to upstreams, whatever their kind: a protocol reached on a platform
(``routing.protocols.registry``), which say the endpoint, the credential's headers and
the protocol's own headers; the client only sends.

One pooled client per provider (``routing.upstream.transport.Pool``). A send answers an
``UpstreamResponse`` or raises ``UpstreamFailure`` — a transport error translated once in
the transport, or a status >= 400 whose bounded body is classified here — so nothing above
``routing.upstream`` knows an HTTP library. The same client serves calls, active health
checks, the provider "test" button and the model-list refresh.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from routing.engine.failures import Failure, FailureCode
from routing.platforms.base import Authenticator, PlatformSettings, StreamReader
from routing.protocols import Protocol
from routing.protocols.registry import DIRECT, PROTOCOLS, PlatformSpec, ProtocolSpec
from routing.upstream.base import Timeouts, UpstreamFailure
from routing.upstream.transport import Pool, UpstreamResponse

__all__ = ["OpenAIClient", "Timeouts", "UpstreamFailure", "UpstreamResponse"]

ERROR_BODY_LIMIT = 64 * 1024
DEFAULT_TIMEOUTS = Timeouts()


class OpenAIClient:
    """A pooled client for one provider. Created once per provider version, reused by every
    call. ``protocol`` and ``platform`` (the registry's) say where and how it sends; the
    default is an OpenAI-compatible chat upstream reached directly."""

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str,
        protocol: ProtocolSpec = PROTOCOLS[Protocol.CHAT],
        platform: PlatformSpec = DIRECT,
        settings: PlatformSettings | None = None,
        provider: str = "",
        headers: Mapping[str, str] | None = None,
        timeouts: Timeouts = DEFAULT_TIMEOUTS,
        max_connections: int = 512,
        redact: Callable[[str], str] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``clock`` is wall time (the runtime's): it dates a ``Retry-After`` given as an
        HTTP date and a platform token's expiry. ``provider`` (its name) and ``settings``
        (its platform fields) go to the platform's authenticator."""
        self.base_url = base_url.rstrip("/")
        self._clock = clock
        # Applied where upstream text enters: every provider's secret and any 6+ character
        # fragment of one leaves it before anything keeps it (SPEC §9).
        self._redact = redact
        self.timeouts = timeouts
        self.protocol = protocol
        self.platform = platform
        self.kind = protocol.kind.value
        self.url = platform.endpoint_url(protocol, self.base_url)
        self.models_url = platform.models_url(protocol, self.base_url)
        self.max_connections = max_connections
        # the URL names the model or the stream: computed per request
        self._per_request_url = platform.model_in_url or protocol.model_path is not None
        self._headers = {"content-type": "application/json", "accept": "application/json"}
        self._headers.update(protocol.headers)
        self._headers.update(headers or {})
        self._auth: Authenticator | None = platform.authenticator(
            provider, protocol, api_key, settings or PlatformSettings(), clock
        )
        if api_key and self._auth is None:
            self._headers.update(platform.auth_headers(protocol, api_key))
        self._pool = Pool(headers=self._headers, timeouts=timeouts, max_connections=max_connections)

    def upstream_failure(self, failure: Failure) -> Failure:
        """A failure whose message is the upstream's own text, scrubbed of secrets."""
        if self._redact is None:
            return failure
        message = self._redact(failure.message)
        if message == failure.message:
            return failure
        return Failure(failure.code, message, failure.status, failure.retry_after_s)

    def test_body(self, model: str) -> dict[str, object]:
        """The cheapest request the provider's "test" button sends, in its protocol."""
        return self.protocol.test_body(model)

    async def send(
        self,
        body: bytes,
        *,
        path: str | None = None,
        headers: Mapping[str, str] | None = None,
        model: str = "",
        stream: bool = False,
    ) -> UpstreamResponse:
        """Send a request (to the kind's endpoint, or ``path`` under the base URL, e.g.
        ``/embeddings``) and return once the response headers arrived. ``headers`` are
        added to this request only (a pass-through's protocol headers, e.g. ``anthropic-beta``).
        ``model`` and ``stream`` say the endpoint of a kind whose URL names them (Gemini's).

        Raises ``UpstreamFailure`` for transport errors and for any status >= 400 (whose
        bounded error body is read and classified). The caller owns closing the response.
        """
        if path is not None:
            url = path if "://" in path else self.base_url + path
        elif self._per_request_url:
            url = self.platform.endpoint_url(self.protocol, self.base_url, model, stream)
        else:
            url = self.url
        if self.platform is not DIRECT:
            if path is None:
                body = self.platform.prepare_body(self.protocol, body, model, stream)
                body, headers = self.platform.headers_into_body(self.protocol, body, headers)
            if self._auth is not None:
                sent = {**self._headers, **(headers or {})}
                headers = {**(headers or {}), **await self._auth.headers("POST", url, body, sent)}
        response = await self._pool.post(url, body, headers)
        if response.status_code >= 400:
            try:
                payload = await response.read_limited(ERROR_BODY_LIMIT)
            finally:
                await response.aclose()
            raise UpstreamFailure(
                self.upstream_failure(
                    self.platform.classify(
                        response.status_code, payload, response.headers, now=self._clock()
                    )
                )
            )
        return response

    def reader(self, response: UpstreamResponse) -> StreamReader:
        """A streamed answer's body as the protocol's own bytes (the platform's framing
        undone: a Bedrock event-stream re-framed as the protocol's SSE)."""
        return self.platform.reader(response)

    def count_tokens_url(self, model: str) -> str | None:
        """Where this provider counts tokens (None: it cannot)."""
        return self.platform.count_tokens_url(self.protocol, self.base_url, model)

    def count_tokens_body(self, body: bytes) -> bytes:
        """A token count's body as this provider's platform sends it."""
        return self.platform.count_tokens_body(self.protocol, body)

    def count_tokens_answer(self, payload: bytes) -> bytes:
        """The platform's count answer as the protocol's ``{"input_tokens": n}``."""
        return self.platform.count_tokens_answer(payload)

    async def model_list(self) -> Any:
        """``GET`` the kind's model list, parsed; ``UpstreamFailure`` for a transport error,
        a status >= 400 (classified, scrubbed), a body that is not JSON, or a platform
        that lists no models."""
        if self.models_url is None:
            raise UpstreamFailure(
                Failure(FailureCode.BAD_REQUEST, f"platform {self.platform.name} lists no models")
            )
        headers: Mapping[str, str] | None = None
        if self._auth is not None:
            headers = await self._auth.headers("GET", self.models_url, b"", self._headers)
        response = await self._pool.get(self.models_url, headers)
        try:
            if response.status_code >= 400:
                payload = await response.read_limited(ERROR_BODY_LIMIT)
                raise UpstreamFailure(
                    self.upstream_failure(
                        self.platform.classify(
                            response.status_code, payload, response.headers, now=self._clock()
                        )
                    )
                )
            raw = await response.read()  # the whole list; a cut is a TRANSPORT failure
        finally:
            await response.aclose()
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise UpstreamFailure(
                Failure(FailureCode.TRANSPORT, "the model list is not JSON")
            ) from None

    @property
    def closed(self) -> bool:
        return self._pool.closed

    async def aclose(self) -> None:
        try:
            if self._auth is not None:
                await self._auth.aclose()
        finally:
            await self._pool.aclose()
