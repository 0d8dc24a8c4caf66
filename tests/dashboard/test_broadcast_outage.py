"""Issue 10 item 8: a Redis outage logs one line, not one per call. The live page's pushes
through a shared channel layer follow the store's degraded state and log one line down and
one line up. A fake shared layer stands in at the channel-layer seam."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
from channels.layers import BaseChannelLayer, channel_layers

from dashboard import broadcast
from routing.gateway.runtime import get_runtime
from routing.state.memory import MemoryStore


class SharedLayer(BaseChannelLayer):  # type: ignore[misc]
    """Like channels-redis from the sender's side: sends fail while ``down``."""

    def __init__(self) -> None:
        super().__init__()
        self.down = False
        self.sent: list[dict[str, Any]] = []

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        if self.down:
            raise ConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")
        self.sent.append(message)


class DegradedStore(MemoryStore):
    degraded = True


@pytest.fixture
def layer() -> Iterator[SharedLayer]:
    fake = SharedLayer()
    old = channel_layers.set("default", fake)
    yield fake
    if old is None:  # none was built yet: the next use builds the configured one, as before
        del channel_layers.backends["default"]
    else:
        channel_layers.set("default", old)


class Ticks:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def ticks() -> Ticks:
    return Ticks()


@pytest.fixture
def pushes(ticks: Ticks) -> broadcast.Broadcaster:
    """A broadcaster of its own, on a clock the test moves."""
    return broadcast.Broadcaster(clock=ticks)


def lines(caplog: pytest.LogCaptureFixture, text: str) -> int:
    return sum(text in r.getMessage() for r in caplog.records if r.name == "switchyard.dashboard")


async def test_a_layer_outage_logs_one_line_down_and_one_up(
    layer: SharedLayer,
    pushes: broadcast.Broadcaster,
    ticks: Ticks,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    layer.down = True
    for i in range(50):
        await pushes.send({"type": "call.recorded", "n": i})
        assert pushes.paused()  # within the retry window: the next push is skipped
        ticks.now += broadcast.LAYER_RETRY_S  # past it: every push tries the layer again
    assert lines(caplog, "channel layer unreachable") == 1
    layer.down = False
    for i in range(5):
        await pushes.send({"type": "call.recorded", "n": i})
    assert lines(caplog, "reachable again") == 1
    assert len(layer.sent) == 5
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_pushes_are_skipped_while_the_store_is_degraded(
    layer: SharedLayer, pushes: broadcast.Broadcaster, caplog: pytest.LogCaptureFixture
) -> None:
    runtime = get_runtime()
    healthy = runtime.store
    runtime.use_store(DegradedStore())
    try:
        await pushes.send({"type": "call.recorded"})
        assert layer.sent == []
        assert pushes.paused()
    finally:
        runtime.use_store(healthy)
    await pushes.send({"type": "call.recorded"})
    assert len(layer.sent) == 1
    assert lines(caplog, "unreachable") == 0  # skipped quietly: the store already said so
