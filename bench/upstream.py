"""A fast OpenAI-compatible fake upstream: raw asyncio protocol on uvloop.

Why not aiohttp/Starlette: the upstream must never be the bottleneck, so it parses
HTTP/1.1 by hand (Content-Length or chunked request bodies, keep-alive, no pipelining)
and answers from pre-encoded templates. On one core it serves well over 10 000 req/s,
an order of magnitude above what any Python gateway in front of it can pass.

Behaviour is chosen by the requested ``model``:

``fast``
    answers; non-streaming JSON, or SSE with ``chunks`` content chunks when
    ``"stream": true`` — on ``/v1/chat/completions`` in Chat Completions shapes, on
    ``/v1/messages`` in Anthropic Messages shapes (``x-api-key`` accepted there), on
    ``/v1/responses`` in OpenAI Responses shapes (the standard event sequence, each event
    with its ``sequence_number``). The first byte waits ``delay_ms``; ``gap_ms`` separates chunks.
``fail503``
    always HTTP 503 with an OpenAI-shaped error body.
``cut<N>`` (e.g. ``cut40``)
    a chat stream like ``fast`` (same text) cut after its first ``N`` content chunks: the
    connection closes with no finish and no ``[DONE]`` (a mid-stream rescue's price).
anything else
    HTTP 404 ``model_not_found``.

Knobs (``chunks``, ``delay_ms``, ``gap_ms``) come from the CLI or the environment
(``BENCH_UPSTREAM_CHUNKS``, ``BENCH_UPSTREAM_DELAY_MS``, ``BENCH_UPSTREAM_GAP_MS``) and
can be changed at run time with ``PUT /_bench/settings`` (a JSON object with any of
those keys) — the driver does that between scenarios so the upstream keeps its port
and the gateway never sees a refused connection. Request headers do NOT change
behaviour: a gateway is not expected to forward them.

Other routes: ``GET /v1/models``, ``GET /_bench/settings``, ``GET /_bench/stats``
(per ``"model status"`` counters; the driver uses deltas to see how often the failing
target was actually tried). ``--api-key`` (default ``bench-upstream-key``; empty
disables the check) is required as ``Authorization: Bearer`` on ``/v1`` routes, which
proves the gateway forwards the provider credential.

On start it prints ``listening <port>`` on stdout (port 0 picks a free one).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import sys
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any, cast

import orjson

MAX_HEAD = 64 * 1024


@dataclass
class Settings:
    """Mutable behaviour knobs; one instance shared by every connection."""

    chunks: int = 20
    delay_ms: float = 0.0
    gap_ms: float = 0.0
    api_key: str = "bench-upstream-key"
    stats: Counter[str] = field(default_factory=Counter)

    def public(self) -> dict[str, object]:
        data = asdict(self)
        data.pop("stats")
        data.pop("api_key")
        return data

    def update(self, values: dict[str, Any]) -> None:
        for key in ("chunks", "delay_ms", "gap_ms"):
            if key in values:
                value = int(values[key]) if key == "chunks" else float(values[key])
                if value < 0:
                    raise ValueError(f"{key} must be >= 0")
                setattr(self, key, value)


def _response(status: str, body: bytes, content_type: bytes = b"application/json") -> bytes:
    return (
        b"HTTP/1.1 "
        + status.encode()
        + b"\r\nContent-Type: "
        + content_type
        + b"\r\nContent-Length: "
        + str(len(body)).encode()
        + b"\r\n\r\n"
        + body
    )


def _error(status: str, message: str, kind: str, code: str) -> bytes:
    body = {"error": {"message": message, "type": kind, "code": code, "param": None}}
    return _response(status, orjson.dumps(body))


INVALID = "invalid_request_error"
FAIL_503 = _error("503 Service Unavailable", "bench: induced failure", "server_error", "bench_fail")
UNAUTHORIZED = _error("401 Unauthorized", "bench: bad api key", INVALID, "invalid_api_key")
BAD_REQUEST = _error("400 Bad Request", "bench: body is not JSON", INVALID, "bad_json")
NOT_FOUND = _error("404 Not Found", "bench: no such route", INVALID, "not_found")
STREAM_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
    b"Transfer-Encoding: chunked\r\n\r\n"
)
MODELS = _response(
    "200 OK",
    orjson.dumps(
        {
            "object": "list",
            "data": [
                {"id": "fast", "object": "model", "owned_by": "bench"},
                {"id": "fail503", "object": "model", "owned_by": "bench"},
            ],
        }
    ),
)


def completion_body(model: str) -> bytes:
    return orjson.dumps(
        {
            "id": "chatcmpl-bench",
            "object": "chat.completion",
            "created": 1700000000,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": "pong from the bench upstream"},
                }
            ],
            "usage": {"prompt_tokens": 8, "completion_tokens": 5, "total_tokens": 13},
        }
    )


def _sse_chunk(payload: dict[str, object] | None) -> bytes:
    data = b"data: [DONE]\n\n" if payload is None else b"data: " + orjson.dumps(payload) + b"\n\n"
    return b"%x\r\n%s\r\n" % (len(data), data)


def stream_events(model: str, chunks: int, usage: bool) -> list[bytes]:
    """Transfer-encoded SSE pieces: role chunk, ``chunks`` content chunks, finish, [DONE]."""

    def chunk(delta: dict[str, object], finish: str | None = None) -> dict[str, object]:
        return {
            "id": "chatcmpl-bench",
            "object": "chat.completion.chunk",
            "created": 1700000000,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    events = [_sse_chunk(chunk({"role": "assistant", "content": ""}))]
    events += [_sse_chunk(chunk({"content": f"tok{i} "})) for i in range(chunks)]
    events.append(_sse_chunk(chunk({}, "stop")))
    if usage:
        events.append(
            _sse_chunk(
                {
                    "id": "chatcmpl-bench",
                    "object": "chat.completion.chunk",
                    "created": 1700000000,
                    "model": model,
                    "choices": [],
                    "usage": {
                        "prompt_tokens": 8,
                        "completion_tokens": chunks,
                        "total_tokens": 8 + chunks,
                    },
                }
            )
        )
    events.append(_sse_chunk(None))
    events.append(b"0\r\n\r\n")
    return events


def messages_body(model: str) -> bytes:
    """The Anthropic Messages answer (``POST /v1/messages``, kind ``anthropic``)."""
    return orjson.dumps(
        {
            "id": "msg_bench",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [{"type": "text", "text": "pong from the bench upstream"}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 8, "output_tokens": 5},
        }
    )


def _named_event(kind: str, payload: dict[str, object]) -> bytes:
    data = b"event: " + kind.encode() + b"\ndata: " + orjson.dumps(payload) + b"\n\n"
    return b"%x\r\n%s\r\n" % (len(data), data)


def messages_stream_events(model: str, chunks: int) -> list[bytes]:
    """A Messages stream: message_start, ping, one text block of ``chunks`` deltas, stop."""
    start: dict[str, object] = {
        "id": "msg_bench",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "usage": {"input_tokens": 8, "output_tokens": 1},
    }
    events = [
        _named_event("message_start", {"type": "message_start", "message": start}),
        _named_event("ping", {"type": "ping"}),
        _named_event(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        ),
    ]
    events += [
        _named_event(
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": f"tok{i} "},
            },
        )
        for i in range(chunks)
    ]
    events.append(_named_event("content_block_stop", {"type": "content_block_stop", "index": 0}))
    events.append(
        _named_event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": chunks},
            },
        )
    )
    events.append(_named_event("message_stop", {"type": "message_stop"}))
    events.append(b"0\r\n\r\n")
    return events


def _responses_object(model: str, status: str, text: str | None) -> dict[str, object]:
    output: list[dict[str, object]] = []
    usage: dict[str, object] | None = None
    if text is not None:
        output.append(
            {
                "id": "msg_bench",
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        )
        words = len(text.split())
        usage = {
            "input_tokens": 8,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": words,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 8 + words,
        }
    return {
        "id": "resp_bench",
        "object": "response",
        "created_at": 1700000000,
        "status": status,
        "model": model,
        "output": output,
        "error": None,
        "incomplete_details": None,
        "usage": usage,
    }


def responses_body(model: str) -> bytes:
    """The OpenAI Responses answer (``POST /v1/responses``, kind ``openai-responses``)."""
    return orjson.dumps(_responses_object(model, "completed", "pong from the bench upstream"))


def responses_stream_events(model: str, chunks: int) -> list[bytes]:
    """A Responses stream: created, in_progress, one message item of ``chunks`` text
    deltas with its added/done events, completed (usage included)."""
    pieces = [f"tok{i} " for i in range(chunks)]
    text = "".join(pieces)
    item = {"id": "msg_bench", "type": "message", "role": "assistant", "status": "in_progress"}
    part = {"type": "output_text", "text": "", "annotations": []}
    ids = {"item_id": "msg_bench", "output_index": 0, "content_index": 0}
    shell = _responses_object(model, "in_progress", None)
    events: list[tuple[str, dict[str, object]]] = [
        ("response.created", {"response": shell}),
        ("response.in_progress", {"response": shell}),
        ("response.output_item.added", {"output_index": 0, "item": {**item, "content": []}}),
        ("response.content_part.added", {**ids, "part": part}),
    ]
    events += [("response.output_text.delta", {**ids, "delta": piece}) for piece in pieces]
    done_part = {**part, "text": text}
    events += [
        ("response.output_text.done", {**ids, "text": text}),
        ("response.content_part.done", {**ids, "part": done_part}),
        (
            "response.output_item.done",
            {"output_index": 0, "item": {**item, "status": "completed", "content": [done_part]}},
        ),
        ("response.completed", {"response": _responses_object(model, "completed", text)}),
    ]
    out = [
        _named_event(kind, {"type": kind, **data, "sequence_number": seq})
        for seq, (kind, data) in enumerate(events)
    ]
    out.append(b"0\r\n\r\n")
    return out


class UpstreamProtocol(asyncio.Protocol):
    """One keep-alive connection. Requests are answered strictly one at a time."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.buf = bytearray()
        self.transport: asyncio.Transport | None = None
        self.busy = False
        self.close_after = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement the interface without subclassing asyncio.Transport.
        self.transport = cast(asyncio.Transport, transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None

    def data_received(self, data: bytes) -> None:
        self.buf += data
        self._drain()

    def _drain(self) -> None:
        while not self.busy and self.transport is not None:
            request = self._parse()
            if request is None:
                return
            self._handle(*request)

    def _parse(self) -> tuple[bytes, bytes, dict[bytes, bytes], bytes] | None:
        end = self.buf.find(b"\r\n\r\n")
        if end < 0:
            if len(self.buf) > MAX_HEAD and self.transport:
                self.transport.close()
            return None
        lines = bytes(self.buf[:end]).split(b"\r\n")
        method, path, version = (lines[0].split(b" ", 2) + [b"", b""])[:3]
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            headers[name.strip().lower()] = value.strip()
        start = end + 4
        if headers.get(b"transfer-encoding", b"").lower() == b"chunked":
            decoded = self._dechunk(start)
            if decoded is None:
                return None
            body, consumed = decoded
        else:
            length = int(headers.get(b"content-length", b"0") or 0)
            if len(self.buf) < start + length:
                return None
            body, consumed = bytes(self.buf[start : start + length]), start + length
        del self.buf[:consumed]
        connection = headers.get(b"connection", b"").lower()
        http10 = version == b"HTTP/1.0" and connection != b"keep-alive"
        self.close_after = connection == b"close" or http10
        return method, path, headers, body

    def _dechunk(self, pos: int) -> tuple[bytes, int] | None:
        parts: list[bytes] = []
        while True:
            eol = self.buf.find(b"\r\n", pos)
            if eol < 0:
                return None
            size = int(bytes(self.buf[pos:eol]).split(b";")[0], 16)
            if size == 0:
                tail = self.buf.find(b"\r\n\r\n", eol)
                if tail < 0:
                    return None
                return b"".join(parts), tail + 4
            if len(self.buf) < eol + 2 + size + 2:
                return None
            parts.append(bytes(self.buf[eol + 2 : eol + 2 + size]))
            pos = eol + 2 + size + 2

    def _handle(self, method: bytes, path: bytes, headers: dict[bytes, bytes], body: bytes) -> None:
        path = path.split(b"?", 1)[0]
        if path.startswith(b"/_bench/"):
            self._finish(self._control(method, path, body))
            return
        key = self.settings.api_key
        if headers.get(b"x-api-key"):  # how kind: anthropic sends the credential
            headers[b"authorization"] = b"Bearer " + headers[b"x-api-key"]
        if key and headers.get(b"authorization", b"") != b"Bearer " + key.encode():
            self.settings.stats["- 401"] += 1
            self._finish(UNAUTHORIZED)
            return
        if path == b"/v1/models" and method == b"GET":
            self._finish(MODELS)
        elif path == b"/v1/chat/completions" and method == b"POST":
            self._chat(body)
        elif path == b"/v1/messages" and method == b"POST":
            self._chat(body, messages=True)
        elif path == b"/v1/responses" and method == b"POST":
            self._chat(body, responses=True)
        else:
            self._finish(NOT_FOUND)

    def _control(self, method: bytes, path: bytes, body: bytes) -> bytes:
        if path == b"/_bench/stats":
            return _response("200 OK", orjson.dumps(dict(self.settings.stats)))
        if path == b"/_bench/settings":
            if method == b"PUT":
                try:
                    self.settings.update(orjson.loads(body))
                except (ValueError, TypeError, orjson.JSONDecodeError) as exc:
                    return _error("400 Bad Request", str(exc), INVALID, "bad_settings")
            return _response("200 OK", orjson.dumps(self.settings.public()))
        return NOT_FOUND

    def _chat(self, body: bytes, *, messages: bool = False, responses: bool = False) -> None:
        try:
            request = orjson.loads(body)
            model = str(request.get("model", ""))
        except (orjson.JSONDecodeError, AttributeError):
            self._finish(BAD_REQUEST)
            return
        settings = self.settings
        if model == "fail503":
            settings.stats["fail503 503"] += 1
            self._finish(FAIL_503)
            return
        cut = model[3:] if model.startswith("cut") and request.get("stream") else ""
        if cut.isdigit() and not (messages or responses):
            settings.stats[f"{model[:40]} cut"] += 1
            events = stream_events(model, settings.chunks, False)
            self.close_after = True  # the cut: no finish, no [DONE], no chunked terminator
            self._finish(b"".join([STREAM_HEAD, *events[: 1 + int(cut)]]))
            return
        if model != "fast":
            settings.stats[f"{model[:40]} 404"] += 1
            self._finish(
                _error(
                    "404 Not Found",
                    f"model {model[:40]!r} does not exist",
                    INVALID,
                    "model_not_found",
                )
            )
            return
        settings.stats["fast 200"] += 1
        if responses and request.get("stream"):
            pieces = [STREAM_HEAD, *responses_stream_events(model, settings.chunks)]
        elif responses:
            pieces = [_response("200 OK", responses_body(model))]
        elif messages and request.get("stream"):
            pieces = [STREAM_HEAD, *messages_stream_events(model, settings.chunks)]
        elif messages:
            pieces = [_response("200 OK", messages_body(model))]
        elif request.get("stream"):
            usage = bool((request.get("stream_options") or {}).get("include_usage"))
            pieces = [STREAM_HEAD, *stream_events(model, settings.chunks, usage)]
        else:
            pieces = [_response("200 OK", completion_body(model))]
        self.busy = True
        delay, gap = settings.delay_ms / 1000, settings.gap_ms / 1000
        loop = asyncio.get_running_loop()
        if gap <= 0:
            if delay > 0:
                loop.call_later(delay, self._finish, b"".join(pieces))
            else:
                self._finish(b"".join(pieces))
            return
        # Head and role chunk after `delay`, then one piece per `gap`.
        first, rest = pieces[:2], pieces[2:]
        loop.call_later(delay, self._write_paced, b"".join(first), rest, gap)

    def _write_paced(
        self, data: bytes, rest: list[bytes], gap: float, due: float | None = None
    ) -> None:
        """Pieces on a fixed schedule, one per ``gap`` from the first: a late wake-up (a
        busy machine) sends every piece already due in one write, so a stream lasts
        chunks x gap however loaded the upstream is, and the lateness is counted in the
        stats (``paced writes``, ``paced late ms``, ``paced late>100ms``)."""
        now = asyncio.get_running_loop().time()
        if due is None:
            due = now
        else:
            late_ms = int((now - due) * 1000)
            self.settings.stats["paced writes"] += 1
            self.settings.stats["paced late ms"] += late_ms
            self.settings.stats["paced late>100ms"] += late_ms > 100
        while rest and due + gap <= now:
            data, rest, due = data + rest[0], rest[1:], due + gap
        if not rest:
            self._finish(data)
            return
        if self.transport is not None:
            self.transport.write(data)
            asyncio.get_running_loop().call_at(
                due + gap, self._write_paced, rest[0], rest[1:], gap, due + gap
            )

    def _finish(self, data: bytes) -> None:
        resume, self.busy = self.busy, False  # only a delayed answer resumes parsing here
        if self.transport is None:
            return
        self.transport.write(data)
        if self.close_after:
            self.transport.close()
        elif resume and self.buf:
            self._drain()


def _raise_open_file_limit() -> None:
    """One file per connection: thousands of streams need more than a default soft
    limit of 1024. Up to the hard limit; stderr says when that stops short."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 1 << 16 if hard == resource.RLIM_INFINITY else hard
    if soft != resource.RLIM_INFINITY and soft < wanted:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
        except (ValueError, OSError):
            pass
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft != resource.RLIM_INFINITY and soft < 12_000:
        print(f"bench upstream: open-file limit {soft}", file=sys.stderr, flush=True)


async def serve(host: str, port: int, settings: Settings) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: UpstreamProtocol(settings), host, port, backlog=4096, reuse_address=True
    )
    bound = server.sockets[0].getsockname()[1]
    print(f"listening {bound}", flush=True)
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> None:
    env = os.environ.get
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=int(env("BENCH_UPSTREAM_PORT", "0")))
    parser.add_argument("--chunks", type=int, default=int(env("BENCH_UPSTREAM_CHUNKS", "20")))
    parser.add_argument(
        "--delay-ms", type=float, default=float(env("BENCH_UPSTREAM_DELAY_MS", "0"))
    )
    parser.add_argument("--gap-ms", type=float, default=float(env("BENCH_UPSTREAM_GAP_MS", "0")))
    parser.add_argument("--api-key", default=env("BENCH_UPSTREAM_KEY", "bench-upstream-key"))
    args = parser.parse_args(argv)
    settings = Settings(
        chunks=args.chunks, delay_ms=args.delay_ms, gap_ms=args.gap_ms, api_key=args.api_key
    )
    _raise_open_file_limit()
    try:
        import uvloop
    except ImportError:  # still correct on plain asyncio, just slower
        runner = asyncio.run
    else:
        runner = uvloop.run
    try:
        runner(serve(args.host, args.port, settings))
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
