"""Carry out one behaviour on one aiohttp request.

``perform`` is a ``match`` over the behaviour classes of ``script``; each branch writes
the response itself (headers and body are on the wire when it returns), so the
server's bookkeeping can record when the answer really ended.

Two ways a response ends early, both as exceptions carrying the response object so the
handler can hand it back to aiohttp (whose own write then fails quietly):

- ``ClientGone``: a write failed because the client already left;
- ``CutByScript``: the behaviour itself cut the connection (``Reset``, ``DropAfter``).

Every branch calls ``Exchange.settle()`` just before its final write (or cut), so a
test that has read the whole response can assert on the recorded request at once.

When the client leaves while we sleep or wait, aiohttp cancels the handler task
(the app runs with ``handler_cancellation=True``); that surfaces as ``CancelledError``.
"""

from __future__ import annotations

import asyncio
import json
import socket
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

from aiohttp import web

from routing.simulator import bedrock
from routing.simulator.payloads import (
    Completion,
    embeddings,
    fill_model,
    split_pieces,
    tool_specs,
    usage_for,
    with_cache,
)
from routing.simulator.script import (
    Behaviour,
    ContentFilter,
    ContextLength,
    Delay,
    DropAfter,
    Empty,
    EndBeforeFinish,
    Fail,
    Flaky,
    KeyEcho,
    Malformed,
    NoDone,
    Reply,
    Reset,
    Silent,
    StallAfter,
    StreamError,
    UsageThenError,
    When,
)
from routing.simulator.state import Ledger
from routing.simulator.wires import Event, Wire, wire_class

CONTEXT_WINDOW = 8192


class ClientGone(Exception):
    """The client closed the connection while the response was being written."""

    def __init__(self, response: web.StreamResponse | None) -> None:
        super().__init__("client went away")
        self.response = response


class CutByScript(Exception):
    """The behaviour closed the connection on purpose."""

    def __init__(self, response: web.StreamResponse | None) -> None:
        super().__init__("connection cut by the script")
        self.response = response


@dataclass
class Exchange:
    """One chat-completions request as the behaviours need to see it."""

    request: web.Request
    body: dict[str, Any]
    model: str
    ledger: Ledger
    settle: Callable[[], None] = lambda: None
    raw: bytes = b""
    """Records the request as answered. Called *before* the last bytes go out, so a
    client that has seen the end of its response always finds it recorded."""

    @property
    def stream(self) -> bool:
        return bool(self.body.get("stream"))

    @property
    def include_usage(self) -> bool:
        options = self.body.get("stream_options")
        return isinstance(options, dict) and bool(options.get("include_usage"))

    def completion(self) -> Completion:
        return Completion(self.model, include_usage=self.stream and self.include_usage)

    @property
    def bedrock_action(self) -> str | None:
        """The Bedrock action the path names (its streams are event-stream frames)."""
        named = bedrock.model_and_action(self.request.path)
        return None if named is None else named[1]

    def wire(self) -> Wire:
        """The shapes of the protocol this request's path speaks (chat, messages, responses)."""
        cls = wire_class(self.request.path)
        return cls(self.model, include_usage=self.stream and self.include_usage)


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"))


class Sse:
    """A server-sent-events response; write errors become ``ClientGone``."""

    def __init__(self, exchange: Exchange) -> None:
        self.exchange = exchange
        self.action = exchange.bedrock_action
        kind = "text/event-stream" if self.action is None else "application/vnd.amazon.eventstream"
        self.response = web.StreamResponse(
            status=200, headers={"Content-Type": kind, "Cache-Control": "no-cache"}
        )
        self.wire: Wire | None = None

    async def open(self) -> Sse:
        try:
            await self.response.prepare(self.exchange.request)
        except ConnectionError as exc:
            raise ClientGone(self.response) from exc
        return self

    async def event(self, obj: dict[str, Any]) -> None:
        await self.raw(_dumps(obj))

    async def emit(self, events: list[Event]) -> None:
        for name, obj in events:
            await self.raw(_dumps(obj), name)

    async def raw(self, data: str, name: str | None = None) -> None:
        head = f"event: {name}\n" if name else ""
        out = f"{head}data: {data}\n\n".encode()
        if self.action is not None:  # Bedrock: AWS event-stream frames
            out = bedrock.encode(self.action, name, data)
        try:
            await self.response.write(out)
        except ConnectionError as exc:
            raise ClientGone(self.response) from exc

    async def end(self, *, done: bool = True) -> web.StreamResponse:
        self.exchange.settle()
        if done:
            await self.raw("[DONE]")
        try:
            await self.response.write_eof()
        except ConnectionError as exc:
            raise ClientGone(self.response) from exc
        return self.response


async def perform(behaviour: Behaviour, ex: Exchange) -> web.StreamResponse:
    """Write the whole response ``behaviour`` describes; see ``script`` for each one."""
    match behaviour:
        case Delay(seconds=seconds, then=then):
            await ex.ledger.sleep(seconds)
            return await perform(then, ex)
        case Flaky():
            return await perform(behaviour.pick(ex.ledger.flaky_tick(ex.model)), ex)
        case When():
            return await perform(behaviour.pick(ex.body, ex.raw), ex)
        case Fail():
            return await _fail(ex, behaviour)
        case ContextLength() if ex.request.path == "/v1/messages":
            message = (
                f"prompt is too long: {CONTEXT_WINDOW + 808} tokens > {CONTEXT_WINDOW} maximum"
            )
            return await _fail(ex, Fail(400, message, type="invalid_request_error"))
        case ContextLength():
            return await _fail(
                ex,
                Fail(
                    400,
                    f"This model's maximum context length is {CONTEXT_WINDOW} tokens. However, "
                    "your messages resulted in more tokens. Please reduce the length of the "
                    "messages.",
                    code="context_length_exceeded",
                    type="invalid_request_error",
                ),
            )
        case ContentFilter():
            return await _fail(
                ex,
                Fail(
                    400,
                    "The response was filtered due to the prompt triggering the content "
                    "management policy.",
                    code="content_filter",
                    type="invalid_request_error",
                ),
            )
        case KeyEcho(status=status, header=header):
            presented = ex.request.headers.get(header, "").removeprefix("Bearer ")
            masked = f"{presented[:12]}****{presented[-4:]}"
            message = f"Incorrect API key provided: {masked}. You can find your API key at x."
            return await _fail(ex, Fail(status, message, code="invalid_api_key"))
        case Silent():
            await _forever()
        case Reset():
            _cut(ex, reset=True)
            raise CutByScript(None)
        case Reply():
            return await (_stream_reply(ex, behaviour) if ex.stream else _json_reply(ex, behaviour))
        case Empty():
            return await perform(Reply(content="", chunks=0), ex)
        case NoDone(chunks=chunks, content=content):
            reply = Reply(content=content, chunks=chunks)
            return await (
                _stream_reply(ex, reply, done=False) if ex.stream else _json_reply(ex, reply)
            )
        case DropAfter():
            return await (_stream_drop(ex, behaviour) if ex.stream else _json_drop(ex, behaviour))
        case EndBeforeFinish():
            return await (
                _stream_end_early(ex, behaviour) if ex.stream else _json_end_early(ex, behaviour)
            )
        case StallAfter():
            return await (_stream_stall(ex, behaviour) if ex.stream else _json_stall(ex))
        case UsageThenError():
            return await _usage_then_error(ex, behaviour)
        case StreamError():
            return await _stream_error(ex, behaviour)
        case Malformed():
            return await (_stream_malformed(ex, behaviour) if ex.stream else _json_garbage(ex))
    raise TypeError(f"not a behaviour: {behaviour!r}")


# -- plain HTTP answers ------------------------------------------------------------------
async def _send(
    ex: Exchange,
    status: int,
    body: str,
    headers: dict[str, str] | None = None,
) -> web.StreamResponse:
    response = web.Response(
        status=status,
        body=body.encode(),
        headers={"Content-Type": "application/json", **(headers or {})},
    )
    ex.settle()
    try:
        await response.prepare(ex.request)
        await response.write_eof()
    except ConnectionError as exc:
        raise ClientGone(response) from exc
    return response


async def _fail(ex: Exchange, fail: Fail) -> web.StreamResponse:
    headers = fail.headers
    if ex.bedrock_action is not None:  # the error's type is a header
        headers = {**bedrock.error_headers(fail.status, fail.type), **headers}
    if fail.body is not None:
        return await _send(ex, fail.status, fail.body, headers)
    body = ex.wire().error(fill_model(fail.message, ex.model), fail.type, fail.code, fail.status)
    return await _send(ex, fail.status, _dumps(body), headers)


async def _json_reply(ex: Exchange, reply: Reply) -> web.StreamResponse:
    if ex.request.path.endswith("/v1/embeddings"):  # Azure's too: /openai/v1/embeddings
        return await _send(ex, 200, _dumps(embeddings(ex.body, ex.model)))
    content = fill_model(reply.content, ex.model)
    reasoning = fill_model(reply.reasoning, ex.model)
    gaps = max(len(split_pieces(content, reply.chunks)) - 1, 0)
    wait = reply.think_s + (reply.chunk_delay_s * gaps if gaps else 0.0)
    if wait:
        await ex.ledger.sleep(wait)  # as long as the stream would take
    usage = usage_for(ex.body, f"{reasoning} {content}") if reply.usage else None
    if usage is not None:
        usage = with_cache(usage, read=reply.cache_read, write=reply.cache_write)
    body = ex.wire().body(
        content=content,
        reasoning=reasoning,
        tool_calls=tool_specs(reply.tool_call),
        finish_reason=reply.finish,
        usage=usage,
    )
    return await _send(ex, 200, _dumps(body))


async def _json_garbage(ex: Exchange) -> web.StreamResponse:
    return await _send(ex, 200, "<html><body><h1>502 Bad Gateway</h1></body></html>")


# -- streams -----------------------------------------------------------------------------
async def _stream_reply(ex: Exchange, reply: Reply, *, done: bool = True) -> web.StreamResponse:
    w = ex.wire()
    content = fill_model(reply.content, ex.model)
    reasoning = fill_model(reply.reasoning, ex.model)
    sse = await Sse(ex).open()
    await sse.emit(w.preamble())
    if reply.think_s:
        await ex.ledger.sleep(reply.think_s)
    if reasoning:
        await sse.emit(w.reasoning(reasoning))
    for i, piece in enumerate(split_pieces(content, reply.chunks)):
        if i and reply.chunk_delay_s:
            await ex.ledger.sleep(reply.chunk_delay_s)
        await sse.emit(w.content(piece))
    for index, spec in enumerate(tool_specs(reply.tool_call)):
        await sse.emit(w.tool_call(spec, index))
    usage = usage_for(ex.body, f"{reasoning} {content}") if reply.usage else None
    if usage is not None:
        usage = with_cache(usage, read=reply.cache_read, write=reply.cache_write)
    await sse.emit(w.finish(reply.finish, usage))
    return await sse.end(done=done and w.done)


async def _stream_partial(
    ex: Exchange, content: str, chunks: int, *, usage_first: bool = False, reasoning: str = ""
) -> Sse:
    """Role chunk, optional usage-only chunk and reasoning, then ``content`` in ``chunks``
    chunks."""
    w = ex.wire()
    text = fill_model(content, ex.model)
    sse = await Sse(ex).open()
    await sse.emit(w.preamble())
    if usage_first:
        await sse.emit(w.usage_only(usage_for(ex.body, text)))
    if reasoning:
        await sse.emit(w.reasoning(fill_model(reasoning, ex.model)))
    for piece in split_pieces(text, chunks):
        await sse.emit(w.content(piece))
    sse.wire = w
    return sse


async def _stream_drop(ex: Exchange, drop: DropAfter) -> web.StreamResponse:
    sse = await _stream_partial(
        ex, drop.content, drop.chunks, usage_first=drop.usage_first, reasoning=drop.reasoning
    )
    specs = tool_specs(drop.tool_call)
    if specs and sse.wire is not None:  # the first call begins, and is cut before its end
        await sse.emit(sse.wire.tool_call(specs[0], 0)[:-1])
    await _flushed(ex)
    _cut(ex, reset=False)
    raise CutByScript(sse.response)


async def _json_drop(ex: Exchange, drop: DropAfter) -> web.StreamResponse:
    """Promise the full body in Content-Length, send half of it, cut."""
    content = fill_model(drop.content, ex.model)
    data = _dumps(ex.wire().body(content=content, usage=usage_for(ex.body, content)))
    raw = data.encode()
    response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
    response.content_length = len(raw)
    try:
        await response.prepare(ex.request)
        await response.write(raw[: len(raw) // 2])
    except ConnectionError as exc:
        raise ClientGone(response) from exc
    await _flushed(ex)
    _cut(ex, reset=False)
    raise CutByScript(response)


async def _stream_end_early(ex: Exchange, end: EndBeforeFinish) -> web.StreamResponse:
    sse = await _stream_partial(ex, end.content, end.chunks)
    if end.how == "reset":
        await _flushed(ex)
        _cut(ex, reset=True)
        raise CutByScript(sse.response)
    if end.how == "malformed":
        assert sse.wire is not None
        name, last = sse.wire.finish("stop", None)[-1]
        line = _dumps(last)
        await sse.raw(line[: len(line) // 2], name)
    return await sse.end(done=False)


async def _json_end_early(ex: Exchange, end: EndBeforeFinish) -> web.StreamResponse:
    """Half a completion body: a short body with a clean end, or a reset after it."""
    content = fill_model(end.content, ex.model)
    raw = _dumps(ex.wire().body(content=content, usage=usage_for(ex.body, content)))
    half = raw[: len(raw) // 2]
    if end.how != "reset":
        return await _send(ex, 200, half)
    response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
    try:
        await response.prepare(ex.request)
        await response.write(half.encode())
    except ConnectionError as exc:
        raise ClientGone(response) from exc
    await _flushed(ex)
    _cut(ex, reset=True)
    raise CutByScript(response)


async def _stream_stall(ex: Exchange, stall: StallAfter) -> web.StreamResponse:
    await _stream_partial(ex, stall.content, stall.chunks)
    await _forever()


async def _json_stall(ex: Exchange) -> web.StreamResponse:
    response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
    try:
        await response.prepare(ex.request)  # StreamResponse sends its headers right away
    except ConnectionError as exc:
        raise ClientGone(response) from exc
    await _forever()


async def _usage_then_error(ex: Exchange, b: UsageThenError) -> web.StreamResponse:
    if not (ex.stream and b.status_in_stream):
        error = ex.wire().error("internal", "server_error", "server_error", 500)
        return await _send(ex, 500, _dumps(error))
    sse = await _stream_partial(ex, "", 0, usage_first=True)
    assert sse.wire is not None
    await sse.emit(sse.wire.stream_error())
    return await sse.end(done=False)


async def _stream_error(ex: Exchange, b: StreamError) -> web.StreamResponse:
    message = fill_model(b.message, ex.model)
    if not ex.stream:
        kind = b.exception[:1].upper() + b.exception[1:]
        return await _fail(ex, Fail(b.status, message, type=kind))
    sse = await _stream_partial(ex, b.content if b.chunks else "", b.chunks)
    assert sse.wire is not None
    if ex.bedrock_action is not None:
        await sse.emit(bedrock.exception_events(b.exception, message))
    else:
        await sse.emit(sse.wire.stream_error())
    return await sse.end(done=False)


async def _stream_malformed(ex: Exchange, m: Malformed) -> web.StreamResponse:
    w = ex.wire()
    sse = await Sse(ex).open()
    if m.kind == "json":
        for garbage in (
            '{"id":"chatcmpl-sim","choi',
            "<html>502 Bad Gateway</html>",
            "not json at all",
        ):
            await sse.raw(garbage)
        return await sse.end(done=False)
    await sse.emit(w.preamble())
    for i, piece in enumerate(m.pieces(), start=1):
        *events, (name, last) = w.content(piece)
        await sse.emit(events)
        line = _dumps(last)
        await sse.raw(line[: len(line) // 2] if i == m.bad_chunk else line, name)
    await sse.emit(w.finish("stop", usage_for(ex.body, m.expected_content())))
    return await sse.end(done=w.done)


# -- connection tricks -------------------------------------------------------------------
async def _forever() -> NoReturn:
    """Wait until cancelled (the client left, or the server is stopping)."""
    await asyncio.get_running_loop().create_future()
    raise AssertionError("a future nobody resolves returned")


async def _flushed(ex: Exchange, limit_s: float = 1.0) -> None:
    """Let the transport hand what we wrote to the kernel before we cut it."""
    transport = ex.request.transport
    waited = 0.0
    while transport is not None and transport.get_write_buffer_size() and waited < limit_s:
        await asyncio.sleep(0.005)
        waited += 0.005


def _cut(ex: Exchange, *, reset: bool) -> None:
    """Abort the connection; ``reset`` makes the kernel send RST instead of FIN."""
    transport = ex.request.transport
    if transport is None or transport.is_closing():
        raise ClientGone(None)
    ex.settle()
    if reset:
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()
