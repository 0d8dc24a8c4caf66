"""A minimal keep-alive HTTP/1.1 client for the load generator.

aiohttp's client costs a few hundred microseconds of CPU per request; this one writes
a pre-encoded request and reads the answer with asyncio streams (on uvloop), so the
load generator stays far below the gateway's cost. It understands exactly what the
benchmark meets: ``Content-Length``, ``Transfer-Encoding: chunked`` and close-delimited
bodies, and SSE streams, where it records the time of the first event that carries
content (time to first token), counts content events and notices in-stream errors.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

import orjson

HEAD_LIMIT = 64 * 1024


def build_request(*, host: str, port: int, path: str, body: bytes, key: str) -> bytes:
    """The whole request, encoded once per round and reused for every call."""
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
        f"Accept: application/json, text/event-stream\r\nContent-Length: {len(body)}\r\n"
    )
    if key:
        head += f"Authorization: Bearer {key}\r\n"
    return head.encode() + b"\r\n" + body


@dataclass
class SseWatch:
    """Splits an SSE byte stream into events and watches for content and errors."""

    started: float
    first_content: float | None = None
    content_events: int = 0
    done: bool = False
    error: str | None = None
    buf: bytes = b""

    def feed(self, data: bytes, now: float) -> None:
        self.buf = (self.buf + data).replace(b"\r\n", b"\n")
        while True:
            end = self.buf.find(b"\n\n")
            if end < 0:
                return
            event, self.buf = self.buf[:end], self.buf[end + 2 :]
            payload = b"\n".join(
                line[5:].lstrip(b" ") for line in event.split(b"\n") if line.startswith(b"data:")
            )
            if payload:
                self._event(payload, now)

    def _event(self, payload: bytes, now: float) -> None:
        if payload.strip() == b"[DONE]":
            self.done = True
            return
        try:
            obj = orjson.loads(payload)
        except orjson.JSONDecodeError:
            self.error = self.error or "bad-sse-json"
            return
        if not isinstance(obj, dict):
            return
        if obj.get("error"):
            self.error = self.error or "sse-error-event"
            return
        kind = obj.get("type")
        if kind is not None:  # Anthropic Messages and OpenAI Responses events
            if kind in ("content_block_delta", "response.output_text.delta"):
                self.content_events += 1
                if self.first_content is None:
                    self.first_content = now
            elif kind in ("message_stop", "response.completed"):
                self.done = True
            elif kind in ("response.failed", "response.incomplete"):
                self.error = self.error or "sse-error-event"
            return
        candidates = obj.get("candidates")
        if isinstance(candidates, list) and candidates:  # Gemini's (no event names)
            parts = (candidates[0].get("content") or {}).get("parts") or ()
            if any(p.get("text") or p.get("functionCall") for p in parts):
                self.content_events += 1
                if self.first_content is None:
                    self.first_content = now
            self.done = self.done or bool(candidates[0].get("finishReason"))
            return
        for choice in obj.get("choices") or ():
            delta = choice.get("delta") or {}
            if delta.get("content") or delta.get("reasoning_content") or delta.get("tool_calls"):
                self.content_events += 1
                if self.first_content is None:
                    self.first_content = now
                break


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes = b""
    sse: SseWatch | None = None
    reusable: bool = True
    extra: dict[str, str] = field(default_factory=dict)


class Connection:
    """One keep-alive TCP connection; ``call`` may be repeated until ``reusable`` is False."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def open(cls, host: str, port: int) -> Connection:
        reader, writer = await asyncio.open_connection(host, port, limit=HEAD_LIMIT * 4)
        return cls(reader, writer)

    def close(self) -> None:
        self.writer.close()

    async def call(self, request: bytes, started: float) -> Answer:
        self.writer.write(request)
        reader = self.reader
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head[:-4].decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        answer = Answer(status, headers)
        if "event-stream" in headers.get("content-type", ""):
            answer.sse = SseWatch(started)
        if headers.get("connection", "").lower() == "close":
            answer.reusable = False
        if headers.get("transfer-encoding", "").lower() == "chunked":
            await self._read_chunked(answer)
        elif "content-length" in headers:
            self._take(answer, await reader.readexactly(int(headers["content-length"])))
        else:
            answer.reusable = False
            while data := await reader.read(65536):
                self._take(answer, data)
        return answer

    async def _read_chunked(self, answer: Answer) -> None:
        reader = self.reader
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            if size == 0:
                while await reader.readuntil(b"\r\n") != b"\r\n":  # trailers
                    pass
                return
            self._take(answer, (await reader.readexactly(size + 2))[:-2])

    @staticmethod
    def _take(answer: Answer, data: bytes) -> None:
        if answer.sse is not None:
            answer.sse.feed(data, time.perf_counter())
        else:
            answer.body += data
