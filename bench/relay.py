"""Micro-benchmark: the gateway's own CPU per relayed chunk after the commit point.

``python -m bench.relay [CHUNKS] [--per-read N] [--items] [--kind anthropic] [--profile]``

Drives the real ``EventReader`` of a chat stream, committed, over an in-memory aiohttp
``StreamReader`` (no socket, no server): each step feeds one network read of ``N``
upstream events (one by default: a gateway that keeps up sees one chunk per read) and
reads what the chat relay writes for it (``next_sse``; ``--items``: ``next_batch`` and
the framing the chat relay did with it before, which the other doors' relays still
read items from). What it measures is the
relay's per-chunk work in isolation (SSE split, parsing, usage / finish-reason / error
checks, continuity's ``ServedTurn.feed``, framing): what the server (daphne/Twisted) and
aiohttp's socket path add on top is measured from outside by ``bench.run --streams``.

Reports the best of seven batches of CPU time (``time.process_time``) per chunk, and the
floor under it: the same reads fed to aiohttp and read back with nothing done to them
(what a relay that forwards bytes blindly would still pay in this process). ``--kind
anthropic`` relays an Anthropic Messages stream behind the Messages door instead (the
pass-through: named events, decoded for continuity, usage and the end, sent as read). As with
``bench.rewrite``, the ratio between two runs on one machine holds better than the
absolute figure. Nothing here is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import time
from collections.abc import Callable
from typing import Any

import aiohttp
import httpx
import orjson
from aiohttp.base_protocol import BaseProtocol
from httpx_aiohttp.transport import AiohttpResponseStream

from routing.gateway.attempt import EventReader
from routing.gateway.replies import sse
from routing.protocols import Protocol
from routing.upstream.openai import Timeouts, UpstreamResponse


def event(delta: dict[str, Any], finish: str | None = None) -> bytes:
    """One upstream event as the bench upstream sends it (``bench/upstream.py``)."""
    chunk = {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": "fast",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + orjson.dumps(chunk) + b"\n\n"


class _Native:
    """What ``httpx-aiohttp`` wraps: an aiohttp response, of which the reader uses
    ``content`` (the body's ``StreamReader``)."""

    def __init__(self, content: aiohttp.StreamReader) -> None:
        self.content = content

    async def __aexit__(self, *exc: object) -> None:
        return None


def named_event(kind: str, **data: Any) -> bytes:
    """One Anthropic Messages stream event, as the bench upstream frames it."""
    return b"event: " + kind.encode() + b"\ndata: " + orjson.dumps({"type": kind, **data}) + b"\n\n"


def text_delta(text: str) -> bytes:
    return named_event("content_block_delta", index=0, delta={"type": "text_delta", "text": text})


def committed_reader(
    loop: asyncio.AbstractEventLoop, kind: Protocol = Protocol.CHAT
) -> tuple[EventReader, aiohttp.StreamReader]:
    content = aiohttp.StreamReader(BaseProtocol(loop), 2**16, loop=loop)
    stream = AiohttpResponseStream(_Native(content))  # type: ignore[arg-type]
    response = httpx.Response(200, stream=stream)
    now = loop.time()
    reader = EventReader(
        UpstreamResponse(response), Timeouts(), started=now, deadline=now + 3600, kind=kind
    )
    return reader, content


def chat_frames(batch: list[Any], usage_sent: bool) -> tuple[bytes, bool]:
    """The chat relay's framing of one batch of items (``routing.gateway.relay`` before
    ``next_sse``)."""
    out: list[bytes] = []
    for payload, chunk, _ in batch:
        if chunk.get("usage") and not chunk.get("choices"):
            if usage_sent:
                continue
            usage_sent = True
        out.append(sse(payload))
    return b"".join(out), usage_sent


async def relay(
    chunks: int, per_read: int, how: str, kind: Protocol = Protocol.CHAT
) -> Callable[[], object]:
    """A committed reader and a step that relays one read of ``per_read`` events."""
    loop = asyncio.get_running_loop()
    reader, content = committed_reader(loop, kind)
    if kind is Protocol.MESSAGES:
        start = {"id": "msg_bench", "model": "fast", "usage": {"input_tokens": 8}}
        content.feed_data(
            named_event("message_start", message=start)
            + named_event("content_block_start", index=0, content_block={"type": "text"})
            + text_delta("tok ")
        )
        step_event = text_delta
    else:
        content.feed_data(event({"role": "assistant", "content": ""}) + event({"content": "tok "}))
        step_event = lambda text: event({"content": text})  # noqa: E731
    while not reader.got_content:  # the commit point: what run_attempt reads before it
        await reader.next()
    assert await reader.next_sse()  # the rest of the committing read (not measured)
    reads = [
        b"".join(step_event(f"tok{i + j} ") for j in range(per_read))
        for i in range(0, chunks, per_read)
    ]
    state = {"usage_sent": False}

    async def step_items() -> None:
        for data in reads:
            content.feed_data(data)
            batch = await reader.next_batch()
            assert batch is not None
            _, state["usage_sent"] = chat_frames(batch, state["usage_sent"])

    async def step() -> None:
        for data in reads:
            content.feed_data(data)
            assert await reader.next_sse()

    async def step_floor() -> None:
        for data in reads:
            content.feed_data(data)
            assert await content.readany()

    return {"items": step_items, "sse": step, "floor": step_floor}[how]


def measure(
    chunks: int = 2000,
    per_read: int = 1,
    repeats: int = 7,
    how: str = "sse",
    kind: Protocol = Protocol.CHAT,
) -> float:
    """µs of CPU per relayed chunk: the best of ``repeats`` fresh readers."""

    async def run() -> float:
        best = float("inf")
        for _ in range(repeats + 1):  # the first one warms caches and imports
            step = await relay(chunks, per_read, how, kind)
            start = time.process_time()
            await step()  # type: ignore[misc]
            best = min(best, (time.process_time() - start) * 1e6 / chunks)
        return best

    return asyncio.run(run())


def report(
    chunks: int = 2000, per_read: int = 1, items: bool = False, kind: Protocol = Protocol.CHAT
) -> str:
    how = "items" if items else "sse"
    us = measure(chunks, per_read, how=how, kind=kind)
    floor = measure(chunks, per_read, how="floor", kind=kind)
    what = "next_batch + framing" if items else "next_sse"
    if kind is not Protocol.CHAT:
        what += f", {kind.value} pass-through"
    return (
        f"relay after the commit point, in process ({what}, {per_read} chunk(s) per read): "
        f"{us:.2f} µs CPU per chunk; aiohttp alone {floor:.2f}, the relay's own {us - floor:.2f}"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.relay", description=__doc__)
    parser.add_argument("chunks", type=int, nargs="?", default=2000)
    parser.add_argument("--per-read", type=int, default=1, help="upstream events per read")
    parser.add_argument("--items", action="store_true", help="next_batch and frame the items")
    parser.add_argument(
        "--kind",
        choices=(Protocol.CHAT.value, Protocol.MESSAGES.value),
        default=Protocol.CHAT.value,
        help="the upstream kind (behind its own door)",
    )
    parser.add_argument("--profile", action="store_true", help="print a cProfile of one run")
    args = parser.parse_args(argv)
    how = "items" if args.items else "sse"
    kind = Protocol(args.kind)
    if args.items and kind is not Protocol.CHAT:
        parser.error("--items is the chat relay's old path")
    if args.profile:
        profile = cProfile.Profile()
        profile.runcall(measure, args.chunks, args.per_read, 1, how, kind)
        pstats.Stats(profile).sort_stats("tottime").print_stats(18)
        return
    print(report(args.chunks, args.per_read, args.items, kind))


if __name__ == "__main__":
    main()
