"""The relay's per-read deadline: one timer per stream, same outcomes as a timeout per read;
and what the chat relay writes per network read after the commit point (``next_sse``).

End to end (openai SDK → gateway → simulator, real sockets): a stream that stalls after
its commit point ends with an SSE error naming the idle timeout. Unit level: the
``ReadDeadline`` arms one timer for a whole run of reads, raises ``TimeoutError`` once a
read outlives its deadline, and leaves a cancellation from elsewhere a cancellation.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import openai
import orjson
import pytest

from routing.gateway.attempt import EventReader, ReadDeadline
from routing.gateway.events import CallRecord
from routing.protocols import Protocol
from routing.protocols.legs import relay_for
from routing.simulator.script import StallAfter
from routing.upstream.openai import Timeouts, UpstreamFailure, UpstreamResponse
from tests.conftest import Harness
from tests.gateway.test_gateway_core import FAST_TIMEOUTS, MESSAGES


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


# ---- next_sse: what the chat relay writes per network read after the commit point ----
class Reads(httpx.AsyncByteStream):
    """An upstream body arriving in the given network reads."""

    def __init__(self, reads: list[bytes]) -> None:
        self.reads = reads

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for read in self.reads:
            yield read


def event(delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any) -> bytes:
    chunk: dict[str, Any] = {"id": "c1", "object": "chat.completion.chunk", **extra}
    if delta is not None:
        chunk["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish}]
    return b"data: " + orjson.dumps(chunk) + b"\n\n"


ROLE = event({"role": "assistant", "content": ""})
A, B, C = (event({"content": text}) for text in "abc")
USAGE = event(choices=[], usage={"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3})
STOP = event({}, "stop")
LAST = STOP + b"data: [DONE]\n\n"


async def relayed(
    reads: list[bytes], kind: Protocol = Protocol.CHAT
) -> tuple[list[bytes], EventReader, str | None]:
    """Read to the commit point as run_attempt does (until a read brought content), then
    with next_sse: the writes, the reader, and the failure it ended with (None for a clean
    end). What the committing read brought after the item that committed comes first."""
    now = asyncio.get_running_loop().time()
    reader = EventReader(
        UpstreamResponse(httpx.Response(200, stream=Reads(reads))),
        Timeouts(),
        started=now,
        deadline=now + 60,
        kind=kind,
    )
    while not reader.got_content:
        assert await reader.next() is not None
    writes: list[bytes] = []
    try:
        while (out := await reader.next_sse()) is not None:
            writes.append(out)
    except UpstreamFailure as exc:
        return writes, reader, exc.failure.message
    return writes, reader, None


async def test_reads_of_whole_data_events_go_out_as_they_came() -> None:
    middle = B + C
    writes, reader, failure = await relayed([ROLE, A, middle, LAST])
    assert failure is None
    assert writes[0] is middle  # the read itself, not a re-framed copy
    assert writes[1:] == [STOP]  # [DONE] is the relay's own to send
    assert reader.turn.fingerprint() is not None  # continuity saw the deltas


async def test_the_rest_of_the_committing_read_comes_first() -> None:
    writes, _, failure = await relayed([ROLE + A + B, LAST])
    assert failure is None
    assert writes == [A + B, STOP]  # ROLE committed: content came in the same read


async def test_usage_goes_out_once_whichever_read_repeats_it() -> None:
    writes, reader, failure = await relayed([ROLE, A + USAGE, B + USAGE, USAGE, LAST])
    assert failure is None
    assert writes == [USAGE, B, STOP]
    assert reader.usage == {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}


async def test_the_events_before_an_error_event_go_out_then_it_fails() -> None:
    error = b'data: {"error":{"message":"overloaded","type":"server_error"}}\n\n'
    writes, _, failure = await relayed([ROLE, A, B + error + C])
    assert writes == [B]
    assert failure == "overloaded"


async def test_an_end_without_a_finish_reason_is_a_cut_after_the_commit_point() -> None:
    writes, _, failure = await relayed([ROLE, A, B])
    assert writes == [B]
    assert failure == "stream ended before a finish reason"


async def test_a_malformed_line_is_dropped_not_passed_on() -> None:
    writes, _, failure = await relayed([ROLE, A, b"data: {not json\n\n" + B, LAST])
    assert failure is None
    assert writes == [B, STOP]


# ---- next_sse for a pass-through: a Messages or Responses stream behind its own door ----
def named(kind: str, **data: Any) -> bytes:
    return b"event: " + kind.encode() + b"\ndata: " + orjson.dumps({"type": kind, **data}) + b"\n\n"


START = named("message_start", message={"id": "msg_1", "model": "m", "usage": {"input_tokens": 3}})
BLOCK = named("content_block_start", index=0, content_block={"type": "text", "text": ""})
X, Y, Z = (
    named("content_block_delta", index=0, delta={"type": "text_delta", "text": text})
    for text in "xyz"
)
END = (
    named("content_block_stop", index=0)
    + named("message_delta", delta={"stop_reason": "end_turn"}, usage={"output_tokens": 3})
    + named("message_stop")
)


async def test_a_pass_through_sends_reads_of_whole_named_events_as_they_came() -> None:
    middle = Y + Z
    writes, reader, failure = await relayed([START + BLOCK, X, middle, END], Protocol.MESSAGES)
    assert failure is None
    assert writes[0] is middle and writes[1] is END  # the reads themselves
    assert reader.usage == {"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6}
    assert reader.turn.fingerprint() is not None  # continuity saw the deltas


async def test_a_pass_through_reframes_a_read_it_does_not_pass_whole() -> None:
    # the rest of the committing read; a read with a malformed line; one with events after
    # the final event: each goes out as the events it passes on, in the upstream's framing
    malformed = b"event: content_block_delta\ndata: {not json\n\n"
    writes, _, failure = await relayed(
        [START + BLOCK + X + Y, malformed + Z, END + X], Protocol.MESSAGES
    )
    assert failure is None
    assert writes == [BLOCK + X + Y, Z, END]  # START committed: content came in its read


async def test_a_pass_through_sends_the_events_before_an_error_event_then_fails() -> None:
    error = named("error", error={"type": "overloaded_error", "message": "overloaded"})
    writes, _, failure = await relayed([START + BLOCK + X, Y + error + Z], Protocol.MESSAGES)
    assert writes == [BLOCK + X, Y]
    assert failure == "overloaded"


def responses_event(kind: str, sequence: int, **data: Any) -> bytes:
    return named(kind, sequence_number=sequence, **data)


async def test_a_responses_pass_through_cut_names_its_response_and_the_next_sequence() -> None:
    created = responses_event("response.created", 0, response={"id": "resp_7", "model": "m"})
    deltas = [
        responses_event("response.output_text.delta", n, item_id="i", delta=f"t{n} ")
        for n in (1, 2, 3)
    ]
    writes, reader, failure = await relayed(
        [created + deltas[0], deltas[1] + deltas[2]], Protocol.RESPONSES
    )
    assert writes == [deltas[0], deltas[1] + deltas[2]]
    assert failure == "stream ended before its final event"
    relay = relay_for(Protocol.RESPONSES, Protocol.RESPONSES, {}, reader.decoder)
    event = relay.error("cut", code="TRANSPORT")
    assert event.startswith(b"event: response.failed\ndata: ")
    failed = orjson.loads(event.split(b"data: ", 1)[1])
    assert (failed["response"]["id"], failed["sequence_number"]) == ("resp_7", 4)
    assert failed["response"]["error"] == {"code": "TRANSPORT", "message": "cut"}


# ---- a stream whose client left before its first byte -----------------------------------
async def test_a_relay_never_started_is_abandoned_not_leaked() -> None:
    """An async generator that never started runs no ``finally``: the handler awaits the
    reply's ``abandon`` instead, which closes the upstream and finishes the call."""
    from routing.api.asgi import GatewayASGIHandler, RelayResponse

    started: list[bool] = []
    abandoned: list[bool] = []

    async def chunks() -> AsyncIterator[bytes]:
        started.append(True)
        yield b"data: {}\n\n"

    async def abandon() -> None:
        abandoned.append(True)

    async def send(message: dict[str, Any]) -> None:
        raise asyncio.CancelledError  # the client left as the response started

    relay = RelayResponse(chunks(), abandon=abandon, content_type="text/event-stream")
    with pytest.raises(asyncio.CancelledError):
        await GatewayASGIHandler.send_response(
            GatewayASGIHandler.__new__(GatewayASGIHandler), relay, send
        )
    assert (started, abandoned) == ([], [True])
