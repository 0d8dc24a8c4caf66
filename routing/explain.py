"""Dry-run route explanation: which target the next call would try, in what order, and why
each target is or is not eligible (``POST /api/v1/route/explain``).

It mirrors the selection of ``routing.gateway.call.Call._pick`` for a call's first pick —
algorithm order, then session affinity, then health — using only reads: one store
snapshot, the session's affinity entry and the compiled routing table. It never takes a
probe lease, force-revives, or advances a round-robin ticket. Consequences, stated in the
answer rather than hidden:

- an algorithm that rotates per call (``uses_ticket``: round-robin, weighted) is shown at
  ticket 0, i.e. the rotation's first position (``rotates: true``); the next real call
  may start elsewhere, but each target's eligibility is exact;
- a probe-eligible target is reported eligible; a concurrent call may take its probe
  lease first.

Targets disabled in the configuration are not in the routing table; they are listed last
(read from the database) as ineligible, so the answer covers every target of the group.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from asgiref.sync import sync_to_async

from routing.engine.algorithms import SelectionView
from routing.engine.health import Availability, availability
from routing.runtime import Runtime
from routing.state import Snapshot
from routing.table import GroupSpec, TargetSpec


@dataclass(frozen=True, slots=True)
class CandidateExplanation:
    target: str  # "provider/model"
    provider: str
    model: str
    eligible: bool
    state: str  # healthy | probe-eligible | probing | cooling | disabled | disabled-in-config
    reason: str
    remaining_s: float | None = None


@dataclass(frozen=True, slots=True)
class Explanation:
    model: str
    group: str
    algorithm: str
    rotates: bool
    session: str | None
    sticky: str | None  # the target this session is pinned to, if any
    next_target: str | None  # what the next call would try first (None: 503 exhaustion)
    force_revive: bool  # nothing eligible: the next call force-revives ``next_target``
    candidates: list[CandidateExplanation] = field(default_factory=list)


def _seconds(value: float) -> float:
    return round(max(0.0, value), 3)


def _judge(target: TargetSpec, snapshot: Snapshot, now: float) -> CandidateExplanation:
    def says(
        eligible: bool, state: str, reason: str, remaining: float | None = None
    ) -> CandidateExplanation:
        return CandidateExplanation(
            target.key, target.provider.name, target.model, eligible, state, reason, remaining
        )

    provider = snapshot.providers.get(target.provider.name)
    if provider is not None and provider.disabled:
        return says(
            False,
            "disabled",
            f"provider {target.provider.name!r} is disabled after "
            f"{provider.code}: re-enable it (or change its credential)",
        )
    health = snapshot.targets.get(target.key)
    if health is None:
        return says(True, "healthy", "healthy")
    state = availability(health, now)
    if state is Availability.AVAILABLE:
        return says(True, "healthy", "healthy")
    if state is Availability.PROBE_ELIGIBLE:
        return says(
            True,
            "probe-eligible",
            "its cooldown is over: the call would probe it (one attempt, no retries)",
        )
    if state is Availability.PROBING:
        return says(
            False, "probing", "another call is probing it", _seconds(health.probe_lease_until - now)
        )
    if state is Availability.COOLING:
        remaining = _seconds(health.until - now)
        return says(
            False,
            "cooling",
            f"cooling after {health.last_code or 'failures'} for {math.ceil(remaining)} s",
            remaining,
        )
    return says(False, "disabled", f"disabled after {health.last_code}")


def _configured_off(group: str) -> list[tuple[str, str]]:
    from routing.models import Target

    rows = Target.objects.filter(group__name=group, enabled=False).order_by("position")
    return list(rows.values_list("provider__name", "model"))


async def route_explain(
    runtime: Runtime, *, model: str, session: str | None = None
) -> Explanation | None:
    """Explain how the next call for ``model`` would be routed; None if nothing answers to
    that name (the gateway would say 404)."""
    table = await runtime.current_table()
    group: GroupSpec | None = table.resolve(model)
    if group is None:
        return None
    store = runtime.store
    snapshot = await store.snapshot(group.keys, group.provider_names)
    now = runtime.clock()
    view = SelectionView(ticket=0, inflight=snapshot.inflight, latency_ms=snapshot.latency_ms)
    by_key = group.by_key
    ordered = [by_key[c.key] for c in group.algorithm.order(view)]
    sticky = await store.affinity_get(session) if session else None
    if sticky not in by_key:
        sticky = None
    if sticky is not None:
        ordered.sort(key=lambda t: t.key != sticky)  # stable: only the sticky target moves

    candidates = [_judge(target, snapshot, now) for target in ordered]
    if sticky is not None and candidates[0].eligible:
        first = candidates[0]
        candidates[0] = CandidateExplanation(
            first.target,
            first.provider,
            first.model,
            True,
            first.state,
            f"{first.reason}; served this session last (affinity)",
            first.remaining_s,
        )
    next_target = next((c.target for c in candidates if c.eligible), None)
    force_revive = False
    if next_target is None:
        cooling = [c for c in candidates if c.state == "cooling"]
        if cooling:
            revive = min(cooling, key=lambda c: c.remaining_s or 0.0)
            next_target, force_revive = revive.target, True
    if group.version:  # a real group (not a direct provider/model address)
        for provider, target_model in await sync_to_async(_configured_off)(group.name):
            candidates.append(
                CandidateExplanation(
                    f"{provider}/{target_model}",
                    provider,
                    target_model,
                    False,
                    "disabled-in-config",
                    "disabled in the group's configuration",
                )
            )
    return Explanation(
        model=model,
        group=group.name,
        algorithm=str(group.policy.get("algorithm") or group.algorithm.name),
        rotates=group.algorithm.uses_ticket,
        session=session,
        sticky=sticky,
        next_target=next_target,
        force_revive=force_revive,
        candidates=candidates,
    )
