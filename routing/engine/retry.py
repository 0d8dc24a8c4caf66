"""Retry-in-place policy: how often and how long to wait before trying the same target again.

The policy is a small frozen value; :func:`backoff_ms` is a pure function of it, the
retry number and an injected ``rand`` (so tests pin the jitter). Whether to retry at
all is the planner's call (:func:`routing.engine.plan.decide`), not this module's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .failures import DEFAULT_RETRY_CODES, FailureCode

# 2**62 ms is far beyond any cap; clamping the exponent keeps absurd retry numbers cheap.
_MAX_EXPONENT = 62


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """At most ``max_retries`` retries per target, for ``retry_codes`` only.

    Delays grow ``initial_delay_ms · 2^(n−1)`` up to ``max_delay_ms``, ±``jitter_ratio``.
    ``switch_after_ms`` bounds the time spent on one target — its attempts and the waits
    between them — while another target of the chain is eligible (SPEC §16: switch fast
    when there is somewhere to go).
    Values are validated by the configuration schema, not here. The defaults are the
    engine's own (stdlib only); tests/config/test_policy_fields.py holds them to the declared
    built-in policy (``routing.config.schema.RetryPolicyIn``).
    """

    max_retries: int = 5
    retry_codes: frozenset[FailureCode] = DEFAULT_RETRY_CODES
    initial_delay_ms: int = 500
    max_delay_ms: int = 10_000
    jitter_ratio: float = 0.1
    switch_after_ms: int = 2_000


def backoff_ms(policy: RetryPolicy, retry_number: int, rand: Callable[[], float]) -> float:
    """Delay before the ``retry_number``-th retry (1-based), in milliseconds.

    Jitter spreads concurrent callers apart; it is applied after the cap and the result
    is clamped again, so ``max_delay_ms`` is a hard ceiling and 0 a hard floor.
    """
    exponent = min(max(retry_number, 1) - 1, _MAX_EXPONENT)
    base = min(policy.initial_delay_ms * 2**exponent, policy.max_delay_ms)
    jittered = base * (1.0 + policy.jitter_ratio * (2.0 * rand() - 1.0))
    return float(max(0.0, min(jittered, float(policy.max_delay_ms))))
