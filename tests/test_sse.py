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
    ("read", "verbatim"),
    [
        (b'data: {"a":1}\n\ndata: {"b":2}\n\n', True),
        (b"data: [DONE]\n\n", True),
        (b"data: \n\n", True),
        (b'data: {"a":1}\n\ndata: {"b"', False),  # ends inside an event
        (b"data: {}\r\n\r\n", False),
        (b"data:{}\n\n", False),
        (b": keep-alive\n\ndata: {}\n\n", False),
        (b"event: x\ndata: {}\n\n", False),
        (b"data: a\ndata: b\n\n", False),
        (b"data: a\n\n\ndata: b\n\n", False),
    ],
)
def test_a_read_of_whole_data_events_is_verbatim_and_parses_the_same(
    read: bytes, verbatim: bool
) -> None:
    reference = SSEParser()
    expected = [e for b in read for e in reference.feed(bytes([b]))]  # byte by byte: slow path
    parser = SSEParser()
    assert parser.feed(read) == expected
    assert parser.verbatim is verbatim
    if verbatim:
        assert read == b"".join(b"data: " + e + b"\n\n" for e in expected)


def test_a_read_after_a_partial_one_is_not_verbatim() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: 1\n") == []
    assert parser.feed(b"\ndata: 2\n\n") == [b"1", b"2"]
    assert not parser.verbatim
    assert parser.feed(b"data: 3\n\n") == [b"3"]
    assert parser.verbatim
