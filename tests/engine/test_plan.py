"""decide(): one row per rule, in the order the rules are applied."""

from __future__ import annotations

from typing import Any

import pytest

from routing.engine.failures import DEFAULT_SWITCH_CODES, Failure, FailureCode
from routing.engine.plan import (
    Action,
    Decision,
    SwitchReason,
    context_window_allows,
    decide,
    retries_allowed,
)
from routing.engine.retry import RetryPolicy
from routing.upstream.base import Timeouts

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
        {"alternative": True, "retries_done": 1, "spent_s": 0.5},
        retry(1.0),
    ),
    (
        "budget-passed-switches",
        Failure(F.SERVER, "x"),
        {"alternative": True, "retries_done": 2, "spent_s": 1.5},
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
        {"retries_done": 3, "spent_s": 3.5},
        retry(4.0),
    ),
    (
        "budget-not-a-switch-code-keeps-retrying",
        Failure(F.SERVER, "x"),
        {"alternative": True, "spent_s": 5.0, "switch_codes": frozenset({F.AUTH})},
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
            spent_s=clock,
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


# -- issue 41 item 1: the switch deadline counts the time spent on a target -----------------
TIMEOUTS = Timeouts()  # the shipped defaults: first token and idle 60 s


def seconds_to_switch(attempt: tuple[float, Failure], *, alternative: bool = True) -> float:
    """Drive decide() as the call does against a target whose every attempt takes
    ``attempt[0]`` seconds and ends in ``attempt[1]``: the instant it moves on, on the
    call's clock (attempts as measured, waits as asked)."""
    took, failure = attempt
    spent, tries = 0.0, 0
    while True:
        spent += took
        decision = decide(
            failure,
            retries_done=tries,
            policy=POLICY,
            switch_codes=DEFAULT_SWITCH_CODES,
            alternative=alternative,
            spent_s=spent,
            rand=lambda: 0.5,
        )
        if decision.action is not Action.RETRY:
            assert decision.action is Action.SWITCH
            return spent
        spent += decision.delay_s
        tries += 1


def test_s09_a_stream_that_stalls_then_closes_switches_within_idle_plus_one_backoff() -> None:
    """S09: the stream stalls, then the upstream closes it (a cut, TRANSPORT, a retry code)
    before the idle timeout, or the idle timeout ends it first (TIMEOUT). Either way the
    fallback is reached within idle_s plus one backoff, not after three 30 s stalls."""
    one_backoff = POLICY.initial_delay_ms / 1000
    for stalled_s in (30.0, TIMEOUTS.idle_s - 1):
        cut = (stalled_s, Failure(F.TRANSPORT, "stream ended before a finish reason"))
        assert seconds_to_switch(cut) <= TIMEOUTS.idle_s + one_backoff
        assert seconds_to_switch(cut) == stalled_s  # at once: the attempt used the budget
    idle = (TIMEOUTS.idle_s, Failure(F.TIMEOUT, "idle timeout"))
    assert seconds_to_switch(idle) == TIMEOUTS.idle_s


def test_s06_no_response_at_all_switches_at_the_first_token_timeout() -> None:
    silent = (TIMEOUTS.first_token_s, Failure(F.TIMEOUT, "first-token timeout"))
    assert seconds_to_switch(silent) == TIMEOUTS.first_token_s


def test_s07_a_slow_first_token_then_a_cut_is_not_retried_in_place() -> None:
    """S07: 20 s before the first token, then the stream is cut before the commit point:
    one attempt, then the fallback (the arithmetic before counted only the waits: 3 tries
    and 61.5 s)."""
    slow = (20.0, Failure(F.TRANSPORT, "stream ended before a finish reason"))
    assert seconds_to_switch(slow) == 20.0


def test_the_last_target_keeps_every_retry_however_long_its_attempts() -> None:
    cut = (30.0, Failure(F.TRANSPORT, "cut"))
    assert seconds_to_switch(cut, alternative=False) == 6 * 30.0 + 0.5 + 1 + 2 + 4 + 8


def test_fast_failures_keep_the_budgets_retries() -> None:
    """A 529 in 50 ms: 0.05 + 0.5 + 0.05 + 1 + 0.05 = 1.65 s, the next 2 s wait passes 2 s."""
    assert seconds_to_switch((0.05, Failure(F.SERVER, "overloaded", 529))) == pytest.approx(1.65)


@pytest.mark.parametrize(
    ("retries_done", "spent_s", "budgeted", "expected"),
    [
        (0, 0.0, False, 5),  # the last target: every retry
        (4, 10.0, False, 1),
        (5, 0.0, False, 0),
        (1, 0.5, True, 1),  # 0.5 waited; +1 fits 2 s, +2 more does not
        (2, 1.5, True, 0),
        (1, 30.5, True, 0),  # a 30 s stall used the budget
        (0, 0.0, True, 2),  # 0.5 + 1 fit, + 2 does not
    ],
)
def test_retries_allowed_counts_what_the_budget_allows(
    retries_done: int, spent_s: float, budgeted: bool, expected: int
) -> None:
    assert (
        retries_allowed(POLICY, retries_done=retries_done, spent_s=spent_s, budgeted=budgeted)
        == expected
    )
