"""A monotonic clock that moves only when a test says, shared by the gateway and the
simulator across their threads and event loops.

The gateway reads it as ``runtime.monotonic`` and asks it for its attempt timers
(``routing.gateway.deadline.ReadDeadline`` uses a clock's ``call_later``); the simulator
waits on it (``FakeUpstream.use_sleep(clock.sleep)``: ``Delay``, ``Reply.think_s``). A
test lets a minute pass with ``advance(60)`` and waits for nothing: every timer due by then
fires on its own loop, in the order of its deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass


@dataclass(eq=False)
class _Timer:
    at: float
    loop: asyncio.AbstractEventLoop
    callback: Callable[[], None]
    cancelled: bool = False

    def cancel(self) -> None:
        self.cancelled = True

    def fire(self) -> None:
        if not self.cancelled:
            self.callback()


class VirtualClock:
    def __init__(self, now: float = 1000.0) -> None:
        self._lock = threading.Lock()
        self._now = now
        self._timers: list[_Timer] = []

    def __call__(self) -> float:
        with self._lock:
            return self._now

    def call_later(self, delay: float, callback: Callable[[], None]) -> _Timer:
        """``loop.call_later`` on this clock: ``callback`` runs on the caller's loop once
        the clock has been advanced ``delay`` past now."""
        loop = asyncio.get_running_loop()
        with self._lock:
            timer = _Timer(self._now + delay, loop, callback)
            self._timers.append(timer)
        return timer

    async def sleep(self, seconds: float) -> None:
        loop = asyncio.get_running_loop()
        woken: asyncio.Future[None] = loop.create_future()

        def wake() -> None:
            if not woken.done():
                woken.set_result(None)

        timer = self.call_later(seconds, wake)
        try:
            await woken
        finally:
            timer.cancel()

    def pending(self) -> list[float]:
        """How far ahead each live timer is, soonest first."""
        with self._lock:
            return sorted(t.at - self._now for t in self._timers if not t.cancelled)

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += seconds
            live = [t for t in self._timers if not t.cancelled]
            due = sorted((t for t in live if t.at <= self._now), key=lambda t: t.at)
            self._timers = [t for t in live if t.at > self._now]
        for timer in due:
            with contextlib.suppress(RuntimeError):  # a loop closed meanwhile
                timer.loop.call_soon_threadsafe(timer.fire)

    def wait_until(self, condition: Callable[[], bool], timeout: float = 10.0) -> None:
        """Poll (real time, briefly) until ``condition`` holds: the other threads have
        reached the point the test advances from. Fails the test if they never do."""
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError(f"never happened; timers pending: {self.pending()}")
            time.sleep(0.005)

    def has_timers(self, *ahead: float) -> bool:
        """Whether timers are pending exactly ``ahead`` seconds from now (each of them)."""
        pending = self.pending()
        return all(any(abs(p - a) < 1e-6 for p in pending) for a in ahead)


@contextlib.contextmanager
def virtual_time(runtime: object, upstream: object) -> Iterator[VirtualClock]:
    """The gateway's ``monotonic`` and the simulator's waits on one ``VirtualClock``. Enter
    it inside whatever joins the test's threads: on the way out it lets a day pass, so a
    call the test left waiting ends instead of holding the join."""
    clock = VirtualClock()
    before = runtime.monotonic  # type: ignore[attr-defined]
    runtime.monotonic = clock  # type: ignore[attr-defined]
    upstream.use_sleep(clock.sleep)  # type: ignore[attr-defined]
    try:
        yield clock
    finally:
        clock.advance(24 * 3600.0)  # a test that failed halfway leaves nothing waiting
        runtime.monotonic = before  # type: ignore[attr-defined]
        upstream.use_sleep(asyncio.sleep)  # type: ignore[attr-defined]
