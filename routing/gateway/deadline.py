"""``ReadDeadline``: one timer bounding a run of awaits (an attempt's headers, its stream's
reads), on the call's clock (``routing.gateway.attempt``).

Deadlines are instants on ``clock`` (the runtime's injectable ``monotonic``); the loop's
timer is given the time left until them. A clock that schedules its own timers (a
``call_later(delay, callback)`` method returning something with ``cancel()``, as a test's
virtual clock has) is asked for them instead of the loop, so a test can let minutes pass
on the gateway's timeouts without waiting them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")


class ReadDeadline:
    """Bounds each read of one stream by its own deadline with one timer per stream.

    ``asyncio.timeout_at`` around every read would schedule and cancel a timer per relayed
    chunk: thousands of streams then keep the loop's timer heap full of cancelled handles.
    Deadlines here only move later between reads (idle is measured from the latest read),
    so one armed timer serves many reads: when it fires during a read whose deadline is
    still ahead it re-arms for that deadline; when it fires between reads it does nothing
    (the next read arms it again). Past its deadline the reading task is cancelled and the
    read raises ``TimeoutError``, as ``asyncio.timeout`` would. Deadlines are instants on
    ``clock``; the loop's timer is set for the time left until them.
    """

    __slots__ = (
        "_timer",
        "_armed",
        "_deadline",
        "_task",
        "_cancelling",
        "_expired",
        "_clock",
        "_later",
    )

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        # A clock with timers of its own (a test's virtual clock) sets them; else the loop.
        self._later: Callable[[float, Callable[[], None]], Any] | None = getattr(
            clock, "call_later", None
        )
        self._timer: asyncio.TimerHandle | None = None
        self._armed = 0.0  # the deadline the timer was set for
        self._deadline = 0.0
        self._task: asyncio.Task[Any] | None = None
        self._cancelling = 0
        self._expired = False

    async def run(self, read: Awaitable[T], deadline: float) -> T:
        """``read`` bounded by ``deadline``: its result, or ``TimeoutError`` past it."""
        self.start(deadline)
        try:
            return await read
        except asyncio.CancelledError:
            if self.timed_out():
                raise TimeoutError from None
            raise
        finally:
            self.stop()

    def start(self, deadline: float) -> None:
        """Bound the read the current task awaits next by ``deadline`` (``run`` without a
        coroutine of its own, for the relay: each level of a stream's await chain is
        resumed on every chunk, and held while the stream is open)."""
        task = asyncio.current_task()
        assert task is not None
        self._deadline = deadline
        timer = self._timer
        if timer is None or self._armed > deadline:
            if timer is not None:
                timer.cancel()
            self._arm(deadline, self._clock())
        self._task, self._cancelling, self._expired = task, task.cancelling(), False

    def timed_out(self) -> bool:
        """Whether the ``CancelledError`` the read raised came from the deadline (and is
        then taken back), not from anyone else cancelling the task."""
        task = self._task
        return self._expired and task is not None and task.uncancel() <= self._cancelling

    def stop(self) -> None:
        """The read ended: a timer that fires from now on finds no read to cancel."""
        self._task = None

    def _arm(self, deadline: float, now: float) -> None:
        self._armed = deadline
        later = self._later
        if later is None:
            self._timer = asyncio.get_running_loop().call_later(deadline - now, self._fire)
        else:
            self._timer = later(deadline - now, self._fire)

    def _fire(self) -> None:
        self._timer = None
        task = self._task
        if task is None:  # between reads: the next read arms the timer again
            return
        now = self._clock()
        if now < self._deadline:
            self._arm(self._deadline, now)
            return
        self._expired = True
        task.cancel()

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
