"""Where limit counters live. :class:`LocalCounters` keeps them in this process; the
Redis store (``routing.limits.redis_counters``) shares them between processes with the
same semantics, one script per check.

A store applies a :class:`~routing.limits.rules.Plan` atomically: every rule is checked,
and only if none refuses are the COUNT and GAUGE rules taken (and the loop guard's streak
moved). In process that is one synchronous function on the event loop, so no other call
interleaves.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from routing.limits.rules import Kind, Plan, Rule, refuses

SWEEP_EVERY_S = 60.0


class Counters(Protocol):
    async def take(self, plan: Plan, now: float) -> Rule | None:
        """The first rule that refuses (nothing taken), or None (the plan is taken)."""

    async def settle(self, plan: Plan, tokens: int, cost: float | None, now: float) -> None:
        """The call ended: add its usage to the charges, give its gauges back."""

    async def read(self, counters: Sequence[str], now: float) -> list[float]:
        """Current values (0 for a counter never written or expired)."""

    def describe(self) -> dict[str, object]: ...


class LocalCounters:
    """Counters in a dict, each with an expiry (swept once a minute)."""

    name = "memory"

    def __init__(self) -> None:
        self._values: dict[str, float] = {}
        self._loops: dict[str, tuple[str, int]] = {}
        self._expires: dict[str, float] = {}
        self._next_sweep = 0.0

    async def take(self, plan: Plan, now: float) -> Rule | None:
        return self.take_now(plan, now)

    def take_now(self, plan: Plan, now: float) -> Rule | None:
        if now >= self._next_sweep:
            self._sweep(now)
        values, loops, expires, digest = self._values, self._loops, self._expires, plan.digest
        for rule in plan.rules:  # ``rules.refuses``, inlined: this loop is the hot path
            kind, value = rule.kind, values.get(rule.counter, 0.0)
            if kind is Kind.CAP:
                if value >= rule.limit:
                    return rule
            elif kind is Kind.LOOP:
                if refuses(rule, value, loops.get(rule.counter), digest):
                    return rule
            elif value + 1 > rule.limit:
                return rule
        for rule in plan.rules:
            counter, kind = rule.counter, rule.kind
            if kind is Kind.LOOP:
                last = loops.get(counter)
                streak = last[1] + 1 if last is not None and last[0] == digest else 1
                loops[counter] = (digest, streak)
            elif kind is not Kind.CAP:
                values[counter] = values.get(counter, 0.0) + 1
            expires[counter] = now + rule.ttl_s
        return None

    async def settle(self, plan: Plan, tokens: int, cost: float | None, now: float) -> None:
        self.settle_now(plan, tokens, cost, now)

    def settle_now(self, plan: Plan, tokens: int, cost: float | None, now: float) -> None:
        values = self._values
        for counter in plan.gauges:
            values[counter] = max(0.0, values.get(counter, 0.0) - 1)
        for charge in plan.charges:
            amount = (cost or 0.0) if charge.cost else float(tokens)
            if amount:
                values[charge.counter] = values.get(charge.counter, 0.0) + amount
                self._expires[charge.counter] = max(
                    self._expires.get(charge.counter, 0.0), now + charge.ttl_s
                )

    async def read(self, counters: Sequence[str], now: float) -> list[float]:
        return [
            self._values.get(c, 0.0) if self._expires.get(c, 0.0) > now else 0.0 for c in counters
        ]

    def describe(self) -> dict[str, object]:
        return {"store": self.name, "degraded": False, "detail": "in this process"}

    def _sweep(self, now: float) -> None:
        self._next_sweep = now + SWEEP_EVERY_S
        gone = [c for c, until in self._expires.items() if until <= now]
        for counter in gone:
            del self._expires[counter]
            self._values.pop(counter, None)
            self._loops.pop(counter, None)
