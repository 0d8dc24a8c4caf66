"""The management API fixtures (``tests/api/conftest.py``) and the browser
(``tests/dashboard/conftest.py``) for the limits tests, and a wall clock for the tests
that count calls per calendar minute."""

import time
from collections.abc import Callable, Iterator

import pytest

from tests.api.conftest import api, live, runtime_state
from tests.conftest import Harness
from tests.dashboard.conftest import browser

__all__ = ["api", "browser", "live", "minute_begun", "runtime_state"]

DAY_S = 86400.0


def minute_begun_clock(now: float) -> Callable[[], float]:
    """The wall clock moved (by less than a minute, within the same UTC day) to read one
    second past a minute's start at ``now``: calls made in the next 59 s fall in one
    calendar minute (an ``rpm`` window), however slow the machine, where the real clock's
    minute may end between two of them. Spend is counted by UTC day from the real clock,
    so the move never crosses a day's start (in a day's first minute it goes forward)."""
    start = now - now % 60 + 1
    if now % DAY_S < 60:  # back would be yesterday: the next minute instead
        start += 60
    offset = start - now
    return lambda: time.time() + offset


@pytest.fixture
def minute_begun(harness: Harness) -> Iterator[Callable[[], float]]:
    """The harness's runtime on :func:`minute_begun_clock` for the test, then the real one."""
    runtime = harness.runtime
    previous = runtime.clock  # type: ignore[attr-defined]
    clock = runtime.clock = minute_begun_clock(time.time())  # type: ignore[attr-defined]
    yield clock
    runtime.clock = previous  # type: ignore[attr-defined]
