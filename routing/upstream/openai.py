"""The one seam to OpenAI-compatible upstreams (``kind: openai``).

One pooled ``httpx.AsyncClient`` per provider, on the aiohttp transport: httpx's default
transport walks its whole pool on every request and costs several ms of CPU per call under
concurrency on a small machine; ``httpx-aiohttp`` keeps the httpx API at a fraction of that.

Foreign exceptions are translated exactly once, here, into engine ``Failure`` values
(most specific first, ``raise ... from exc``), so nothing above this module knows httpx.

Exception tree::

    UpstreamFailure(Exception)        carries .failure: routing.engine.failures.Failure
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import aiohttp
import httpx
from httpx_aiohttp import AiohttpTransport

from routing.engine.failures import Failure, FailureCode, classify_http

ERROR_BODY_LIMIT = 64 * 1024


@dataclass(frozen=True, slots=True)
class Timeouts:
    connect_s: float = 5.0
    first_token_s: float = 60.0
    idle_s: float = 60.0
    total_s: float = 600.0


class UpstreamFailure(Exception):
    """An upstream outcome that is not a usable answer, already classified."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.message)
        self.failure = failure


def translate_exception(exc: BaseException, *, phase: str) -> Failure:
    """Map an httpx/asyncio exception to a failure code, most specific first."""
    cause = exc.__cause__
    # httpx-aiohttp maps every aiohttp connection error, a dropped connection included,
    # to ConnectTimeout; the aiohttp cause tells a real timeout from a cut.
    if isinstance(
        cause, aiohttp.ServerDisconnectedError | aiohttp.ClientOSError | aiohttp.ClientPayloadError
    ):
        return Failure(FailureCode.TRANSPORT, f"connection lost during {phase}")
    if isinstance(exc, TimeoutError | httpx.TimeoutException):
        return Failure(FailureCode.TIMEOUT, f"{phase} timeout")
    if isinstance(exc, httpx.ConnectError):
        return Failure(
            FailureCode.TRANSPORT, f"connection failed: {exc}" if str(exc) else "connection failed"
        )
    if isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError | httpx.WriteError):
        return Failure(FailureCode.TRANSPORT, f"connection lost during {phase}")
    if isinstance(exc, httpx.TransportError):
        return Failure(
            FailureCode.TRANSPORT, f"transport error during {phase}: {type(exc).__name__}"
        )
    if isinstance(exc, OSError):
        return Failure(
            FailureCode.TRANSPORT, f"network error during {phase}: {exc.strerror or exc}"
        )
    return Failure(FailureCode.UNKNOWN, f"{type(exc).__name__} during {phase}")


class OpenAIClient:
    """A pooled client for one provider. Created once per provider version, reused by every call.

    Subclasses for the other upstream kinds (``routing.upstream.anthropic``,
    ``routing.upstream.responses``) change only the endpoint and the credential header.
    """

    kind = "openai"

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str,
        headers: Mapping[str, str] | None = None,
        timeouts: Timeouts = Timeouts(),
        max_connections: int = 512,
        redact: Callable[[str], str] | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        # Applied where upstream text enters: every provider's secret and any 6+ character
        # fragment of one leaves it before anything keeps it (SPEC §9).
        self._redact = redact
        self.timeouts = timeouts
        self.url = self.endpoint_url(self.base_url)
        self._url = httpx.URL(self.url)  # parsed once: httpx re-parses a str URL per request
        self.max_connections = max_connections
        self._headers = {"content-type": "application/json", "accept": "application/json"}
        self._headers.update(self.kind_headers())
        self._headers.update(headers or {})
        if api_key:
            self._headers.update(self.credential_headers(api_key))
        limits = httpx.Limits(
            max_connections=max_connections, max_keepalive_connections=max_connections
        )
        self._client = httpx.AsyncClient(
            transport=AiohttpTransport(limits=limits),
            timeout=httpx.Timeout(
                connect=timeouts.connect_s,
                read=None,
                write=timeouts.connect_s,
                pool=timeouts.connect_s * 2,
            ),
            headers=self._headers,
        )

    def upstream_failure(self, failure: Failure) -> Failure:
        """A failure whose message is the upstream's own text, scrubbed of secrets."""
        if self._redact is None:
            return failure
        message = self._redact(failure.message)
        if message == failure.message:
            return failure
        return Failure(failure.code, message, failure.status, failure.retry_after_s)

    @staticmethod
    def endpoint_url(base_url: str) -> str:
        return base_url + "/chat/completions"

    @staticmethod
    def models_url(base_url: str) -> str:
        return base_url + "/models"

    @staticmethod
    def test_body(model: str) -> dict[str, object]:
        """The cheapest request the provider's "test" button sends."""
        return {
            "model": model,
            "messages": [{"role": "user", "content": "ping"}],
            "max_tokens": 1,
            "stream": False,
        }

    @staticmethod
    def kind_headers() -> dict[str, str]:
        return {}

    @staticmethod
    def credential_headers(api_key: str) -> dict[str, str]:
        return {"authorization": f"Bearer {api_key}"}

    async def send(
        self, body: bytes, *, path: str | None = None, headers: Mapping[str, str] | None = None
    ) -> httpx.Response:
        """Send a request (to the kind's endpoint, or ``path`` under the base URL, e.g.
        ``/embeddings``) and return once the response headers arrived. ``headers`` are
        added to this request only (a pass-through's protocol headers, e.g. ``anthropic-beta``).

        Raises ``UpstreamFailure`` for transport errors and for any status >= 400 (whose
        bounded error body is read and classified). The caller owns closing the response.
        """
        url = self._url if path is None else self.base_url + path
        request = self._client.build_request("POST", url, content=body, headers=headers)
        try:
            response = await self._client.send(request, stream=True)
        except (httpx.HTTPError, OSError) as exc:
            raise UpstreamFailure(translate_exception(exc, phase="connect")) from exc
        if response.status_code >= 400:
            try:
                payload = await read_limited(response, ERROR_BODY_LIMIT)
            except (httpx.HTTPError, OSError):
                payload = b""
            finally:
                await response.aclose()
            raise UpstreamFailure(
                self.upstream_failure(
                    classify_http(response.status_code, payload, response.headers, now=time.time())
                )
            )
        return response

    async def get(self, path: str) -> httpx.Response:
        """A plain GET (model list, health test), with the provider's total timeout."""
        try:
            return await self._client.get(
                self.base_url + path,
                timeout=httpx.Timeout(self.timeouts.total_s, connect=self.timeouts.connect_s),
            )
        except (httpx.HTTPError, OSError) as exc:
            raise UpstreamFailure(translate_exception(exc, phase="request")) from exc

    async def aclose(self) -> None:
        await self._client.aclose()


async def read_limited(response: httpx.Response, limit: int) -> bytes:
    """Read at most ``limit`` bytes of a response body (error bodies can be huge HTML pages)."""
    parts: list[bytes] = []
    size = 0
    async for chunk in response.aiter_raw():
        parts.append(chunk)
        size += len(chunk)
        if size >= limit:
            break
    return b"".join(parts)[:limit]


class BodyReader:
    """The raw body bytes as they arrive, one network read per ``read()``, losing nothing
    before a cut; ``b""`` at the end.

    aiohttp's reader raises a connection error *before* handing out bytes that arrived
    just ahead of the cut, so a stream dropped after two chunks would reach the client
    with one. Reading the aiohttp stream directly lets us hand out that tail first (and
    skips httpx's per-read iterator layers: this runs once per relayed chunk).
    """

    __slots__ = ("_content", "_fallback", "_failed")

    def __init__(self, response: httpx.Response) -> None:
        stream = getattr(
            response.stream, "_stream", response.stream
        )  # httpx wraps it in BoundAsyncStream
        native = getattr(stream, "_aiohttp_response", None)
        self._content: aiohttp.StreamReader | None = native.content if native else None
        # another transport (tests with httpx.MockTransport): httpx's own iterator
        self._fallback = response.aiter_raw() if native is None else None
        self._failed: BaseException | None = None

    async def read(self) -> bytes:
        content = self._content
        if content is None:
            assert self._fallback is not None
            return await anext(self._fallback, b"")
        if self._failed is not None:
            failed = self._failed
            raise httpx.ReadError(str(failed) or type(failed).__name__) from failed
        try:
            return await content.readany()
        except (aiohttp.ClientPayloadError, aiohttp.ClientConnectionError) as exc:
            tail = b"".join(getattr(content, "_buffer", ()))
            if tail:
                content._buffer.clear()
                self._failed = exc
                return tail
            raise httpx.ReadError(str(exc) or type(exc).__name__) from exc
