"""The only module that knows the HTTP libraries' insides (STYLE: one adapter module).

The gateway speaks to upstreams through httpx's API (the user's choice) on the
``httpx-aiohttp`` transport: httpx's default transport walks its whole pool on every
request and costs several ms of CPU per call under concurrency on a small machine.
Everything above this module sees :class:`UpstreamResponse` and ``UpstreamFailure``.

Three things here reach past public APIs, and this module owns them:

- :class:`BodyReader` reads the aiohttp stream under httpx's wrapper
  (``response.stream._stream._aiohttp_response.content``) and, when aiohttp raises a
  connection error, hands out ``content._buffer`` first: aiohttp raises *before* giving
  out bytes that arrived just ahead of a cut, so a stream dropped after two chunks would
  reach the client with one;
- :func:`translate_exception` looks at the aiohttp cause of httpx-aiohttp's
  ``ConnectTimeout``, which that transport raises for every dropped connection;
- :meth:`Pool._send` hands a request to the transport httpx's client would pick
  (``AsyncClient._transport_for_url``) instead of ``AsyncClient.send``, whose cookie jar
  a gateway must not keep; and :class:`CookielessTransport` makes the transport's aiohttp
  session itself, the same one ``AiohttpTransport.get_client`` makes but with aiohttp's
  ``DummyCookieJar``: aiohttp's default jar keeps every named host's cookies (only an IP
  address's are refused) and sends them with every later request to that host.

They were written for the versions in :data:`WRITTEN_FOR` (pinned in pyproject.toml);
``tests/upstream/test_transport_contract.py`` fails loudly when an upgrade changes any
of them, instead of letting a cut stream lose its tail, or a cookie jar come back, in
silence.
"""

from __future__ import annotations

import errno
import functools
import socket
import ssl
from collections.abc import AsyncIterator, Mapping
from importlib.metadata import version

import aiohttp
import httpx
from aiohttp.abc import AbstractResolver, ResolveResult
from httpx_aiohttp import AiohttpTransport

from routing.engine.addresses import metadata_address
from routing.engine.failures import Failure, FailureCode
from routing.upstream.base import Timeouts, UpstreamFailure

WRITTEN_FOR = {"httpx": "0.28.1", "httpx-aiohttp": "0.2.0", "aiohttp": "3.14.5"}


class MetadataRefusingResolver(AbstractResolver):
    """aiohttp's resolver, less the addresses of cloud metadata services
    (``routing.engine.addresses``). The config schema refuses a ``base_url`` that names
    one; this refuses a name that *resolves* to one when connecting (DNS rebinding: a
    name that pointed elsewhere when it was written). It runs once per new connection
    (and aiohttp caches what it returns for 10 s), never per request on a kept-alive
    connection. An address literal is not resolved: the schema judged it."""

    def __init__(self, inner: AbstractResolver | None = None) -> None:
        self._inner = inner if inner is not None else aiohttp.DefaultResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        found = await self._inner.resolve(host, port, family)
        kept = [result for result in found if not metadata_address(result["host"])]
        if not kept:
            # with an errno, so aiohttp's connection error carries the message
            raise OSError(errno.EACCES, f"{host} resolves to a cloud metadata address: refused")
        return kept

    async def close(self) -> None:
        await self._inner.close()


class CookielessTransport(AiohttpTransport):
    """httpx-aiohttp's transport on an aiohttp session that keeps no cookies. One session
    per provider serves every caller, so a cookie one upstream answer set (a CDN's bot
    cookie, a sticky-session cookie) would otherwise go out with everyone's later calls to
    that provider. The connector is ``AiohttpTransport.get_client``'s own, with a resolver
    that refuses cloud metadata addresses."""

    def get_client(self) -> aiohttp.ClientSession:
        most = self.limits.max_connections
        connector = aiohttp.TCPConnector(
            keepalive_timeout=self.limits.keepalive_expiry,
            ssl=self.ssl_context,
            limit=100 if most is None else most,  # 100: aiohttp's default
            resolver=MetadataRefusingResolver(),
        )
        return aiohttp.ClientSession(connector=connector, cookie_jar=aiohttp.DummyCookieJar())


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The verifying TLS context every provider's pool shares (httpx's default one, so
    ``SSL_CERT_FILE`` and ``SSL_CERT_DIR`` still apply). Loading the CA bundle costs about
    a fifth of a second: once per process, at start (``Runtime.warm``), not in each
    provider's first call."""
    return httpx.create_ssl_context()


def installed_versions() -> dict[str, str]:
    return {name: version(name) for name in WRITTEN_FOR}


def translate_exception(exc: BaseException, *, phase: str) -> Failure:
    """Map an httpx/aiohttp/asyncio exception to a failure code, most specific first."""
    cause = exc.__cause__
    # httpx-aiohttp maps every aiohttp connection error, a dropped connection included,
    # to ConnectTimeout; the aiohttp cause tells a refused connection, a real timeout and
    # a cut apart.
    # The OS's words name the address the gateway tried: the log and the ledger keep them,
    # a client is told only that the connection failed (``Failure.public``).
    if isinstance(cause, aiohttp.ClientConnectorError):
        return _unreachable(f"connection failed: {cause.strerror or cause}")
    if isinstance(
        cause, aiohttp.ServerDisconnectedError | aiohttp.ClientOSError | aiohttp.ClientPayloadError
    ):
        return Failure(FailureCode.TRANSPORT, f"connection lost during {phase}")
    if isinstance(exc, TimeoutError | httpx.TimeoutException):
        return Failure(FailureCode.TIMEOUT, f"{phase} timeout")
    if isinstance(exc, httpx.ConnectError):
        return _unreachable(f"connection failed: {exc}" if str(exc) else "connection failed")
    if isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError | httpx.WriteError):
        return Failure(FailureCode.TRANSPORT, f"connection lost during {phase}")
    if isinstance(exc, httpx.TransportError):
        return Failure(
            FailureCode.TRANSPORT, f"transport error during {phase}: {type(exc).__name__}"
        )
    if isinstance(exc, OSError):
        return Failure(
            FailureCode.TRANSPORT,
            f"network error during {phase}: {exc.strerror or exc}",
            public=f"network error during {phase}",
        )
    return Failure(FailureCode.UNKNOWN, f"{type(exc).__name__} during {phase}")


def _unreachable(message: str) -> Failure:
    return Failure(FailureCode.TRANSPORT, message, public="connection failed")


# What a send or a read may raise that is the network's doing, not a bug of ours.
NETWORK_ERRORS = (httpx.HTTPError, OSError)


class Pool:
    """One provider's pooled connections, reused by every call."""

    def __init__(
        self, *, headers: Mapping[str, str], timeouts: Timeouts, max_connections: int
    ) -> None:
        limits = httpx.Limits(
            max_connections=max_connections, max_keepalive_connections=max_connections
        )
        self._client = httpx.AsyncClient(
            transport=CookielessTransport(limits=limits, verify=tls_context()),
            timeout=httpx.Timeout(
                connect=timeouts.connect_s,
                read=None,
                write=timeouts.connect_s,
                pool=timeouts.connect_s * 2,
            ),
            headers=dict(headers),
        )
        self._timeouts = timeouts
        self._urls: dict[str, httpx.URL] = {}
        # What build_request merges in per request, merged once: the client's headers (its
        # defaults and ours) and its timeouts (no params, cookies or base URL to merge)
        self._headers = self._client.headers
        self._raw = list(self._headers.raw)
        self._timeout = self._client.timeout.as_dict()
        # httpx adds Host and Content-Length unless the headers have them (_request)
        framing = {b"host", b"content-length", b"transfer-encoding"}
        names = {name.lower() for name, _ in self._raw}
        self._own_framing = not names.isdisjoint(framing)
        # A call's own header of one of these names replaces or frames: build_request's way
        self._merged_names = frozenset(names | framing)

    def _url(self, url: str) -> httpx.URL:
        """Parsed once: httpx re-parses a str URL per request."""
        parsed = self._urls.get(url)
        if parsed is None:
            if len(self._urls) < 64:
                parsed = self._urls[url] = httpx.URL(url)
            else:
                parsed = httpx.URL(url)
        return parsed

    async def post(
        self, url: str, body: bytes, headers: Mapping[str, str] | None = None
    ) -> UpstreamResponse:
        """POST and return once the response headers arrived (the body unread)."""
        request = self._request(url, body, headers)
        try:
            response = await self._send(request)
        except NETWORK_ERRORS as exc:
            raise UpstreamFailure(translate_exception(exc, phase="connect")) from exc
        return UpstreamResponse(response)

    def _request(
        self, url: str, body: bytes, headers: Mapping[str, str] | None = None
    ) -> httpx.Request:
        """``AsyncClient.build_request("POST", url, content=body, headers=headers)``: the
        same request (``tests/upstream/test_transport_contract.py`` compares them), about a
        sixth of its CPU. ``build_request`` merges the client's headers, cookies, query and
        timeouts into new objects, then the request encodes the body and rebuilds its
        headers with the ``Host`` and ``Content-Length`` it adds; here the headers are
        given whole, as bytes, with the call's own ``headers`` (an attempt's
        ``traceparent``, a door's protocol headers) after the client's and those two where
        httpx puts them, and the body as its stream."""
        parsed = self._url(url)
        own: list[tuple[bytes, bytes]] = []
        if headers:
            merged = self._merged_names
            for name, value in headers.items():
                raw = name.encode()
                if raw.lower() in merged:  # replaces a client header, or frames the body
                    return self._merged(parsed, body, headers)
                own.append((raw, value.encode()))
        if not body or self._own_framing:  # httpx's own order of things differs there
            return self._merged(parsed, body, headers)
        request = httpx.Request(
            "POST",
            parsed,
            headers=[
                (b"Host", parsed.netloc),
                *self._raw,
                *own,
                (b"Content-Length", b"%d" % len(body)),
            ],
            stream=httpx.ByteStream(body),
            extensions={"timeout": self._timeout},
        )
        request.read()  # the body as ``content``, which the transport sends
        return request

    def _merged(
        self, url: httpx.URL, body: bytes, headers: Mapping[str, str] | None
    ) -> httpx.Request:
        """The request built by httpx from the client's headers, the call's own set one by
        one on its copy of them, each replacing the client's of that name as a merge
        would (UTF-8, as a header set on httpx's ``Headers`` is encoded)."""
        request = httpx.Request(
            "POST",
            url,
            headers=self._headers,
            content=body,
            extensions={"timeout": self._timeout},
        )
        if headers:
            on_request = request.headers
            for name, value in headers.items():
                on_request[name] = value
        return request

    async def get(self, url: str, headers: Mapping[str, str] | None = None) -> UpstreamResponse:
        """A plain GET (a model list), bounded by the provider's total timeout; ``headers``
        are added to this request only (a platform's signature or token)."""
        timeouts = self._timeouts
        request = self._client.build_request(
            "GET",
            self._url(url),
            headers=dict(headers) if headers else None,
            timeout=httpx.Timeout(timeouts.total_s, connect=timeouts.connect_s),
        )
        try:
            response = await self._send(request)
        except NETWORK_ERRORS as exc:
            raise UpstreamFailure(translate_exception(exc, phase="request")) from exc
        return UpstreamResponse(response)

    async def _send(self, request: httpx.Request) -> httpx.Response:
        """``AsyncClient.send(request, stream=True)`` less what it does around the
        transport that a gateway must not do or has no use for: above all, keeping each
        response's cookies in the client's jar — one jar per provider, shared by every
        caller, so one client's cookie (a CDN's, say) would go out with everyone's later
        calls; and turning every response into urllib and ``email`` objects for that jar
        was 7 % of a short call's CPU under a profiler. Also left out: the auth and
        redirect flows (none configured; an upstream's redirect is its answer, as with
        ``follow_redirects=False``), the response timer and the per-request log line. The
        transport is the one httpx picks for the URL (a proxy from the environment
        included), and the response is the transport's, its request set."""
        client = self._client
        if client.is_closed:
            raise RuntimeError("Cannot send a request, as the client has been closed.")
        return await client._transport_for_url(request.url).handle_async_request(request)

    @property
    def closed(self) -> bool:
        return self._client.is_closed

    async def aclose(self) -> None:
        await self._client.aclose()


class UpstreamResponse:
    """An upstream's answer whose headers arrived. Every read raises only
    ``UpstreamFailure``; the owner closes it (:meth:`aclose`)."""

    __slots__ = ("_response", "status_code", "headers")

    def __init__(self, response: httpx.Response) -> None:
        self._response = response
        self.status_code = response.status_code
        self.headers: Mapping[str, str] = response.headers

    async def read(self) -> bytes:
        """The whole body."""
        try:
            return await self._response.aread()
        except NETWORK_ERRORS as exc:
            raise UpstreamFailure(translate_exception(exc, phase="body")) from exc

    async def read_limited(self, limit: int) -> bytes:
        """At most ``limit`` bytes of the body (error bodies can be huge HTML pages); a
        body cut short by the network is what arrived of it."""
        parts: list[bytes] = []
        size = 0
        try:
            async for chunk in self._response.aiter_raw():
                parts.append(chunk)
                size += len(chunk)
                if size >= limit:
                    break
        except NETWORK_ERRORS:
            pass
        return b"".join(parts)[:limit]

    def reader(self) -> BodyReader:
        """The body network read by network read (streams)."""
        return BodyReader(self._response)

    def release_request(self) -> None:
        """For an answer that streams on: httpx keeps the request (and so its body) on the
        response for as long as the response lives, and nothing reads that body again
        (aiohttp holds whatever it still has to write). A stand-in without a body takes its
        place, for the messages of errors raised while reading."""
        sent = self._response.request
        self._response.request = httpx.Request(sent.method, sent.url)

    async def aclose(self) -> None:
        response = self._response
        try:
            await response.aclose()
        finally:
            # httpx binds a response and its stream to each other: left so, a finished
            # call's response, aiohttp's and their buffers wait for a full garbage
            # collection instead of going with their last reference (as httpx's own
            # unpickled responses do, the closed one gets a stream that holds nothing)
            response.stream = _RELEASED


_RELEASED = httpx.ByteStream(b"")


class BodyReader:
    """The raw body bytes as they arrive, one network read per ``read()``, losing nothing
    before a cut; ``b""`` at the end. A cut raises ``UpstreamFailure`` (TRANSPORT) once
    every byte that came before it was handed out.

    It reads the aiohttp stream directly (see the module docstring): that hands out the
    tail aiohttp holds back, and skips httpx's per-read iterator layers (this runs once
    per relayed chunk)."""

    __slots__ = ("_content", "_fallback", "_failed")

    def __init__(self, response: httpx.Response) -> None:
        stream = getattr(response.stream, "_stream", response.stream)  # BoundAsyncStream
        native = getattr(stream, "_aiohttp_response", None)
        self._content: aiohttp.StreamReader | None = native.content if native else None
        # another transport (httpx.MockTransport): httpx's own iterator
        self._fallback: AsyncIterator[bytes] | None = (
            response.aiter_raw() if native is None else None
        )
        self._failed: BaseException | None = None

    async def read(self) -> bytes:
        content = self._content
        if content is None:
            assert self._fallback is not None
            try:
                return await anext(self._fallback, b"")
            except NETWORK_ERRORS as exc:
                raise UpstreamFailure(translate_exception(exc, phase="stream")) from exc
        if self._failed is not None:
            raise UpstreamFailure(
                Failure(FailureCode.TRANSPORT, "connection lost during stream")
            ) from self._failed
        try:
            return await content.readany()
        except (aiohttp.ClientPayloadError, aiohttp.ClientConnectionError) as exc:
            tail = b"".join(getattr(content, "_buffer", ()))
            if tail:
                content._buffer.clear()
                self._failed = exc
                return tail
            raise UpstreamFailure(
                Failure(FailureCode.TRANSPORT, "connection lost during stream")
            ) from exc
        except NETWORK_ERRORS as exc:
            raise UpstreamFailure(translate_exception(exc, phase="stream")) from exc
