"""The HealthStore contract, run against every store (SPEC §4: one suite for both).

Time is passed in as ``now``, or moved on the store's injected clock (``ticks``); nothing
here sleeps for a cooldown. Only Redis expires sessions on the server's clock, which no
test can move: there (and only there) a 50 ms TTL is waited out for real.
"""

from __future__ import annotations

import asyncio

import pytest

from routing.engine.failures import Failure, FailureCode
from routing.engine.health import (
    Availability,
    CircuitPolicy,
    EventKind,
    HealthState,
    availability,
)
from routing.state import HealthStore
from routing.state.redis import RedisStore
from tests.state.conftest import Ticks

KEY = "p1/model-a"
OTHER = "p2/model-b"
T0 = 1_700_000_000.0
POLICY = CircuitPolicy()  # threshold 1, base 10 s, cap 600 s
SERVER = Failure(FailureCode.SERVER, "boom", 500)
AUTH = Failure(FailureCode.AUTH, "bad key", 401)


def rate_limit(retry_after_s: float | None) -> Failure:
    return Failure(FailureCode.RATE_LIMIT, "slow down", 429, retry_after_s=retry_after_s)


async def state_of(store: HealthStore, key: str = KEY):  # type: ignore[no-untyped-def]
    return (await store.snapshot([key], [])).targets.get(key)


async def expire(store: HealthStore, ticks: Ticks, seconds: float) -> None:
    """Let ``seconds`` pass for the store's time-to-live bookkeeping."""
    ticks.advance(seconds)
    if isinstance(store, RedisStore):
        await asyncio.sleep(seconds)  # Redis's own clock expires its keys


async def cool(store: HealthStore, now: float = T0) -> float:
    """Open the circuit once; returns the cooling deadline."""
    [event] = await store.record_failure(KEY, SERVER, POLICY, now, was_probe=False)
    assert event.until is not None
    return event.until


async def test_snapshot_of_unknown_keys_is_empty(store: HealthStore) -> None:
    snap = await store.snapshot([KEY, OTHER], ["p1", "p2"])
    assert dict(snap.targets) == {}
    assert dict(snap.providers) == {}
    assert snap.inflight.get(KEY, 0) == 0
    assert KEY not in snap.latency_ms
    assert dict((await store.snapshot([], [])).targets) == {}


async def test_failure_cools_with_a_deadline(store: HealthStore) -> None:
    events = await store.record_failure(KEY, SERVER, POLICY, T0, was_probe=False)
    assert [e.kind for e in events] == [EventKind.COOLING]
    assert events[0].until == T0 + 10 and events[0].code == "SERVER"
    health = await state_of(store)
    assert health is not None
    assert health.state is HealthState.COOLING and health.until == T0 + 10
    assert availability(health, T0 + 9.99) is Availability.COOLING
    assert availability(health, T0 + 10) is Availability.PROBE_ELIGIBLE
    assert await state_of(store, OTHER) is None  # health is per target


async def test_failures_count_up_to_the_threshold(store: HealthStore) -> None:
    policy = CircuitPolicy(failure_threshold=3)
    assert await store.record_failure(KEY, SERVER, policy, T0, was_probe=False) == []
    assert await store.record_failure(KEY, SERVER, policy, T0 + 1, was_probe=False) == []
    counted = await state_of(store)
    assert counted is not None and counted.consecutive_failures == 2
    assert availability(counted, T0 + 1) is Availability.AVAILABLE
    events = await store.record_failure(KEY, SERVER, policy, T0 + 2, was_probe=False)
    assert [e.kind for e in events] == [EventKind.COOLING]
    health = await state_of(store)
    assert health is not None and health.state is HealthState.COOLING


async def test_rate_limit_cools_for_retry_after(store: HealthStore) -> None:
    [event] = await store.record_failure(KEY, rate_limit(120), POLICY, T0, was_probe=False)
    assert event.until == T0 + 120
    health = await state_of(store)
    assert health is not None and health.until == T0 + 120


async def test_a_deadline_never_moves_earlier(store: HealthStore) -> None:
    await store.record_failure(KEY, rate_limit(120), POLICY, T0, was_probe=False)
    # A straggler failing while the deadline is in force changes nothing about it.
    assert await store.record_failure(KEY, SERVER, POLICY, T0 + 5, was_probe=False) == []
    assert await store.record_failure(KEY, rate_limit(10), POLICY, T0 + 5, was_probe=False) == []
    # A force-revived probe that fails would cool for 20 s, but 120 s are still in force.
    await store.force_revive(KEY, T0 + 6)
    events = await store.record_failure(KEY, SERVER, POLICY, T0 + 7, was_probe=True)
    assert [e.kind for e in events] == [EventKind.PROBE, EventKind.COOLING]
    health = await state_of(store)
    assert health is not None and health.until == T0 + 120
    # A later 429 may push it further out.
    await store.record_failure(KEY, rate_limit(300), POLICY, T0 + 8, was_probe=False)
    health = await state_of(store)
    assert health is not None and health.until == T0 + 308


async def test_exactly_one_of_fifty_concurrent_callers_gets_the_probe(store: HealthStore) -> None:
    until = await cool(store)
    early = await asyncio.gather(*(store.try_begin_probe(KEY, until - 1, 30) for _ in range(50)))
    assert not any(early)  # still cooling: nobody probes
    won = await asyncio.gather(*(store.try_begin_probe(KEY, until + 1, 30) for _ in range(50)))
    assert sum(won) == 1
    health = await state_of(store)
    assert health is not None and health.state is HealthState.PROBING
    assert health.probe_lease_until == until + 31


async def test_an_expired_probe_lease_makes_the_target_eligible_again(store: HealthStore) -> None:
    until = await cool(store)
    assert await store.try_begin_probe(KEY, until, 30)
    assert not await store.try_begin_probe(KEY, until + 29.9, 30)  # the prober still holds it
    again = await asyncio.gather(*(store.try_begin_probe(KEY, until + 30, 30) for _ in range(20)))
    assert sum(again) == 1  # the prober died: one new prober, not twenty


async def test_a_released_probe_is_at_once_eligible_for_one_new_prober(store: HealthStore) -> None:
    until = await cool(store)
    assert await store.try_begin_probe(KEY, until + 1, 30)
    await store.release_probe(KEY, until + 2)  # the prober's client went away: no verdict
    health = await state_of(store)
    assert health is not None and availability(health, until + 2) is Availability.PROBE_ELIGIBLE
    again = await asyncio.gather(*(store.try_begin_probe(KEY, until + 2, 30) for _ in range(20)))
    assert sum(again) == 1
    await store.release_probe(OTHER, until + 2)  # nothing to release: no state appears
    assert await state_of(store, OTHER) is None


async def test_a_healthy_target_is_never_probed(store: HealthStore) -> None:
    assert not await store.try_begin_probe(KEY, T0, 30)
    assert await state_of(store) is None


async def test_success_after_a_probe_resets_everything(store: HealthStore) -> None:
    until = await cool(store)
    assert await store.try_begin_probe(KEY, until, 30)
    events = await store.record_success(KEY, until + 1, None)
    assert [(e.kind, e.ok) for e in events] == [(EventKind.PROBE, True), (EventKind.REVIVED, None)]
    assert await state_of(store) is None  # healthy, counters reset
    # Openings were reset too: the next cooldown is the base again, not doubled.
    [event] = await store.record_failure(KEY, SERVER, POLICY, until + 2, was_probe=False)
    assert event.cooldown_s == 10


async def test_a_failed_probe_cools_for_the_doubled_duration(store: HealthStore) -> None:
    until = await cool(store)
    assert await store.try_begin_probe(KEY, until, 30)
    events = await store.record_failure(KEY, SERVER, POLICY, until + 1, was_probe=True)
    assert [(e.kind, e.ok) for e in events] == [(EventKind.PROBE, False), (EventKind.COOLING, None)]
    assert events[1].until == until + 1 + 20


async def test_success_of_a_healthy_target_has_no_events(store: HealthStore) -> None:
    assert await store.record_success(KEY, T0, None) == []
    assert await state_of(store) is None


async def test_exactly_one_concurrent_force_revive_wins(store: HealthStore) -> None:
    assert await store.force_revive(KEY, T0) == []  # healthy: nothing to revive
    until = await cool(store)
    results = await asyncio.gather(*(store.force_revive(KEY, T0 + 1) for _ in range(50)))
    winners = [events for events in results if events]
    assert len(winners) == 1
    [event] = winners[0]
    assert event.kind is EventKind.FORCE_REVIVED and event.until == until
    assert await store.force_revive(KEY, T0 + 2) == []  # probing now: its lease runs
    # Once the cooldown is over there is nothing to cut short: that is try_begin_probe's job.
    await store.reset_target(KEY, T0 + 2)
    until = await cool(store, T0 + 3)
    assert await store.force_revive(KEY, until) == []


async def test_a_cooling_window_is_force_revived_once_across_callers(store: HealthStore) -> None:
    # SPEC §16: fifty callers (processes, with Redis) race to revive; one wins, its probe
    # fails, and nobody revives the target again in the window that failure opened.
    until = await cool(store)
    results = await asyncio.gather(*(store.force_revive(KEY, T0 + 4) for _ in range(50)))
    assert sum(1 for events in results if events) == 1
    await store.record_failure(KEY, SERVER, POLICY, T0 + 5, was_probe=True)
    health = await state_of(store)
    assert health is not None and health.revived and health.until > until
    again = await asyncio.gather(*(store.force_revive(KEY, T0 + 6) for _ in range(10)))
    assert again == [[]] * 10
    # the window's end lets one ordinary probe through, which clears the mark
    assert await store.try_begin_probe(KEY, health.until, 30)
    health = await state_of(store)
    assert health is not None and not health.revived


async def test_force_revive_and_reset(store: HealthStore) -> None:
    until = await cool(store)
    [event] = await store.force_revive(KEY, T0 + 1)
    assert event.kind is EventKind.FORCE_REVIVED and event.until == until
    health = await state_of(store)
    assert health is not None and health.state is HealthState.PROBING
    [reset] = await store.reset_target(KEY, T0 + 2, by="ops")
    assert reset.kind is EventKind.RESET and reset.message == "reset by ops"
    assert await state_of(store) is None
    assert [e.kind for e in await store.reset_target(KEY, T0 + 3)] == [EventKind.RESET]


async def test_disable_and_enable_provider_are_idempotent(store: HealthStore) -> None:
    events = await store.disable_provider("p1", AUTH, T0)
    assert [(e.kind, e.provider, e.code) for e in events] == [(EventKind.DISABLED, "p1", "AUTH")]
    quota = Failure(FailureCode.QUOTA, "no credit", 402)
    assert await store.disable_provider("p1", quota, T0 + 1) == []
    snap = await store.snapshot([], ["p1", "p2"])
    assert set(snap.providers) == {"p1"}
    assert snap.providers["p1"].disabled and snap.providers["p1"].code == "AUTH"
    assert snap.providers["p1"].since == T0
    [enabled] = await store.enable_provider("p1", T0 + 2, by="ops")
    assert enabled.kind is EventKind.ENABLED and enabled.code == "AUTH"
    assert await store.enable_provider("p1", T0 + 3) == []
    assert dict((await store.snapshot([], ["p1"])).providers) == {}


async def test_one_active_check_per_interval_among_many_claimers(store: HealthStore) -> None:
    await cool(store)
    assert await store.try_begin_check(KEY, T0, 10) is False  # first sighting arms it
    assert await store.try_begin_check(KEY, T0 + 5, 10) is False
    won = await asyncio.gather(*(store.try_begin_check(KEY, T0 + 10, 10) for _ in range(50)))
    assert won.count(True) == 1  # N gateways sharing the store ping once between them
    assert await store.try_begin_check(KEY, T0 + 15, 10) is False
    assert await store.try_begin_check(KEY, T0 + 20, 10) is True
    health = await state_of(store)
    assert health is not None and health.state is HealthState.COOLING  # checks change no window
    assert health.until == T0 + 10


async def test_healthy_probing_and_unknown_targets_are_never_checked(store: HealthStore) -> None:
    assert await store.try_begin_check(KEY, T0, 10) is False
    assert await state_of(store) is None  # a claim on a healthy target writes nothing
    until = await cool(store)
    assert await store.try_begin_probe(KEY, until, 30)
    assert await store.try_begin_check(KEY, until, 10) is False
    assert await store.try_begin_check(KEY, until + 20, 10) is False


async def test_force_revive_waits_for_a_retry_after_the_provider_gave(
    store: HealthStore,
) -> None:
    await store.record_failure(KEY, rate_limit(30), POLICY, T0, was_probe=False)
    assert await store.force_revive(KEY, T0 + 5) == []
    health = await state_of(store)
    assert health is not None and health.state is HealthState.COOLING
    assert availability(health, T0 + 5) is Availability.COOLING


async def test_no_active_check_before_a_retry_after_the_provider_gave(
    store: HealthStore,
) -> None:
    # A check that succeeded early would revive the target for client calls too (SPEC §4).
    await store.record_failure(KEY, rate_limit(30), POLICY, T0, was_probe=False)
    assert await store.try_begin_check(KEY, T0, 10) is False  # arms it
    for now in (T0 + 10, T0 + 20, T0 + 29.9):
        assert await store.try_begin_check(KEY, now, 10) is False
    assert await store.try_begin_check(KEY, T0 + 30, 10) is True


async def test_a_server_error_with_retry_after_holds_checks_and_force_revive(
    store: HealthStore,
) -> None:
    # A 503 "back in 60 s" cools until then, not for the circuit's 10 s: no call probes
    # it, no force-revive cuts that short and no active check pings it before the
    # provider's own deadline.
    unavailable = Failure(FailureCode.SERVER, "maintenance", 503, retry_after_s=60)
    [event] = await store.record_failure(KEY, unavailable, POLICY, T0, was_probe=False)
    assert event.until == T0 + 60
    assert availability(await state_of(store), T0 + 30) is Availability.COOLING
    assert await store.force_revive(KEY, T0 + 5) == []
    assert await store.force_revive(KEY, T0 + 59) == []
    assert await store.try_begin_check(KEY, T0 + 1, 10) is False  # arms it
    assert await store.try_begin_check(KEY, T0 + 11, 10) is False
    assert await store.try_begin_check(KEY, T0 + 59, 10) is False
    assert await store.try_begin_check(KEY, T0 + 60, 10) is True


async def test_a_straggler_with_retry_after_extends_the_hold(store: HealthStore) -> None:
    await cool(store)  # until T0 + 10, no hold
    unavailable = Failure(FailureCode.SERVER, "maintenance", 503, retry_after_s=45)
    assert await store.record_failure(KEY, unavailable, POLICY, T0 + 1, was_probe=False) == []
    assert await store.force_revive(KEY, T0 + 5) == []
    assert await store.try_begin_check(KEY, T0 + 5, 10) is False  # arms it
    assert await store.try_begin_check(KEY, T0 + 45.9, 10) is False
    assert await store.try_begin_check(KEY, T0 + 46, 10) is True


async def test_forbidden_disables_the_target_only(store: HealthStore) -> None:
    forbidden = Failure(FailureCode.FORBIDDEN, "not this model", 403)
    events = await store.record_failure(KEY, forbidden, POLICY, T0, was_probe=False)
    assert [(e.kind, e.target) for e in events] == [(EventKind.DISABLED, KEY)]
    snap = await store.snapshot([KEY, OTHER], ["p1"])
    assert snap.targets[KEY].state is HealthState.DISABLED
    assert availability(snap.targets[KEY], T0 + 10**6) is Availability.DISABLED
    assert dict(snap.providers) == {}
    assert await store.record_failure(KEY, forbidden, POLICY, T0 + 1, was_probe=False) == []
    await store.reset_target(KEY, T0 + 2)
    assert await state_of(store) is None


async def test_tickets_are_unique_and_increasing(store: HealthStore) -> None:
    sequential = [await store.next_ticket("auto") for _ in range(3)]
    assert sequential == [0, 1, 2]
    concurrent = await asyncio.gather(*(store.next_ticket("auto") for _ in range(200)))
    assert sorted(concurrent) == list(range(3, 203))  # no duplicates, no gaps
    assert await store.next_ticket("other") == 0  # one counter per group
    assert await store.next_ticket("auto") == 203


async def test_inflight_counts_never_go_negative(store: HealthStore) -> None:
    await store.inflight_add(KEY, -1)
    assert (await store.snapshot([KEY], [])).inflight.get(KEY, 0) == 0
    await asyncio.gather(*(store.inflight_add(KEY, 1) for _ in range(50)))
    await store.inflight_add(OTHER, 2)
    snap = await store.snapshot([KEY, OTHER], [])
    assert snap.inflight.get(KEY) == 50 and snap.inflight.get(OTHER) == 2
    await asyncio.gather(*(store.inflight_add(KEY, -1) for _ in range(60)))
    assert (await store.snapshot([KEY], [])).inflight.get(KEY, 0) == 0
    await store.inflight_add(KEY, 1)
    assert (await store.snapshot([KEY], [])).inflight.get(KEY) == 1


async def test_latency_is_a_moving_average(store: HealthStore) -> None:
    await store.record_success(KEY, T0, 100.0)
    assert (await store.snapshot([KEY], [])).latency_ms[KEY] == pytest.approx(100.0)
    await store.record_success(KEY, T0, 200.0)
    assert (await store.snapshot([KEY], [])).latency_ms[KEY] == pytest.approx(120.0)  # alpha 0.2
    await store.record_success(KEY, T0, None)  # no sample: unchanged
    snap = await store.snapshot([KEY, OTHER], [])
    assert snap.latency_ms[KEY] == pytest.approx(120.0)
    assert OTHER not in snap.latency_ms


async def test_affinity_set_get_and_expiry(store: HealthStore, ticks: Ticks) -> None:
    assert await store.affinity_get("s1") is None
    await store.affinity_set("s1", KEY, 60)
    await store.affinity_set("s2", OTHER, 0.05)
    assert await store.affinity_get("s1") == KEY
    assert await store.affinity_get("s2") == OTHER
    await store.affinity_set("s1", OTHER, 60)  # the session moved
    assert await store.affinity_get("s1") == OTHER
    await expire(store, ticks, 0.15)
    assert await store.affinity_get("s2") is None
    assert await store.affinity_get("s1") == OTHER


async def test_clear_forgets_everything(store: HealthStore) -> None:
    await cool(store)
    await store.disable_provider("p2", AUTH, T0)
    await store.next_ticket("auto")
    await store.inflight_add(KEY, 3)
    await store.record_success(OTHER, T0, 50.0)
    await store.affinity_set("s1", KEY, 60)
    await store.clear()
    snap = await store.snapshot([KEY, OTHER], ["p2"])
    assert (dict(snap.targets), dict(snap.providers)) == ({}, {})
    assert snap.inflight.get(KEY, 0) == 0 and dict(snap.latency_ms) == {}
    assert await store.affinity_get("s1") is None
    assert await store.next_ticket("auto") == 0


async def test_describe_reports_a_healthy_store(store: HealthStore) -> None:
    info = await store.describe()
    assert info["store"] == store.name and info["degraded"] is False


async def test_provenance_is_remembered_by_scope_bounded_and_by_response_id(
    store: HealthStore, ticks: Ticks
) -> None:
    assert await store.provenance_targets("s1") == frozenset()
    assert await store.provenance_lookup("s1", ["fp1"]) == {}
    await store.provenance_record("s1", "fp1", KEY, response_id="resp-1", ttl_s=60, limit=2)
    await store.provenance_record("s1", "fp2", OTHER, response_id=None, ttl_s=60, limit=2)
    await store.provenance_record("s2", "fp9", OTHER, response_id=None, ttl_s=60, limit=2)
    assert await store.provenance_targets("s1") == frozenset({KEY, OTHER})
    assert await store.provenance_lookup("s1", ["fp1", "fp2", "fp9"]) == {"fp1": KEY, "fp2": OTHER}
    assert await store.provenance_lookup("s2", ["fp1", "fp9"]) == {"fp9": OTHER}  # scoped
    assert await store.provenance_by_response("resp-1") == KEY
    assert await store.provenance_by_response("resp-2") is None
    await store.provenance_record("s1", "fp3", KEY, response_id=None, ttl_s=60, limit=2)
    assert await store.provenance_lookup("s1", ["fp1", "fp2", "fp3"]) == {"fp2": OTHER, "fp3": KEY}
    await store.provenance_record("s3", "fp1", KEY, response_id=None, ttl_s=0.05, limit=2)
    await expire(store, ticks, 0.15)
    assert await store.provenance_lookup("s3", ["fp1"]) == {}
    assert await store.provenance_targets("s3") == frozenset()


async def test_peek_ticket_reads_the_cursor_without_moving_it(store: HealthStore) -> None:
    assert await store.peek_ticket("g") == 0
    assert await store.next_ticket("g") == 0
    assert await store.peek_ticket("g") == 1
    assert await store.peek_ticket("g") == 1
