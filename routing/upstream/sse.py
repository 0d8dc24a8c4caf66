"""Incremental Server-Sent Events parsing for OpenAI-style chat streams.

OpenAI-compatible upstreams send one JSON object per ``data:`` line, events separated by a
blank line, and finish with ``data: [DONE]``. We split on newlines ourselves instead of
using a general SSE library: the gateway relays thousands of chunks per second and only
needs the ``data`` field, so the parser stays a few byte operations per line.

The parser is fed whole network reads and returns every event they completed, so the
relay can forward all the events of one read in one write. Most reads of a healthy stream
are nothing but whole ``data: <payload>\n\n`` events; such a read is split in one pass and
marked ``verbatim``: its bytes are exactly those events re-framed, so a relay that passes
every one of them on may send the read itself. The named events of Anthropic Messages and
OpenAI Responses streams (``event: <name>\ndata: <payload>\n\n``) get the same one-pass
split and are marked ``named``: a pass-through relay may send such a read as it came.
"""

from __future__ import annotations

import re

DONE = b"[DONE]"

# A chat chunk that is one content delta and nothing else the relay must act on, matched as
# a whole JSON object (see ``PlainDeltas``). Its other members are scalars with
# escape-free strings, named anything but ``error``, ``choices`` or ``usage`` (so there is
# no duplicate of those either, which a JSON parser would read last-one-wins); ``usage``
# may only be ``null``.
_STRING = rb'"[^"\\\x00-\x1f]*"'
_SCALAR = rb"(?:" + _STRING + rb"|-?(?:0|[1-9][0-9]*)|null|true|false)"
_MEMBER = rb'"(?!(?:error|choices|usage)")[A-Za-z0-9_]+":' + _SCALAR
_CONTENT = rb'((?:[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*)'
_NOT_PLAIN = re.compile(rb'["\\\x00-\x1f]')  # content bytes that end or escape a string
_PLAIN_DELTA = re.compile(
    rb"\{(?:" + _MEMBER + rb",)*"
    rb'"choices":\[\{"index":0,"delta":\{(?:"role":"assistant",)?"content":"'
    + _CONTENT
    + rb'"\}(?:,"logprobs":null)?,"finish_reason":null(?:,"logprobs":null)?\}\]'
    rb'(?:,"usage":null)?(?:,' + _MEMBER + rb")*\}"
)


class SSEParser:
    """Feed bytes as they arrive; get back the ``data`` payloads of completed events.

    Comments (``:``-lines), ``event:``/``id:``/``retry:`` fields and blank keep-alives are
    dropped; multi-line ``data`` is joined with newlines as the SSE spec says. ``close()``
    returns a final event that lacked its terminating blank line, so a stream whose upstream
    closed without ``[DONE]`` loses nothing.
    """

    __slots__ = ("_buffer", "_pending", "verbatim", "named")

    def __init__(self) -> None:
        self._buffer = b""
        self._pending: list[bytes] = []
        self.verbatim = False  # the last read was whole events, each one ``data: `` line
        self.named = False  # the last read was whole events, each ``event: `` + ``data: ``

    def feed(self, chunk: bytes) -> list[bytes]:
        if not self._buffer and not self._pending and chunk[-2:] == b"\n\n":
            whole = _whole_events(chunk)
            if whole is not None:
                payloads, named = whole
                self.verbatim, self.named = not named, named
                return payloads
        self.verbatim = self.named = False
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
        self.verbatim = self.named = False
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


def _whole_events(chunk: bytes) -> tuple[list[bytes], bool] | None:
    """The payloads of a read made only of ``data: <payload>\n\n`` events, or only of
    ``event: <name>\ndata: <payload>\n\n`` events (LF line ends, one data line each), and
    whether they were named; None for anything else (comments, other fields, CR, multi-line
    data, a space missing after a colon, named and unnamed events mixed), which the
    line-by-line path handles."""
    newlines = chunk.count(b"\n")
    if b"\r" in chunk:
        return None
    if newlines == 2:  # one event: a gateway that keeps up reads them one at a time
        return ([chunk[6:-2]], False) if chunk[:6] == b"data: " else None
    parts = chunk[:-2].split(b"\n\n")
    events = []
    if newlines == 2 * len(parts):  # no newline inside any event: data lines only
        for part in parts:
            if part[:6] != b"data: ":
                return None
            events.append(part[6:])
        return events, False
    if newlines != 3 * len(parts):  # else one newline inside each event (checked below)
        return None
    for part in parts:
        end = part.find(b"\n")  # an event with no newline leaves another with two
        if part[:7] != b"event: " or end < 0 or part[end + 1 : end + 7] != b"data: ":
            return None
        events.append(part[end + 7 :])
    return events, True


class PlainDeltas:
    """Finds the chat chunks of one stream that are exactly one content delta of choice 0,
    with no finish reason, usage or error — what almost every chunk of a long stream is —
    and returns their content's raw JSON string body; None for anything else (which the
    caller parses in full).

    A byte scan instead of a JSON parse. The first such chunk is matched against a pattern
    that spells out the whole object (``_PLAIN_DELTA``), so a match says everything a parse
    would have told the relay about it: a JSON object, choice 0 got this content and
    nothing else, nothing ended, nothing failed. Its bytes before and after the content
    (the stream's id, model, ... and the closing brackets) are kept: the next chunks of the
    stream start and end with the same bytes, so for them two comparisons and a search of
    the content for a quote, a backslash or a control character say the same. Valid UTF-8
    is the caller's to check, as a parser would; escapes in the content are left for it to
    decode (``\\n`` is common in code)."""

    __slots__ = ("_head", "_tail")

    def __init__(self) -> None:
        self._head = b""  # empty: no plain chunk seen yet
        self._tail = b""

    def content(self, payload: bytes) -> bytes | None:
        head, tail = self._head, self._tail
        if (
            head
            and payload.startswith(head)
            and payload.endswith(tail)
            and len(payload) >= len(head) + len(tail)
        ):
            raw = payload[len(head) : len(payload) - len(tail)]
            if _NOT_PLAIN.search(raw) is None:
                return raw
        match = _PLAIN_DELTA.fullmatch(payload)
        if match is None:
            return None
        self._head, self._tail = payload[: match.start(1)], payload[match.end(1) :]
        return match.group(1)
