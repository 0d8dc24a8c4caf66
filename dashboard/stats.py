"""Live per-target statistics for the groups page, from in-memory windows fed by the hub.

No database, no Django: :meth:`LiveStats.on_event` is an event-hub subscriber and does an
O(1) append per attempt of a finished call (a call has a bounded number of attempts);
everything else happens when a page renders, from the windows alone.

A target's window is a ring of one-minute buckets (the last :data:`SPAN_BUCKETS` minutes).
Each bucket counts attempts and failures and keeps up to :data:`TTFT_SAMPLES` time-to-first-
token samples, so memory per target is bounded whatever the traffic.

What counts:

- an **attempt** is one upstream try on the target; a try the client cut short
  (``ABORTED``) says nothing about the target and is not counted;
- a **failure** is a failed attempt whose code is the target's fault — not
  ``BAD_REQUEST``, ``CONTENT_FILTER`` or ``CONTEXT_WINDOW_EXCEEDED`` (the request itself);
  success rate = 1 − failures / attempts;
- **time to first token** is the call's, credited to the target that served it.

A target is **degraded** when, over the last five minutes, it had at least
``min_attempts`` attempts and its failure rate reached ``failure_rate``: shown even while
its health is ``healthy`` (a target failing two tries in three, each retried into a success,
never cools but is clearly getting worse).

Times are the gateway clock's epoch seconds (the records' ``started_at``); the reader
passes ``now`` from the same clock, so tests move time by hand.
"""

from __future__ import annotations

import math
import threading
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from routing.engine import select
from routing.engine.failures import FailureCode
from routing.gateway.events import CallRecord

BUCKET_S = 60
SPAN_BUCKETS = 60
TTFT_SAMPLES = 256  # per bucket
WINDOWS_MIN = (5, 15, 60)
NOT_COUNTED = frozenset({FailureCode.ABORTED.value})
# The engine's rule (the request, not the target, failed), minus what is not counted at all.
NOT_THE_TARGETS_FAULT = frozenset(code.value for code in select.NOT_THE_TARGETS_FAULT) - NOT_COUNTED
DEGRADED_FAILURE_RATE = 0.5
DEGRADED_MIN_ATTEMPTS = 5


@dataclass(slots=True)
class Bucket:
    minute: int  # epoch minute
    attempts: int = 0
    failures: int = 0
    ttfts: list[float] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class WindowStats:
    minutes: int
    attempts: int
    failures: int
    ttft_p50_ms: float | None
    ttft_p95_ms: float | None

    @property
    def success_rate(self) -> float | None:
        if not self.attempts:
            return None
        return 1.0 - self.failures / self.attempts

    @property
    def failure_rate(self) -> float:
        return self.failures / self.attempts if self.attempts else 0.0


@dataclass(frozen=True, slots=True)
class TargetStats:
    key: str
    windows: tuple[WindowStats, ...]  # one per WINDOWS_MIN, in that order
    success_by_minute: tuple[float | None, ...]  # oldest first, SPAN_BUCKETS values
    ttft_by_minute: tuple[float | None, ...]  # p50 per minute
    degraded: bool

    @property
    def recent(self) -> WindowStats:
        return self.windows[0]


def percentile(samples: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile (``q`` in 0..100) of unsorted samples."""
    if not samples:
        return None
    ordered = sorted(samples)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


class TargetWindow:
    """One target's minute buckets, newest last."""

    __slots__ = ("buckets",)

    def __init__(self) -> None:
        self.buckets: deque[Bucket] = deque(maxlen=SPAN_BUCKETS + 1)

    def add(self, at: float, *, failed: bool, ttft_ms: float | None) -> None:
        minute = int(at // BUCKET_S)
        last = self.buckets[-1] if self.buckets else None
        if last is None or minute > last.minute:
            last = Bucket(minute)
            self.buckets.append(last)
        elif minute < last.minute:  # a late record (a long call): credit its own minute
            last = next((b for b in reversed(self.buckets) if b.minute <= minute), last)
            if last.minute != minute:
                return  # older than the buckets kept
        last.attempts += 1
        last.failures += int(failed)
        if ttft_ms is not None and len(last.ttfts) < TTFT_SAMPLES:
            last.ttfts.append(ttft_ms)

    def read(
        self, now: float, *, failure_rate: float, min_attempts: int
    ) -> tuple[tuple[WindowStats, ...], tuple[float | None, ...], tuple[float | None, ...], bool]:
        current = int(now // BUCKET_S)
        by_minute = {b.minute: b for b in self.buckets}
        windows = []
        for minutes in WINDOWS_MIN:
            chosen = [b for b in self.buckets if current - minutes < b.minute <= current]
            ttfts = [t for b in chosen for t in b.ttfts]
            windows.append(
                WindowStats(
                    minutes=minutes,
                    attempts=sum(b.attempts for b in chosen),
                    failures=sum(b.failures for b in chosen),
                    ttft_p50_ms=percentile(ttfts, 50),
                    ttft_p95_ms=percentile(ttfts, 95),
                )
            )
        success: list[float | None] = []
        ttft: list[float | None] = []
        for minute in range(current - SPAN_BUCKETS + 1, current + 1):
            bucket = by_minute.get(minute)
            if bucket is None or not bucket.attempts:
                success.append(None)
                ttft.append(None)
                continue
            success.append(1.0 - bucket.failures / bucket.attempts)
            ttft.append(percentile(bucket.ttfts, 50))
        recent = windows[0]
        degraded = recent.attempts >= min_attempts and recent.failure_rate >= failure_rate
        return tuple(windows), tuple(success), tuple(ttft), degraded


class LiveStats:
    """Every target's window; fed by :meth:`on_event`, read by :meth:`read`."""

    def __init__(
        self,
        *,
        failure_rate: float = DEGRADED_FAILURE_RATE,
        min_attempts: int = DEGRADED_MIN_ATTEMPTS,
    ) -> None:
        self.failure_rate = failure_rate
        self.min_attempts = min_attempts
        self._windows: dict[str, TargetWindow] = {}
        self._lock = threading.Lock()  # readers run in other threads than the hub

    def on_event(self, event: object) -> None:
        """Hub subscriber: count a finished call's attempts."""
        if not isinstance(event, CallRecord):
            return
        started, served_by, ttft_ms = event.started_at, event.served_by, event.ttft_ms
        with self._lock:
            for attempt in event.attempts:
                code = attempt.code or ""
                if code in NOT_COUNTED:
                    continue
                window = self._windows.get(attempt.target)
                if window is None:
                    window = self._windows[attempt.target] = TargetWindow()
                window.add(
                    started,
                    failed=not attempt.ok and code not in NOT_THE_TARGETS_FAULT,
                    ttft_ms=ttft_ms if attempt.ok and attempt.target == served_by else None,
                )

    def read(self, keys: Iterable[str], now: float) -> dict[str, TargetStats]:
        out: dict[str, TargetStats] = {}
        with self._lock:
            for key in keys:
                window = self._windows.get(key) or TargetWindow()
                windows, success, ttft, degraded = window.read(
                    now, failure_rate=self.failure_rate, min_attempts=self.min_attempts
                )
                out[key] = TargetStats(key, windows, success, ttft, degraded)
        return out


# ---------------------------------------------------------------------- wiring
_current = LiveStats()
_unsubscribe: Callable[[], None] | None = None
_attached: object | None = None
_settings: tuple[float, int] = (DEGRADED_FAILURE_RATE, DEGRADED_MIN_ATTEMPTS)


def configure(*, failure_rate: float, min_attempts: int) -> None:
    global _settings
    _settings = (failure_rate, min_attempts)
    _current.failure_rate, _current.min_attempts = _settings


def attach(hub: object) -> None:
    """``EVENT_SUBSCRIBERS`` hook: statistics follow the hub the runtime installs (a new
    hub starts fresh windows: they describe the traffic that hub carries)."""
    global _current, _unsubscribe, _attached
    if hub is _attached:
        return
    if _unsubscribe is not None:
        try:
            _unsubscribe()
        except ValueError:
            pass
    failure_rate, min_attempts = _settings
    _current = LiveStats(failure_rate=failure_rate, min_attempts=min_attempts)
    _unsubscribe = hub.subscribe(_current.on_event)  # type: ignore[attr-defined]
    _attached = hub


def current() -> LiveStats:
    return _current
