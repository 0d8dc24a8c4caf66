"""Load generator: closed loop (C connections for D seconds) or open loop (R req/s).

Closed loop: ``--concurrency C`` workers, each with its own keep-alive connection, send
back-to-back until ``--duration`` has passed; requests in flight at the deadline are
allowed ``--drain`` seconds to finish (then counted as ``timeout`` errors). req/s is
completed responses over the time from the start to the last completion.

Open loop (``--rate R``): ``R * D`` requests are released on a fixed schedule whatever
the answers do, over at most ``--max-conns`` connections. Latency is measured from the
*scheduled* send time, so a stalled server is charged for the queue it causes
(no coordinated omission); ``service`` latencies from the actual send are reported
too, and ``late`` counts sends the generator itself released more than 2 ms late.

Output: a human summary, or with ``--json`` one JSON object on stdout.

``--serve`` (used by the driver) keeps one warm process for a whole run: each stdin
line is a JSON list of the arguments above, answered by one JSON result line. The
round starts the moment its line arrives, so the driver samples the gateway's CPU
counters right before writing it and right after reading the answer; a fresh process
per round would cost ~0.4 s of interpreter start-up each time.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import orjson

from bench.wire import Answer, Connection, build_request

TRANSPORT_ERRORS = (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError)
DOORS = ("chat", "messages", "responses", "gemini")
ENDPOINTS = {"chat": "/chat/completions", "messages": "/messages", "responses": "/responses"}
# What a non-streaming answer of each protocol cannot be without.
BODY_MARKERS = {
    "chat": b'"choices"',
    "messages": b'"content"',
    "responses": b'"output"',
    "gemini": b'"candidates"',
}


def endpoint(door: str, model: str, stream: bool) -> str:
    """The door's path under the version (Gemini's names the model and the stream)."""
    if door == "gemini":
        action = "streamGenerateContent?alt=sse" if stream else "generateContent"
        return f"/models/{model}:{action}"
    return ENDPOINTS[door]


def request_body(door: str, model: str, stream: bool) -> bytes:
    """The ping every door's load sends (the same fields the counted calls send)."""
    body: dict[str, object]
    if door == "gemini":  # the URL names the model and the stream
        ping = [{"role": "user", "parts": [{"text": "ping"}]}]
        body = {"contents": ping, "generationConfig": {"maxOutputTokens": 32}}
        return orjson.dumps(body)
    body = {"model": model, "stream": stream}
    if door == "responses":
        body.update(input="ping", max_output_tokens=32, store=False)
    else:
        body.update(messages=[{"role": "user", "content": "ping"}], max_tokens=32)
    return orjson.dumps(body)


@dataclass(frozen=True)
class Target:
    host: str
    port: int
    request: bytes
    stream: bool
    expect_chunks: int
    door: str = "chat"  # "messages": Anthropic Messages; "responses": OpenAI Responses


def percentile(sorted_values: list[float], q: float) -> float | None:
    """Nearest-rank percentile of an already sorted list (None when empty)."""
    if not sorted_values:
        return None
    rank = max(1, math.ceil(q / 100 * len(sorted_values)))
    return sorted_values[rank - 1]


@dataclass
class Recorder:
    """Collects one round's outcomes; ``summary`` reduces them to JSON-able numbers."""

    target: Target
    latencies: list[float] = field(default_factory=list)
    service: list[float] = field(default_factory=list)
    ttfts: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    samples: list[str] = field(default_factory=list)
    targets: Counter[str] = field(default_factory=Counter)
    overhead: list[float] = field(default_factory=list)
    attempts: list[float] = field(default_factory=list)
    completed: int = 0
    inflight: int = 0
    last_end: float = 0.0
    late: int = 0

    def error(self, kind: str, detail: str = "") -> None:
        self.errors[kind] += 1
        if self.errors[kind] == 1 and len(self.samples) < 5 and detail:
            self.samples.append(f"{kind}: {detail[:300]}")

    def answer(self, answer: Answer, started: float, sent: float, ended: float) -> None:
        self.completed += 1
        self.last_end = max(self.last_end, ended)
        headers = answer.headers
        if "x-switchyard-target" in headers:
            self.targets[headers["x-switchyard-target"]] += 1
        for name, sink in (
            ("x-switchyard-overhead-ms", self.overhead),
            ("x-switchyard-attempts", self.attempts),
        ):
            if name in headers:
                try:
                    sink.append(float(headers[name]))
                except ValueError:
                    pass
        if answer.status != 200:
            body = answer.body or (answer.sse.buf if answer.sse else b"")
            self.error(f"http-{answer.status}", body.decode("utf-8", "replace"))
            return
        if not self._valid(answer):
            return
        self.latencies.append((ended - started) * 1000)
        self.service.append((ended - sent) * 1000)
        if answer.sse is not None and answer.sse.first_content is not None:
            self.ttfts.append((answer.sse.first_content - started) * 1000)

    def _valid(self, answer: Answer) -> bool:
        sse = answer.sse
        if not self.target.stream:
            marker = BODY_MARKERS[self.target.door]
            if sse is not None or marker not in answer.body:
                self.error("bad-body", answer.body.decode("utf-8", "replace"))
                return False
            return True
        if sse is None:
            self.error("not-a-stream", answer.body.decode("utf-8", "replace"))
            return False
        if sse.error:
            self.error(sse.error)
            return False
        if self.target.expect_chunks and sse.content_events != self.target.expect_chunks:
            self.error("short-stream", f"{sse.content_events} content events")
            return False
        return True

    def summary(self, started: float, deadline: float, cpu_s: float) -> dict[str, object]:
        elapsed = max(self.last_end, deadline) - started
        lat, svc, ttft = sorted(self.latencies), sorted(self.service), sorted(self.ttfts)

        def stats(values: list[float]) -> dict[str, float | None]:
            return {
                "p50": percentile(values, 50),
                "p90": percentile(values, 90),
                "p99": percentile(values, 99),
                "max": values[-1] if values else None,
                "mean": sum(values) / len(values) if values else None,
            }

        def mean(values: list[float]) -> float | None:
            return sum(values) / len(values) if values else None

        return {
            "elapsed_s": elapsed,
            "completed": self.completed,
            "ok": len(lat),
            "errors": dict(self.errors),
            "error_count": sum(self.errors.values()),
            "error_samples": self.samples,
            "rps": self.completed / elapsed if elapsed else 0.0,
            "ok_rps": len(lat) / elapsed if elapsed else 0.0,
            "latency_ms": stats(lat),
            "service_ms": stats(svc),
            "ttft_ms": stats(ttft),
            "overhead_ms_mean": mean(self.overhead),
            "attempts_mean": mean(self.attempts),
            "targets": dict(self.targets),
            "late": self.late,
            "client_cpu_ms": cpu_s * 1000,
            "client_cpu_util": cpu_s / elapsed if elapsed else 0.0,
        }


async def _call(rec: Recorder, conn: Connection, started: float) -> bool:
    """One request on ``conn``; returns whether the connection may be reused."""
    target = rec.target
    rec.inflight += 1
    sent = time.perf_counter()
    try:
        answer = await conn.call(target.request, sent)
    except TRANSPORT_ERRORS as exc:
        rec.error("transport", f"{type(exc).__name__}: {exc}")
        conn.close()
        return False
    finally:
        rec.inflight -= 1
    rec.answer(answer, started, sent, time.perf_counter())
    if not answer.reusable:
        conn.close()
    return answer.reusable


async def _connect(rec: Recorder) -> Connection | None:
    try:
        return await Connection.open(rec.target.host, rec.target.port)
    except OSError as exc:
        rec.error("connect", str(exc))
        await asyncio.sleep(0.05)  # a refusing server must not turn this into a busy loop
        return None


async def closed_loop(rec: Recorder, *, concurrency: int, deadline: float, drain: float) -> None:
    async def worker() -> None:
        conn: Connection | None = None
        try:
            while time.perf_counter() < deadline:
                conn = conn or await _connect(rec)
                if conn is not None and not await _call(rec, conn, time.perf_counter()):
                    conn = None
        finally:
            if conn is not None:
                conn.close()

    await _finish(
        [asyncio.create_task(worker()) for _ in range(concurrency)], rec, deadline + drain
    )


async def open_loop(
    rec: Recorder, *, rate: float, start: float, deadline: float, max_conns: int, drain: float
) -> None:
    idle: list[Connection] = []
    slots = asyncio.Semaphore(max_conns)

    async def one(scheduled: float) -> None:
        async with slots:
            conn = idle.pop() if idle else await _connect(rec)
            if conn is not None and await _call(rec, conn, scheduled):
                idle.append(conn)

    # uvloop timers have 1 ms resolution: wake at most every millisecond and release
    # everything due by then, rather than spinning on sub-millisecond sleeps.
    tasks = []
    total = int(rate * (deadline - start))
    sent = 0
    while sent < total:
        now = time.perf_counter()
        due = min(total, int((now + 0.0005 - start) * rate) + 1)
        for index in range(sent, due):
            scheduled = start + index / rate
            if now - scheduled > 0.002:
                rec.late += 1
            tasks.append(asyncio.create_task(one(scheduled)))
        sent = due
        if sent < total:
            await asyncio.sleep(max(0.001, start + sent / rate - time.perf_counter()))
    await _finish(tasks, rec, deadline + drain)
    for conn in idle:
        conn.close()


async def _finish(tasks: list[asyncio.Task[None]], rec: Recorder, until: float) -> None:
    if not tasks:
        return
    _, pending = await asyncio.wait(tasks, timeout=max(0.0, until - time.perf_counter()))
    if pending:
        stuck = rec.inflight
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        if stuck:
            rec.errors["timeout"] += stuck


def make_target(args: argparse.Namespace) -> Target:
    url = urlsplit(args.url)
    host, port = url.hostname or "127.0.0.1", url.port or 80
    path = (url.path.rstrip("/") or "/v1") + endpoint(args.door, args.model, bool(args.stream))
    body = request_body(args.door, args.model, bool(args.stream))
    request = build_request(host=host, port=port, path=path, body=body, key=args.key)
    return Target(
        host, port, request, bool(args.stream), args.expect_chunks if args.stream else 0, args.door
    )


async def run(args: argparse.Namespace) -> dict[str, object]:
    rec = Recorder(make_target(args))
    cpu0 = sum(os.times()[:2])
    start = time.perf_counter()
    deadline = start + args.duration
    if args.rate:
        await open_loop(
            rec,
            rate=args.rate,
            start=start,
            deadline=deadline,
            max_conns=args.max_conns,
            drain=args.drain,
        )
    else:
        await closed_loop(rec, concurrency=args.concurrency, deadline=deadline, drain=args.drain)
    result = rec.summary(start, deadline, sum(os.times()[:2]) - cpu0)
    result.update(
        mode="open" if args.rate else "closed",
        model=args.model,
        stream=bool(args.stream),
        concurrency=args.concurrency,
        rate=args.rate,
    )
    return result


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="base URL ending in /v1 (required)")
    parser.add_argument("--model", help="required")
    parser.add_argument("--key", default="", help="sent as Authorization: Bearer")
    parser.add_argument("--stream", action="store_true")
    parser.add_argument("--door", choices=DOORS, default="chat", help="the protocol to speak")
    parser.add_argument(
        "--expect-chunks",
        type=int,
        default=0,
        help="streams with another number of content events count as errors",
    )
    parser.add_argument("--concurrency", "-c", type=int, default=1)
    parser.add_argument("--duration", "-d", type=float, default=5.0)
    parser.add_argument("--rate", type=float, default=0.0, help="open loop: requests per second")
    parser.add_argument("--max-conns", type=int, default=512, help="open loop connection cap")
    parser.add_argument("--drain", type=float, default=5.0)
    parser.add_argument("--serve", action="store_true", help="rounds from stdin, one per line")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if not args.serve and not (args.url and args.model):
        parser.error("--url and --model are required")
    return args


async def serve() -> None:
    """One round per stdin line (a JSON argument list), one JSON result line each."""
    loop = asyncio.get_running_loop()
    print("ready", flush=True)
    while line := await loop.run_in_executor(None, sys.stdin.readline):
        try:
            result = await run(parse_args(orjson.loads(line)))
        except (SystemExit, ValueError, TypeError) as exc:  # a bad spec must not kill the worker
            result = {"failed": f"{type(exc).__name__}: {exc}"}
        sys.stdout.write(orjson.dumps(result).decode() + "\n")
        sys.stdout.flush()


def human(result: dict[str, object]) -> str:
    lat = result["latency_ms"]
    ttft = result["ttft_ms"]
    assert isinstance(lat, dict) and isinstance(ttft, dict)

    def ms(value: object) -> str:
        return "-" if value is None else f"{value:.2f}"

    return (
        f"{result['completed']} done, {result['rps']:.0f} req/s, p50 {ms(lat['p50'])} ms, "
        f"p99 {ms(lat['p99'])} ms, ttft p50 {ms(ttft['p50'])} ms, "
        f"errors {result['errors'] or 0}, client cpu {result['client_cpu_util']:.0%}"
    )


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    try:
        import uvloop

        loop_run: Callable[..., Any] = uvloop.run
    except ImportError:
        loop_run = asyncio.run
    if args.serve:
        loop_run(serve())
        return
    result = loop_run(run(args))
    print(orjson.dumps(result).decode() if args.json else human(result), flush=True)


if __name__ == "__main__":
    main()
