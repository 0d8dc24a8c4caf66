"""A finished call is freed by reference counting, not left to the garbage collector.

With thousands of streams open, a full collection walks every object they hold while the
event loop stands still (bench scenario h: pauses of over a second). Each call that leaves a
reference cycle behind hands the collector more work and keeps its response, buffers and
upstream objects in memory until the next full collection. Two such cycles were on every
call: httpx's response and its bound stream (routing.upstream.transport), and the handler's
frame, its disconnect-listener task and that task's RequestAborted (routing.api.asgi).

End to end (openai SDK → gateway in uvicorn → simulator, real sockets): the collector runs
with ``DEBUG_SAVEALL`` around a handful of calls, so everything it finds unreachable stays
in ``gc.garbage``; none of it may be the gateway's.
"""

from __future__ import annotations

import gc
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import anthropic

from routing.gateway.events import CallRecord
from routing.simulator.script import Fail
from tests.conftest import Harness
from tests.test_front_doors import THREE_KINDS
from tests.test_gateway_core import MESSAGES

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
        assert switched.model == "a-model"  # broken credentials: the next target
        with chat.chat.completions.create(
            model="via-openai", messages=MESSAGES, stream=True
        ) as left:
            next(iter(left))  # the client leaves after the first chunk
        harness.events(CallRecord, at_least=3 + 7)
        gc.collect()
        assert gateway_garbage(found) == Counter()
