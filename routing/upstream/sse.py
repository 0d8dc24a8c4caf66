"""Incremental Server-Sent Events parsing for OpenAI-style chat streams.

OpenAI-compatible upstreams send one JSON object per ``data:`` line, events separated by a
blank line, and finish with ``data: [DONE]``. We split on newlines ourselves instead of
using a general SSE library: the gateway relays thousands of chunks per second and only
needs the ``data`` field, so the parser stays a few byte operations per line.

The parser is fed whole network reads and returns every event they completed, so the
relay can forward all the events of one read in one write.
"""

from __future__ import annotations

DONE = b"[DONE]"


class SSEParser:
    """Feed bytes as they arrive; get back the ``data`` payloads of completed events.

    Comments (``:``-lines), ``event:``/``id:``/``retry:`` fields and blank keep-alives are
    dropped; multi-line ``data`` is joined with newlines as the SSE spec says. ``close()``
    returns a final event that lacked its terminating blank line, so a stream whose upstream
    closed without ``[DONE]`` loses nothing.
    """

    __slots__ = ("_buffer", "_pending")

    def __init__(self) -> None:
        self._buffer = b""
        self._pending: list[bytes] = []

    def feed(self, chunk: bytes) -> list[bytes]:
        self._buffer += chunk
        if b"\n" not in chunk:
            return []
        *lines, self._buffer = self._buffer.split(b"\n")
        events: list[bytes] = []
        pending = self._pending
        for raw in lines:
            line = raw.rstrip(b"\r")
            if not line:
                if pending:
                    events.append(b"\n".join(pending))
                    pending.clear()
            elif line.startswith(b"data:"):
                value = line[5:]
                pending.append(value[1:] if value.startswith(b" ") else value)
        return events

    def close(self) -> list[bytes]:
        tail = self._buffer.rstrip(b"\r")
        self._buffer = b""
        if tail.startswith(b"data:"):
            value = tail[5:]
            self._pending.append(value[1:] if value.startswith(b" ") else value)
        if not self._pending:
            return []
        event = b"\n".join(self._pending)
        self._pending.clear()
        return [event]
