"""What a call does about limits: ``admit`` before any upstream, ``settle`` at its end.

The gate is the process's: the gateway's ``Runtime`` builds one beside its health store
(``LimitGate.beside``), and a new one when its store is replaced. Its counters are in
process, or in Redis when the health store is (``routing.limits.redis_counters``).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from routing.limits.counters import Counters, LocalCounters
from routing.limits.redis_counters import counters_for
from routing.limits.rules import Plan, Refusal, plan_for
from routing.limits.spec import GroupLimits, LimitSet

PLAN_CACHE_MAX = 20_000


@dataclass(slots=True)
class Admission:
    """A call let through: what its end gives back and charges."""

    plan: Plan
    settled: bool = False


class LimitGate:
    def __init__(self, counters: Counters, clock: Callable[[], float]) -> None:
        self.counters = counters
        self.clock = clock
        # A limit was checked or read in this process: the status shows where the
        # counters live only then (a gateway without limits reports no counters).
        self.used = False
        self._pending: set[asyncio.Task[None]] = set()
        # Plans by (key, group, session, minute): the rules only change with the window,
        # and building them is most of a check's cost. Values hold the limits objects,
        # compared by identity (a recompiled table's new objects miss, never match).
        self._plans: dict[tuple[Any, ...], tuple[Plan | None, object, object]] = {}

    async def admit(
        self,
        *,
        key_id: int | None,
        key_name: str,
        key_limits: LimitSet | None,
        group: str,
        group_limits: GroupLimits | None,
        session: str | None,
        body: Mapping[str, Any],
    ) -> Admission | Refusal | None:
        """None: nothing limits this call. A Refusal: over a limit, nothing taken."""
        self.used = True
        guard = group_limits is not None and group_limits.loop_guard is not None and session
        now = self.clock()
        cache_key = (key_id, id(key_limits), group, id(group_limits), session, int(now // 60))
        cached = self._plans.get(cache_key)
        if cached is not None and cached[1] is key_limits and cached[2] is group_limits:
            plan = cached[0]
        else:
            plan = plan_for(
                key_id=key_id,
                key_name=key_name,
                key_limits=key_limits,
                group=group,
                group_limits=group_limits,
                session=session,
                digest="",
                now=now,
            )
            if len(self._plans) >= PLAN_CACHE_MAX:
                self._plans.clear()
            self._plans[cache_key] = (plan, key_limits, group_limits)
        if plan is None:
            return None
        if guard:
            plan = plan.with_digest(body_digest(body))
        refused = await self.counters.take(plan, now)
        if refused is not None:
            return Refusal.of(refused)
        return Admission(plan)

    def settle(self, admission: Admission, tokens: int, cost: float | None) -> None:
        """Give back and charge, once; never blocks the caller (a Redis write runs as a
        task, kept referenced until done)."""
        if admission.settled:
            return
        admission.settled = True
        counters, now = self.counters, self.clock()
        if isinstance(counters, LocalCounters):
            counters.settle_now(admission.plan, tokens, cost, now)
            return
        task = asyncio.get_running_loop().create_task(
            counters.settle(admission.plan, tokens, cost, now)
        )
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    @classmethod
    def beside(cls, store: object, clock: Callable[[], float]) -> LimitGate:
        """The gate of a health store: Redis counters beside a Redis store (same server,
        same prefix), in-process counters otherwise."""
        return cls(counters_for(store), clock)

    async def drain(self) -> None:
        """Wait for settlements in flight (tests; shutdown)."""
        while self._pending:
            await asyncio.gather(*tuple(self._pending))


@dataclass(frozen=True, slots=True)
class LimitUse:
    """One limit and what its current window used so far."""

    limit: float
    used: float
    window: str
    resets_at: float | None


async def limits_use(
    gate: LimitGate,
    *,
    key_id: int | None = None,
    key_name: str = "",
    key_limits: LimitSet | None = None,
    group: str = "",
    group_limits: GroupLimits | None = None,
) -> dict[str, LimitUse]:
    """Each configured limit (by name) of a key or a group, and its use now."""
    gate.used = True
    now = gate.clock()
    plan = plan_for(
        key_id=key_id,
        key_name=key_name,
        key_limits=key_limits,
        group=group,
        group_limits=group_limits,
        session=None,
        digest="",
        now=now,
    )
    if plan is None:
        return {}
    values = await gate.counters.read([r.counter for r in plan.rules], now)
    return {
        rule.name: LimitUse(rule.limit, value, str(rule.window), rule.resets_at)
        for rule, value in zip(plan.rules, values, strict=True)
    }


def body_digest(body: Mapping[str, Any]) -> str:
    """The loop guard's fingerprint of a request body (key order kept as sent)."""
    return hashlib.blake2b(orjson.dumps(body), digest_size=16).hexdigest()
