"""Fixtures for the state-store suites: the same ``store`` for every backend, and a private
``redis-server`` that a test may kill and restart.

The shared Redis is the machine's (``SWITCHYARD_TEST_REDIS_URL``, default
127.0.0.1:6379 db 0); each test gets a unique key prefix and deletes it afterwards, so
parallel runs and other users of that Redis never see each other's keys.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from routing.state import HealthStore, build_store
from routing.state.redis import RedisStore
from tests.state.servers import REDIS_URL, RedisServer, free_port, unique_prefix


class Ticks:
    """A monotonic clock that moves only when a test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def ticks() -> Ticks:
    return Ticks()


@pytest.fixture(params=["memory", "redis"])
async def store(request: pytest.FixtureRequest, ticks: Ticks) -> AsyncIterator[HealthStore]:
    if request.param == "memory":
        yield build_store("memory", clock=ticks)
        return
    redis_store = build_store("redis", url=REDIS_URL, prefix=unique_prefix(), clock=ticks)
    assert isinstance(redis_store, RedisStore)
    try:
        yield redis_store
    finally:
        await redis_store.clear()
        assert not redis_store.degraded, "the shared Redis went away during the test"
        await redis_store.aclose()


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer(port=free_port())
    server.start()
    try:
        yield server
    finally:
        server.kill()
