"""decide(): one row per rule, in the order the rules are applied."""

from __future__ import annotations

from typing import Any

import pytest

from routing.engine.failures import DEFAULT_SWITCH_CODES, Failure, FailureCode
from routing.engine.plan import Action, Decision, SwitchReason, context_window_allows, decide
from routing.engine.retry import RetryPolicy

F = FailureCode
R = SwitchReason
POLICY = RetryPolicy()
ALL_CODES = frozenset(FailureCode)


def retry(delay: float) -> Decision:
    return Decision(Action.RETRY, delay_s=delay)


def switch(reason: SwitchReason) -> Decision:
    return Decision(Action.SWITCH, reason=reason)


SURFACE = Decision(Action.SURFACE)

# id, failure, keyword overrides for decide(), expected decision. rand is pinned to 0.5
# (no jitter), so backoff delays are 0.5, 1, 2, 4, 8 s.
DECIDE: list[tuple[str, Failure, dict[str, Any], Decision]] = [
    ("committed-beats-everything", Failure(F.SERVER, "x"), {"committed": True}, SURFACE),
    ("committed-probe", Failure(F.SERVER, "x"), {"committed": True, "is_probe": True}, SURFACE),
    ("aborted", Failure(F.ABORTED, "x"), {}, SURFACE),
    ("aborted-even-if-switchable", Failure(F.ABORTED, "x"), {"switch_codes": ALL_CODES}, SURFACE),
    ("server-first-retry", Failure(F.SERVER, "x"), {}, retry(0.5)),
    ("server-third-retry", Failure(F.SERVER, "x"), {"retries_done": 2}, retry(2.0)),
    ("empty-fifth-retry", Failure(F.EMPTY_RESPONSE, "x"), {"retries_done": 4}, retry(8.0)),
    ("transport-retry", Failure(F.TRANSPORT, "x"), {}, retry(0.5)),
    ("server-exhausted", Failure(F.SERVER, "x"), {"retries_done": 5}, switch(R.RETRY_EXHAUSTED)),
    (
        "server-exhausted-not-switchable",
        Failure(F.SERVER, "x"),
        {"retries_done": 5, "switch_codes": frozenset({F.AUTH})},
        SURFACE,
    ),
    (
        "no-retries-configured",
        Failure(F.SERVER, "x"),
        {"policy": RetryPolicy(max_retries=0)},
        switch(R.RETRY_EXHAUSTED),
    ),
    (
        "retry-after-replaces-backoff",
        Failure(F.RATE_LIMIT, "x", 429, 3.0),
        {"retries_done": 3},
        retry(3.0),
    ),
    ("retry-after-zero", Failure(F.RATE_LIMIT, "x", 429, 0.0), {}, retry(0.0)),
    ("retry-after-at-max-delay", Failure(F.RATE_LIMIT, "x", 429, 10.0), {}, retry(10.0)),
    (
        "retry-after-beyond-max-switches-now",
        Failure(F.RATE_LIMIT, "x", 429, 10.5),
        {},
        switch(R.NOT_RETRYABLE),
    ),
    (
        "retry-after-beyond-max-not-switchable",
        Failure(F.RATE_LIMIT, "x", 429, 60.0),
        {"switch_codes": frozenset({F.SERVER})},
        SURFACE,
    ),
    (
        "retry-after-ignored-when-exhausted",
        Failure(F.RATE_LIMIT, "x", 429, 1.0),
        {"retries_done": 5},
        switch(R.RETRY_EXHAUSTED),
    ),
    ("deadline-too-close", Failure(F.SERVER, "x"), {"time_left_s": 0.4}, switch(R.RETRY_EXHAUSTED)),
    (
        "deadline-equal-to-delay",
        Failure(F.SERVER, "x"),
        {"time_left_s": 0.5},
        switch(R.RETRY_EXHAUSTED),
    ),
    ("deadline-leaves-room", Failure(F.SERVER, "x"), {"time_left_s": 0.6}, retry(0.5)),
    (
        "deadline-vs-retry-after",
        Failure(F.RATE_LIMIT, "x", 429, 5.0),
        {"time_left_s": 4.0},
        switch(R.RETRY_EXHAUSTED),
    ),
    (
        "deadline-not-switchable",
        Failure(F.SERVER, "x"),
        {"time_left_s": 0.1, "switch_codes": frozenset({F.AUTH})},
        SURFACE,
    ),
    ("timeout-not-retried-by-default", Failure(F.TIMEOUT, "x"), {}, switch(R.NOT_RETRYABLE)),
    (
        "timeout-retried-when-configured",
        Failure(F.TIMEOUT, "x"),
        {"policy": RetryPolicy(retry_codes=frozenset({F.TIMEOUT}))},
        retry(0.5),
    ),
    (
        "context-window-never-retried",
        Failure(F.CONTEXT_WINDOW_EXCEEDED, "x"),
        {"policy": RetryPolicy(retry_codes=ALL_CODES)},
        switch(R.NOT_RETRYABLE),
    ),
    (
        "context-window-not-switchable",
        Failure(F.CONTEXT_WINDOW_EXCEEDED, "x"),
        {"switch_codes": frozenset({F.SERVER})},
        SURFACE,
    ),
    ("probe-never-retries", Failure(F.SERVER, "x"), {"is_probe": True}, switch(R.PROBE)),
    (
        "probe-ignores-retry-after",
        Failure(F.RATE_LIMIT, "x", 429, 1.0),
        {"is_probe": True},
        switch(R.PROBE),
    ),
    ("probe-non-switchable", Failure(F.BAD_REQUEST, "x"), {"is_probe": True}, SURFACE),
    ("auth-switches", Failure(F.AUTH, "x", 401), {}, switch(R.NOT_RETRYABLE)),
    ("unknown-model-switches", Failure(F.UNKNOWN_MODEL, "x", 404), {}, switch(R.NOT_RETRYABLE)),
    ("bad-request-surfaces", Failure(F.BAD_REQUEST, "x", 400), {}, SURFACE),
    ("content-filter-surfaces", Failure(F.CONTENT_FILTER, "x", 400), {}, SURFACE),
    # switch fast while another target is eligible: 0.5 s waited + 1 s fits 2 s, + 2 s not
    (
        "budget-fits",
        Failure(F.SERVER, "x"),
        {"alternative": True, "retries_done": 1, "waited_s": 0.5},
        retry(1.0),
    ),
    (
        "budget-passed-switches",
        Failure(F.SERVER, "x"),
        {"alternative": True, "retries_done": 2, "waited_s": 1.5},
        switch(R.RETRY_EXHAUSTED),
    ),
    (
        "budget-counts-retry-after",
        Failure(F.SERVER, "x", 529, 3.0),
        {"alternative": True},
        switch(R.RETRY_EXHAUSTED),
    ),
    (
        "budget-zero-switches-at-once",
        Failure(F.SERVER, "x"),
        {"alternative": True, "policy": RetryPolicy(switch_after_ms=0)},
        switch(R.RETRY_EXHAUSTED),
    ),
    # the last eligible target keeps the full schedule
    (
        "budget-last-target",
        Failure(F.SERVER, "x"),
        {"retries_done": 3, "waited_s": 3.5},
        retry(4.0),
    ),
    (
        "budget-not-a-switch-code-keeps-retrying",
        Failure(F.SERVER, "x"),
        {"alternative": True, "waited_s": 5.0, "switch_codes": frozenset({F.AUTH})},
        retry(0.5),
    ),
    (
        "operator-made-bad-request-switchable",
        Failure(F.BAD_REQUEST, "x", 400),
        {"switch_codes": ALL_CODES},
        switch(R.NOT_RETRYABLE),
    ),
]


@pytest.mark.parametrize(
    ("failure", "overrides", "expected"),
    [row[1:] for row in DECIDE],
    ids=[row[0] for row in DECIDE],
)
def test_decide(failure: Failure, overrides: dict[str, Any], expected: Decision) -> None:
    kwargs: dict[str, Any] = {
        "retries_done": 0,
        "policy": POLICY,
        "switch_codes": DEFAULT_SWITCH_CODES,
        "rand": lambda: 0.5,
    }
    kwargs.update(overrides)
    decision = decide(failure, **kwargs)
    assert decision.action is expected.action
    assert decision.reason is expected.reason
    assert decision.delay_s == pytest.approx(expected.delay_s)


@pytest.mark.parametrize(
    ("alternative", "sleeps"), [(True, [0.5, 1.0]), (False, [0.5, 1, 2, 4, 8])]
)
def test_switch_after_on_a_clock(alternative: bool, sleeps: list[float]) -> None:
    """A 529 every 50 ms, driven the way the call drives decide(): with another target
    eligible the call leaves after 1.5 s of waits (2 s budget); alone it waits them all."""
    clock, slept, tries = 0.0, [], 0
    while True:
        clock += 0.05  # the attempt
        decision = decide(
            Failure(F.SERVER, "overloaded", 529),
            retries_done=tries,
            policy=POLICY,
            switch_codes=DEFAULT_SWITCH_CODES,
            alternative=alternative,
            waited_s=sum(slept),
            rand=lambda: 0.5,
        )
        if decision.action is not Action.RETRY:
            break
        slept.append(decision.delay_s)
        clock += decision.delay_s
        tries += 1
    assert slept == sleeps
    assert decision == switch(R.RETRY_EXHAUSTED)
    if alternative:
        assert clock <= 2.5  # SPEC §16: the second target within ~2.5 s, not 15 s


def test_decide_uses_jitter_from_rand() -> None:
    decision = decide(
        Failure(F.SERVER, "x"),
        retries_done=1,
        policy=POLICY,
        switch_codes=DEFAULT_SWITCH_CODES,
        rand=lambda: 0.0,
    )
    assert decision.action is Action.RETRY
    assert decision.delay_s == pytest.approx(0.9)  # 1 s - 10 %


@pytest.mark.parametrize(
    ("failed", "candidate", "allowed"),
    [
        (None, None, True),
        (None, 4096, True),  # the failed target told us nothing
        (8192, None, True),  # unknown window: worth a try
        (8192, 8192, False),
        (8192, 4096, False),
        (8192, 8193, True),
        (8192, 128_000, True),
    ],
)
def test_context_window_allows(failed: int | None, candidate: int | None, allowed: bool) -> None:
    assert context_window_allows(failed, candidate) is allowed
