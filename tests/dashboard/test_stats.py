"""Live target statistics (pure windows, an injected clock) and their sparklines."""

from __future__ import annotations

import pytest

from dashboard.sparkline import sparkline
from dashboard.stats import LiveStats, percentile
from routing.gateway.events import AttemptRecord, CallRecord, FallbackEvent

T0 = 1_800_000_000.0  # a minute boundary's neighbourhood; the exact value does not matter


def call(at: float, *attempts: tuple[str, bool, str | None], ttft: float | None = 100.0):  # type: ignore[no-untyped-def]
    served = next((t for t, ok, _ in reversed(attempts) if ok), None)
    return CallRecord(
        call_id=f"c{at}",
        group="auto",
        session=None,
        stream=False,
        started_at=at,
        served_by=served,
        ttft_ms=ttft if served else None,
        attempts=[AttemptRecord(target, 1, ok, 1.0, code=code) for target, ok, code in attempts],
    )


def flaky(at: float) -> CallRecord:
    """The demo's flaky-model: two 503s, then a success — never cools, fails 2 in 3."""
    return call(
        at,
        ("sim/flaky", False, "SERVER"),
        ("sim/flaky", False, "SERVER"),
        ("sim/flaky", True, None),
    )


def test_a_target_failing_two_tries_in_three_is_degraded_while_healthy() -> None:
    stats = LiveStats(failure_rate=0.5, min_attempts=5)
    stats.on_event(flaky(T0))
    [once] = stats.read(["sim/flaky"], T0 + 1).values()
    assert once.recent.attempts == 3 and not once.degraded  # too few attempts to judge
    stats.on_event(flaky(T0 + 2))
    [twice] = stats.read(["sim/flaky"], T0 + 3).values()
    assert twice.recent.attempts == 6 and twice.recent.failures == 4
    assert twice.recent.success_rate == pytest.approx(1 / 3)
    assert twice.degraded


def test_windows_forget_old_minutes_as_the_clock_moves() -> None:
    stats = LiveStats(failure_rate=0.5, min_attempts=5)
    for i in range(3):
        stats.on_event(flaky(T0 + i))
    five, fifteen, sixty = stats.read(["sim/flaky"], T0 + 10)["sim/flaky"].windows
    assert (five.attempts, fifteen.attempts, sixty.attempts) == (9, 9, 9)
    later = stats.read(["sim/flaky"], T0 + 10 * 60)["sim/flaky"]
    assert [w.attempts for w in later.windows] == [0, 9, 9]
    assert not later.degraded  # nothing in the last five minutes
    much_later = stats.read(["sim/flaky"], T0 + 61 * 60)["sim/flaky"]
    assert [w.attempts for w in much_later.windows] == [0, 0, 0]
    assert much_later.recent.success_rate is None


def test_ttft_percentiles_come_from_the_serving_target_only() -> None:
    stats = LiveStats()
    for i, ttft in enumerate([100.0, 200.0, 300.0, 400.0]):
        stats.on_event(call(T0 + i, ("p1/a", False, "RATE_LIMIT"), ("p2/b", True, None), ttft=ttft))
    read = stats.read(["p1/a", "p2/b"], T0 + 5)
    assert read["p1/a"].recent.ttft_p50_ms is None and read["p1/a"].recent.failures == 4
    b = read["p2/b"].recent
    assert (b.ttft_p50_ms, b.ttft_p95_ms, b.success_rate) == (200.0, 400.0, 1.0)


def test_requests_at_fault_and_client_aborts_do_not_count_against_the_target() -> None:
    stats = LiveStats(min_attempts=1)
    stats.on_event(call(T0, ("p1/a", False, "BAD_REQUEST")))
    stats.on_event(call(T0, ("p1/a", False, "ABORTED")))
    stats.on_event(
        FallbackEvent("c", "auto", "p1/a", None, "threshold", "SERVER", 503, "", None, at=0.0)
    )
    recent = stats.read(["p1/a"], T0 + 1)["p1/a"].recent
    assert (recent.attempts, recent.failures) == (1, 0)


def test_the_per_minute_series_is_sixty_slots_with_gaps() -> None:
    stats = LiveStats()
    stats.on_event(call(T0, ("p1/a", True, None)))
    stats.on_event(call(T0 + 120, ("p1/a", False, "SERVER")))
    series = stats.read(["p1/a"], T0 + 120)["p1/a"].success_by_minute
    assert len(series) == 60
    assert series[-1] == 0.0 and series[-2] is None and series[-3] == 1.0


def test_memory_per_target_is_bounded() -> None:
    stats = LiveStats()
    for minute in range(200):
        stats.on_event(call(T0 + minute * 60, ("p1/a", True, None)))
    window = stats._windows["p1/a"]
    assert len(window.buckets) <= 61


def test_percentile_is_nearest_rank() -> None:
    assert percentile([], 50) is None
    assert percentile([5.0, 1.0, 3.0], 50) == 3.0
    assert percentile(list(map(float, range(1, 101))), 95) == 95.0


def test_sparklines_are_inline_svg_with_gaps() -> None:
    svg = sparkline([1.0, 0.5, None, 0.0, 1.0], label="success", low=0, high=1, width=40, height=10)
    assert svg.startswith("<svg") and 'aria-label="success"' in svg
    assert svg.count("<polyline") == 2  # the gap breaks the line
    assert 'points="0.0,1.0 10.0,5.0"' in svg  # 1.0 at the top, 0.5 half way
    lone = sparkline([None, 0.5, None], label="one", low=0, high=1)
    assert "<circle" in lone and "<polyline" not in lone
    assert "<polyline" not in sparkline([None] * 60, label="empty")
