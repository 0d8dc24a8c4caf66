"""The server edge: what a request may cost before it is known to be wanted (SPEC §9).

Nothing unauthenticated costs more than a bounded read. Two rules, decided from the
request's line and headers alone, by :func:`body_wanted`, under any server:

- a body declared larger than the limit (``SWITCHYARD_MAX_BODY_BYTES``, Django's
  ``DATA_UPLOAD_MAX_MEMORY_SIZE``) is not read: the answer is a 413 (on ``/v1`` the door's
  own, after its key check; elsewhere :func:`too_large`);
- a ``/v1`` request without a key the routing table knows is not read: the door answers it
  with its own 401 (and records it as it records every refusal) from an empty body.

A body that is read is read up to the limit (a body without ``Content-Length`` is counted
as it arrives: over the limit it gets :func:`too_large` and the connection is closed).
Such a request's response says ``Connection: close``: the rest of its body is never read.

The servers differ in when a body is read. uvicorn hands it to the application as it
arrives, so :func:`guard` (in the lean ``/v1`` handler's front, ``routing.api.asgi``) is
all it takes. daphne (Twisted) reads the whole body before the application sees the
request, so ``routing.management.daphne_edge`` applies the same :func:`body_wanted` while
reading, and this guard then finds nothing left to do.

The access log lines of both servers go through :func:`scrub_query`: a key sent as a query
parameter is refused, but would otherwise be written to the log.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
from collections.abc import Awaitable, Callable, Iterable
from typing import Any
from urllib.parse import unquote_to_bytes

import orjson
from django.conf import settings

from routing.gateway.runtime import get_runtime

# The gateway's paths: the /v1 doors and Gemini's /v1beta (its SDKs' default version).
GATEWAY_PREFIX = ("/v1/", "/v1beta/")
SCRUBBED = "[scrubbed]"
# Query parameters that carry credentials (Gemini's ``?key=``, OAuth's ``access_token``, ...):
# their values never reach a log line.
_SECRET_PARAMETER = re.compile(
    r"(?i)([?&;](?:key|api[-_]?key|access[-_]?token|token|secret|password|auth)=)[^&;#\s\"]*"
)
_KEY_HEADERS = (b"x-api-key", b"x-goog-api-key")
_warming: set[asyncio.Task[object | None]] = set()  # the compile warm_table started

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
App = Callable[[dict[str, Any], Receive, Send], Awaitable[None]]


def body_limit() -> int | None:
    """``SWITCHYARD_MAX_BODY_BYTES`` (router_project.settings); None: no limit."""
    limit: int | None = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    return limit


def scrub_query(text: str) -> str:
    """``text`` (a path with its query, or a log line) with credential values replaced."""
    if "=" not in text:
        return text
    return _SECRET_PARAMETER.sub(rf"\1{SCRUBBED}", text)


def body_wanted(path: str, query: bytes, headers: Iterable[tuple[bytes, bytes]]) -> bool:
    """Whether the request's answer can depend on its body: False when its declared length
    is over the limit, or when it is for ``/v1`` and carries no key the table knows. With no
    table to tell (before the first compile, just after a change) it is read, bounded, and
    a compile is started so the next request can tell."""
    wanted = _admission(path, query, list(headers))[0]
    if wanted is None:
        warm_table()
    return wanted is not False


def _admission(
    path: str, query: bytes, headers: list[tuple[bytes, bytes]]
) -> tuple[bool | None, bool, int | None]:
    """(the body is wanted (None: no routing table to tell), it must be counted as it
    arrives, the limit). A request with neither ``Content-Length`` nor ``Transfer-Encoding``
    has no body (RFC 9112 6.3). One pass over the headers: it runs on every request."""
    limit = body_limit()
    length: int | None = None
    unbounded = False
    secrets: list[bytes] = []
    for name, value in headers:
        if name == b"content-length":
            length = int(value) if value.strip().isdigit() else None
        elif name == b"transfer-encoding":
            unbounded = True
        elif name == b"authorization":
            scheme, _, secret = value.partition(b" ")
            if scheme.lower() == b"bearer":
                secrets.append(secret)
        elif name in _KEY_HEADERS:
            secrets.append(value)
    if not unbounded and not length:  # no body: nothing to read, nothing to bound
        return True, False, limit
    if limit is not None and length is not None and length > limit:
        return False, False, limit
    counted = unbounded and length is None and limit is not None
    if path.startswith(GATEWAY_PREFIX):
        known = _known_key(query, secrets)
        if not known:
            return known, counted, limit
    return True, counted, limit


def _known_key(query: bytes, secrets: list[bytes]) -> bool | None:
    """Whether any of the key headers' ``secrets`` (or ``?key=``) is a key of the routing
    table; None when there is no table (not compiled yet, or dropped by a change). Broader
    than a door's own check on purpose (any door's header, any kind of key): a key accepted
    here and refused by the door costs one bounded read."""
    table = get_runtime().table
    if table is None:
        return None
    if b"key=" in query:
        for parameter in query.split(b"&"):
            name, _, value = parameter.partition(b"=")
            if name == b"key":
                secrets.append(unquote_to_bytes(value))
    keys = table.keys
    return any(hashlib.sha256(s.strip()).hexdigest() in keys for s in secrets if s.strip())


def warm_table() -> None:
    """Start compiling the routing table in the background (on the running loop), so the
    edge can tell keys apart again; a failure is the runtime's to log."""
    if _warming:
        return
    try:
        task = asyncio.get_running_loop().create_task(_table())
    except RuntimeError:  # no loop running: nothing to compile on
        return
    _warming.add(task)
    task.add_done_callback(_warming.discard)


def compile_table() -> None:
    """Compile the routing table now (sync, before a server's loop runs), so the first
    requests can be told apart by key; a failure leaves it to the first request."""
    from django.db import connections

    try:
        get_runtime().reload()
    except Exception:  # noqa: BLE001 - the first request compiles again, and logs
        return
    finally:
        connections.close_all()  # this thread becomes the serving loop's


async def _table() -> object | None:
    try:
        return await get_runtime().current_table()
    except Exception:  # noqa: BLE001 - TableUnavailable & co.: logged by the runtime
        return None


def too_large(limit: int | None) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """The edge's own 413 (a body refused before any door saw it), in the OpenAI shape
    every door's clients parse: status, headers, body."""
    body = orjson.dumps(
        {
            "error": {
                "message": f"Request body is too large (the limit is {limit} bytes).",
                "type": "invalid_request_error",
                "code": "request_too_large",
                "param": None,
            }
        }
    )
    return 413, _plain_headers(body), body


def edge_error(
    status: int, message: str, code: str
) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """A refusal made by the server edge before any application saw the request (408, 431):
    status, headers, body."""
    body = orjson.dumps(
        {
            "error": {
                "message": message,
                "type": "invalid_request_error",
                "code": code,
                "param": None,
            }
        }
    )
    return status, _plain_headers(body), body


def _plain_headers(body: bytes) -> list[tuple[bytes, bytes]]:
    return [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
    ]


def guard(
    scope: dict[str, Any], receive: Receive, send: Send, *, table_awaited: bool = False
) -> Callable[[App], Awaitable[None]] | None:
    """The bounded-read rules for one HTTP request: None when the server's own receive
    already keeps them (a wanted body of a declared length within the limit: no server
    reads past ``Content-Length``); else how to serve it (``await edge(app)``): with an
    empty body, with a counted one, or with the edge's 413 and no application at all."""
    path = scope["path"]
    wanted, counted, limit = _admission(path, scope["query_string"], scope["headers"])
    if wanted is None and table_awaited:  # no table even after a compile: read, bounded
        wanted = True
    if wanted and not counted:
        return None

    async def edge(app: App) -> None:
        if wanted is None:  # no table to tell keys apart: wait for one, then decide
            await _table()
            again = guard(scope, receive, send, table_awaited=True)
            await (app(scope, receive, send) if again is None else again(app))
        elif wanted:
            counted_receive, guarded_send = _Counted(receive, send, limit).pair()
            await app(scope, counted_receive, guarded_send)
        elif path.startswith(GATEWAY_PREFIX):  # the door answers (401, or its own 413)
            await app(scope, _Unread(receive), _closing(send))
        else:
            await refuse_too_large(send, limit)

    return edge


async def refuse_too_large(send: Send, limit: int | None) -> None:
    status, headers, body = too_large(limit)
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class _Unread:
    """An empty body for the application; the client's body is never read (the response
    closes the connection). Body messages the server has anyway are skipped, so the
    application's disconnect listener sees the disconnect and nothing else."""

    __slots__ = ("given", "receive")

    def __init__(self, receive: Receive) -> None:
        self.receive = receive
        self.given = False

    async def __call__(self) -> dict[str, Any]:
        if not self.given:
            self.given = True
            return {"type": "http.request", "body": b"", "more_body": False}
        while True:
            message = await self.receive()
            if message["type"] != "http.request":
                return message


def _closing(send: Send) -> Send:
    async def closing_send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            headers = [h for h in message.get("headers", []) if h[0].lower() != b"connection"]
            message = {**message, "headers": [*headers, (b"connection", b"close")]}
        await send(message)

    return closing_send


class _Counted:
    """A body without a declared length, counted as it arrives: over the limit, the edge's
    413 is sent and the application is told the client left (Django's handlers then stop
    quietly); whatever it sends afterwards is dropped."""

    __slots__ = ("limit", "received", "receive", "refused", "send")

    def __init__(self, receive: Receive, send: Send, limit: int | None) -> None:
        self.receive, self.send, self.limit = receive, send, limit
        self.received = 0
        self.refused = False

    def pair(self) -> tuple[Receive, Send]:
        return self.counted_receive, self.guarded_send

    async def counted_receive(self) -> dict[str, Any]:
        if self.refused:
            return {"type": "http.disconnect"}
        message = await self.receive()
        if message["type"] == "http.request" and self.limit is not None:
            self.received += len(message.get("body", b""))
            if self.received > self.limit:
                self.refused = True
                await refuse_too_large(_closing(self.send), self.limit)
                return {"type": "http.disconnect"}
        return message

    async def guarded_send(self, message: dict[str, Any]) -> None:
        if not self.refused:
            await self.send(message)


class ScrubQueryFilter(logging.Filter):
    """uvicorn's access log (``uvicorn.access``: client, method, path with query, version,
    status) with credential values scrubbed from the path."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str):
            record.args = (*args[:2], scrub_query(args[2]), *args[3:])
        elif isinstance(record.msg, str):
            record.msg = scrub_query(record.msg)
        return True


def scrub_access_log(logger_name: str = "uvicorn.access") -> None:
    logger = logging.getLogger(logger_name)
    if not any(isinstance(f, ScrubQueryFilter) for f in logger.filters):
        logger.addFilter(ScrubQueryFilter())
