"""The relay's byte scan of plain content deltas (issue 27): after the commit point a chat
chunk that is one content delta and nothing else is recognised without a JSON parse
(``routing.upstream.sse.PlainDeltas``), and the relay learns from it exactly what a parse
would have told it. Everything else — a finish reason, usage, an error, another choice, a
tool call, reasoning, odd JSON — is left to the parse."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from routing.gateway.continuity import ServedTurn
from routing.upstream.sse import PlainDeltas
from tests.gateway.test_stream_relay import LAST, ROLE, STOP, relayed

HEAD = b'{"id":"c1","object":"chat.completion.chunk","created":1700000000,"model":"m",'


def chunk(content: str, **extra: Any) -> bytes:
    body = {
        "id": "c1",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": "m",
        "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": None}],
        **extra,
    }
    return orjson.dumps(body)


def data(payload: bytes) -> bytes:
    return b"data: " + payload + b"\n\n"


TEXTS = ["tok ", "", "line\nnext", 'say "hi"', "back\\slash", "café", "日本語", "😀", "\t\x01"]


@pytest.mark.parametrize("text", TEXTS)
def test_a_plain_delta_gives_its_content_as_the_json_string_body(text: str) -> None:
    payload = chunk(text)
    raw = PlainDeltas().content(payload)
    assert raw is not None
    assert orjson.loads(b'"' + raw + b'"') == text


@pytest.mark.parametrize(
    "payload",
    [
        chunk("x").replace(b'"finish_reason":null', b'"finish_reason":"stop"'),
        chunk("x", usage={"prompt_tokens": 1}),
        chunk("x").replace(b'"model":"m"', b'"model":"m","error":"boom"'),
        chunk("x").replace(b'"model":"m"', b'"model":"m","error":{"message":"boom"}'),
        chunk("x").replace(b'"index":0', b'"index":1'),
        chunk("x").replace(b'{"content":"x"}', b'{"content":"x","tool_calls":[]}'),
        chunk("x").replace(b'{"content":"x"}', b'{"content":"x","reasoning_content":"r"}'),
        chunk("x").replace(b'"model":"m"', b'"model":"m","choices":null'),  # a duplicate
        chunk("x").replace(b'"model":"m"', b'"model":{"name":"m"}'),
        chunk("x").replace(b'"model":"m"', b'"model":"m\\u0041"'),  # an escape outside content
        chunk("x").replace(b'"created":1700000000', b'"created":01700000000'),  # not JSON
        chunk("x").replace(b",", b", "),  # whitespace: valid, but left to the parser
        chunk("x")[:-1],  # cut
        chunk("x") + b"}",
        chunk("x").replace(b'"x"', b'"a\\qb"'),  # no such escape
        b"[DONE]",
    ],
)
def test_anything_but_a_plain_delta_is_left_to_the_parse(payload: bytes) -> None:
    assert PlainDeltas().content(payload) is None


def test_the_kept_head_and_tail_serve_the_next_chunks_and_a_new_shape_is_matched_again() -> None:
    scanner = PlainDeltas()
    assert scanner.content(chunk("one")) == b"one"
    assert scanner.content(chunk("two")) == b"two"  # the fast path: same head and tail
    assert scanner.content(chunk('a "quote"')) == b'a \\"quote\\"'  # escaped: matched whole
    assert scanner.content(chunk("x").replace(b":1700000000", b":1700000001")) == b"x"
    stop = chunk("x").replace(b'"finish_reason":null', b'"finish_reason":"stop"')
    assert scanner.content(stop) is None  # the tail differs: the pattern refuses it
    trick = HEAD + b'"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}]}'
    assert scanner.content(trick) == b"a"
    # a content that would close the string and add members: not plain, whatever the head
    sneaky = trick.replace(b'"a"', b'"a","tool_calls":[1],"content":"b"')
    assert scanner.content(sneaky) is None


async def test_a_relayed_stream_fingerprints_the_same_as_parsing_every_chunk() -> None:
    payloads = [chunk(text) for text in TEXTS * 3]
    writes, reader, failure = await relayed([ROLE, *(data(p) for p in payloads), LAST])
    assert failure is None
    assert b"".join(writes) == b"".join(data(p) for p in payloads[1:]) + STOP
    parsed = ServedTurn()
    parsed.feed(orjson.loads(ROLE[6:-2]))
    for payload in payloads:
        parsed.feed(orjson.loads(payload))
    assert reader.turn.response_id == parsed.response_id == "c1"
    assert reader.turn.fingerprint() == parsed.fingerprint() is not None
    assert reader.malformed == 0


@pytest.mark.parametrize(
    "bad",
    [
        chunk("x").replace(b'"x"', b'"\xff\xfe"'),  # not UTF-8
        chunk("x").replace(b'"x"', b'"a\x01b"'),  # a raw control character
        chunk("x").replace(b'"x"', b'"\\ud800"'),  # a lone surrogate
    ],
    ids=["not-utf8", "control-character", "lone-surrogate"],
)
async def test_a_chunk_a_parser_refuses_is_dropped_as_malformed_after_the_scan_too(
    bad: bytes,
) -> None:
    first, second = chunk("first"), chunk("second")
    writes, reader, failure = await relayed([ROLE, data(first), data(bad), data(second), LAST])
    assert failure is None
    assert bad not in b"".join(writes)
    assert writes == [data(second), STOP]  # the first committed: run_attempt sends it
    assert reader.malformed == 1
