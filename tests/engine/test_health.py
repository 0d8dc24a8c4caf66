"""The health state machine, one transition per row; time is moved by hand."""

from __future__ import annotations

import json

import pytest

from routing.engine.failures import Failure, FailureCode
from routing.engine.health import (
    Availability,
    CircuitPolicy,
    EventKind,
    HealthEvent,
    HealthState,
    HealthTransitionError,
    ProviderHealth,
    TargetHealth,
    availability,
    begin_probe,
    cooling_duration_s,
    disable_provider,
    enable_provider,
    force_revive,
    record_failure,
    record_success,
    reset,
)
from routing.engine.targets import target_key

F = FailureCode
S = HealthState
A = Availability
E = EventKind
KEY = "primary/model-a"
T0 = 1_000_000.0
POLICY = CircuitPolicy()  # threshold 1, base 10 s, cap 600 s
SERVER = Failure(F.SERVER, "boom", 500)


def kinds(events: list[HealthEvent]) -> list[EventKind]:
    return [e.kind for e in events]


def cooling(
    until: float, openings: int = 1, consecutive_failures: int = 0, last_code: str | None = None
) -> TargetHealth:
    return TargetHealth(
        state=S.COOLING,
        openings=openings,
        until=until,
        consecutive_failures=consecutive_failures,
        last_code=last_code,
    )


@pytest.mark.parametrize(
    ("health", "now", "expected"),
    [
        (TargetHealth(), T0, A.AVAILABLE),
        (TargetHealth(consecutive_failures=2), T0, A.AVAILABLE),
        (cooling(T0 + 10), T0, A.COOLING),
        (cooling(T0 + 10), T0 + 9.999, A.COOLING),
        (cooling(T0 + 10), T0 + 10, A.PROBE_ELIGIBLE),
        (cooling(T0 + 10), T0 + 500, A.PROBE_ELIGIBLE),
        (TargetHealth(state=S.PROBING, probe_lease_until=T0 + 30), T0 + 29, A.PROBING),
        (TargetHealth(state=S.PROBING, probe_lease_until=T0 + 30), T0 + 30, A.PROBE_ELIGIBLE),
        (TargetHealth(state=S.DISABLED), T0, A.DISABLED),
    ],
)
def test_availability(health: TargetHealth, now: float, expected: Availability) -> None:
    assert availability(health, now) is expected


@pytest.mark.parametrize(
    ("openings", "seconds"),
    [(0, 10.0), (1, 10.0), (2, 20.0), (3, 40.0), (6, 320.0), (7, 600.0), (10_000, 600.0)],
)
def test_cooling_duration(openings: int, seconds: float) -> None:
    assert cooling_duration_s(POLICY, openings) == seconds


# id, start, failure, policy, was_probe, expected (state, consecutive, openings, until - T0),
# expected event kinds
FAILURES = [
    (
        "threshold-1-cools",
        TargetHealth(),
        SERVER,
        POLICY,
        False,
        (S.COOLING, 1, 1, 10.0),
        [E.COOLING],
    ),
    (
        "threshold-3-first",
        TargetHealth(),
        SERVER,
        CircuitPolicy(failure_threshold=3),
        False,
        (S.HEALTHY, 1, 0, 0.0),
        [],
    ),
    (
        "threshold-3-second",
        TargetHealth(consecutive_failures=1),
        SERVER,
        CircuitPolicy(failure_threshold=3),
        False,
        (S.HEALTHY, 2, 0, 0.0),
        [],
    ),
    (
        "threshold-3-third-cools",
        TargetHealth(consecutive_failures=2),
        SERVER,
        CircuitPolicy(failure_threshold=3),
        False,
        (S.COOLING, 3, 1, 10.0),
        [E.COOLING],
    ),
    (
        "429-cools-at-once-for-retry-after",
        TargetHealth(),
        Failure(F.RATE_LIMIT, "slow", 429, 42.0),
        CircuitPolicy(failure_threshold=3),
        False,
        (S.COOLING, 1, 1, 42.0),
        [E.COOLING],
    ),
    (
        "429-retry-after-not-capped",
        TargetHealth(),
        Failure(F.RATE_LIMIT, "slow", 429, 3600.0),
        POLICY,
        False,
        (S.COOLING, 1, 1, 3600.0),
        [E.COOLING],
    ),
    (
        "429-without-retry-after-doubles",
        cooling(T0 - 1, openings=2),
        Failure(F.RATE_LIMIT, "slow", 429),
        CircuitPolicy(failure_threshold=3),
        False,
        (S.COOLING, 1, 3, 40.0),
        [E.COOLING],
    ),
    (
        "reopening-after-expiry-doubles",
        cooling(T0 - 1, openings=1, consecutive_failures=1),
        SERVER,
        POLICY,
        False,
        (S.COOLING, 2, 2, 20.0),
        [E.COOLING],
    ),
    (
        "failed-probe-doubles",
        TargetHealth(
            state=S.PROBING,
            openings=1,
            until=T0 - 5,
            probe_lease_until=T0 + 25,
            consecutive_failures=1,
        ),
        SERVER,
        POLICY,
        True,
        (S.COOLING, 2, 2, 20.0),
        [E.PROBE, E.COOLING],
    ),
    (
        "failed-probe-capped",
        TargetHealth(state=S.PROBING, openings=9),
        SERVER,
        POLICY,
        True,
        (S.COOLING, 1, 10, 600.0),
        [E.PROBE, E.COOLING],
    ),
    (
        "failed-probe-ignores-threshold",
        TargetHealth(state=S.PROBING, openings=1),
        SERVER,
        CircuitPolicy(failure_threshold=5),
        True,
        (S.COOLING, 1, 2, 20.0),
        [E.PROBE, E.COOLING],
    ),
    (
        "probe-429-longer-retry-after-wins",
        TargetHealth(state=S.PROBING, openings=1),
        Failure(F.RATE_LIMIT, "slow", 429, 90.0),
        POLICY,
        True,
        (S.COOLING, 1, 2, 90.0),
        [E.PROBE, E.COOLING],
    ),
    (
        "probe-429-shorter-retry-after-loses",
        TargetHealth(state=S.PROBING, openings=1),
        Failure(F.RATE_LIMIT, "slow", 429, 1.0),
        POLICY,
        True,
        (S.COOLING, 1, 2, 20.0),
        [E.PROBE, E.COOLING],
    ),
    # A new deadline never moves an existing one earlier.
    (
        "deadline-kept-against-short-429",
        cooling(T0 + 100, openings=1),
        Failure(F.RATE_LIMIT, "slow", 429, 5.0),
        POLICY,
        False,
        (S.COOLING, 1, 1, 100.0),
        [],
    ),
    (
        "deadline-extended-by-long-429",
        cooling(T0 + 100, openings=1),
        Failure(F.RATE_LIMIT, "slow", 429, 200.0),
        POLICY,
        False,
        (S.COOLING, 1, 1, 200.0),
        [E.COOLING],
    ),
    (
        "straggler-is-not-a-new-opening",
        cooling(T0 + 100, openings=1),
        SERVER,
        POLICY,
        False,
        (S.COOLING, 1, 1, 100.0),
        [],
    ),
    (
        "failed-forced-probe-keeps-old-deadline",
        TargetHealth(state=S.PROBING, openings=1, until=T0 + 500, probe_lease_until=T0 + 30),
        SERVER,
        POLICY,
        True,
        (S.COOLING, 1, 2, 500.0),
        [E.PROBE, E.COOLING],
    ),
    (
        "credential-codes-just-count",
        TargetHealth(),
        Failure(F.AUTH, "bad key", 401),
        CircuitPolicy(failure_threshold=2),
        False,
        (S.HEALTHY, 1, 0, 0.0),
        [],
    ),
]


@pytest.mark.parametrize(
    ("start", "failure", "policy", "was_probe", "expected", "event_kinds"),
    [row[1:] for row in FAILURES],
    ids=[row[0] for row in FAILURES],
)
def test_record_failure(
    start: TargetHealth,
    failure: Failure,
    policy: CircuitPolicy,
    was_probe: bool,
    expected: tuple[HealthState, int, int, float],
    event_kinds: list[EventKind],
) -> None:
    new, events = record_failure(start, KEY, failure, policy, T0, was_probe=was_probe)
    state, consecutive, openings, until = expected
    assert (new.state, new.consecutive_failures, new.openings) == (state, consecutive, openings)
    assert max(new.until - T0, 0.0) == pytest.approx(until)
    assert new.last_code == failure.code.value
    assert new.last_message == failure.message
    assert kinds(events) == event_kinds
    for event in events:
        assert (event.target, event.provider, event.at) == (KEY, "primary", T0)
        assert event.code == failure.code.value
    if was_probe:
        assert events[0].ok is False
    if events and events[-1].kind is E.COOLING:
        assert events[-1].until == new.until
        assert events[-1].cooldown_s == pytest.approx(new.until - T0)


@pytest.mark.parametrize(
    ("start", "event_kinds"),
    [
        (TargetHealth(), []),
        (TargetHealth(consecutive_failures=2, last_code="SERVER"), []),
        (cooling(T0 + 50, openings=3), [E.REVIVED]),
        (
            TargetHealth(state=S.PROBING, openings=2, probe_lease_until=T0 + 30),
            [E.PROBE, E.REVIVED],
        ),
        (TargetHealth(state=S.DISABLED), [E.REVIVED]),
    ],
)
def test_record_success_resets_everything(
    start: TargetHealth, event_kinds: list[EventKind]
) -> None:
    new, events = record_success(start, KEY, T0)
    assert new == TargetHealth()
    assert kinds(events) == event_kinds
    assert [e.ok for e in events if e.kind is E.PROBE] in ([], [True])


def test_threshold_counts_consecutive_failures_only() -> None:
    policy = CircuitPolicy(failure_threshold=3)
    h = TargetHealth()
    h, _ = record_failure(h, KEY, SERVER, policy, T0)
    h, _ = record_failure(h, KEY, SERVER, policy, T0 + 1)
    h, _ = record_success(h, KEY, T0 + 2)
    h, _ = record_failure(h, KEY, SERVER, policy, T0 + 3)
    h, events = record_failure(h, KEY, SERVER, policy, T0 + 4)
    assert (h.state, h.consecutive_failures, events) == (S.HEALTHY, 2, [])
    h, events = record_failure(h, KEY, SERVER, policy, T0 + 5)
    assert h.state is S.COOLING and kinds(events) == [E.COOLING]


def test_cycle_cool_probe_fail_doubles_then_success_resets_openings() -> None:
    h, _ = record_failure(TargetHealth(), KEY, SERVER, POLICY, T0)
    assert h.until == T0 + 10
    now = T0
    for expected in (20.0, 40.0, 80.0):
        now = h.until
        assert availability(h, now) is A.PROBE_ELIGIBLE
        h = begin_probe(h, now, lease_s=30)
        assert availability(h, now + 1) is A.PROBING  # others keep skipping it
        h, events = record_failure(h, KEY, SERVER, POLICY, now + 1, was_probe=True)
        assert h.until - (now + 1) == expected
        assert kinds(events) == [E.PROBE, E.COOLING]
    now = h.until
    h = begin_probe(h, now, lease_s=30)
    h, events = record_success(h, KEY, now + 1)
    assert h == TargetHealth() and kinds(events) == [E.PROBE, E.REVIVED]
    h, _ = record_failure(h, KEY, SERVER, POLICY, now + 2)
    assert h.openings == 1 and h.until == now + 2 + 10  # back to the base duration


def test_lease_expiry_makes_stuck_probe_eligible_again() -> None:
    h = begin_probe(cooling(T0), T0, lease_s=30)
    assert h.state is S.PROBING and h.probe_lease_until == T0 + 30
    with pytest.raises(HealthTransitionError):
        begin_probe(h, T0 + 29, lease_s=30)  # one probe in flight
    again = begin_probe(h, T0 + 30, lease_s=30)  # the prober died; someone else may probe
    assert again.probe_lease_until == T0 + 60


@pytest.mark.parametrize(
    "health",
    [TargetHealth(), cooling(T0 + 1), TargetHealth(state=S.DISABLED)],
)
def test_begin_probe_requires_probe_eligible(health: TargetHealth) -> None:
    with pytest.raises(HealthTransitionError):
        begin_probe(health, T0, lease_s=30)


def test_force_revive_cooling_target() -> None:
    h = cooling(T0 + 300, openings=2, last_code="RATE_LIMIT")
    new, events = force_revive(h, KEY, T0)
    assert (new.state, new.probe_lease_until, new.openings) == (S.PROBING, T0 + 30, 2)
    assert availability(new, T0 + 1) is A.PROBING
    assert kinds(events) == [E.FORCE_REVIVED]
    assert (events[0].target, events[0].until, events[0].code) == (KEY, T0 + 300, "RATE_LIMIT")


def test_a_cooling_window_is_force_revived_at_most_once() -> None:
    revived, _ = force_revive(cooling(T0 + 10), KEY, T0 + 4)
    assert revived.revived
    # the revived probe fails: a new, doubled window, opened by a spent revive
    spent, _ = record_failure(revived, KEY, SERVER, POLICY, T0 + 5, was_probe=True)
    assert (spent.state, spent.until, spent.revived) == (S.COOLING, T0 + 25, True)
    assert force_revive(spent, KEY, T0 + 6) == (spent, [])
    # an ordinary probe at the window's end clears the mark; its failure opens a plain window
    probing = begin_probe(spent, T0 + 25, lease_s=30)
    assert not probing.revived
    plain, _ = record_failure(probing, KEY, SERVER, POLICY, T0 + 26, was_probe=True)
    assert not plain.revived
    assert kinds(force_revive(plain, KEY, T0 + 27)[1]) == [E.FORCE_REVIVED]
    # a client call's own failure never marks a window as revived
    assert not record_failure(TargetHealth(), KEY, SERVER, POLICY, T0)[0].revived
    # and the mark survives a trip through a store's JSON
    assert TargetHealth.from_dict(json.loads(json.dumps(spent.to_dict()))) == spent


@pytest.mark.parametrize(
    "health",
    [TargetHealth(), TargetHealth(state=S.PROBING, probe_lease_until=T0 + 30)],
)
def test_force_revive_rejects_non_cooling(health: TargetHealth) -> None:
    with pytest.raises(HealthTransitionError):
        force_revive(health, KEY, T0)


@pytest.mark.parametrize(
    ("start", "by", "message"),
    [(cooling(T0 + 100, openings=4), "alice", "reset by alice"), (TargetHealth(), "", "reset")],
)
def test_reset(start: TargetHealth, by: str, message: str) -> None:
    new, events = reset(start, KEY, T0, by=by)
    assert new == TargetHealth()
    assert kinds(events) == [E.RESET]
    assert events[0].message == message


def test_disable_provider_is_idempotent_and_enable_reverses_it() -> None:
    p = ProviderHealth()
    p, events = disable_provider(p, "primary", Failure(F.AUTH, "bad key", 401), T0)
    assert p == ProviderHealth(disabled=True, code="AUTH", since=T0, message="bad key")
    assert kinds(events) == [E.DISABLED]
    assert (events[0].target, events[0].provider, events[0].code) == (None, "primary", "AUTH")
    again, events = disable_provider(p, "primary", Failure(F.QUOTA, "broke", 402), T0 + 5)
    assert again == p and events == []
    enabled, events = enable_provider(p, "primary", T0 + 9, by="bob")
    assert enabled == ProviderHealth()
    assert kinds(events) == [E.ENABLED] and events[0].message == "enabled by bob"
    assert enable_provider(enabled, "primary", T0 + 10) == (enabled, [])


@pytest.mark.parametrize(
    "health",
    [
        TargetHealth(),
        TargetHealth(
            state=S.PROBING,
            consecutive_failures=3,
            openings=2,
            until=T0 + 0.5,
            probe_lease_until=T0 + 30,
            last_code="SERVER",
            last_message="boom",
        ),
    ],
)
def test_target_health_round_trips_through_json(health: TargetHealth) -> None:
    assert TargetHealth.from_dict(json.loads(json.dumps(health.to_dict()))) == health


def test_from_dict_tolerates_missing_and_unknown_keys() -> None:
    assert TargetHealth.from_dict({"state": "cooling", "until": 5, "future": 1}) == TargetHealth(
        state=S.COOLING, until=5.0
    )
    p = ProviderHealth(disabled=True, code="QUOTA", since=T0)
    assert ProviderHealth.from_dict(json.loads(json.dumps(p.to_dict()))) == p
    assert ProviderHealth.from_dict({}) == ProviderHealth()


def test_event_to_dict_is_json_safe() -> None:
    _, events = record_failure(TargetHealth(), KEY, SERVER, POLICY, T0)
    data = json.loads(json.dumps(events[0].to_dict()))
    assert data["kind"] == "cooling" and data["until"] == T0 + 10


def test_target_key_and_provider_of_slashed_model() -> None:
    key = target_key("openrouter", "meta-llama/llama-3-70b")
    assert key == "openrouter/meta-llama/llama-3-70b"
    _, events = record_failure(TargetHealth(), key, SERVER, POLICY, T0)
    assert events[0].provider == "openrouter"


def test_release_probe_hands_the_slot_back_without_a_verdict() -> None:
    from routing.engine.health import begin_probe, release_probe

    cooling = TargetHealth(state=HealthState.COOLING, openings=2, until=100.0)
    probing = begin_probe(cooling, 101.0, lease_s=30)
    released = release_probe(probing, 105.0)
    assert availability(released, 105.0) is Availability.PROBE_ELIGIBLE
    assert released.openings == 2  # nothing counted: the next probe decides
    assert release_probe(TargetHealth(), 105.0) == TargetHealth()  # healthy: untouched
    assert release_probe(cooling, 50.0) == cooling  # not probing: untouched
