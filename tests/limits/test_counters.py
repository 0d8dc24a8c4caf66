"""The counter stores hold to one contract (in process and Redis), and a Redis that goes
away means per-process limits, never none (SPEC §17). Pure rules and windows too."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import pytest

from routing.limits import windows
from routing.limits.counters import Counters, LocalCounters
from routing.limits.redis_counters import RedisCounters
from routing.limits.rules import LimitCode, Plan, Refusal, plan_for
from routing.limits.spec import GroupLimits, LimitSet, Price, SessionCaps, cost_of
from routing.state.redis import RedisStore
from tests.state.servers import RedisServer, free_port, unique_prefix

NOW = 1_796_405_430.0  # 2026-12-04 17:30:30 UTC


@pytest.fixture(scope="module")
def redis_server() -> RedisServer:  # type: ignore[misc]
    server = RedisServer(port=free_port())
    server.start()
    yield server
    server.kill()


@pytest.fixture(params=["memory", "redis"])
async def counters(
    request: pytest.FixtureRequest, redis_server: RedisServer
) -> AsyncIterator[Counters]:
    if request.param == "memory":
        yield LocalCounters()
        return
    store = RedisStore(redis_server.url, prefix=unique_prefix())
    yield RedisCounters(store)
    await store.aclose()


def group_plan(limits: LimitSet, now: float = NOW, **more: object) -> Plan:
    plan = plan_for(
        key_id=None,
        key_name="",
        key_limits=None,
        group="g",
        group_limits=GroupLimits(limits, **more),  # type: ignore[arg-type]
        session=None,
        digest="",
        now=now,
    )
    assert plan is not None
    return plan


async def test_rpm_is_exact_and_frees_with_the_next_minute(counters: Counters) -> None:
    plan = group_plan(LimitSet(rpm=2))
    assert await counters.take(plan, NOW) is None
    assert await counters.take(plan, NOW) is None
    refused = await counters.take(plan, NOW)
    assert refused is not None and refused.code is LimitCode.RPM
    assert Refusal.of(refused).retry_after_s(NOW) == 30
    later = group_plan(LimitSet(rpm=2), NOW + 30)
    assert await counters.take(later, NOW + 30) is None


async def test_a_refused_plan_takes_nothing(counters: Counters) -> None:
    full = group_plan(LimitSet(rpm=5, concurrency=1))
    assert await counters.take(full, NOW) is None
    assert (await counters.take(full, NOW)).code is LimitCode.CONCURRENCY  # type: ignore[union-attr]
    rpm = [r.counter for r in full.rules if r.name == "rpm"]
    assert await counters.read(rpm, NOW) == [1.0]  # the refused call took no rpm
    await counters.settle(full, 0, None, NOW)  # the first call ends: its slot frees
    assert await counters.take(full, NOW) is None


async def test_budgets_are_charged_at_the_end_and_overshoot_by_one_call(counters: Counters) -> None:
    plan = group_plan(LimitSet(tokens_per_day=100, cost_per_month=1.0))
    assert await counters.take(plan, NOW) is None
    assert await counters.take(plan, NOW) is None  # both in flight: neither charged yet
    await counters.settle(plan, 80, 0.25, NOW)
    await counters.settle(plan, 80, 0.25, NOW)  # 160 > 100: the overshoot of one call
    refused = await counters.take(plan, NOW)
    assert refused is not None and refused.name == "tokens_per_day"
    assert Refusal.of(refused).code is LimitCode.BUDGET
    values = await counters.read([c.counter for c in plan.charges], NOW)
    assert values == [160.0, 0.5]


async def test_the_loop_guard_counts_the_same_body_in_a_row(counters: Counters) -> None:
    def plan(digest: str) -> Plan:
        made = plan_for(
            key_id=None,
            key_name="",
            key_limits=None,
            group="g",
            group_limits=GroupLimits(loop_guard=2, session=SessionCaps(calls=100)),
            session="s",
            digest=digest,
            now=NOW,
        )
        assert made is not None
        return made

    assert await counters.take(plan("x"), NOW) is None
    assert await counters.take(plan("x"), NOW) is None
    assert (await counters.take(plan("x"), NOW)).code is LimitCode.LOOP  # type: ignore[union-attr]
    assert await counters.take(plan("y"), NOW) is None
    assert await counters.take(plan("x"), NOW) is None


async def test_unreachable_redis_falls_back_to_limits_per_process(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = RedisStore(f"redis://127.0.0.1:{free_port()}/0", prefix=unique_prefix())
    counters = RedisCounters(store)
    plan = group_plan(LimitSet(rpm=1))
    with caplog.at_level(logging.WARNING, logger="switchyard.limits"):
        assert await counters.take(plan, NOW) is None
        refused = await counters.take(plan, NOW)
    assert refused is not None and refused.code is LimitCode.RPM  # never "no limits"
    assert counters.describe()["degraded"] is True
    assert len([r for r in caplog.records if "unreachable" in r.getMessage()]) == 1
    await store.aclose()


def test_calendar_windows_reset_at_utc_boundaries() -> None:
    assert windows.when(windows.minute(NOW)[1]) == "2026-12-04T17:31:00Z"
    assert windows.when(windows.day(NOW)[1]) == "2026-12-05T00:00:00Z"
    assert windows.when(windows.month(NOW)[1]) == "2027-01-01T00:00:00Z"
    assert windows.month(NOW)[0] == 202612


def test_cost_prices_cached_input_apart_and_is_none_without_usage_or_price() -> None:
    price = Price(input=2.0, output=10.0, cached_input=0.5)
    usage = {
        "prompt_tokens": 1000,
        "completion_tokens": 100,
        "total_tokens": 1100,
        "prompt_tokens_details": {"cached_tokens": 400},
    }
    assert cost_of(usage, price) == pytest.approx((600 * 2.0 + 400 * 0.5 + 100 * 10.0) / 1e6)
    assert cost_of(usage, Price(2.0, 10.0)) == pytest.approx((1000 * 2.0 + 100 * 10.0) / 1e6)
    assert cost_of(None, price) is None
    assert cost_of(usage, None) is None


def test_a_key_or_group_without_limits_has_no_plan() -> None:
    assert LimitSet.of({}) is None
    assert GroupLimits.of_policy({"retry.max_retries": 3}) is None
    assert (
        plan_for(
            key_id=1,
            key_name="k",
            key_limits=None,
            group="g",
            group_limits=None,
            session="s",
            digest="",
            now=NOW,
        )
        is None
    )
