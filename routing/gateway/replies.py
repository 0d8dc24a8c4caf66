"""What a call hands back to the HTTP edge, and the OpenAI-shaped error bodies.

The gateway core never builds Django responses; it returns one of three plain values and
``routing.api.pipeline.render`` turns them into HTTP in exactly one place.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field

import orjson

from routing.protocols import Protocol
from routing.protocols.legs import door_error_body


@dataclass(slots=True)
class JsonReply:
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)
    status: int = 200


@dataclass(slots=True)
class StreamReply:
    chunks: AsyncIterator[bytes]  # ready-framed SSE bytes
    headers: dict[str, str] = field(default_factory=dict)
    # Awaited instead when ``chunks`` is never iterated (the client left between the
    # commit and the first write): an async generator never started runs no ``finally``,
    # so without it the upstream stream would stay open and the call off the record.
    abandon: Callable[[], Awaitable[None]] | None = None


@dataclass(slots=True)
class ErrorReply:
    status: int
    message: str
    code: str
    type: str = "invalid_request_error"
    param: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    door: Protocol = Protocol.CHAT  # the error leaves in this protocol's shape
    logged: bool = False  # the gateway logged it already (an exhausted call's ERROR line)

    @property
    def body(self) -> bytes:
        return door_error_body(
            self.door,
            self.message,
            code=self.code,
            type=self.type,
            status=self.status,
            param=self.param,
        )


Reply = JsonReply | StreamReply | ErrorReply


def error_body(message: str, *, code: str, type: str, param: str | None = None) -> bytes:
    return orjson.dumps({"error": {"message": message, "type": type, "code": code, "param": param}})


def sse(payload: bytes) -> bytes:
    return b"data: " + payload + b"\n\n"


SSE_DONE = b"data: [DONE]\n\n"


def sse_error(message: str, *, code: str, type: str = "upstream_error") -> bytes:
    """The event that ends a stream that failed after its commit point."""
    return sse(error_body(message, code=code, type=type))


def merge_headers(*layers: Mapping[str, str]) -> dict[str, str]:
    merged: dict[str, str] = {}
    for layer in layers:
        merged.update(layer)
    return merged
