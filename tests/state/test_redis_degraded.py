"""Redis goes away mid-run: routing keeps working on local state, says so once, and goes
back to Redis (tried at most once per ``retry_s``, on an injected clock) when it returns."""

from __future__ import annotations

import logging

import pytest
import redis

from routing.engine.failures import Failure, FailureCode
from routing.engine.health import CircuitPolicy, HealthState
from routing.state.redis import RedisStore
from tests.state.servers import RedisServer, free_port, unique_prefix

KEY = "p1/model-a"
OTHER = "p2/model-b"
T0 = 1_700_000_000.0
SERVER = Failure(FailureCode.SERVER, "boom", 500)
POLICY = CircuitPolicy()


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def state_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "switchyard.state"]


async def test_redis_dies_and_comes_back(
    redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="switchyard.state")
    clock = FakeClock()
    prefix = unique_prefix()
    store = RedisStore(url=redis_server.url, prefix=prefix, retry_s=2.0, clock=clock)
    raw = redis.Redis.from_url(redis_server.url, decode_responses=True)
    try:
        await store.record_failure(KEY, SERVER, POLICY, T0, was_probe=False)
        assert raw.get(f"{prefix}target:{KEY}") is not None  # shared state is in Redis
        assert (await store.describe())["degraded"] is False

        redis_server.kill()

        # Every operation keeps answering, from the local fallback.
        snap = await store.snapshot([KEY, OTHER], ["p1"])
        assert dict(snap.targets) == {}  # the fallback starts empty: soft state
        events = await store.record_failure(OTHER, SERVER, POLICY, T0, was_probe=False)
        assert events and events[0].until == T0 + 10
        assert (await store.snapshot([OTHER], [])).targets[OTHER].state is HealthState.COOLING
        assert [await store.next_ticket("auto") for _ in range(3)] == [0, 1, 2]
        await store.inflight_add(KEY, 1)
        await store.affinity_set("s", OTHER, 60)
        assert await store.affinity_get("s") == OTHER
        for _ in range(50):
            await store.snapshot([KEY], [])
        info = await store.describe()
        assert info["degraded"] is True
        assert "unreachable" in str(info["detail"]) and "ConnectionError" in str(info["detail"])
        assert len(state_lines(caplog)) == 1  # one warning for the outage, none per call

        # Redis is back, but the next trial is not due yet: calls stay local.
        redis_server.start()
        await store.record_failure(KEY, SERVER, POLICY, T0, was_probe=False)
        assert raw.keys(prefix + "*") == []
        assert (await store.describe())["degraded"] is True

        # Due now: the next operation (here describe's ping) finds Redis and switches back.
        clock.now += 2.0
        assert (await store.describe())["degraded"] is False
        assert len(state_lines(caplog)) == 2 and "reachable again" in state_lines(caplog)[1]
        # Local state from the outage is dropped; new state goes to Redis again.
        assert dict((await store.snapshot([KEY, OTHER], [])).targets) == {}
        await store.record_failure(OTHER, SERVER, POLICY, T0 + 1, was_probe=False)
        assert raw.get(f"{prefix}target:{OTHER}") is not None
        assert await store.next_ticket("auto") == 0  # Redis's counter, not the local one
    finally:
        raw.close()
        await store.aclose()


async def test_unreachable_from_the_start(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    store = RedisStore(url=f"redis://127.0.0.1:{free_port()}/0", retry_s=2.0, clock=clock)
    [event] = await store.record_failure(KEY, SERVER, POLICY, T0, was_probe=False)
    assert event.until == T0 + 10
    assert (await store.snapshot([KEY], [])).targets[KEY].state is HealthState.COOLING
    clock.now += 2.0  # a trial is due; it fails again and stays degraded, without a new warning
    assert await store.try_begin_probe(KEY, T0 + 10, 30)
    info = await store.describe()
    assert info["degraded"] is True
    assert len(state_lines(caplog)) == 1
    await store.aclose()
