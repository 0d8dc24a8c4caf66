"""Backoff table with pinned ``rand`` values."""

from __future__ import annotations

import pytest

from routing.engine.retry import RetryPolicy, backoff_ms

DEFAULT = RetryPolicy()


@pytest.mark.parametrize(
    ("policy", "retry_number", "rand", "expected"),
    [
        (DEFAULT, 1, 0.5, 500.0),  # rand 0.5 = no jitter
        (DEFAULT, 2, 0.5, 1000.0),
        (DEFAULT, 3, 0.5, 2000.0),
        (DEFAULT, 4, 0.5, 4000.0),
        (DEFAULT, 5, 0.5, 8000.0),
        (DEFAULT, 6, 0.5, 10000.0),  # capped
        (DEFAULT, 60, 0.5, 10000.0),
        (DEFAULT, 10_000, 0.5, 10000.0),  # absurd retry numbers stay cheap
        (DEFAULT, 1, 0.0, 450.0),  # -10 %
        (DEFAULT, 1, 0.75, 525.0),  # +5 %
        (DEFAULT, 5, 0.0, 7200.0),
        (DEFAULT, 6, 0.0, 9000.0),  # jitter below the cap is allowed
        (DEFAULT, 6, 0.999, 10000.0),  # ... above it is not
        (DEFAULT, 5, 0.999, 8798.4),
        (DEFAULT, 0, 0.5, 500.0),  # below 1 counts as the first retry
        (RetryPolicy(initial_delay_ms=100, max_delay_ms=250, jitter_ratio=0.0), 3, 0.9, 250.0),
        (RetryPolicy(jitter_ratio=0.0), 2, 0.0, 1000.0),
        (RetryPolicy(jitter_ratio=2.0), 1, 0.0, 0.0),  # never below zero
        (RetryPolicy(initial_delay_ms=0), 3, 0.9, 0.0),
    ],
)
def test_backoff_ms(policy: RetryPolicy, retry_number: int, rand: float, expected: float) -> None:
    assert backoff_ms(policy, retry_number, lambda: rand) == pytest.approx(expected)


def test_backoff_calls_rand_once_per_delay() -> None:
    calls: list[int] = []

    def rand() -> float:
        calls.append(1)
        return 0.5

    backoff_ms(DEFAULT, 2, rand)
    assert calls == [1]
