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
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from typing import IO, Any

from django.core.exceptions import RequestAborted
from django.core.handlers.asgi import ASGIHandler, get_script_prefix
from django.http import HttpRequest, HttpResponseBase, StreamingHttpResponse
from django.urls import set_script_prefix

from routing.api.django_seam import asgi_scope, close_response, forget_body, middleware_setting

GATEWAY_MIDDLEWARE: list[str] = []
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
    def load_middleware(self, is_async: bool = False) -> None:
        with middleware_setting(GATEWAY_MIDDLEWARE):  # once, at start-up
            super().load_middleware(is_async=is_async)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        await self.handle(scope, receive, send)

    async def handle(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """Django's ``ASGIHandler.handle`` minus the request signals and thread hops."""
        scope[STARTED] = asyncio.get_running_loop().time()  # for the overhead header
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

        async def process_request() -> HttpResponseBase:
            response = await self.run_get_response(request)
            if isinstance(response, RelayResponse):
                _release_body(request, body_file)
            try:
                await self.send_response(response, send)
            except asyncio.CancelledError:
                pass  # the client left while we were sending
            return response

        # Watch for a disconnect while the view runs: it cancels the call, and with it the
        # upstream request and any backoff sleep.
        listener = asyncio.create_task(self.listen_for_disconnect(receive))
        served = asyncio.create_task(process_request())
        await asyncio.wait((listener, served), return_when=asyncio.FIRST_COMPLETED)
        for task in (listener, served):
            if not task.done():
                task.cancel()
                try:
                    await task
                except asyncio.CancelledError:
                    pass
        # The listener ends with RequestAborted whenever the client goes, which is also how
        # daphne and uvicorn say an answer is complete: so on most requests. It is looked at,
        # not raised: raised here, its traceback would hold this frame, which holds the task
        # that holds the exception, and that cycle would keep each finished request (its
        # call, response and buffers) alive until a full garbage collection.
        if not listener.cancelled():
            failure = listener.exception()
            if failure is not None and not isinstance(failure, RequestAborted):
                raise failure
        if not served.cancelled():
            close_response(served.result())
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


def _response_start(response: HttpResponseBase) -> dict[str, Any]:
    headers = [(name.encode("ascii"), value.encode("latin1")) for name, value in response.items()]
    return {"type": "http.response.start", "status": response.status_code, "headers": headers}


def _release_body(request: HttpRequest, body_file: IO[bytes]) -> None:
    """A relayed stream is past its commit point when its view returns, and may stream for
    minutes: the request's body (spooled by the handler, then read by ``request.body``) is
    not read again, and an agent's history is often hundreds of KB."""
    body_file.close()
    forget_body(request)


def split_gateway_traffic(default_app: Any, prefix: str = "/v1/") -> Any:
    """An ASGI app sending ``prefix`` paths to the lean handler, the rest to ``default_app``."""
    gateway_app = GatewayASGIHandler()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["path"].startswith(prefix):
            await gateway_app(scope, receive, send)
        else:
            await default_app(scope, receive, send)

    return app
