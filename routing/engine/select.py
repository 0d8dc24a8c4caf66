"""Who may serve, in what order, and what a failure costs: decided once, here.

Three pure functions that the call, route/explain, the exhaustion message, the status
API and the page's badges all render, so they cannot drift apart:

- :func:`judge` — one target's health, its provider's credential state and ``now`` →
  a :class:`Verdict`: the state a badge shows, whether a fresh call may use it, and when
  it may serve again;
- :func:`choose` — the algorithm's order, the verdicts, the session's sticky target and
  what this call already excluded → the :class:`Choice` list the driver walks: the first
  target to SERVE ends it; a PROBE is tried only if its single probe lease can be taken
  (another call may hold it); when nothing is eligible, REVIVE the one cooling target
  whose deadline comes first, once per cooling window (never before a ``Retry-After``
  the provider gave, never while a probe of the chain is out or a failed revive's window
  runs: SPEC §16, a full outage sheds load);
- :func:`charge` — a call gave up on a target: what that costs the target's health
  (SPEC §3.9: once per call), and :func:`switch_reason` names the move for the record.

Nothing here takes a lease, writes a state or reads a clock: the stores apply the
transitions atomically (``routing.engine.health``) and may still refuse one (a lease
taken by another process a moment earlier), which is why ``choose`` returns every
candidate in order rather than a single pick.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from .failures import PROVIDER_WIDE_CODES, FailureCode
from .health import Availability, HealthState, ProviderHealth, TargetHealth, availability
from .plan import SwitchReason

# Failures that say nothing about the target's health: the request itself was the problem.
NOT_THE_TARGETS_FAULT = frozenset(
    {
        FailureCode.BAD_REQUEST,
        FailureCode.CONTENT_FILTER,
        FailureCode.CONTEXT_WINDOW_EXCEEDED,
        FailureCode.ABORTED,
    }
)


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the health machine says of one target at ``now``.

    ``state`` is the machine's (a disabled provider disables its targets), ``availability``
    folds time in (a cooling target past its deadline is probe-eligible). ``revives_at``
    is when a cooling or probing target may serve again; ``held_until`` the provider's own
    ``Retry-After`` that not even a force-revive may cut short."""

    state: HealthState
    availability: Availability
    remaining_s: float = 0.0  # until the cooling deadline, never below zero
    revives_at: float | None = None
    wait_s: float = 0.0  # until ``revives_at``
    held_until: float = 0.0
    code: str | None = None  # the failure that put it in this state
    message: str = ""
    consecutive_failures: int = 0
    provider_disabled: bool = False
    revived: bool = False  # its window was opened by a force-revive (in flight or failed)
    next_check: float = 0.0  # when an active health check may revive it (0: none armed)

    @property
    def standing(self) -> str:
        """One word for the operator: healthy, probe-eligible, probing, cooling, disabled."""
        if self.availability is Availability.AVAILABLE:
            return "healthy"
        return self.availability.value

    @property
    def eligible(self) -> bool:
        """A fresh call may use it now (directly, or as its single probe)."""
        return self.availability in (Availability.AVAILABLE, Availability.PROBE_ELIGIBLE)

    @property
    def earliest_revival(self) -> float | None:
        """When it may serve again at the earliest, for ``Retry-After``: its cooling
        deadline, or sooner its next active health check (never before the provider's own
        ``Retry-After``), so a client that honours the header comes back when a recovered
        route can be serving, not a doubled window later."""
        if self.revives_at is None or self.next_check <= 0:
            return self.revives_at
        return min(self.revives_at, max(self.next_check, self.held_until))

    def revivable(self, now: float) -> bool:
        """Cooling, and no provider's ``Retry-After`` forbids a force-revive now."""
        return self.availability is Availability.COOLING and now >= self.held_until

    def reason(self, provider: str) -> str:
        """Why, in an operator's words (route/explain)."""
        if self.provider_disabled:
            return (
                f"provider {provider!r} is disabled after {self.code}: "
                "re-enable it (or change its credential)"
            )
        match self.availability:
            case Availability.AVAILABLE:
                return "healthy"
            case Availability.PROBE_ELIGIBLE:
                return "its cooldown is over: the call would probe it (one attempt, no retries)"
            case Availability.PROBING:
                return "another call is probing it"
            case Availability.COOLING:
                return (
                    f"cooling after {self.code or 'failures'} for {math.ceil(self.remaining_s)} s"
                )
        return f"disabled after {self.code}"

    def exhaustion_line(self) -> str | None:
        """Why an untried target did not serve, for the exhaustion message (None: it was
        not in the way: it simply was not reached)."""
        if self.provider_disabled:  # with the upstream's own (scrubbed) words when known
            return (
                f"disabled: {self.code}: {self.message}"
                if self.message
                else f"disabled: {self.code}"
            )
        match self.availability:
            case Availability.DISABLED:
                return f"disabled: {self.code}: {self.message}"
            case Availability.COOLING:
                return f"cooling for {max(1, math.ceil(self.remaining_s))} s"
            case Availability.PROBING:
                return "probing: another call is testing it"
        return None


HEALTHY = Verdict(HealthState.HEALTHY, Availability.AVAILABLE)


def judge(health: TargetHealth | None, provider: ProviderHealth | None, now: float) -> Verdict:
    """One target's verdict from its health, its provider's credential state and ``now``."""
    if provider is not None and provider.disabled:
        return Verdict(
            HealthState.DISABLED,
            Availability.DISABLED,
            code=provider.code,
            message=provider.message,
            consecutive_failures=health.consecutive_failures if health is not None else 0,
            provider_disabled=True,
        )
    if health is None:
        return HEALTHY
    avail = availability(health, now)
    revives_at: float | None = None
    if avail is Availability.COOLING:
        revives_at = health.until
    elif avail is Availability.PROBING:
        revives_at = health.probe_lease_until
    remaining = max(0.0, health.until - now) if health.state is HealthState.COOLING else 0.0
    return Verdict(
        health.state,
        avail,
        remaining_s=remaining,
        revives_at=revives_at,
        wait_s=max(0.0, revives_at - now) if revives_at is not None else 0.0,
        held_until=health.hold_until,
        code=health.last_code,
        message=health.last_message,
        consecutive_failures=health.consecutive_failures,
        revived=health.revived,
        next_check=health.next_check if avail is Availability.COOLING else 0.0,
    )


class Use(StrEnum):
    SERVE = "serve"  # healthy: send the call
    PROBE = "probe"  # cooldown over: the call is its single probe, if the lease is free
    REVIVE = "revive"  # nothing eligible: cut this cooling target's wait short


@dataclass(frozen=True, slots=True)
class Choice:
    key: str
    use: Use


def sticky_first(
    order: Sequence[str], sticky: str | None, excluded: Iterable[str] = ()
) -> list[str]:
    """Session affinity: the target that served the session last moves to the front
    (stable: nothing else moves) unless this call already excluded it. Health still
    decides: a sticky target that may not serve is skipped like any other."""
    ordered = list(order)
    if sticky is not None and sticky in ordered and sticky not in set(excluded):
        ordered.sort(key=lambda key: key != sticky)
    return ordered


def choose(
    order: Sequence[str],
    verdicts: Mapping[str, Verdict],
    now: float,
    *,
    sticky: str | None = None,
    excluded: Iterable[str] = (),
) -> list[Choice]:
    """The candidates a call walks, in order; empty means exhausted.

    ``order`` is the algorithm's, ``excluded`` the targets this call may not use (already
    failed or skipped, or known too small for a context that overflowed). The list stops
    at the first target that can SERVE; PROBE entries before it are tried first in
    algorithm order (each needs its lease). A REVIVE entry comes only when no target can
    serve: the single cooling target whose deadline comes first, and none while any target
    of the chain (excluded or not) is being probed or cools after a failed force-revive —
    its verdict, or its window, comes first; every other call gets the fast 503. Every
    call picks the same target, so the store's compare-and-set lets exactly one through."""
    out = set(excluded)
    ordered = [key for key in sticky_first(order, sticky, out) if key not in out]
    choices: list[Choice] = []
    for key in ordered:
        verdict = verdicts.get(key, HEALTHY)
        if verdict.availability is Availability.AVAILABLE:
            choices.append(Choice(key, Use.SERVE))
            return choices
        if verdict.availability is Availability.PROBE_ELIGIBLE:
            choices.append(Choice(key, Use.PROBE))
    if any(_blocks_revival(v) for v in verdicts.values()):
        return choices
    cooling = [
        (verdicts[key].revives_at or now, key)
        for key in ordered
        if key in verdicts and verdicts[key].revivable(now)
    ]
    if cooling:
        choices.append(Choice(min(cooling)[1], Use.REVIVE))
    return choices


def has_alternative(
    keys: Sequence[str], verdicts: Mapping[str, Verdict], now: float, excluded: Iterable[str]
) -> bool:
    """Another target of the chain could serve this call now (healthy, or its cooldown is
    over): while one can, in-place retries stop at ``retry.switch_after_ms`` (SPEC §16). A
    force-revive is not somewhere to go."""
    return any(c.use is not Use.REVIVE for c in choose(keys, verdicts, now, excluded=excluded))


def _blocks_revival(verdict: Verdict) -> bool:
    """A probe of the chain is out (its verdict comes first), or a force-revive already
    spent this cooling window."""
    if verdict.availability is Availability.PROBING:
        return True
    return verdict.availability is Availability.COOLING and verdict.revived


class Charge(StrEnum):
    DISABLE_PROVIDER = "disable-provider"  # the credential is broken (AUTH, QUOTA)
    FAILURE = "failure"  # counts toward the target's failure threshold
    END_PROBE = "end-probe"  # a probe answered; the request was at fault: it is alive
    NOTHING = "nothing"  # the request, not the target, failed


def charge(code: FailureCode, *, switch_codes: frozenset[FailureCode], probe: bool) -> Charge:
    """What giving up on a target for ``code`` costs its health (once per call)."""
    if code in PROVIDER_WIDE_CODES:
        return Charge.DISABLE_PROVIDER
    if code in switch_codes and code not in NOT_THE_TARGETS_FAULT:
        return Charge.FAILURE
    return Charge.END_PROBE if probe else Charge.NOTHING


def switch_reason(decided: SwitchReason | None, *, cooled: bool) -> SwitchReason:
    """The reason a fallback record gives: the planner's when it says probe or retries
    exhausted; ``threshold`` when this failure opened the target's circuit."""
    if decided in (SwitchReason.PROBE, SwitchReason.RETRY_EXHAUSTED):
        return decided
    return SwitchReason.THRESHOLD if cooled else SwitchReason.NOT_RETRYABLE
