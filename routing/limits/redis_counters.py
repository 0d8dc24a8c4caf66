"""Limit counters in Redis: every process of a deployment shares them (SPEC §17).

Key layout, under the health store's prefix: ``limit:<counter>`` where the counter is
named by ``routing.limits.rules`` (``k:7:rpm:m29940090``, ``g:agents:cost_per_day:d20791``,
``s:agents:<session>:calls``); each expires with its window.

One round trip per check: ``lua/take.lua`` checks every rule of the call's plan and takes
them all, or nothing, atomically, so N processes never let N times the limit through. A
call's end is one more script (``lua/settle.lua``), run off the call's path.

Redis unreachable: limits must never become "no limits", so each process falls back to
counters of its own (:class:`~routing.limits.counters.LocalCounters`): one warning, the
status says ``degraded``, and Redis is tried again by at most one check every ``retry_s``.
While degraded a deployment of N processes may let up to N times a limit through; when
Redis answers again its counters (which kept what was taken before) are used again and
the local ones dropped.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from routing.limits.counters import Counters, LocalCounters
from routing.limits.rules import Plan, Rule
from routing.state.outage import RedisOutage

log = logging.getLogger("switchyard.limits")

_LUA_DIR = Path(__file__).with_name("lua")
_TAKE_LUA = (_LUA_DIR / "take.lua").read_text()
_SETTLE_LUA = (_LUA_DIR / "settle.lua").read_text()


def counters_for(store: Any) -> Counters:
    """Redis counters beside a Redis health store (same server, same prefix); else local."""
    from routing.state.redis import RedisStore

    if isinstance(store, RedisStore):
        return RedisCounters(store)
    return LocalCounters()


class RedisCounters:
    name = "redis"

    def __init__(
        self, store: Any, *, retry_s: float = 2.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.store = store  # a routing.state.redis.RedisStore: its connections and prefix
        self.prefix = f"{store.prefix}limit:"
        self.retry_s = retry_s
        self._clock = clock
        self._local = LocalCounters()
        self._outage = RedisOutage(retry_s=retry_s, clock=clock)
        self._scripts: dict[int, tuple[Any, Any]] = {}  # id(client) -> (take, settle)

    @property
    def degraded(self) -> bool:
        return self._outage.degraded

    async def take(self, plan: Plan, now: float) -> Rule | None:
        use_redis, trial = self._outage.route()
        if not use_redis:
            return self._local.take_now(plan, now)
        args: list[Any] = [plan.digest]
        for rule in plan.rules:
            args += [int(rule.kind), rule.limit, rule.ttl_s]
        try:
            take, _ = self._scripts_now()
            refused = int(await take(keys=[self.prefix + r.counter for r in plan.rules], args=args))
        except _down() as exc:
            self._went_down(exc)
            return self._local.take_now(plan, now)
        if trial:
            self._came_back()
        return plan.rules[refused - 1] if refused else None

    async def settle(self, plan: Plan, tokens: int, cost: float | None, now: float) -> None:
        if self.degraded:
            self._local.settle_now(plan, tokens, cost, now)
            return
        gauges = plan.gauges
        keys = [self.prefix + g for g in gauges]
        args: list[Any] = [len(gauges)]
        for charge in plan.charges:
            amount = (cost or 0.0) if charge.cost else float(tokens)
            if amount:
                keys.append(self.prefix + charge.counter)
                args += [f"{amount:.15f}", charge.ttl_s]
        if not keys:
            return
        try:
            _, settle = self._scripts_now()
            await settle(keys=keys, args=args)
        except _down() as exc:
            self._went_down(exc)
            self._local.settle_now(plan, tokens, cost, now)

    async def read(self, counters: Sequence[str], now: float) -> list[float]:
        if self.degraded or not counters:
            return await self._local.read(counters, now)
        try:
            client = self.store.redis_client()
            values = await client.mget([self.prefix + c for c in counters])
        except _down() as exc:
            self._went_down(exc)
            return await self._local.read(counters, now)
        return [float(v) if v is not None else 0.0 for v in values]

    def describe(self) -> dict[str, object]:
        if not self._outage.degraded:
            return {"store": self.name, "degraded": False, "detail": "limit counters in Redis"}
        return {
            "store": self.name,
            "degraded": True,
            "detail": f"Redis unreachable ({self._outage.reason}): limits are counted per process",
        }

    def _scripts_now(self) -> tuple[Any, Any]:
        client = self.store.redis_client()
        scripts = self._scripts.get(id(client))
        if scripts is None:
            scripts = (client.register_script(_TAKE_LUA), client.register_script(_SETTLE_LUA))
            self._scripts = {id(client): scripts}  # one loop's client at a time
        return scripts

    def _went_down(self, exc: BaseException) -> None:
        if self._outage.went_down(exc):
            log.warning(
                "limits: Redis unreachable (%s); counting limits per process until it answers "
                "(retrying every %g s)",
                self._outage.reason,
                self.retry_s,
            )

    def _came_back(self) -> None:
        if self._outage.came_back():
            self._local = LocalCounters()
            log.warning("limits: Redis reachable again; limits are shared across processes again")


def _down() -> tuple[type[BaseException], ...]:
    from routing.state.redis import REDIS_DOWN

    return REDIS_DOWN
