"""Live pushes to open dashboard pages: health changes, finished calls, config saves.

Two producers feed the channel-layer group ``channel_names.GROUP``:

- **The runtime's event hub.** :func:`on_event` is subscribed to ``get_runtime().hub``. It
  runs on the call path, so it only schedules a task on the running loop (never awaits,
  never touches the database) and drops the event when there is no running loop or too
  many pushes are already pending. The task reads the affected targets' health in one
  snapshot, renders the badges (or the call's chain row) and sends one message.
- **Committed configuration writes.** ``post_save``/``post_delete`` receivers on groups,
  targets, providers and global settings queue :func:`notify` with
  ``transaction.on_commit``, so a rolled-back write (validation, conflict) tells nobody.

When no dashboard socket is open in this process and the channel layer is the in-memory
one, nobody could hear a push, so :func:`on_event` returns before scheduling anything.

A shared (Redis) layer goes down with Redis. Its sends follow the state store's degraded
state: while the store is degraded, or for ``LAYER_RETRY_S`` after a failed send, pushes are
skipped (nothing is rendered, nothing waits on a dead socket); the first failure logs one
line and the first send that works again logs one line — never one line per call.

Subscription follows the runtime: it calls :func:`attach` for every hub it installs
(``settings.SWITCHYARD["EVENT_SUBSCRIBERS"]``), dropping the previous subscription, so a
gateway process that serves calls but no dashboard still publishes its calls to
dashboards connected to other processes (Redis channel layer). :func:`follow_hub` does
the same from a websocket connect.

The process's wiring is one :class:`Broadcaster` (``BROADCASTER``), built with a
monotonic clock for its retry window; the module functions are its bound methods, which
is what consumers, signals and ``EVENT_SUBSCRIBERS`` name.

Where a message is sent from: the loop the consumers live on, captured at connect
(:func:`remember_loop`). Sync code (a service in a worker thread) hands the send to that
loop with ``run_coroutine_threadsafe`` instead of spinning up a loop of its own, which an
in-memory channel layer could not be woken from. Without a captured loop an in-memory
layer has no listener in this process, so the message is dropped; a shared (Redis) layer
is sent to directly.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from asgiref.sync import async_to_sync
from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.template.loader import render_to_string

if TYPE_CHECKING:
    from routing.gateway.events import EventHub

from dashboard import channel_names as names
from dashboard.call_rows import row_from_record
from dashboard.chain import call_from_record
from dashboard.health import badges_read
from routing.audit.call_query import call_facts
from routing.engine.health import HealthEvent
from routing.engine.targets import provider_of
from routing.gateway.events import CallRecord, EventHub

log = logging.getLogger("switchyard.dashboard")

MAX_PENDING = 200  # pushes in flight; beyond this the page misses updates, calls never wait
LAYER_RETRY_S = 2.0  # after a failed send to a shared layer, how long pushes are skipped


class Broadcaster:
    """One process's live-page pushes: the hub it follows, the consumers' loop, the open
    sockets, the pushes in flight and the shared layer's retry window."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._hub: EventHub | None = None
        self._unsubscribe: Callable[[], None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pending: set[asyncio.Task[None]] = set()
        self.listeners = 0  # dashboard sockets open in this process
        self._layer_down_until: float | None = None  # a shared layer failed: skip until then

    @property
    def pending(self) -> int:
        """Pushes scheduled and not yet sent."""
        return len(self._pending)

    # ------------------------------------------------------------------ wiring
    def follow_hub(self) -> None:
        """Subscribe :meth:`on_event` to the current runtime hub (idempotent, cheap)."""
        from routing.gateway.runtime import get_runtime

        self.attach(get_runtime().hub)

    def attach(self, hub: EventHub) -> None:
        """Subscribe :meth:`on_event` to ``hub``, leaving the previous one (idempotent)."""
        if hub is self._hub:
            return
        with self._lock:
            if hub is self._hub:
                return
            if self._unsubscribe is not None:
                try:
                    self._unsubscribe()
                except ValueError:  # that hub was cleared already
                    pass
            self._unsubscribe = hub.subscribe(self.on_event)
            self._hub = hub

    def remember_loop(self) -> None:
        """Called on the consumers' loop (websocket connect): sync senders hand work to it."""
        self._loop = asyncio.get_running_loop()

    def listener_joined(self) -> None:
        self.listeners += 1

    def listener_left(self) -> None:
        self.listeners = max(0, self.listeners - 1)

    def _nobody_listens(self) -> bool:
        """True when no page can hear a push: no socket here and a process-local layer.

        With a shared (Redis) layer pages on other processes may listen, so we always send.
        """
        return self.listeners == 0 and isinstance(get_channel_layer(), InMemoryChannelLayer)

    # ------------------------------------------------------------------ hub events
    def on_event(self, event: object) -> None:
        """Hub subscriber: schedule a push for health changes and finished calls."""
        if not isinstance(event, HealthEvent | CallRecord):
            return
        if self._nobody_listens() or self.paused():
            return  # no rendering for nobody: the call path's loop stays free
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        if len(self._pending) >= MAX_PENDING:
            return
        self._track(loop.create_task(self._push_event(event)))

    def _track(self, task: asyncio.Task[None]) -> None:
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _push_event(self, event: HealthEvent | CallRecord) -> None:
        try:
            message = await (
                _health_message(event) if isinstance(event, HealthEvent) else _call_message(event)
            )
            if message is not None:
                await self.send(message)
        except Exception:  # a failed push costs one update, never a call
            log.exception("dashboard push failed for %s", type(event).__name__)

    # ------------------------------------------------------------------ config changes
    def notify(self, message: dict[str, Any]) -> None:
        """Send ``message`` to every open page from any thread or loop; never raises."""
        from routing.gateway import runtime

        built = runtime.installed_runtime()  # never build a runtime just to timestamp a notice
        message = {**message, "now": built.clock() if built is not None else time.time()}
        layer = get_channel_layer()
        if layer is None:
            return
        loop = self._loop
        if loop is not None and loop.is_running() and not loop.is_closed():
            future = asyncio.run_coroutine_threadsafe(self.send(message), loop)
            future.add_done_callback(_log_failure)
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is not None:
            self._track(running.create_task(self.send(message)))
            return
        if isinstance(layer, InMemoryChannelLayer):
            return  # nobody in this process listens, and no other process can hear it
        try:
            async_to_sync(self.send)(message)
        except Exception:
            log.exception("dashboard notice %s not sent", message.get("type"))

    # ------------------------------------------------------------------ the layer
    def paused(self) -> bool:
        """A shared layer is skipped while the state store says Redis is down, and for a
        moment after a send of ours failed (the store may not have noticed yet)."""
        if isinstance(get_channel_layer(), InMemoryChannelLayer):
            return False
        down_until = self._layer_down_until
        return _store_degraded() or (down_until is not None and self._clock() < down_until)

    async def send(self, message: dict[str, Any]) -> None:
        layer = get_channel_layer()
        if layer is None:
            return
        if isinstance(layer, InMemoryChannelLayer):
            await layer.group_send(names.GROUP, message)
            return
        if self.paused():
            return
        try:
            await layer.group_send(names.GROUP, message)
        except Exception as exc:  # Redis down: one line, then quiet until it is back
            first = self._layer_down_until is None
            self._layer_down_until = self._clock() + LAYER_RETRY_S
            if first:
                log.warning(
                    "live page: channel layer unreachable (%s: %s); pushes skipped until it "
                    "is back",
                    type(exc).__name__,
                    exc,
                )
            return
        if self._layer_down_until is not None:
            self._layer_down_until = None
            log.warning("live page: channel layer reachable again; pushes resumed")


async def _health_message(event: HealthEvent) -> dict[str, Any] | None:
    from routing.gateway.runtime import get_runtime

    runtime = get_runtime()
    if event.target:
        keys = [event.target]
    else:  # a provider-level event: every target of the provider changed
        table = runtime.table or await runtime.current_table()
        keys = sorted(
            {
                t.key
                for g in table.groups.values()
                for t in g.targets
                if provider_of(t.key) == event.provider
            }
        )
        if not keys:
            return None
    badges = await badges_read(runtime, keys)
    html = {
        key: render_to_string("dashboard/groups.html#badge", {"badge": b})
        for key, b in badges.items()
    }
    return {"type": names.HEALTH_CHANGED, "badges": html, "now": runtime.clock()}


async def _call_message(record: CallRecord) -> dict[str, Any]:
    from routing.gateway.runtime import get_runtime

    view = call_from_record(record)
    html = render_to_string("dashboard/groups.html#call", {"call": view})
    row_html = render_to_string("dashboard/calls.html#call_row", {"row": row_from_record(record)})
    return {
        "type": names.CALL_RECORDED,
        "group": record.group,
        "call_id": record.call_id,
        "html": html,
        "row_html": row_html,
        "facts": call_facts(record),
        "now": get_runtime().clock(),
    }


def _store_degraded() -> bool:
    from routing.gateway import runtime

    built = runtime.installed_runtime()
    return built is not None and bool(getattr(built.store, "degraded", False))


def _log_failure(future: Any) -> None:
    if not future.cancelled() and future.exception() is not None:
        log.error("dashboard notice not sent: %s", future.exception())


BROADCASTER = Broadcaster()
# What consumers, signals and ``EVENT_SUBSCRIBERS`` call: the process broadcaster's methods.
attach = BROADCASTER.attach
follow_hub = BROADCASTER.follow_hub
remember_loop = BROADCASTER.remember_loop
listener_joined = BROADCASTER.listener_joined
listener_left = BROADCASTER.listener_left
on_event = BROADCASTER.on_event
notify = BROADCASTER.notify
