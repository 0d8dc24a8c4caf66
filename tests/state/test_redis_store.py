"""What only the Redis store promises beyond the contract: its key space, one round trip
per snapshot, state shared between processes, and clients bound to their event loop."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest
import redis
import redis.asyncio

from routing.engine.failures import Failure, FailureCode
from routing.engine.health import CircuitPolicy, HealthState, TargetHealth
from routing.state.redis import RedisStore, redact_url
from tests.state.servers import REDIS_URL, RedisServer, unique_prefix

KEY = "p1/model-a"
T0 = 1_700_000_000.0
SERVER = Failure(FailureCode.SERVER, "boom", 500)


@pytest.fixture
async def raw() -> AsyncIterator[redis.asyncio.Redis]:
    client = redis.asyncio.Redis.from_url(REDIS_URL, decode_responses=True)
    yield client
    await client.aclose()


async def test_keys_live_under_the_prefix_and_clear_touches_nothing_else(
    raw: redis.asyncio.Redis,
) -> None:
    prefix = unique_prefix()
    store = RedisStore(url=REDIS_URL, prefix=prefix)
    neighbour = prefix[:-1] + "x:kept"  # shares all but the last character of the prefix
    await raw.set(neighbour, "1")
    try:
        await store.record_failure(KEY, SERVER, CircuitPolicy(), T0, was_probe=False)
        await store.next_ticket("auto")
        await store.affinity_set("s", KEY, 60)
        names = set(await raw.keys(prefix + "*"))
        assert names == {f"{prefix}target:{KEY}", f"{prefix}ticket:auto", f"{prefix}affinity:s"}
        stored = json.loads(str(await raw.get(f"{prefix}target:{KEY}")))
        assert TargetHealth.from_dict(stored).state is HealthState.COOLING  # readable JSON
        await store.clear()
        assert await raw.keys(prefix + "*") == []
        assert await raw.get(neighbour) == "1"
    finally:
        await raw.delete(neighbour)
        await store.clear()
        await store.aclose()


async def test_snapshot_is_one_round_trip(redis_server: RedisServer) -> None:
    store = RedisStore(url=redis_server.url, prefix=unique_prefix())
    observer = redis.asyncio.Redis.from_url(redis_server.url)

    async def commands() -> int:
        return int((await observer.info("stats"))["total_commands_processed"])

    try:
        keys = [f"p{i}/m" for i in range(5)]
        await store.record_failure(keys[0], SERVER, CircuitPolicy(), T0, was_probe=False)
        await store.inflight_add(keys[1], 1)
        before = await commands()
        idle = await commands() - before  # what observing costs by itself
        before = await commands()
        snap = await store.snapshot(keys, ["p0", "p1"])
        assert await commands() - before - idle == 1
        assert set(snap.targets) == {keys[0]} and snap.inflight == {keys[1]: 1}
    finally:
        await observer.aclose()
        await store.aclose()


async def test_two_processes_share_health_and_probe_leases() -> None:
    prefix = unique_prefix()
    first = RedisStore(url=REDIS_URL, prefix=prefix)
    second = RedisStore(url=REDIS_URL, prefix=prefix)
    try:
        [event] = await first.record_failure(KEY, SERVER, CircuitPolicy(), T0, was_probe=False)
        seen = (await second.snapshot([KEY], [])).targets[KEY]
        assert seen.state is HealthState.COOLING and seen.until == event.until
        assert event.until is not None
        now = event.until + 1
        won = await asyncio.gather(
            *(store.try_begin_probe(KEY, now, 30) for _ in range(25) for store in (first, second))
        )
        assert sum(won) == 1
        assert [await s.next_ticket("auto") for s in (first, second, first)] == [0, 1, 2]
    finally:
        await first.clear()
        await first.aclose()
        await second.aclose()


def test_one_store_serves_several_event_loops() -> None:
    """A client belongs to its loop: a second loop must get its own, not reuse a dead one."""
    store = RedisStore(url=REDIS_URL, prefix=unique_prefix())

    async def ticket() -> int:
        return await store.next_ticket("auto")

    try:
        assert [asyncio.run(ticket()) for _ in range(3)] == [0, 1, 2]
        assert not store.degraded
    finally:
        sync = redis.Redis.from_url(REDIS_URL)
        sync.delete(f"{store.prefix}ticket:auto")
        sync.close()


def test_describe_never_shows_the_password() -> None:
    assert redact_url("redis://user:s3cret@host:6379/0") == "redis://***@host:6379/0"
    assert redact_url("redis://127.0.0.1:6379/5") == "redis://127.0.0.1:6379/5"


def test_a_url_is_required() -> None:
    with pytest.raises(ValueError, match="REDIS_URL"):
        RedisStore(url="")
