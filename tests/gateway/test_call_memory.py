"""What a call holds while it streams, and what it leaves behind.

An open stream holds no copy of its request past the commit point, nor Django's request: an agent's history is
often hundreds of KB, which the server's, the view's, continuity's and the upstream
request's copies each held for the whole stream (bench: 173 KB per open stream with a 40 KB
history, 40 KB after, the same as with a one-line request).

A finished call is freed by reference counting, not left to the garbage collector.

With thousands of streams open, a full collection walks every object they hold while the
event loop stands still (bench scenario h: pauses of over a second). Each call that leaves a
reference cycle behind hands the collector more work and keeps its response, buffers and
upstream objects in memory until the next full collection. Two such cycles were on every
call: httpx's response and its bound stream (routing.upstream.transport), and the handler's
frame, its disconnect-listener task and that task's RequestAborted (routing.api.asgi).

End to end (SDKs → gateway in uvicorn → simulator, real sockets), looking at the gateway's
own live objects: the open stream's request, call and upstream response; and, with the
collector on ``DEBUG_SAVEALL`` around a handful of calls, at everything it found
unreachable: none of it may be the gateway's.
"""

from __future__ import annotations

import gc
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anthropic
import pytest
from django.core.handlers.asgi import ASGIRequest

from bench.streams import history as agent_history
from routing.gateway.events import CallRecord
from routing.gateway.state import CallState
from routing.simulator.script import Fail, Reply
from routing.upstream.transport import UpstreamResponse
from tests.api.test_front_doors import THREE_KINDS
from tests.conftest import Harness
from tests.gateway.test_gateway_core import MESSAGES

# What a call through the gateway makes (the test's own client is httpx over httpcore, so
# httpx's own types would also count the client's side: aiohttp's are the gateway's alone).
SERVER_SIDE = ("routing.", "aiohttp.", "django.core.handlers.", "django.http.")


def gateway_garbage(found: list[object]) -> Counter[str]:
    names = (f"{type(o).__module__}.{type(o).__qualname__}" for o in found)
    return Counter(
        name
        for name in names
        if name.startswith(SERVER_SIDE) and not name.startswith("routing.simulator.")
    )


@contextmanager
def saved_garbage() -> Iterator[list[object]]:
    """Everything the collector finds unreachable from here on (``gc.garbage``)."""
    gc.collect()
    gc.garbage.clear()
    flags = gc.get_debug()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        yield gc.garbage
    finally:
        gc.set_debug(flags)
        gc.garbage.clear()


def test_finished_calls_leave_no_reference_cycles(harness: Harness) -> None:
    harness.configure(THREE_KINDS)
    chat = harness.client()
    claude = anthropic.Anthropic(base_url=harness.gateway.url, api_key=harness.key, max_retries=0)
    for group in ("via-openai", "via-anthropic", "via-openai-responses"):  # tables, pools up
        chat.chat.completions.create(model=group, messages=MESSAGES)
    harness.events(CallRecord, at_least=3)
    with saved_garbage() as found:
        answer = chat.chat.completions.create(model="via-openai", messages=MESSAGES)
        assert answer.choices[0].message.content
        for group in ("via-openai", "anthropic-then-openai"):  # as is; translated
            stream = chat.chat.completions.create(model=group, messages=MESSAGES, stream=True)
            assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
        with claude.messages.stream(model="via-anthropic", max_tokens=32, messages=MESSAGES) as s:
            assert s.get_final_text()  # the Messages door's pass-through
        with chat.responses.stream(model="via-openai-responses", input="hi") as r:
            assert r.get_final_response().output_text  # the Responses door's pass-through
        harness.upstream.script("c-model", Fail(401, "bad key"))
        switched = chat.chat.completions.create(model="via-openai", messages=MESSAGES)
        assert (
            switched.choices[0].message.content == "Hello from a-model."
        )  # broken credentials: the next target
        with chat.chat.completions.create(
            model="via-openai", messages=MESSAGES, stream=True
        ) as left:
            next(iter(left))  # the client leaves after the first chunk
        harness.events(CallRecord, at_least=3 + 7, timeout=10)
        gc.collect()
        assert gateway_garbage(found) == Counter()


def live(kinds: tuple[type, ...]) -> dict[type, list[Any]]:
    """The live objects of each of ``kinds``, from one pass over the collector's objects."""
    found: dict[type, list[Any]] = {kind: [] for kind in kinds}
    for o in gc.get_objects():
        if type(o) in found:
            found[type(o)].append(o)
    return found


@pytest.mark.parametrize("door", ["chat", "messages"])
def test_an_open_stream_holds_no_copy_of_its_request(harness: Harness, door: str) -> None:
    harness.configure(THREE_KINDS)
    model = {"chat": "c-model", "messages": "a-model"}[door]
    # 1 s between chunks: the stream is still open after one look at every live object,
    # even on a busy machine (at 0.3 s a loaded run once found its call already ended)
    harness.upstream.script(model, Reply(content="one two three four", chunks=4, chunk_delay_s=1.0))
    tag = uuid.uuid4().hex
    history = agent_history(160)  # KB: as an agent's requests carry
    if door == "chat":
        stream: Any = harness.client().chat.completions.create(
            model="via-openai", messages=history, stream=True, extra_headers={"x-test": tag}
        )
        first, rest = iter(stream), lambda c: c.choices[0].delta.content or "" if c.choices else ""
    else:
        claude = anthropic.Anthropic(
            base_url=harness.gateway.url, api_key=harness.key, max_retries=0
        )
        stream = claude.messages.create(
            model="via-anthropic",
            max_tokens=64,
            messages=history,  # type: ignore[arg-type]
            stream=True,
            extra_headers={"x-test": tag},
        )
        first = iter(stream)
        rest = lambda e: e.delta.text if e.type == "content_block_delta" else ""  # noqa: E731
    call_id = stream.response.headers["x-switchyard-request-id"]
    with stream:
        got = rest(next(first))  # the client has bytes: the call is past its commit point
        found = live((ASGIRequest, CallState, UpstreamResponse))  # one look, while it streams
        requests = [r for r in found[ASGIRequest] if r.headers.get("x-test") == tag]
        [call] = [c for c in found[CallState] if c.call_id == call_id]
        upstreams = [u for u in found[UpstreamResponse] if not u._response.is_closed]
        assert requests == []  # Django's request, with its copy of the body and its META
        assert call.body == {} and call.prepared.body == {} and call.prepared.bodies == {}
        assert call.continuity.body == {}
        assert call.door_continuity is None or call.door_continuity.body == {}
        assert upstreams  # the stream's, and any other test's still closing, all released:
        assert all(u._response.request.content == b"" for u in upstreams)  # (upstream's copy)
        got += "".join(rest(event) for event in first)
    assert got.strip() == "one two three four"  # the stream itself is untouched
    records = harness.events(CallRecord, at_least=1, timeout=10)
    [record] = [r for r in records if r.call_id == call_id]
    assert record.outcome == "ok"
