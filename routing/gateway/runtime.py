"""Process-wide gateway state: the compiled routing table, the health store, pooled
upstream clients, the event hub, and the injectable clock/monotonic/sleep/random seams.

One ``Runtime`` per process, built lazily from settings by ``get_runtime()``. Tests put a
fake in at the seams (``runtime.sleep = recorder``, ``runtime.clock = fake_clock``) or
install a whole runtime with ``install_runtime``.

Two clocks: ``clock`` is wall-clock seconds (health, cooldowns, records, ``Retry-After``);
``monotonic`` measures a call: its deadline, each attempt's timeouts, elapsed and
overhead times. By default it is ``time.monotonic``, the clock asyncio's loop reads, so
a deadline computed from it bounds the loop's timers (``routing.gateway.attempt`` hands
them delays, never instants of its own).
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import threading
import time
from collections.abc import Awaitable, Callable
from importlib import import_module
from typing import TYPE_CHECKING

from asgiref.sync import sync_to_async

from routing.conf import switchyard_settings
from routing.engine.failures import Redactor
from routing.engine.refusals import KeylessRefusals
from routing.gateway.events import EventHub
from routing.gateway.limits import upstream_connections
from routing.gateway.table import (
    ProviderSpec,
    RoutingTable,
    compile_table,
    group_summary,
    keep_algorithms,
)
from routing.limits.gate import LimitGate
from routing.observability.tracing import build_tracing
from routing.state import HealthStore, build_store
from routing.upstream.openai import OpenAIClient
from routing.upstream.transport import tls_context

if TYPE_CHECKING:
    from routing.gateway.checker import Checks
    from routing.observability.spans import Tracing

log = logging.getLogger("switchyard.gateway")


COMPILE_RETRY_S = 1.0  # with no table at all, how often a call may try to compile one


class TableUnavailable(Exception):
    """This process has no routing table at all: its first compile failed (the database is
    away, or not migrated) and there is no last good table to keep serving. ``/v1``
    answers an OpenAI-shaped 503 (``routing.api.openai``); the next call tries again."""

    def __init__(self, cause: str) -> None:
        super().__init__(
            f"Switchyard cannot read its configuration ({cause}), so no model can be routed "
            "yet. The gateway's log says why; calls work again once its database answers."
        )


class Runtime:
    def __init__(
        self,
        *,
        store: HealthStore,
        hub: EventHub | None = None,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rand: Callable[[], float] = random.random,
        compile: Callable[[], RoutingTable] = compile_table,
        tracing: Tracing | None = None,
    ) -> None:
        self.store = store
        # Limits are counted beside the health store (routing.limits): replace both
        # together with use_store().
        self.limit_gate = LimitGate.beside(store, lambda: self.clock())
        self.tracing = tracing  # None: tracing off, and every hook on the call path skipped
        self._compile = compile
        self._subscribers = _load_subscribers()
        self.hub = hub or EventHub()
        self.clock = clock
        self.monotonic = monotonic
        self.sleep = sleep
        self.rand = rand
        # Targets a 400 taught not to take an assistant prefill (SPEC §16): rescues restart
        # there instead. Per process, and never charged to health.
        self.no_prefill: set[str] = set()
        # Chat targets a 400 taught to take no system message mid-conversation: they get it
        # folded into a user turn (routing.continuity.system). Per process, never charged.
        self.no_mid_system: set[str] = set()
        self.table: RoutingTable | None = None
        self._last_good: RoutingTable | None = None
        self._generation = 0
        self._summarized = False
        self._lock = threading.Lock()
        self._clients: dict[str, tuple[tuple[object, ...], OpenAIClient]] = {}
        # Every provider's secret, so upstream text is scrubbed of all of them (SPEC §9).
        self.redact = Redactor()
        self._checker: asyncio.Task[None] | None = None
        self.background_checks = True  # tests turn the loop off and drive check passes
        self.calls_open = 0  # calls begun and not yet finished (streams until their end)
        self._compile_failed: tuple[float, str] | None = None  # (when, why) with no table
        self.keyless = KeylessRefusals()  # refusals without a valid key: counted, sampled
        self._checker_due = False  # a table compiled before serving: start it on the loop

    def use_store(self, store: HealthStore) -> None:
        """Replace the health store (tests; a store rebuilt): the limit counters move with
        it, so a Redis store gets Redis counters beside it and an in-process one local."""
        self.store = store
        self.limit_gate = LimitGate.beside(store, lambda: self.clock())

    @property
    def hub(self) -> EventHub:
        return self._hub

    @hub.setter
    def hub(self, hub: EventHub) -> None:
        """Installing a hub attaches the configured subscribers (audit writer, live page)."""
        self._hub = hub
        for attach in self._subscribers:
            attach(hub)

    async def current_table(self) -> RoutingTable:
        """The table to serve from; :class:`TableUnavailable` when there is none at all."""
        table = self.table
        if table is None:
            failed = self._compile_failed
            if failed is not None and self.clock() < failed[0] + COMPILE_RETRY_S:
                # Tried a moment ago: calls arriving meanwhile do not each queue a compile
                # on the lock (and a log line) while the database is away.
                raise TableUnavailable(failed[1])
            try:
                table = await sync_to_async(self.reload, thread_sensitive=False)()
            except Exception as exc:
                self._compile_failed = (self.clock(), type(exc).__name__)
                log.error("no routing table to serve: compiling it failed (%r)", exc)
                raise TableUnavailable(type(exc).__name__) from exc
            self._compile_failed = None
            self._start_checker()
        elif self._checker_due:  # the table was compiled at start (``warm``), off the loop
            self._checker_due = False
            self._start_checker()
        return table

    def _start_checker(self) -> None:
        """The active health checker runs on the serving loop, started with the first
        table (there is no ASGI lifespan under daphne). It runs even when the gateway's
        interval is 0: a provider may set its own (a pass with nothing to check reads
        nothing, not even the store)."""
        if self._checker is not None or not self.background_checks:
            return
        from routing.gateway.checker import run_forever

        self._checker = asyncio.get_running_loop().create_task(run_forever(self.health_checks))

    def health_checks(self) -> Checks:
        """What a pass of the health checker uses (``routing.gateway.checker``): the
        table, store, clients, hub and clocks as they are now."""
        from routing.gateway.checker import Checks

        return Checks(
            table=self.table,
            store=self.store,
            client_for=self.client_for,
            publish=self.hub.publish_all,
            clock=self.clock,
            monotonic=self.monotonic,
        )

    def reload(self) -> RoutingTable:
        """Compile the table from the database and swap it in (sync; never per call).

        If compiling fails (the database is away mid-change), the last good table keeps
        serving until a later change compiles; with no table yet, the error propagates.
        """
        with self._lock:
            generation = self._generation
            try:
                table = keep_algorithms(self._last_good, self._compile())
            except Exception:
                if self._last_good is None:
                    raise
                log.exception("routing table not recompiled; serving the last good one")
                table = self._last_good
            self._last_good = table
            self.redact = Redactor(s for p in table.providers.values() for s in p.secrets)
            if generation == self._generation:  # no newer invalidation raced us
                self.table = table
            if not self._summarized:  # once per process: what this gateway routes, and how
                self._summarized = True
                for group in table.groups.values():
                    log.info("%s", group_summary(group))
            return table

    def warm(self) -> None:
        """Build before serving what a first call would otherwise build (SPEC §20: the
        first call costs what later ones cost): the routing table and every provider's
        pooled client, on the TLS context they share. Sync, for start-up: it reads the
        database. A table that cannot be compiled yet is left to the first call, as before.
        """
        tls_context()
        import_module("routing.gateway.checker")  # what starting the checker imports
        try:
            table = self.reload()
        except Exception as exc:
            log.warning("no routing table compiled at start (%r): the first call tries", exc)
            return
        self._checker_due = True
        for provider in table.providers.values():
            if not provider.config_error:
                self.client_for(provider)

    def invalidate(self) -> None:
        """Configuration changed: the next call compiles a fresh table."""
        with self._lock:
            self._generation += 1
            self.table = None
            self._compile_failed = None  # a change: worth trying at once

    def client_for(self, provider: ProviderSpec) -> OpenAIClient:
        """The pooled client of a provider; a new one only when its settings changed."""
        entry = self._clients.get(provider.name)
        fingerprint = provider.fingerprint
        if entry is not None and entry[0] == fingerprint:
            return entry[1]
        client = OpenAIClient(
            protocol=provider.protocol,
            platform=provider.platform,
            settings=provider.settings,
            provider=provider.name,
            base_url=provider.base_url,
            api_key=provider.api_key,
            headers=provider.headers,
            timeouts=provider.timeouts,
            max_connections=upstream_connections(switchyard_settings().UPSTREAM_MAX_CONNECTIONS),
            redact=lambda text: self.redact(text),  # the current table's secrets
            clock=lambda: self.clock(),  # the runtime's, even when a test replaces it
        )
        self._clients[provider.name] = (fingerprint, client)
        if entry is not None:
            _close_later(entry[1])
        return client

    async def aclose(self) -> int:
        """Stop the checker and close every pooled upstream client; returns how many."""
        if self._checker is not None:
            self._checker.cancel()
            self._checker = None
        clients = [client for _, client in self._clients.values()]
        self._clients.clear()
        for client in clients:
            await client.aclose()
        return len(clients)


def _load_subscribers() -> list[Callable[[EventHub], None]]:
    """``settings.SWITCHYARD["EVENT_SUBSCRIBERS"]``: dotted paths of ``attach(hub)`` functions."""
    from django.utils.module_loading import import_string

    return [import_string(path) for path in switchyard_settings().EVENT_SUBSCRIBERS]


def _close_later(client: OpenAIClient) -> None:
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return
    task = loop.create_task(client.aclose())
    _background.add(task)
    task.add_done_callback(_background.discard)


_background: set[asyncio.Task[None]] = set()
_runtime: Runtime | None = None
_runtime_lock = threading.Lock()


def installed_runtime() -> Runtime | None:
    """The process runtime if one was built, without building one (for code that only
    follows a running gateway: invalidations, notices, degraded checks)."""
    return _runtime


def get_runtime() -> Runtime:
    global _runtime
    runtime = _runtime
    if runtime is None:
        with _runtime_lock:
            if _runtime is None:
                conf = switchyard_settings()
                options = {"url": conf.REDIS_URL} if conf.STATE_STORE == "redis" else {}
                _runtime = Runtime(
                    store=build_store(conf.STATE_STORE, **options),
                    tracing=build_tracing(os.environ),
                )
            runtime = _runtime
    return runtime


async def close_runtime() -> None:
    """Shutdown: close the pooled upstream clients (and stop the checker) on the serving
    loop, so the process ends without "Unclosed client session" warnings."""
    runtime = _runtime
    closed = await runtime.aclose() if runtime is not None else 0
    # One line at shutdown, so an operator (and tests/management/test_make_run.py) can see the pooled
    # connections were released rather than left to the interpreter's teardown.
    log.info("shutdown: closed %d pooled upstream client%s", closed, "" if closed == 1 else "s")


async def lifespan(
    scope: dict[str, object],
    receive: Callable[[], Awaitable[dict[str, object]]],
    send: Callable[[dict[str, object]], Awaitable[None]],
) -> None:
    """ASGI lifespan (uvicorn and other servers that speak it)."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await close_runtime()
            await send({"type": "lifespan.shutdown.complete"})
            return


def close_on_twisted_shutdown() -> bool:
    """daphne speaks no lifespan: close from Twisted's before-shutdown trigger, while the
    asyncio reactor's loop still runs. False when not under Twisted (nothing to hook)."""
    import sys

    if "twisted.internet.reactor" not in sys.modules:
        return False
    from twisted.internet import defer, reactor

    def close() -> defer.Deferred[None]:
        return defer.Deferred.fromFuture(asyncio.ensure_future(close_runtime()))

    # Twisted declares its reactor methods zope-style (no ``self``), so mypy binds "before"
    # to ``self``: a gap in Twisted's annotations, not in this call.
    reactor.addSystemEventTrigger("before", "shutdown", close)  # type: ignore[arg-type]
    return True


def install_runtime(runtime: Runtime | None) -> None:
    """Replace the process runtime (tests; embedding)."""
    global _runtime
    _runtime = runtime
