"""SPEC §3.5: a stream ends cleanly only when the upstream's answer earned it.

A body that ends (clean close, reset, or a broken last line) before every choice carried a
``finish_reason`` is a cut: retried or switched before the commit point, an SSE error event
and no ``[DONE]`` after it, and the call is recorded ``failed``. Real sockets both sides.
"""

from __future__ import annotations

import httpx
import openai
import pytest

from routing.gateway.events import CallRecord
from routing.simulator.script import EndBeforeFinish, Malformed, NoDone, Reply
from tests.conftest import TWO_ROUTES, Harness

MESSAGES = [{"role": "user", "content": "hi"}]
HOWS = ["clean", "reset", "malformed"]

SAFE = (
    TWO_ROUTES
    + """
  - name: safe
    commit: complete
    targets:
      - {provider: p1, model: a}
      - {provider: p2, model: b}
"""
)


@pytest.fixture
def h(harness: Harness) -> Harness:
    harness.configure(SAFE)
    return harness


def raw_stream(h: Harness, model: str = "auto") -> httpx.Response:
    return httpx.post(
        h.gateway.base_url + "/chat/completions",
        headers={"authorization": f"Bearer {h.key}"},
        json={"model": model, "messages": MESSAGES, "stream": True},
        timeout=30,
    )


@pytest.mark.parametrize("how", HOWS)
def test_a_stream_cut_after_the_commit_point_gets_an_error_event_and_no_done(
    h: Harness, how: str
) -> None:
    h.upstream.script("a", EndBeforeFinish(2, content="one two ", how=how))
    reply = raw_stream(h)
    body = reply.text
    assert '"content":"one ' in body and '"content":"two ' in body
    assert "data: [DONE]" not in body
    assert body.rstrip().splitlines()[-1].startswith('data: {"error"')
    assert "stream ended before a finish reason" in body
    assert h.upstream.count("b") == 0
    [call] = h.events(CallRecord, at_least=1)
    assert call.outcome == "failed"
    assert call.error_code == "TRANSPORT"


@pytest.mark.parametrize("how", HOWS)
def test_the_sdk_sees_a_cut_stream_as_an_error_not_a_short_answer(h: Harness, how: str) -> None:
    h.upstream.script("a", EndBeforeFinish(2, content="one two ", how=how))
    stream = h.client().chat.completions.create(model="auto", messages=MESSAGES, stream=True)
    received: list[str] = []
    with pytest.raises(openai.APIError):
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                received.append(chunk.choices[0].delta.content)
    assert "".join(received) == "one two "


@pytest.mark.parametrize("how", HOWS)
def test_a_cut_before_the_commit_point_fails_over_invisibly(h: Harness, how: str) -> None:
    h.upstream.script("a", then=EndBeforeFinish(3, how=how))
    h.upstream.script("b", Reply("the whole answer", chunks=4))
    stream = h.client().chat.completions.create(model="safe", messages=MESSAGES, stream=True)
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text == "the whole answer"
    [call] = h.events(CallRecord, at_least=1)
    assert call.outcome == "ok" and call.served_by == "p2/b"
    assert {a.code for a in call.attempts if not a.ok} == {"TRANSPORT"}
    assert {a.message for a in call.attempts if not a.ok} == {"stream ended before a finish reason"}


def test_a_role_chunk_then_a_clean_close_is_a_cut_not_an_empty_answer(h: Harness) -> None:
    h.upstream.script("a", then=EndBeforeFinish(0, content=""))
    stream = h.client().chat.completions.create(model="auto", messages=MESSAGES, stream=True)
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text == "Hello from b."
    [call] = h.events(CallRecord, at_least=1)
    assert call.attempts[0].code == "TRANSPORT"
    assert call.attempts[0].message == "stream ended before a finish reason"


def test_garbage_before_any_content_is_transport_not_empty(h: Harness) -> None:
    # Every data line is garbage after a good role chunk would make it "empty" today.
    h.upstream.script("a", then=Malformed("sse-line", chunks=1, bad_chunk=1))
    stream = h.client().chat.completions.create(model="auto", messages=MESSAGES, stream=True)
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text == "Hello from b."
    [call] = h.events(CallRecord, at_least=1)
    assert call.attempts[0].code == "TRANSPORT"


def test_a_complete_answer_without_done_still_ends_cleanly(h: Harness) -> None:
    h.upstream.script("a", NoDone(chunks=3))
    reply = raw_stream(h)
    assert '"error"' not in reply.text
    assert reply.text.rstrip().endswith("data: [DONE]")
    [call] = h.events(CallRecord, at_least=1)
    assert call.outcome == "ok"
