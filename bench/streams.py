"""Stream-scale client (scenarios g and h): N long streams held open, short calls beside them.

``python -m bench.streams --url http://127.0.0.1:PORT/v1 --model M --key K --streams N
[--chunks 200] [--ramp 500] [--short-rate 10] [--probe-ms 100]``

Opens ``--streams`` streaming calls on a fixed schedule (``--ramp`` per second, open
loop), each on its own connection, and counts the content events each one gets (the
upstream sends ``--chunks`` of them, ``--gap`` apart, so a stream lives for about
chunks x gap). Beside them, for the whole run, it sends one short non-streaming call
every 1/``--short-rate`` s and one ``GET /v1/models`` every ``--probe-ms`` ms, each on a
fresh connection, open loop (latency from the scheduled send). A short call's latency is
its time to first token: its whole answer comes in one piece.

The *steady window* runs from the moment every stream has its first content event to the
moment the first stream ends: every stream is open, none is being set up. It prints one
JSON line when the window opens (``{"phase": "open", ...}``) and one when it closes
(``"steady_end"``), so the driver can sample the gateway's CPU, RSS and open files at
exactly those moments, and a final ``"done"`` line with the results:

- ``stream_errors``: non-200, a transport error, an in-stream error event, the wrong number
  of content events, or a stream still open ``--drain`` s after it should have ended;
- ``short`` and ``probe``: p50/p99 latency (ms) of the calls *scheduled inside* the steady
  window, and their errors. The probe is the cheapest thing a server can answer, so its
  latency is the event-loop lag a new request meets;
- ``chunks_in_window``: content events received during the steady window (the gateway
  relays one per upstream event: CPU per relayed chunk = CPU in the window / this);
- ``errors_by_side``: every error above, streams and calls beside them, put down to the
  ``client`` (this process ran out of files or ports, or its own loop fell so far behind
  that a call outlived its wait), the ``server`` (whatever answered: the gateway in
  THROUGH, the upstream mock in DIRECT: a bad status, an error event, a cut, a wrong
  count, a refused or reset connection) or ``late`` (still open at the deadline with the
  client keeping up: the server was too slow);
- ``client``: this process's own health: its CPU (seconds, and its share of a core in
  the window) and its event loop's lag (how late a 20 ms sleep wakes, p50/p99/max in the
  window and overall). A client whose loop lags cannot measure the server's latency, and
  its ``late`` errors are its own.

The long streams use a bare ``asyncio.Protocol`` that only counts byte patterns: at 5 000
streams x 10 chunks/s the client must stay far cheaper than the gateway it measures.
"""

from __future__ import annotations

import argparse
import asyncio
import errno
import math
import resource
import sys
import time
from collections import Counter
from typing import Any, cast
from urllib.parse import urlsplit

import orjson

from bench.wire import Connection, build_request

CONTENT = b'"content":"tok'  # the bench upstream's content deltas; the role chunk has ""
DONE = b"[DONE]"
END = b"0\r\n\r\n"  # last chunk of a chunked body
ERROR = b'"error"'
TAIL = max(len(CONTENT), len(END), len(ERROR)) - 1  # a pattern never fits whole in the tail
LAG_EVERY_S = 0.02  # the loop-lag sampler's sleep
LAGGING_MS = 100.0  # a client whose loop lags more than this (p99) cannot measure the server
# connect() failures that are this machine's or this process's limits, not the server's
CLIENT_ERRNOS = {errno.EMFILE, errno.ENFILE, errno.EADDRNOTAVAIL, errno.ENOBUFS, errno.ENOMEM}


def side(kind: str, client_lagging: bool) -> str:
    """Who an error kind points at (see the module docstring)."""
    if kind.startswith("client-"):
        return "client"
    if kind in ("still-open", "TimeoutError"):
        return "client" if client_lagging else "late"
    return "server"


def os_error(exc: OSError, during: str) -> str:
    name = errno.errorcode.get(exc.errno or 0, type(exc).__name__)
    return f"client-{name}" if exc.errno in CLIENT_ERRNOS else f"{during}-{name}"


def raise_open_file_limit(wanted: int) -> tuple[int, int]:
    """Lift this process's soft open-file limit towards ``wanted`` (the hard limit caps
    it): one file per stream and per call beside them. Returns (soft, hard)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    ceiling = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < ceiling:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (ceiling, hard))
        except (ValueError, OSError):
            pass
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(1, math.ceil(q / 100 * len(ordered))) - 1]


class StreamCounter(asyncio.Protocol):
    """One long stream: counts content events; finished at the body's last chunk."""

    __slots__ = ("run", "request", "transport", "head", "tail", "events", "first", "ended")

    def __init__(self, run: Run, request: bytes) -> None:
        self.run = run
        self.request = request
        self.transport: asyncio.Transport | None = None
        self.head: bytes | None = b""  # None once the status line was checked
        self.tail = b""
        self.events = 0
        self.first = False
        self.ended = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        self.transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        if self.head is not None:
            self.head += data
            end = self.head.find(b"\r\n\r\n")
            if end < 0:
                return
            status = self.head[: self.head.find(b"\r\n")]
            data, self.head = self.head[end + 4 :], None
            if b" 200 " not in status:
                self._end(f"http-{status[9:12].decode('latin-1', 'replace')}")
                return
        seen = self.tail + data
        count = seen.count(CONTENT)
        self.run.reads += 1
        if count:
            self.events += count
            if not self.first:
                self.first = True
                self.run.first_content()
        self.run.chunks += count
        if ERROR in seen:
            self._end("sse-error-event")
        elif END in seen:
            self._end(None if DONE in seen or self.events else "no-done")
        self.tail = seen[-TAIL:]

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.ended:
            self._end("connection-lost")

    def _end(self, error: str | None) -> None:
        if self.ended:
            return
        self.ended = True
        if error is None and self.events != self.run.chunks_expected:
            error = f"got-{self.events}-of-{self.run.chunks_expected}"
        self.run.stream_ended(error, had_content=self.first)
        if self.transport is not None:
            self.transport.close()


def history(kb: int) -> list[dict[str, str]]:
    """A conversation of about ``kb`` KB ending in the new question: turns of 1 KB,
    alternating user and assistant, as an agent's requests carry."""
    turns = [
        {"role": ("user", "assistant")[i % 2], "content": f"turn {i} " + "x" * 1000}
        for i in range(kb)
    ]
    return [*turns, {"role": "user", "content": "hello"}]


class Run:
    def __init__(self, args: argparse.Namespace) -> None:
        url = urlsplit(args.url)
        self.host, self.port = url.hostname or "127.0.0.1", url.port or 80
        base = url.path.rstrip("/")
        self.args = args
        self.chunks_expected = args.chunks
        body = {"model": args.model, "messages": [{"role": "user", "content": "hello"}]}
        self.stream_request = build_request(
            host=self.host,
            port=self.port,
            path=base + "/chat/completions",
            body=orjson.dumps({**body, "messages": history(args.history_kb), "stream": True}),
            key=args.key,
        )
        self.short_request = build_request(
            host=self.host,
            port=self.port,
            path=base + "/chat/completions",
            body=orjson.dumps(body),
            key=args.key,
        )
        self.probe_request = (
            f"GET {base}/models HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
            f"Authorization: Bearer {args.key}\r\n\r\n"
        ).encode()
        self.chunks = 0
        self.reads = 0  # network reads of the long streams (chunks/read > 1: coalesced)
        self.window_reads = 0
        self.with_content = 0
        self.ended = 0
        self.failed_early = 0  # streams that ended in an error before their first content
        self.errors: Counter[str] = Counter()
        self.window: tuple[float, float] | None = None
        self.window_cpu: list[float] = []  # process CPU at the window's open and close
        self.lags: list[tuple[float, float]] = []  # (when, ms late) of the lag sampler
        self.window_open_at: float | None = None
        self.window_chunks = 0
        self.all_ended = asyncio.Event()
        self.short: list[tuple[float, float | None]] = []  # (scheduled, latency or None)
        self.probe: list[tuple[float, float | None]] = []
        self.extra_errors: Counter[str] = Counter()

    # ---- long streams -----------------------------------------------------------------
    def first_content(self) -> None:
        self.with_content += 1
        self._maybe_open()

    def _maybe_open(self) -> None:
        """Every stream that will ever stream is streaming (the ones that failed before
        their first content are counted as errors and left out)."""
        if (
            self.window_open_at is None
            and self.with_content + self.failed_early == self.args.streams
        ):
            self.window_open_at = time.perf_counter()
            self.window_cpu.append(time.process_time())
            self.window_chunks = self.chunks
            self.window_reads = self.reads
            emit({"phase": "open", "open": self.with_content, "chunks": self.chunks})

    def stream_ended(self, error: str | None, *, had_content: bool = True) -> None:
        self.ended += 1
        if error:
            self.errors[error] += 1
            if not had_content:
                self.failed_early += 1
                self._maybe_open()
        elif self.window_open_at is not None and self.window is None:
            self.window = (self.window_open_at, time.perf_counter())
            self.window_cpu.append(time.process_time())
            self.window_chunks = self.chunks - self.window_chunks
            self.window_reads = self.reads - self.window_reads
            emit({"phase": "steady_end", "chunks": self.window_chunks})
        if self.ended == self.args.streams:
            self.all_ended.set()

    async def open_streams(self) -> None:
        loop = asyncio.get_running_loop()
        start = loop.time()
        pending: set[asyncio.Task[Any]] = set()
        for index in range(self.args.streams):
            when = start + index / self.args.ramp
            delay = when - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            task = loop.create_task(self._open_one())
            pending.add(task)
            task.add_done_callback(pending.discard)
        if pending:
            await asyncio.wait(pending)

    async def _open_one(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            await loop.create_connection(
                lambda: StreamCounter(self, self.stream_request), self.host, self.port
            )
        except OSError as exc:
            self.stream_ended(os_error(exc, "connect"), had_content=False)

    # ---- short calls and probes beside them -------------------------------------------
    async def beside(
        self, request: bytes, every_s: float, out: list[Any], stop: asyncio.Event
    ) -> None:
        loop = asyncio.get_running_loop()
        start = loop.time()
        tasks: set[asyncio.Task[Any]] = set()
        index = 0
        while not stop.is_set():
            when = start + index * every_s
            index += 1
            delay = when - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            task = loop.create_task(self._one_call(request, time.perf_counter(), out))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        if tasks:
            await asyncio.wait(tasks, timeout=self.args.drain)

    async def _one_call(self, request: bytes, scheduled: float, out: list[Any]) -> None:
        try:
            conn = await Connection.open(self.host, self.port)
            try:
                answer = await asyncio.wait_for(conn.call(request, scheduled), self.args.drain)
            finally:
                conn.close()
        except (asyncio.IncompleteReadError, TimeoutError, ValueError) as exc:
            # before OSError: TimeoutError is one, and here it is our own wait running out
            self.extra_errors[type(exc).__name__] += 1
            out.append((scheduled, None))
            return
        except OSError as exc:
            self.extra_errors[os_error(exc, "socket")] += 1
            out.append((scheduled, None))
            return
        if answer.status != 200:
            self.extra_errors[f"http-{answer.status}"] += 1
            out.append((scheduled, None))
            return
        out.append((scheduled, (time.perf_counter() - scheduled) * 1000))

    # ---- the client's own health ------------------------------------------------------
    async def sample_lag(self, stop: asyncio.Event) -> None:
        """How late a short sleep wakes up: this process's event-loop lag."""
        loop = asyncio.get_running_loop()
        while not stop.is_set():
            before = loop.time()
            await asyncio.sleep(LAG_EVERY_S)
            late = (loop.time() - before - LAG_EVERY_S) * 1000
            self.lags.append((time.perf_counter(), max(0.0, late)))

    def client_health(self, cpu_s: float) -> dict[str, Any]:
        def stats(values: list[float]) -> dict[str, float | None]:
            return {
                "p50_ms": percentile(values, 50),
                "p99_ms": percentile(values, 99),
                "max_ms": max(values) if values else None,
            }

        window: list[float] = []
        share = None
        if self.window is not None:
            lo, hi = self.window
            window = [lag for at, lag in self.lags if lo <= at <= hi]
            if len(self.window_cpu) == 2 and hi > lo:
                share = (self.window_cpu[1] - self.window_cpu[0]) / (hi - lo)
        return {
            "cpu_s": cpu_s,
            "window_cpu_share": share,
            "lag_window": stats(window),
            "lag_all": stats([lag for _, lag in self.lags]),
        }

    def _in_window(self, calls: list[tuple[float, float | None]]) -> dict[str, Any]:
        if self.window is None:
            return {"n": 0, "p50_ms": None, "p99_ms": None, "errors": 0}
        lo, hi = self.window
        inside = [c for c in calls if lo <= c[0] <= hi]
        ok = [lat for _, lat in inside if lat is not None]
        return {
            "n": len(inside),
            "p50_ms": percentile(ok, 50),
            "p99_ms": percentile(ok, 99),
            "max_ms": max(ok) if ok else None,
            "errors": len(inside) - len(ok),
        }

    async def main(self) -> dict[str, Any]:
        args = self.args
        stop = asyncio.Event()
        lag = asyncio.create_task(self.sample_lag(stop))
        besides = [
            asyncio.create_task(
                self.beside(self.short_request, 1 / args.short_rate, self.short, stop)
            ),
            asyncio.create_task(
                self.beside(self.probe_request, args.probe_ms / 1000, self.probe, stop)
            ),
        ]
        started = time.perf_counter()
        await self.open_streams()
        expected_s = args.streams / args.ramp + args.chunks * args.gap_ms / 1000
        left = max(0.0, started + expected_s + args.drain - time.perf_counter())
        try:
            await asyncio.wait_for(self.all_ended.wait(), left)
        except TimeoutError:
            pass
        still_open = args.streams - self.ended
        if still_open:
            self.errors["still-open"] += still_open
        stop.set()
        await asyncio.gather(*besides)
        await lag
        window_s = self.window[1] - self.window[0] if self.window else None
        client = self.client_health(time.process_time())
        lag99 = client["lag_window"]["p99_ms"] or client["lag_all"]["p99_ms"] or 0.0
        lagging = lag99 > LAGGING_MS
        by_side: Counter[str] = Counter()
        short, probe = self._in_window(self.short), self._in_window(self.probe)
        for kinds in (self.errors, self.extra_errors):
            for kind, n in kinds.items():
                by_side[side(kind, lagging)] += n
        return {
            "phase": "done",
            "streams": args.streams,
            "stream_errors": sum(self.errors.values()),
            "stream_error_kinds": dict(self.errors),
            "chunks_total": self.chunks,
            "chunks_in_window": self.window_chunks if self.window else None,
            "window_s": window_s,
            "chunks_per_read": self.window_chunks / self.window_reads
            if self.window and self.window_reads
            else None,
            "short": short,
            "probe": probe,
            "beside_errors": dict(self.extra_errors),
            "errors_by_side": dict(by_side),
            "client": client | {"lagging": lagging},
            "open_file_limit": resource.getrlimit(resource.RLIMIT_NOFILE)[0],
            "elapsed_s": time.perf_counter() - started,
        }


def emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(orjson.dumps(obj).decode() + "\n")
    sys.stdout.flush()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.streams", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--url", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--key", default="")
    parser.add_argument("--streams", type=int, default=2000)
    parser.add_argument("--chunks", type=int, default=200, help="content events per stream")
    parser.add_argument(
        "--gap-ms", type=float, default=100.0, help="the upstream's gap (for timing)"
    )
    parser.add_argument("--ramp", type=float, default=500.0, help="streams opened per second")
    parser.add_argument("--short-rate", type=float, default=10.0, help="short calls per second")
    parser.add_argument("--probe-ms", type=float, default=100.0, help="GET /v1/models every N ms")
    parser.add_argument("--drain", type=float, default=30.0, help="grace after the expected end")
    parser.add_argument(
        "--history-kb", type=int, default=0, help="KB of earlier turns in each stream's request"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    # a file per stream, per call beside them (a few hundred at most in flight), and spare
    soft, _ = raise_open_file_limit(args.streams + 1024)
    if soft < args.streams + 64:
        print(
            f"bench.streams: open-file limit {soft} is below the {args.streams} streams asked "
            "for (raise the hard limit: ulimit -Hn)",
            file=sys.stderr,
        )
    try:
        import uvloop
    except ImportError:
        runner = asyncio.run
    else:
        runner = uvloop.run
    emit(runner(Run(args).main()))


if __name__ == "__main__":
    main()
