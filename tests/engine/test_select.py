"""The engine's selection rules as tables: judge → verdict, choose → the walk, charge."""

from __future__ import annotations

import pytest

from routing.engine.failures import DEFAULT_SWITCH_CODES, FailureCode
from routing.engine.health import Availability, HealthState, ProviderHealth, TargetHealth
from routing.engine.plan import SwitchReason
from routing.engine.select import (
    Charge,
    Choice,
    Use,
    Verdict,
    charge,
    choose,
    judge,
    sticky_first,
    switch_reason,
)

NOW = 1_000.0
COOLING = TargetHealth(state=HealthState.COOLING, until=NOW + 30, last_code="SERVER")
COOLED_OFF = TargetHealth(state=HealthState.COOLING, until=NOW - 1, last_code="SERVER")
PROBING = TargetHealth(state=HealthState.PROBING, until=NOW - 5, probe_lease_until=NOW + 7)
LEASE_LAPSED = TargetHealth(state=HealthState.PROBING, until=NOW - 5, probe_lease_until=NOW - 1)
FORBIDDEN = TargetHealth(state=HealthState.DISABLED, last_code="FORBIDDEN", last_message="no")
HELD = TargetHealth(state=HealthState.COOLING, until=NOW + 5, hold_until=NOW + 60)
SOON = TargetHealth(state=HealthState.COOLING, until=NOW + 3)
# cooling again after a failed force-revive: that window's one revive is spent
SPENT = TargetHealth(state=HealthState.COOLING, until=NOW + 40, revived=True)
OFF = ProviderHealth(disabled=True, code="AUTH", since=NOW - 100)


@pytest.mark.parametrize(
    ("health", "provider", "state", "availability", "eligible", "revives_at", "remaining"),
    [
        (None, None, HealthState.HEALTHY, Availability.AVAILABLE, True, None, 0.0),
        (TargetHealth(), None, HealthState.HEALTHY, Availability.AVAILABLE, True, None, 0.0),
        (COOLING, None, HealthState.COOLING, Availability.COOLING, False, NOW + 30, 30.0),
        (COOLED_OFF, None, HealthState.COOLING, Availability.PROBE_ELIGIBLE, True, None, 0.0),
        (PROBING, None, HealthState.PROBING, Availability.PROBING, False, NOW + 7, 0.0),
        (LEASE_LAPSED, None, HealthState.PROBING, Availability.PROBE_ELIGIBLE, True, None, 0.0),
        (FORBIDDEN, None, HealthState.DISABLED, Availability.DISABLED, False, None, 0.0),
        # A disabled provider overrides whatever its target's own state says.
        (None, OFF, HealthState.DISABLED, Availability.DISABLED, False, None, 0.0),
        (COOLING, OFF, HealthState.DISABLED, Availability.DISABLED, False, None, 0.0),
    ],
)
def test_judge(
    health: TargetHealth | None,
    provider: ProviderHealth | None,
    state: HealthState,
    availability: Availability,
    eligible: bool,
    revives_at: float | None,
    remaining: float,
) -> None:
    verdict = judge(health, provider, NOW)
    assert (verdict.state, verdict.availability, verdict.eligible) == (
        state,
        availability,
        eligible,
    )
    assert (verdict.revives_at, verdict.remaining_s) == (revives_at, remaining)


def test_a_disabled_provider_says_its_code_everywhere() -> None:
    verdict = judge(COOLING, OFF, NOW)
    assert verdict.code == "AUTH" and verdict.provider_disabled
    assert verdict.exhaustion_line() == "disabled: AUTH"
    assert "provider 'p' is disabled after AUTH" in verdict.reason("p")


@pytest.mark.parametrize(
    ("health", "line", "reason"),
    [
        (None, None, "healthy"),
        (COOLING, "cooling for 30 s", "cooling after SERVER for 30 s"),
        (PROBING, "probing: another call is testing it", "another call is probing it"),
        (FORBIDDEN, "disabled: FORBIDDEN: no", "disabled after FORBIDDEN"),
        (
            COOLED_OFF,
            None,
            "its cooldown is over: the call would probe it (one attempt, no retries)",
        ),
    ],
)
def test_what_a_verdict_says(health: TargetHealth | None, line: str | None, reason: str) -> None:
    verdict = judge(health, None, NOW)
    assert verdict.exhaustion_line() == line
    assert verdict.reason("p") == reason


def verdicts(**states: TargetHealth | None) -> dict[str, Verdict]:
    return {key: judge(health, None, NOW) for key, health in states.items()}


@pytest.mark.parametrize(
    ("states", "sticky", "excluded", "walk"),
    [
        # the first healthy target in algorithm order serves; nothing after it is listed
        ({"a": None, "b": None}, None, (), [("a", Use.SERVE)]),
        ({"a": COOLING, "b": None}, None, (), [("b", Use.SERVE)]),
        # probe-eligible targets before it are tried first, each needing its lease
        (
            {"a": COOLED_OFF, "b": LEASE_LAPSED, "c": None},
            None,
            (),
            [("a", Use.PROBE), ("b", Use.PROBE), ("c", Use.SERVE)],
        ),
        # nothing eligible: revive only the cooling target whose deadline comes first
        ({"a": COOLING, "b": SOON}, None, (), [("b", Use.REVIVE)]),
        ({"a": COOLING, "b": SOON, "c": COOLING}, None, (), [("b", Use.REVIVE)]),
        # ... once per cooling window: a failed revive's window blocks the whole chain,
        # even when the call already excluded that target (it just failed there)
        ({"a": SPENT, "b": SOON}, None, (), []),
        ({"a": SPENT, "b": SOON}, None, ("a",), []),
        # ... and not while a probe of the chain is out: its verdict comes first
        ({"a": PROBING, "b": SOON}, None, (), []),
        # a provider's Retry-After is never cut short, and probing/disabled are not revived
        ({"a": HELD, "b": PROBING, "c": FORBIDDEN}, None, (), []),
        # a probe that cannot get its lease falls through to the revive list
        ({"a": COOLED_OFF, "b": COOLING}, None, (), [("a", Use.PROBE), ("b", Use.REVIVE)]),
        # affinity moves the sticky target first, but never past health
        ({"a": None, "b": None}, "b", (), [("b", Use.SERVE)]),
        ({"a": None, "b": COOLING}, "b", (), [("a", Use.SERVE)]),
        # what the call excluded (failed, skipped, too small) is never chosen
        ({"a": None, "b": None}, "a", ("a",), [("b", Use.SERVE)]),
        ({"a": COOLING, "b": None}, None, ("b",), [("a", Use.REVIVE)]),
        ({"a": None}, None, ("a",), []),
    ],
)
def test_choose(
    states: dict[str, TargetHealth | None],
    sticky: str | None,
    excluded: tuple[str, ...],
    walk: list[tuple[str, Use]],
) -> None:
    chosen = choose(list(states), verdicts(**states), NOW, sticky=sticky, excluded=excluded)
    assert chosen == [Choice(key, use) for key, use in walk]


def test_sticky_first_is_stable() -> None:
    assert sticky_first(["a", "b", "c", "d"], "c") == ["c", "a", "b", "d"]
    assert sticky_first(["a", "b"], "z") == ["a", "b"]
    assert sticky_first(["a", "b"], "b", excluded=["b"]) == ["a", "b"]


SWITCH = frozenset(DEFAULT_SWITCH_CODES)


@pytest.mark.parametrize(
    ("code", "probe", "expected"),
    [
        (FailureCode.AUTH, False, Charge.DISABLE_PROVIDER),
        (FailureCode.QUOTA, True, Charge.DISABLE_PROVIDER),
        (FailureCode.SERVER, False, Charge.FAILURE),
        (FailureCode.FORBIDDEN, False, Charge.FAILURE),  # the store disables that target
        (FailureCode.RATE_LIMIT, True, Charge.FAILURE),
        (FailureCode.CONTEXT_WINDOW_EXCEEDED, False, Charge.NOTHING),
        (FailureCode.CONTEXT_WINDOW_EXCEEDED, True, Charge.END_PROBE),
        (FailureCode.BAD_REQUEST, True, Charge.END_PROBE),
        (FailureCode.BAD_REQUEST, False, Charge.NOTHING),
        (FailureCode.ABORTED, False, Charge.NOTHING),
    ],
)
def test_charge(code: FailureCode, probe: bool, expected: Charge) -> None:
    assert charge(code, switch_codes=SWITCH, probe=probe) is expected


def test_a_code_the_group_does_not_switch_on_costs_nothing() -> None:
    assert charge(FailureCode.SERVER, switch_codes=frozenset(), probe=False) is Charge.NOTHING


@pytest.mark.parametrize(
    ("decided", "cooled", "expected"),
    [
        (SwitchReason.PROBE, True, SwitchReason.PROBE),
        (SwitchReason.RETRY_EXHAUSTED, True, SwitchReason.RETRY_EXHAUSTED),
        (SwitchReason.NOT_RETRYABLE, True, SwitchReason.THRESHOLD),
        (SwitchReason.NOT_RETRYABLE, False, SwitchReason.NOT_RETRYABLE),
        (None, False, SwitchReason.NOT_RETRYABLE),
    ],
)
def test_switch_reason(decided: SwitchReason | None, cooled: bool, expected: SwitchReason) -> None:
    assert switch_reason(decided, cooled=cooled) is expected
