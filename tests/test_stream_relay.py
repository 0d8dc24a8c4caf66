"""The relay's per-read deadline: one timer per stream, same outcomes as a timeout per read.

End to end (openai SDK → gateway → simulator, real sockets): a stream that stalls after
its commit point ends with an SSE error naming the idle timeout. Unit level: the
``ReadDeadline`` arms one timer for a whole run of reads, raises ``TimeoutError`` once a
read outlives its deadline, and leaves a cancellation from elsewhere a cancellation.
"""

from __future__ import annotations

import asyncio
from typing import Any

import openai
import pytest

from routing.events import CallRecord
from routing.gateway.attempt import ReadDeadline
from routing.simulator.script import StallAfter
from tests.conftest import Harness
from tests.test_gateway_core import FAST_TIMEOUTS, MESSAGES


def test_a_stall_after_the_commit_point_ends_the_stream_with_an_idle_timeout_error(
    harness: Harness,
) -> None:
    harness.configure(FAST_TIMEOUTS)
    harness.upstream.script("a", StallAfter(3, content="one two three "))
    stream = harness.client().chat.completions.create(model="auto", messages=MESSAGES, stream=True)
    received: list[str] = []
    with pytest.raises(openai.APIError) as caught:
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                received.append(chunk.choices[0].delta.content)
    assert "".join(received) == "one two three "
    assert "idle timeout" in str(caught.value)
    assert harness.upstream.count("b") == 0  # too late to switch
    [call] = harness.events(CallRecord, at_least=1)
    assert (call.outcome, call.error_code) == ("failed", "TIMEOUT")


class CountingLoop(asyncio.SelectorEventLoop):
    """Counts the timers scheduled on it."""

    armed = 0

    def call_at(self, when: float, callback: Any, *args: Any, **kwargs: Any) -> asyncio.TimerHandle:
        self.armed += 1
        return super().call_at(when, callback, *args, **kwargs)


def run_on_counting_loop(coro_fn: Any) -> tuple[Any, int]:
    loop = CountingLoop()
    try:
        result = loop.run_until_complete(coro_fn())
        return result, loop.armed
    finally:
        loop.close()


async def ready(data: bytes) -> bytes:
    await asyncio.sleep(0)  # a real suspension, as a network read has
    return data


def test_many_reads_inside_their_deadlines_share_one_timer() -> None:
    async def reads() -> list[bytes]:
        watch = ReadDeadline()
        loop = asyncio.get_running_loop()
        got = [await watch.run(ready(b"%d" % i), loop.time() + 30) for i in range(200)]
        watch.cancel()
        return got

    got, armed = run_on_counting_loop(reads)
    assert got == [b"%d" % i for i in range(200)]
    assert armed == 1


def test_an_earlier_deadline_rearms_and_a_read_past_it_times_out() -> None:
    async def reads() -> str:
        watch = ReadDeadline()
        loop = asyncio.get_running_loop()
        assert await watch.run(ready(b"first"), loop.time() + 30) == b"first"
        never = loop.create_future()
        try:
            await watch.run(never, loop.time() + 0.02)
        except TimeoutError:
            return "timeout"
        return "no timeout"

    outcome, armed = run_on_counting_loop(reads)
    assert outcome == "timeout"
    assert armed == 2


def test_a_cancellation_from_elsewhere_stays_a_cancellation() -> None:
    async def reads() -> tuple[str, int]:
        watch = ReadDeadline()
        loop = asyncio.get_running_loop()

        async def reader() -> bytes:
            return await watch.run(loop.create_future(), loop.time() + 30)

        task = asyncio.ensure_future(reader())
        await asyncio.sleep(0)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            return "cancelled", task.cancelling()
        return "finished", 0

    (outcome, _), _ = run_on_counting_loop(reads)
    assert outcome == "cancelled"
