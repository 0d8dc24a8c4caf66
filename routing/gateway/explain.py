"""Dry-run route explanation: which target the next call would try, in what order, and why
each target is or is not eligible (``POST /api/v1/route/explain``).

It renders the engine's own decision — ``routing.engine.select.judge`` for each target and
``choose`` for the order, as a call's first pick makes them — from reads only: one store
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

from dataclasses import dataclass, field

from asgiref.sync import sync_to_async

from routing.engine.algorithms import SelectionView
from routing.engine.select import Use, Verdict, choose, sticky_first
from routing.engine.targets import target_key
from routing.gateway.runtime import Runtime
from routing.gateway.table import GroupSpec, TargetSpec


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


def _candidate(target: TargetSpec, verdict: Verdict, *, sticky: bool) -> CandidateExplanation:
    reason = verdict.reason(target.provider.name)
    if sticky and verdict.eligible:
        reason += "; served this session last (affinity)"
    return CandidateExplanation(
        target.key,
        target.provider.name,
        target.model,
        verdict.eligible,
        verdict.standing,
        reason,
        round(verdict.wait_s, 3) if verdict.revives_at is not None else None,
    )


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
    order = [c.key for c in group.algorithm.order(view)]
    sticky = await store.affinity_get(session) if session else None
    if sticky not in group.by_key:
        sticky = None
    judged = snapshot.verdicts(group.members, now)
    choices = choose(order, judged, now, sticky=sticky)
    first = choices[0] if choices else None
    candidates = [
        _candidate(group.by_key[key], judged[key], sticky=key == sticky)
        for key in sticky_first(order, sticky)
    ]
    next_target = first.key if first is not None else None
    force_revive = first is not None and first.use is Use.REVIVE
    if group.version:  # a real group (not a direct provider/model address)
        for provider, target_model in await sync_to_async(_configured_off)(group.name):
            candidates.append(
                CandidateExplanation(
                    target_key(provider, target_model),
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
