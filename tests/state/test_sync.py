"""Cross-process config invalidation over Redis pub/sub (``routing.gateway.sync``).

Each listener test uses its own channel so parallel runs on the shared Redis never see
each other's notices. Waiting here is for message delivery and reconnects, bounded by
deadlines — never for a cooldown.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
import redis
from django.conf import settings
from django.test import override_settings

from routing.gateway import runtime as runtime_module
from routing.gateway import sync
from routing.gateway.runtime import Runtime, install_runtime
from routing.state.memory import MemoryStore
from tests.state.servers import REDIS_URL, RedisServer, free_port

DEADLINE_S = 10.0


def eventually(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


class Counter:
    def __init__(self) -> None:
        self.calls = 0
        self._lock = threading.Lock()

    def __call__(self) -> None:
        with self._lock:
            self.calls += 1


@pytest.fixture
def publisher() -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(REDIS_URL)
    yield client
    client.close()


def listener_on(url: str, on_change: Callable[[], None], **kwargs: object) -> sync.ConfigListener:
    listener = sync.ConfigListener(
        url,
        on_change=on_change,
        channel=f"test:{uuid.uuid4().hex}",
        origin="this-process",
        **kwargs,
    )  # type: ignore[arg-type]
    listener.start()
    return listener


def notices(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The listener's debug line per notice read, in order."""
    return [r.getMessage() for r in caplog.records if r.getMessage().endswith(" notice")]


def test_foreign_notices_invalidate_and_own_notices_do_not(
    publisher: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="switchyard.sync")
    changes = Counter()
    listener = listener_on(REDIS_URL, changes)
    try:
        eventually(listener.subscribed.is_set, "the subscription")
        eventually(lambda: changes.calls == 1, "the invalidation on subscribe")
        assert sync.publish_change(publisher, channel=listener.channel, origin="this-process") == 1
        assert sync.publish_change(publisher, channel=listener.channel, origin="other") == 1
        publisher.publish(listener.channel, b"not json")  # unreadable: recompile to be safe
        eventually(lambda: len(notices(caplog)) == 3, "three notices")
        assert sorted(notices(caplog)) == ["config listener: foreign notice"] * 2 + [
            "config listener: own notice"
        ]
        assert changes.calls == 3  # subscribe + "other" + the unreadable one; own one ignored
    finally:
        listener.stop()
    assert not listener.alive


def test_the_listener_reconnects_and_resyncs(
    redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="switchyard.sync")
    changes = Counter()
    listener = listener_on(redis_server.url, changes, backoff_s=(0.05, 0.2))
    try:
        eventually(lambda: changes.calls == 1, "the first subscription")
        redis_server.kill()
        eventually(lambda: not listener.subscribed.is_set(), "the listener to notice")
        redis_server.start()
        # Notices published while it was away are lost: it invalidates on resubscribing.
        eventually(lambda: changes.calls == 2, "the resubscription")
        client = redis.Redis.from_url(redis_server.url)
        sync.publish_change(client, channel=listener.channel, origin="other")
        client.close()
        eventually(lambda: changes.calls == 3, "a notice after the reconnect")
        lines = [r.getMessage() for r in caplog.records if r.name == "switchyard.sync"]
        assert sum("unreachable" in line for line in lines) == 1  # one warning per outage
        assert sum("reconnected" in line for line in lines) == 1
    finally:
        listener.stop()


def test_without_redis_url_everything_is_a_no_op() -> None:
    with override_settings(SWITCHYARD={**settings.SWITCHYARD, "REDIS_URL": ""}):
        assert sync.start_listener() is None
        sync.broadcast_change()  # nothing to publish to, nothing raised


def test_broadcast_reaches_subscribers_with_this_process_as_origin(publisher: redis.Redis) -> None:
    pubsub = publisher.pubsub(ignore_subscribe_messages=True)
    pubsub.subscribe(sync.CHANNEL)
    try:
        with override_settings(SWITCHYARD={**settings.SWITCHYARD, "REDIS_URL": REDIS_URL}):
            sync.broadcast_change()
        deadline = time.monotonic() + DEADLINE_S
        origins = []
        while sync.PROCESS_ID not in origins and time.monotonic() < deadline:
            message = pubsub.get_message(timeout=0.5)
            if message is not None:  # other processes on this Redis may publish too
                origins.append(sync._origin_of(message["data"]))
        assert sync.PROCESS_ID in origins
    finally:
        pubsub.close()


def test_broadcast_to_an_unreachable_redis_only_logs(caplog: pytest.LogCaptureFixture) -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"
    with override_settings(SWITCHYARD={**settings.SWITCHYARD, "REDIS_URL": url}):
        sync.broadcast_change()
    assert any("not broadcast" in r.getMessage() for r in caplog.records)


def test_start_listener_invalidates_the_process_runtime(publisher: redis.Redis) -> None:
    previous = runtime_module.installed_runtime()
    runtime = Runtime(store=MemoryStore())
    install_runtime(runtime)
    stale = object()
    try:
        with override_settings(SWITCHYARD={**settings.SWITCHYARD, "REDIS_URL": REDIS_URL}):
            listener = sync.start_listener()
            assert listener is not None and sync.start_listener() is listener  # once per process
            eventually(listener.subscribed.is_set, "the subscription")
            runtime.table = stale  # type: ignore[assignment]
            sync.publish_change(publisher, origin="another-process")
            eventually(lambda: runtime.table is None, "the invalidation")
    finally:
        sync.stop_listener()
        install_runtime(previous)
