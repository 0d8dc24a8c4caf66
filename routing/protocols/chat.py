"""OpenAI Chat Completions (``kind: openai``, the chat door): the canonical view itself.

Its requests, answers and stream chunks need no translation, so this module holds only
what the other protocols' modules hold besides their codecs: the error shapes (an OpenAI
``{"error": {...}}`` body, and the ``data:`` event that ends a failed stream), the answer
as the door sends it, and the cheapest request the provider's "test" button sends.
"""

from __future__ import annotations

from typing import Any

import orjson

from routing.protocols.canonical import OPAQUE
from routing.protocols.responses.tools import ToolNames


def error_body(
    message: str, *, code: str, type: str, status: int = 400, param: str | None = None
) -> bytes:
    """OpenAI's error shape (also the Responses door's): ``status`` is the HTTP status's."""
    return orjson.dumps({"error": {"message": message, "type": type, "code": code, "param": param}})


def error_event(message: str, *, code: str, status: int = 502) -> bytes:
    """The ``data:`` event that ends a chat stream that failed after its commit point."""
    payload = orjson.dumps(
        {"error": {"message": message, "type": "upstream_error", "code": code, "param": None}}
    )
    return b"data: " + payload + b"\n\n"


def stream_error(event: dict[str, Any]) -> Any:
    """The error a stream event carries: chat ``{"error": {...}}`` and Anthropic's
    ``{"type": "error", "error": {...}}`` alike."""
    return event.get("error")


def completion_for_door(canonical: dict[str, Any], names: ToolNames | None = None) -> bytes:
    for choice in canonical.get("choices") or ():
        (choice.get("message") or {}).pop(OPAQUE, None)  # nothing a chat client reads
    return orjson.dumps(canonical)


def test_body(model: str) -> dict[str, object]:
    return {
        "model": model,
        "messages": [{"role": "user", "content": "ping"}],
        "max_tokens": 1,
        "stream": False,
    }
