"""The SSE parser: events complete only on their blank line, wherever reads split them."""

from __future__ import annotations

import pytest

from routing.upstream.sse import SSEParser

STREAM = b'data: {"a":1}\n\n: keep-alive\n\nevent: x\nid: 7\ndata: {"b":2}\r\n\r\ndata: line1\ndata: line2\n\ndata: [DONE]\n\n'
EVENTS = [b'{"a":1}', b'{"b":2}', b"line1\nline2", b"[DONE]"]


@pytest.mark.parametrize("size", [1, 2, 3, 7, 16, len(STREAM)])
def test_events_survive_any_split(size: int) -> None:
    parser = SSEParser()
    events: list[bytes] = []
    for start in range(0, len(STREAM), size):
        events += parser.feed(STREAM[start : start + size])
    events += parser.close()
    assert events == EVENTS


def test_one_read_may_complete_several_events() -> None:
    assert SSEParser().feed(b"data: 1\n\ndata: 2\n\ndata: 3") == [b"1", b"2"]


def test_a_final_event_without_its_blank_line_is_kept_at_close() -> None:
    parser = SSEParser()
    assert parser.feed(b'data: {"usage":1}\n') == []
    assert parser.close() == [b'{"usage":1}']
    assert parser.close() == []


def test_data_without_a_space_and_comments_only() -> None:
    parser = SSEParser()
    assert parser.feed(b"data:x\n\n:comment\n\n\n") == [b"x"]


@pytest.mark.parametrize(
    ("read", "verbatim", "named"),
    [
        (b'data: {"a":1}\n\ndata: {"b":2}\n\n', True, False),
        (b"data: [DONE]\n\n", True, False),
        (b"data: \n\n", True, False),
        (b'data: {"a":1}\n\ndata: {"b"', False, False),  # ends inside an event
        (b"data: {}\r\n\r\n", False, False),
        (b"data:{}\n\n", False, False),
        (b": keep-alive\n\ndata: {}\n\n", False, False),
        (b"data: a\ndata: b\n\n", False, False),
        (b"data: a\n\n\ndata: b\n\n", False, False),
        # named events (Anthropic Messages, OpenAI Responses)
        (b"event: x\ndata: {}\n\n", False, True),
        (b'event: a\ndata: {"a":1}\n\nevent: b\ndata: {"b":2}\n\n', False, True),
        (b"event: a\ndata: 1\n\ndata: 2\n\n", False, False),  # named and unnamed mixed
        (b"event: a\ndata: 1\ndata: 2\n\ndata: 3\n\n", False, False),  # same newline count
        (b"event: a\nid: 7\ndata: 1\n\n", False, False),
        (b"event: a\ndata:1\n\n", False, False),
        (b"event: a\r\ndata: 1\r\n\r\n", False, False),
        (b"event: a\n\nevent: b\ndata: 1\ndata: 2\n\n", False, False),
    ],
)
def test_a_read_of_whole_events_is_marked_and_parses_the_same(
    read: bytes, verbatim: bool, named: bool
) -> None:
    reference = SSEParser()
    expected = [e for b in read for e in reference.feed(bytes([b]))]  # byte by byte: slow path
    parser = SSEParser()
    assert parser.feed(read) == expected
    assert (parser.verbatim, parser.named) == (verbatim, named)
    if verbatim:
        assert read == b"".join(b"data: " + e + b"\n\n" for e in expected)
    if named:  # each event is its name line, then its one data line
        names = [line[7:] for line in read.split(b"\n") if line.startswith(b"event: ")]
        framed = (
            b"event: " + n + b"\ndata: " + e + b"\n\n" for n, e in zip(names, expected, strict=True)
        )
        assert read == b"".join(framed)


def test_a_read_after_a_partial_one_is_not_verbatim() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: 1\n") == []
    assert parser.feed(b"\ndata: 2\n\n") == [b"1", b"2"]
    assert not parser.verbatim
    assert parser.feed(b"data: 3\n\n") == [b"3"]
    assert parser.verbatim
