"""The gateway under test with an event-loop lag sampler in its own process.

``daphne … bench.lagged:application`` serves the ASGI app named by ``BENCH_LAGGED_APP``
(Switchyard's by default) unchanged, and on its first call starts one task on the
server's event loop that sleeps ``LAG_EVERY_S`` again and again and records how late each
wake-up was: the lag every callback on that loop meets, a relayed chunk or a new request
alike. Once a second it appends the samples to ``BENCH_LAG_FILE``, one
``<time.monotonic()> <ms late>`` line each (the clock the driver's marks use), so the
driver reads the lag of any window after the round without asking the busy server.
Beside it, ``<BENCH_LAG_FILE>.gc`` gets one ``<time.monotonic()> <generation> <ms> <freed>``
line per garbage collection (``gc.callbacks``; ``freed``: the objects it found unreachable,
which only the collector could free: reference cycles): with thousands of streams open, a
full collection walks every object they hold, and the loop stands still meanwhile.

With ``BENCH_MEMORY_DIR`` set, a ``SIGUSR1`` writes what the process holds into that
directory, numbered per signal: ``pymalloc-N.txt`` (``sys._debugmallocstats``: the small
objects' bytes by size class) and ``census-N.txt`` (``<type> <count> <bytes>`` per line,
every object the collector tracks, coroutines by their function): the stream scenarios
send one at each mark, so the difference of two says what an open stream holds.

The stream scenarios serve the gateway through this (``bench/streamrun.py``); production
code carries no sampler. Its own cost is 50 wake-ups a second.
"""

from __future__ import annotations

import asyncio
import gc
import importlib
import os
import signal
import sys
import time
import types
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

LAG_EVERY_S = 0.02
FLUSH_S = 1.0

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


def _load(path: str) -> App:
    module, _, name = path.partition(":")
    app: App = getattr(importlib.import_module(module), name or "application")
    return app


class _Sampler:
    task: asyncio.Task[None] | None = None
    gc_lines: list[str] = []  # noqa: RUF012  (one sampler per process)
    gc_started = 0.0


def _collection(phase: str, info: dict[str, Any]) -> None:
    now = time.monotonic()
    if phase == "start":
        _Sampler.gc_started = now
    else:
        took = (now - _Sampler.gc_started) * 1000
        freed = info["collected"]
        _Sampler.gc_lines.append(f"{now:.4f} {info['generation']} {took:.2f} {freed}\n")


async def sample(out: Path) -> None:
    loop = asyncio.get_running_loop()
    lines: list[str] = []
    flushed = loop.time()
    while True:
        before = loop.time()
        await asyncio.sleep(LAG_EVERY_S)
        now = loop.time()
        late_ms = max(0.0, (now - before - LAG_EVERY_S) * 1000)
        lines.append(f"{time.monotonic():.4f} {late_ms:.2f}\n")
        if now - flushed >= FLUSH_S:
            with out.open("a") as file:
                file.writelines(lines)
            lines.clear()
            collections, _Sampler.gc_lines = _Sampler.gc_lines, []
            with out.with_name(out.name + ".gc").open("a") as file:  # streamrun.gc_file
                file.writelines(collections)
            flushed = now


inner = _load(os.environ.get("BENCH_LAGGED_APP", "router_project.asgi:application"))
lag_file = Path(os.environ.get("BENCH_LAG_FILE", f"lag-{os.getpid()}.txt"))


def census(directory: Path) -> None:
    """What the process holds now, into ``directory`` (see the module's docstring)."""
    n = len(list(directory.glob("census-*.txt")))
    saved = os.dup(2)
    with (directory / f"pymalloc-{n}.txt").open("w") as out:
        os.dup2(out.fileno(), 2)  # _debugmallocstats writes to the C stderr
        try:
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
    counts: Counter[str] = Counter()
    sizes: Counter[str] = Counter()
    for o in gc.get_objects():
        kind = type(o)
        name = f"{kind.__module__}.{kind.__qualname__}"
        if isinstance(o, types.CoroutineType | types.AsyncGeneratorType):
            name += ":" + o.__qualname__
        counts[name] += 1
        sizes[name] += sys.getsizeof(o)
    with (directory / f"census-{n}.txt").open("w") as out:
        out.writelines(f"{name} {count} {sizes[name]}\n" for name, count in counts.items())


async def application(scope: Scope, receive: Receive, send: Send) -> None:
    if _Sampler.task is None:
        _Sampler.task = asyncio.get_running_loop().create_task(sample(lag_file))
        gc.callbacks.append(_collection)
        if memory := os.environ.get("BENCH_MEMORY_DIR"):
            loop = asyncio.get_running_loop()
            loop.add_signal_handler(signal.SIGUSR1, census, Path(memory))
    await inner(scope, receive, send)
