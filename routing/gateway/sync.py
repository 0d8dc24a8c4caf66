"""Cross-process configuration change notices: a version check always, Redis pub/sub when set.

Every configuration write bumps ``ConfigVersion`` in its own transaction
(``routing.signals``). Each gateway process runs one :class:`VersionWatcher` (started by
:func:`start_watcher` from the ASGI entry point): a daemon thread that reads that one
integer every ``CONFIG_CHECK_S`` seconds (default 0.5, at most 1) and invalidates the
local routing table and key index when it moved. That is what makes a ``manage.py``
command, the admin or another gateway process reach this one within a second on the
embedded default (SQLite, no Redis), and it is the safety net for a pub/sub notice lost
while Redis was away. The read is a primary-key lookup in a thread of its own, never on a
call's path.

A config write commits in one process (a daphne worker, ``manage.py loadconfig``, the
admin); ``routing.signals`` then invalidates that process's compiled routing table and
calls :func:`broadcast_change`, which publishes ``{"origin": <process id>}`` on
``switchyard:config``. Every gateway process runs one :class:`ConfigListener` (started by
:func:`start_listener` from the ASGI entry point) in a daemon thread that invalidates the
local table when a notice from *another* process arrives; its own notices are ignored
because the signal already invalidated locally.

Decisions:

- A thread with the sync client, not a task on the server's loop: the listener must live
  as long as the process, independent of which loop serves requests, and blocking reads
  in a thread cost nothing on the request path.
- Pub/sub is fire-and-forget: a process that is disconnected when a notice is published
  never sees it. So the listener invalidates on every (re)subscription, which makes a
  missed notice cost one table recompile instead of a stale routing table.
- Reconnects back off exponentially (0.5 s doubling to 30 s); one warning when the
  connection is lost, one info line when it is back.
- Without ``REDIS_URL`` everything here is a no-op: a single process needs nothing more
  than ``routing.signals``.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable

import redis

from routing.conf import switchyard_settings
from routing.state.redis import REDIS_DOWN, redact_url

log = logging.getLogger("switchyard.sync")

CHANNEL = "switchyard:config"
PROCESS_ID = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"

_publishers: dict[str, redis.Redis] = {}
_listener: ConfigListener | None = None
_watcher: VersionWatcher | None = None
_lock = threading.Lock()
MAX_CHECK_S = 1.0  # SPEC §10: a change reaches every process within 1 s


def publish_change(client: redis.Redis, *, channel: str = CHANNEL, origin: str = PROCESS_ID) -> int:
    """Publish one change notice; returns how many subscribers received it."""
    return int(client.publish(channel, json.dumps({"origin": origin})))


def broadcast_change() -> None:
    """Tell other gateway processes that configuration changed (no-op without Redis).

    Called synchronously after a config write commits. A failure is logged, never raised:
    the write itself succeeded, and other processes resync when their listener reconnects.
    """
    url = switchyard_settings().REDIS_URL
    if not url:
        return
    try:
        publish_change(_publisher(url))
    except REDIS_DOWN as exc:
        log.warning(
            "config change not broadcast: Redis at %s unreachable (%s)", redact_url(url), exc
        )


def start_listener() -> ConfigListener | None:
    """Start this process's listener once (idempotent); None without ``REDIS_URL``."""
    global _listener
    url = switchyard_settings().REDIS_URL
    if not url:
        return None
    with _lock:
        if _listener is None or not _listener.alive:
            _listener = ConfigListener(url, on_change=_invalidate_runtime)
            _listener.start()
        return _listener


def stop_listener(timeout: float = 5.0) -> None:
    global _listener
    with _lock:
        listener, _listener = _listener, None
    if listener is not None:
        listener.stop(timeout)


def start_watcher() -> VersionWatcher:
    """Start this process's configuration-version watcher once (idempotent)."""
    global _watcher
    with _lock:
        if _watcher is None or not _watcher.alive:
            _watcher = VersionWatcher(
                read=read_config_version, on_version=follow_version, interval_s=check_interval()
            )
            _watcher.start()
        return _watcher


def stop_watcher(timeout: float = 5.0) -> None:
    global _watcher
    with _lock:
        watcher, _watcher = _watcher, None
    if watcher is not None:
        watcher.stop(timeout)


def check_interval() -> float:
    """``CONFIG_CHECK_S`` clamped to (0, 1] (``routing.E006`` reports a bad value)."""
    value = switchyard_settings().CONFIG_CHECK_S  # the default when unreadable
    return value if 0 < value <= MAX_CHECK_S else min(max(value, 0.05), MAX_CHECK_S)


def read_config_version() -> int:
    """The committed configuration version (0 before the first write)."""
    from django.db import close_old_connections

    from routing.models import ConfigVersion

    close_old_connections()  # a dropped connection is reopened, never reused broken
    value = ConfigVersion.objects.filter(pk=1).values_list("version", flat=True).first()
    return int(value or 0)


def follow_version(version: int) -> bool:
    """Invalidate this process's table if it was compiled before ``version``; True if so.

    Comparing with the table's own version (not the last one seen) means a write made by
    this process, already followed through ``routing.signals``, costs no second compile."""
    from routing.gateway import runtime

    current = runtime.installed_runtime()
    table = current.table if current is not None else None
    if table is None or getattr(table, "config_version", None) == version:
        return False
    current.invalidate()  # type: ignore[union-attr]
    return True


class VersionWatcher:
    """Calls ``read()`` every ``interval_s`` in a daemon thread and hands each value to
    ``on_version`` (:func:`follow_version` in a gateway). A failing read (database briefly
    away) is logged once and retried; the current table keeps serving meanwhile."""

    def __init__(
        self,
        *,
        read: Callable[[], int],
        on_version: Callable[[int], bool],
        interval_s: float = 0.5,
    ) -> None:
        self._read = read
        self._on_version = on_version
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.seen: int | None = None
        self.checks = 0  # completed reads (tests wait on it)
        self._failing = False

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._run, name="switchyard-config-version", daemon=True
        )
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def check(self) -> bool:
        """One check; True when it invalidated the routing table."""
        try:
            version = self._read()
        except Exception as exc:  # any database error: keep serving the current table
            if not self._failing:
                log.warning("config version check failed (%s); retrying", type(exc).__name__)
            self._failing = True
            return False
        if self._failing:
            log.info("config version check works again")
            self._failing = False
        self.seen = version
        self.checks += 1
        try:
            return self._on_version(version)
        except Exception:  # the watcher must outlive a failing callback
            log.exception("config version watcher: invalidation failed")
            return False

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self.check()
                self._stop.wait(self.interval_s)
        finally:
            from django.db import connections

            connections.close_all()


def _invalidate_runtime() -> None:
    from routing.gateway import runtime

    current = runtime.installed_runtime()
    if current is not None:
        current.invalidate()


def _publisher(url: str) -> redis.Redis:
    client = _publishers.get(url)
    if client is None:
        with _lock:
            client = _publishers.setdefault(
                url, redis.Redis.from_url(url, socket_connect_timeout=0.5, socket_timeout=1.0)
            )
    return client


class ConfigListener:
    """Subscribes to ``channel`` in a daemon thread and calls ``on_change`` for every notice
    whose origin is not ``origin``, and once after every (re)subscription."""

    def __init__(
        self,
        url: str,
        *,
        on_change: Callable[[], None],
        channel: str = CHANNEL,
        origin: str = PROCESS_ID,
        backoff_s: tuple[float, float] = (0.5, 30.0),
    ) -> None:
        self.url = url
        self.channel = channel
        self.origin = origin
        self._on_change = on_change
        self._backoff_s = backoff_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.subscribed = threading.Event()  # set while a subscription is confirmed
        self._delay = backoff_s[0]
        self._lost = False
        self._started = False

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._run, name="switchyard-config-listener", daemon=True
        )
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._listen()
            except REDIS_DOWN as exc:
                self.subscribed.clear()
                if not self._lost:
                    log.warning(
                        "config listener: Redis at %s unreachable (%s); reconnecting",
                        redact_url(self.url),
                        exc,
                    )
                self._lost = True
                self._stop.wait(self._delay)
                self._delay = min(self._delay * 2, self._backoff_s[1])

    def _listen(self) -> None:
        client = redis.Redis.from_url(
            self.url, socket_connect_timeout=1.0, socket_keepalive=True, health_check_interval=15
        )
        pubsub = client.pubsub()
        try:
            pubsub.subscribe(self.channel)
            while not self._stop.is_set():
                message = pubsub.get_message(timeout=1.0)
                if message is None:
                    continue
                if message["type"] == "subscribe":
                    self._on_subscribed()
                elif message["type"] == "message":
                    foreign = self._is_foreign(message["data"])
                    if foreign:
                        self._notify()
                    log.debug("config listener: %s notice", "foreign" if foreign else "own")
        finally:
            self.subscribed.clear()
            pubsub.close()
            client.close()

    def _on_subscribed(self) -> None:
        if self._lost:
            log.info("config listener: reconnected to Redis at %s", redact_url(self.url))
        elif not self._started:
            log.info("config listener: following %s at %s", self.channel, redact_url(self.url))
        self._started = True
        self._lost = False
        self._delay = self._backoff_s[0]
        self.subscribed.set()
        self._notify()  # anything published while we were not subscribed is covered

    def _notify(self) -> None:
        try:
            self._on_change()
        except Exception:  # the listener must outlive a failing callback
            log.exception("config listener: invalidation failed")

    def _is_foreign(self, data: bytes | str) -> bool:
        origin = _origin_of(data)
        return origin is None or origin != self.origin  # unreadable: recompiling is safe


def _origin_of(data: bytes | str) -> str | None:
    try:
        origin = json.loads(data).get("origin")
    except (ValueError, AttributeError):
        return None
    return origin if isinstance(origin, str) else None
