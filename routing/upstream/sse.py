"""Incremental Server-Sent Events parsing for OpenAI-style chat streams.

OpenAI-compatible upstreams send one JSON object per ``data:`` line, events separated by a
blank line, and finish with ``data: [DONE]``. We split on newlines ourselves instead of
using a general SSE library: the gateway relays thousands of chunks per second and only
needs the ``data`` field, so the parser stays a few byte operations per line.

The parser is fed whole network reads and returns every event they completed, so the
relay can forward all the events of one read in one write. Most reads of a healthy stream
are nothing but whole ``data: <payload>\n\n`` events; such a read is split in one pass and
marked ``verbatim``: its bytes are exactly those events re-framed, so a relay that passes
every one of them on may send the read itself.
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

    __slots__ = ("_buffer", "_pending", "verbatim")

    def __init__(self) -> None:
        self._buffer = b""
        self._pending: list[bytes] = []
        self.verbatim = False  # the last read was whole events, each one ``data: `` line

    def feed(self, chunk: bytes) -> list[bytes]:
        if not self._buffer and not self._pending and chunk[-2:] == b"\n\n":
            whole = _whole_events(chunk)
            if whole is not None:
                self.verbatim = True
                return whole
        self.verbatim = False
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
        self.verbatim = False
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


def _whole_events(chunk: bytes) -> list[bytes] | None:
    """The payloads of a read made only of ``data: <payload>\n\n`` events (LF line ends,
    one line each), or None for anything else (comments, other fields, CR, multi-line data,
    a space missing after the colon), which the line-by-line path handles."""
    newlines = chunk.count(b"\n")
    if b"\r" in chunk:
        return None
    if newlines == 2:  # one event: a gateway that keeps up reads them one at a time
        return [chunk[6:-2]] if chunk[:6] == b"data: " else None
    parts = chunk[:-2].split(b"\n\n")
    if newlines != 2 * len(parts):
        return None
    events = []
    for part in parts:
        if part[:6] != b"data: ":
            return None
        events.append(part[6:])
    return events
