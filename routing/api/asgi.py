"""A lean Django ASGI handler for the OpenAI-compatible ``/v1`` endpoints.

The settings page and admin need sessions, CSRF, auth and messages middleware and the
per-request signals that recycle database connections; the gateway path needs none of it:
it never touches the database on a call. Under ASGI each of those costs a thread hop per
request (Django's built-in middleware is sync, ``request_started`` / ``request_finished``
receivers are sync, and every request gets a fresh thread-sensitive executor), which on a
small machine is most of the gateway's CPU. ``/v1`` requests are therefore served by a
second handler with:

- ``GATEWAY_MIDDLEWARE`` (empty: authentication and errors live in the views),
- no ``ThreadSensitiveContext`` and no request signals,
- the response closed in place instead of through ``sync_to_async``.

Same URLconf, same views, same error rendering, same cancellation on client disconnect.
What this takes of Django's private parts is in ``routing.api.django_seam``, and only there.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import aclosing
from typing import IO, Any

from django.core.exceptions import RequestAborted
from django.core.handlers.asgi import ASGIHandler, get_script_prefix
from django.db import connections
from django.http import HttpRequest, HttpResponseBase, StreamingHttpResponse
from django.urls import ResolverMatch, URLResolver, get_resolver, set_script_prefix

from routing.api.django_seam import (
    asgi_scope,
    close_response,
    forget_body,
    middleware_setting,
    release_request,
)
from routing.api.edge import GATEWAY_PREFIX, guard
from routing.api.hosts import host_refusal
from routing.gateway.runtime import get_runtime

GATEWAY_MIDDLEWARE: list[str] = []
# The doors' paths, resolved at start (``GatewayASGIHandler.warm``).
DOOR_PATHS = (
    "/v1/chat/completions",
    "/v1/messages",
    "/v1/messages/count_tokens",
    "/v1/responses",
    "/v1/embeddings",
    "/v1/models",
    "/v1beta/models",
    "/v1beta/models/gemini:generateContent",
    "/v1beta/models/gemini:streamGenerateContent",
)
MATCHES_KEPT = 256  # resolved paths the handler keeps (GatewayASGIHandler.resolve_request)
STARTED = "switchyard.started"  # the scope key: the loop time the request reached us


def started_at(request: HttpRequest) -> float | None:
    """When the request reached the gateway (loop time), for ``x-switchyard-overhead-ms``;
    None for a request the lean handler did not make."""
    started: float | None = asgi_scope(request).get(STARTED)
    return started


class RelayResponse(StreamingHttpResponse):
    """A stream of ready-framed SSE bytes, sent by ``GatewayASGIHandler`` straight from
    ``chunks``: one ASGI message per relay write, without Django's per-chunk generator
    layers (``make_bytes`` mapping and ``chunk_bytes`` slicing), which matter at thousands
    of relayed chunks per second. Any other server or handler streams it as Django would."""

    def __init__(
        self,
        chunks: AsyncIterator[bytes],
        *,
        abandon: Callable[[], Awaitable[None]] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(chunks, **kwargs)
        self.chunks = chunks
        self.abandon = abandon  # when ``chunks`` is never iterated (StreamReply.abandon)


class GatewayASGIHandler(ASGIHandler):
    def __init__(self) -> None:
        super().__init__()
        self._resolver: URLResolver | None = None
        self._matches: dict[str, ResolverMatch] = {}

    def warm(self) -> None:
        """Resolve the doors' paths now, at start: the first resolution imports the whole
        URLconf (every view, and every API schema django-ninja builds with pydantic: most
        of what a start's first call used to spend) and compiles each pattern it walks."""
        resolver = get_resolver()
        self._resolver, self._matches = resolver, {}
        for path in DOOR_PATHS:
            self._matches[path] = resolver.resolve(path)

    def load_middleware(self, is_async: bool = False) -> None:
        with middleware_setting(GATEWAY_MIDDLEWARE):  # once, at start-up
            super().load_middleware(is_async=is_async)

    def resolve_request(self, request: HttpRequest) -> ResolverMatch:
        """Django's resolution of the path, kept per path: walking the URLconf's patterns
        (three levels of resolvers down to a door's view) was about 4 % of a short call's
        CPU, for the same few paths every time. A path that does not resolve is not kept
        (``Resolver404`` goes on to Django's 404); the kept matches go when the URLconf is
        reloaded (``get_resolver`` then gives a new resolver) and when they reach
        ``MATCHES_KEPT`` (under ``/v1`` every path resolves: an unknown one to the 404 view)."""
        if hasattr(request, "urlconf"):  # a per-request URLconf (a middleware's): as Django
            return super().resolve_request(request)
        resolver = get_resolver()
        if resolver is not self._resolver:
            self._resolver, self._matches = resolver, {}
        path = request.path_info
        match = self._matches.get(path)
        if match is None:
            match = super().resolve_request(request)
            if len(self._matches) >= MATCHES_KEPT:
                self._matches.clear()
            self._matches[path] = match
            return match
        request.resolver_match = match
        return match

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        await self.handle(scope, receive, send)

    async def handle(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """Django's ``ASGIHandler.handle`` minus the request signals and thread hops, with
        the view run in this task and one disconnect listener beside it (``_DisconnectWatch``)
        instead of two tasks and an ``asyncio.wait``."""
        scope[STARTED] = asyncio.get_running_loop().time()  # for the overhead header
        refused = host_refusal(scope)  # ALLOWED_HOSTS, as Django's own handler would
        if refused is not None:
            await self.send_response(refused, send)
            return
        try:
            body_file = await self.read_body(receive)
        except RequestAborted:
            return
        set_script_prefix(get_script_prefix(scope))
        request, error_response = self.create_request(scope, body_file)
        if request is None:
            assert error_response is not None  # Django returns a request or an error response
            body_file.close()
            await self.send_response(error_response, send)
            close_response(error_response)
            return

        # Watch for a disconnect while the view runs and its answer is sent: it cancels this
        # task, and with it the call, its upstream request and any backoff sleep. One task
        # beside the request's own, not two and an ``asyncio.wait`` as in Django: each open
        # stream holds whatever its request is waiting in, for minutes.
        watch = _DisconnectWatch(receive, self.listen_for_disconnect)
        response: HttpResponseBase | None = None
        try:
            response = await self.run_get_response(request)
            if isinstance(response, RelayResponse):
                _release_request(request, body_file, response)
            del request  # nothing reads it again; a relayed stream may run for minutes
            await self.send_response(response, send)
        except asyncio.CancelledError:
            if watch.server_cancelled():
                raise
        finally:
            failure = watch.end()
        if failure is not None:
            try:
                raise failure
            finally:
                del failure  # the frame would hold its own traceback: a cycle
        if response is not None:
            close_response(response)
        body_file.close()

    async def send_response(self, response: HttpResponseBase, send: Any) -> None:
        if not isinstance(response, RelayResponse):
            await super().send_response(response, send)
            return
        try:
            await send(_response_start(response))  # no local keeps it for the stream's life
        except BaseException:
            if response.abandon is not None:  # the client left before the first byte
                await response.abandon()
            raise
        async with aclosing(response.chunks) as chunks:  # type: ignore[type-var]
            async for part in chunks:
                await send({"type": "http.response.body", "body": part, "more_body": True})
        await send({"type": "http.response.body"})


class _DisconnectWatch:
    """The client's disconnect, awaited by a task of its own, cancels the request's task
    while the request is not yet answered."""

    __slots__ = ("cancelled", "listener", "served")

    def __init__(self, receive: Any, listen: Callable[[Any], Coroutine[Any, Any, None]]) -> None:
        self.cancelled = False
        self.served: asyncio.Task[Any] | None = asyncio.current_task()
        self.listener: asyncio.Task[None] | None = asyncio.create_task(listen(receive))
        self.listener.add_done_callback(self._left)

    def _left(self, _listener: asyncio.Task[None]) -> None:
        if self.served is not None:
            self.served.cancel()
            self.cancelled = True

    def server_cancelled(self) -> bool:
        """Whether a ``CancelledError`` in the request's task came (also) from someone
        else, the server shutting down: it must go on up, even if the client left too."""
        task = asyncio.current_task()
        return not self.cancelled or (task is not None and task.cancelling() > 1)

    def end(self) -> BaseException | None:
        """Stop watching; an error of the listener other than the client leaving (which
        is also how daphne and uvicorn say an answer is complete) is returned, to raise.

        It is returned, not raised here: raised from the listener, its traceback would hold
        this frame, which holds the task that holds the exception, and that cycle would keep
        each finished request (its call, response and buffers) alive until a full garbage
        collection."""
        served, self.served = self.served, None
        if self.cancelled and served is not None:
            served.uncancel()
        listener, self.listener = self.listener, None
        if listener is None:
            return None
        if not listener.done():
            listener.cancel()  # not awaited: an await here could swallow the server's cancel
            return None
        if listener.cancelled():
            return None
        failure = listener.exception()
        return None if isinstance(failure, RequestAborted) else failure


def _response_start(response: HttpResponseBase) -> dict[str, Any]:
    headers = [(name.encode("ascii"), value.encode("latin1")) for name, value in response.items()]
    return {"type": "http.response.start", "status": response.status_code, "headers": headers}


def _release_request(
    request: HttpRequest, body_file: IO[bytes], response: HttpResponseBase
) -> None:
    """A relayed stream is past its commit point when its view returns, and may stream for
    minutes: the request's body (spooled by the handler, then read by ``request.body``) is
    not read again, and an agent's history is often hundreds of KB; nor is the request
    itself (its headers and ``META``, a few KB per open stream)."""
    body_file.close()
    forget_body(request)
    release_request(request, response)


def split_gateway_traffic(default_app: Any, prefix: str | tuple[str, ...] = GATEWAY_PREFIX) -> Any:
    """An ASGI app sending HTTP requests for ``prefix`` paths to the lean handler, and
    everything else (the page, websockets, lifespan) to ``default_app``; every HTTP request
    first through the edge's bounded-read rules (``routing.api.edge.guard``). It goes in front of
    the protocol router and calls ``handle`` itself: every coroutine between the server and
    the relay is held by each open stream and resumed on each of its chunks.

    What a first call would build is built here, at start (SPEC §20): the URLconf and the
    doors' routes (``GatewayASGIHandler.warm``), the routing table and the providers'
    pooled clients (``Runtime.warm``; it reads the database, whose connection is then
    closed: this thread serves no query later)."""
    gateway_app = GatewayASGIHandler()
    gateway_app.warm()
    get_runtime().warm()
    connections.close_all()
    handle = gateway_app.handle

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await default_app(scope, receive, send)
            return
        served = handle if scope["path"].startswith(prefix) else default_app
        edge = guard(scope, receive, send)  # a bounded read, and none unauthenticated
        if edge is None:
            await served(scope, receive, send)
        else:
            await edge(served)

    return app
