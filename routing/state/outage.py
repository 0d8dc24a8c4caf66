"""When Redis was found unreachable, and when to try it again.

Shared by the two things that keep state in Redis with an in-process fallback: the health
store (``routing.state.redis``) and the limit counters (``routing.limits.redis_counters``).
While Redis is down, at most one call every ``retry_s`` seconds tries it again (the trial);
every other call stays local, so a dead Redis costs no connect timeout per call. Each owner
logs the transitions in its own words and decides what to drop when Redis comes back.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class RedisOutage:
    def __init__(self, *, retry_s: float, clock: Callable[[], float]) -> None:
        self.retry_s = retry_s
        self._clock = clock
        self._lock = threading.Lock()
        self.down_since: float | None = None  # clock() when Redis was found unreachable
        self.reason = ""
        self._retry_at = 0.0

    @property
    def degraded(self) -> bool:
        return self.down_since is not None

    def route(self) -> tuple[bool, bool]:
        """(use Redis, this call is the one trial allowed while degraded)."""
        if self.down_since is None:
            return True, False
        with self._lock:
            if self.down_since is None:
                return True, False
            now = self._clock()
            if now < self._retry_at:
                return False, False
            self._retry_at = now + self.retry_s  # concurrent callers stay local meanwhile
            return True, True

    def went_down(self, exc: BaseException) -> bool:
        """Record a failed Redis call; True when it is the one that found Redis down."""
        with self._lock:
            now = self._clock()
            self._retry_at = now + self.retry_s
            self.reason = f"{type(exc).__name__}: {exc}"
            if self.down_since is not None:
                return False
            self.down_since = now
            return True

    def came_back(self) -> bool:
        """Record a trial that reached Redis; True when Redis had been down."""
        with self._lock:
            if self.down_since is None:
                return False
            self.down_since = None
            self.reason = ""
            return True
