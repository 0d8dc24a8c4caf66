"""The failover planner: given one failed attempt, say what the driver does next.

Like tenacity's ``BaseRetrying.iter()``, :func:`decide` returns an action and never acts:
the async driver sleeps, re-dispatches, moves on or surfaces the error. Rules, first
match wins:

1. the answer is already committed to the client -> SURFACE (never splice two answers);
2. ABORTED -> SURFACE (nobody is waiting);
3. retry in place when the code is a retry code, retries remain, the attempt was not a
   probe (a probe gets exactly one attempt) and the code is not CONTEXT_WINDOW_EXCEEDED
   (the same prompt cannot fit the same window). The wait is the upstream's
   ``Retry-After`` when given — one beyond ``max_delay_ms`` means "switch now" — else
   exponential backoff. A wait that would outlast the call's deadline counts as retries
   exhausted, and so does one that would take the time ``spent_s`` already spent on this
   target — every attempt's duration and the waits between them — past
   ``switch_after_ms`` while another target of the chain is eligible (``alternative``)
   and the code is a switch code: switch fast when there is somewhere to go (SPEC §16).
   A stalled, timed-out or cut attempt that used the budget by itself switches at once.
   The last eligible target keeps the full schedule;
4. otherwise SWITCH when the code is a switch code, else SURFACE.

:class:`SwitchReason.THRESHOLD` is never returned here: the driver uses it when it skips
a target whose circuit is open.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from .failures import Failure, FailureCode
from .retry import RetryPolicy, backoff_ms


class Action(StrEnum):
    RETRY = "retry"  # wait ``delay_s``, then the same target again
    SWITCH = "switch"  # next candidate
    SURFACE = "surface"  # give this failure to the client


class CommitPoint(StrEnum):
    """When an attempt's answer is committed to the client (rule 1 above): at its first
    content, reasoning or tool-call delta, or only once the upstream finished the whole
    answer. Before it a failure is retried or switched invisibly."""

    FIRST_CONTENT = "first-content"
    COMPLETE = "complete"


class SwitchReason(StrEnum):
    THRESHOLD = "threshold"
    PROBE = "probe"
    RETRY_EXHAUSTED = "retry-exhausted"
    NOT_RETRYABLE = "not-retryable"


@dataclass(frozen=True, slots=True)
class Decision:
    action: Action
    delay_s: float = 0.0
    reason: SwitchReason | None = None


SURFACE = Decision(Action.SURFACE)


def _move_on(
    code: FailureCode, switch_codes: frozenset[FailureCode], reason: SwitchReason
) -> Decision:
    if code in switch_codes:
        return Decision(Action.SWITCH, reason=reason)
    return SURFACE


def decide(
    failure: Failure,
    *,
    retries_done: int,
    policy: RetryPolicy,
    switch_codes: frozenset[FailureCode],
    is_probe: bool = False,
    committed: bool = False,
    time_left_s: float | None = None,
    alternative: bool = False,
    spent_s: float = 0.0,
    rand: Callable[[], float],
) -> Decision:
    """Next step after ``failure`` on a target already retried ``retries_done`` times,
    ``spent_s`` seconds after the first attempt on it was sent (a fact the driver measures
    on its injected clock: the attempts and the waits between them)."""
    code = failure.code
    if committed or code is FailureCode.ABORTED:
        return SURFACE
    retryable = code in policy.retry_codes and code is not FailureCode.CONTEXT_WINDOW_EXCEEDED
    if is_probe:
        return _move_on(code, switch_codes, SwitchReason.PROBE)
    if retryable and retries_done < policy.max_retries:
        if failure.retry_after_s is not None:
            if failure.retry_after_s * 1000 > policy.max_delay_ms:
                # The upstream asked for longer than we are willing to wait in place.
                return _move_on(code, switch_codes, SwitchReason.NOT_RETRYABLE)
            delay = failure.retry_after_s
        else:
            delay = backoff_ms(policy, retries_done + 1, rand) / 1000.0
        if time_left_s is not None and delay >= time_left_s:
            return _move_on(code, switch_codes, SwitchReason.RETRY_EXHAUSTED)
        if alternative and code in switch_codes and over_budget(policy, spent_s + delay):
            return Decision(Action.SWITCH, reason=SwitchReason.RETRY_EXHAUSTED)
        return Decision(Action.RETRY, delay_s=delay)
    reason = SwitchReason.RETRY_EXHAUSTED if retryable else SwitchReason.NOT_RETRYABLE
    return _move_on(code, switch_codes, reason)


def over_budget(policy: RetryPolicy, spent_s: float) -> bool:
    """Would ``spent_s`` seconds on one target pass ``switch_after_ms``?"""
    return spent_s * 1000 > policy.switch_after_ms


def retries_allowed(
    policy: RetryPolicy,
    *,
    retries_done: int,
    spent_s: float,
    budgeted: bool,
) -> int:
    """How many more retries in place :func:`decide` can still allow on a target retried
    ``retries_done`` times after ``spent_s`` seconds there (the count a retry's log line
    gives). ``budgeted``: another target is eligible and the code is a switch code, so
    ``switch_after_ms`` bounds them too. The waits are the nominal (unjittered) backoff and
    the attempts are counted as taking no time, so this is an upper bound."""
    left = max(0, policy.max_retries - retries_done)
    if not budgeted:
        return left
    allowed, total = 0, spent_s
    for number in range(retries_done + 1, retries_done + left + 1):
        total += backoff_ms(policy, number, _no_jitter) / 1000.0
        if over_budget(policy, total):
            break
        allowed += 1
    return allowed


def _no_jitter() -> float:
    return 0.5


def context_window_allows(failed_window: int | None, candidate_window: int | None) -> bool:
    """After CONTEXT_WINDOW_EXCEEDED on a target of ``failed_window``, may this one be tried?

    Only if it is not known to be smaller or equal: it declares no window, or a larger one.
    A failed target without a declared window tells us nothing, so everyone stays eligible.
    """
    if failed_window is None or candidate_window is None:
        return True
    return candidate_window > failed_window


@dataclass(frozen=True, slots=True)
class ContextLimit:
    """This call overflowed a context window, on a target that declared ``window``."""

    window: int | None

    def allows(self, candidate_window: int | None) -> bool:
        return context_window_allows(self.window, candidate_window)
