"""Incremental Server-Sent Events parsing for OpenAI-style chat streams.

OpenAI-compatible upstreams send one JSON object per ``data:`` line, events separated by a
blank line, and finish with ``data: [DONE]``. We split on newlines ourselves instead of
using a general SSE library: the gateway relays thousands of chunks per second and only
needs the ``data`` field, so the parser stays a few byte operations per line.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

DONE = b"[DONE]"


async def iter_data(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """Yield the payload of every ``data:`` field, joined per event as the SSE spec says.

    Comments (``:``-lines), ``event:``/``id:``/``retry:`` fields and blank keep-alives are
    dropped. A final event without its terminating blank line is still yielded, so a stream
    whose upstream closed without ``[DONE]`` loses nothing.
    """
    buffer = b""
    pending: list[bytes] = []
    async for chunk in chunks:
        buffer += chunk
        if b"\n" not in chunk:
            continue
        *lines, buffer = buffer.split(b"\n")
        for raw in lines:
            line = raw.rstrip(b"\r")
            if not line:
                if pending:
                    yield b"\n".join(pending)
                    pending = []
                continue
            if line.startswith(b"data:"):
                value = line[5:]
                pending.append(value[1:] if value.startswith(b" ") else value)
    tail = buffer.rstrip(b"\r")
    if tail.startswith(b"data:"):
        value = tail[5:]
        pending.append(value[1:] if value.startswith(b" ") else value)
    if pending:
        yield b"\n".join(pending)
