"""The simulator's faults in the other two upstream protocols (Anthropic Messages on
``/v1/messages``, OpenAI Responses on ``/v1/responses``), over real loopback sockets.

``tests/simulator/test_simulator.py`` covers them in Chat Completions shapes; the gateway's
reading of them is in ``tests/api/test_front_doors.py``. No Django here.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from routing.simulator import Empty, FakeUpstream, Malformed, StallAfter

PATHS = {"anthropic": "/messages", "openai-responses": "/responses"}
DONE = {"anthropic": "message_stop", "openai-responses": "response.completed"}
TEXT_DELTA = {"anthropic": "content_block_delta", "openai-responses": "response.output_text.delta"}


@pytest.fixture
def upstream() -> Iterator[FakeUpstream]:
    with FakeUpstream() as up:
        yield up


def _body(kind: str, *, stream: bool) -> dict[str, Any]:
    if kind == "anthropic":
        return {
            "model": "m",
            "max_tokens": 10,
            "messages": [{"role": "user", "content": "hi"}],
            "stream": stream,
        }
    return {"model": "m", "input": "hi", "stream": stream}


def _events(
    upstream: FakeUpstream, kind: str, *, timeout: float = 5
) -> tuple[list[tuple[str | None, str]], Exception | None]:
    """The (event name, data) pairs of a stream, and the error that ended it, if any."""
    events: list[tuple[str | None, str]] = []
    name: str | None = None
    try:
        with httpx.stream(
            "POST", upstream.base_url + PATHS[kind], json=_body(kind, stream=True), timeout=timeout
        ) as response:
            assert response.status_code == 200
            for line in response.iter_lines():
                if line.startswith("event: "):
                    name = line.removeprefix("event: ")
                elif line.startswith("data: "):
                    events.append((name, line.removeprefix("data: ")))
                    name = None
    except httpx.HTTPError as exc:
        return events, exc
    return events, None


def _json(data: str) -> dict[str, Any] | None:
    try:
        return dict(json.loads(data))
    except ValueError:
        return None


KINDS = pytest.mark.parametrize("kind", list(PATHS))


@KINDS
def test_empty_is_a_finished_answer_without_content(upstream: FakeUpstream, kind: str) -> None:
    upstream.script("m", Empty(), Empty())
    events, error = _events(upstream, kind)
    assert error is None
    names = [name for name, _ in events]
    assert names[-1] == DONE[kind] and TEXT_DELTA[kind] not in names
    assert all(_json(data) is not None for _, data in events)
    body = httpx.post(upstream.base_url + PATHS[kind], json=_body(kind, stream=False)).json()
    texts = (
        [b.get("text") for b in body["content"]]
        if kind == "anthropic"
        else [p["text"] for item in body["output"] for p in item.get("content", [])]
    )
    assert not any(texts)


@KINDS
def test_malformed_json_is_garbage_in_every_line_and_body(
    upstream: FakeUpstream, kind: str
) -> None:
    upstream.script("m", Malformed(), Malformed())
    events, error = _events(upstream, kind)
    assert error is None and events
    assert all(_json(data) is None for _, data in events)
    response = httpx.post(upstream.base_url + PATHS[kind], json=_body(kind, stream=False))
    assert response.status_code == 200
    with pytest.raises(ValueError):
        response.json()


@KINDS
def test_malformed_sse_line_breaks_exactly_one_named_event(
    upstream: FakeUpstream, kind: str
) -> None:
    behaviour = Malformed("sse-line", chunks=5, bad_chunk=3)
    upstream.script("m", behaviour)
    events, error = _events(upstream, kind)
    assert error is None
    bad = [(name, data) for name, data in events if _json(data) is None]
    assert [name for name, _ in bad] == [TEXT_DELTA[kind]]  # the event keeps its name
    good = [_json(data) for _, data in events]
    deltas = [
        (e["delta"]["text"] if kind == "anthropic" else e["delta"])
        for e in good
        if e is not None and e.get("type") == TEXT_DELTA[kind]
    ]
    assert "".join(deltas) == behaviour.expected_content()
    assert events[-1][0] == DONE[kind]


@KINDS
def test_stall_after_sends_named_events_then_stays_silent(
    upstream: FakeUpstream, kind: str
) -> None:
    upstream.script("m", StallAfter(2, content="one two"))
    events, error = _events(
        upstream, kind, timeout=2.0
    )  # the stall is endless: loose for a busy box
    assert isinstance(error, httpx.ReadTimeout)
    names = [name for name, _ in events]
    assert names[0] == ("message_start" if kind == "anthropic" else "response.created")
    assert names.count(TEXT_DELTA[kind]) == 2 and DONE[kind] not in names
    assert upstream.wait_disconnected(1.0) and upstream.requests[0].disconnected
