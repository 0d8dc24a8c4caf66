"""Health badges: what a target's badge says, read from one health-store snapshot.

A badge is one of

- ``healthy``;
- ``cooling`` with the deadline (epoch seconds, the server's clock) that the browser
  counts down to; a cooling target whose deadline passed is ``probe-eligible`` (the next
  call probes it), which the page shows as the end of the countdown;
- ``probing`` (one call is trying it);
- ``disabled`` with the failure code: the provider's credential failed (AUTH, QUOTA,
  FORBIDDEN); every target of that provider shows it until an operator re-enables it.

State comes from the engine's verdict (``routing.engine.select.judge``), the same one the
status API, route/explain and the call render, so they never disagree. Badges show codes, never
upstream messages (an upstream can echo anything back).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from routing.engine.health import Availability
from routing.engine.targets import provider_of
from routing.gateway.runtime import Runtime


@dataclass(frozen=True, slots=True)
class Badge:
    key: str  # "provider/model"
    state: str  # healthy | cooling | probe-eligible | probing | disabled
    until: float  # cooling deadline, epoch seconds; 0 unless cooling
    remaining_s: float
    code: str | None  # last failure code (the disabling code when disabled)

    @property
    def provider(self) -> str:
        return provider_of(self.key)


async def badges_read(runtime: Runtime, keys: Iterable[str]) -> dict[str, Badge]:
    """One snapshot for all ``keys``; a key the store never saw is healthy."""
    wanted = sorted(set(keys))
    providers = sorted({provider_of(key) for key in wanted})
    snapshot = await runtime.store.snapshot(wanted, providers)
    now = runtime.clock()
    judged = snapshot.verdicts(((key, provider_of(key)) for key in wanted), now)
    badges: dict[str, Badge] = {}
    for key, verdict in judged.items():
        cooling = verdict.availability is Availability.COOLING
        badges[key] = Badge(
            key=key,
            state=verdict.standing,
            until=(verdict.revives_at or 0.0) if cooling else 0.0,
            remaining_s=verdict.remaining_s,
            code=verdict.code,
        )
    return badges


async def disabled_providers(runtime: Runtime, names: Iterable[str]) -> dict[str, str]:
    """``{provider: code}`` for the providers whose credential is disabled."""
    wanted = sorted(set(names))
    snapshot = await runtime.store.snapshot([], wanted)
    return {
        name: health.code or "disabled"
        for name, health in snapshot.providers.items()
        if health.disabled
    }
