"""The target walker: which target a call takes next (SPEC §3.1–3.4).

The engine judges and orders (``routing.engine.select.choose``); :func:`pick` carries
its choices out against the store for one :class:`~routing.gateway.state.CallState`:
SERVE at once, PROBE if the lease is free, REVIVE if the store still agrees. A target the
call gave up on, one the door skipped, or one too small for a context window the call
overflowed is never offered again (:func:`excluded`). The call's loop
(``routing.gateway.call``) walks with its ticket, a rescue (``routing.gateway.rescue``)
with none; one target's tries (``routing.gateway.retry``) ask
:func:`has_alternative` before waiting out a retry in place.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from routing.engine.algorithms import SelectionView
from routing.engine.select import Use, choose
from routing.engine.select import has_alternative as any_alternative

if TYPE_CHECKING:
    from routing.gateway.state import CallState
    from routing.gateway.table import TargetSpec

PROBE_LEASE_CAP_S = 120.0


async def pick(call: CallState, ticket: int) -> tuple[TargetSpec, bool] | None:
    """The next target of ``call`` and whether it is a probe, or None when nothing is
    left (or the call's deadline passed: stop rather than charge targets for it)."""
    group, store = call.group, call.runtime.store
    if call.runtime.monotonic() >= call.deadline:
        return None
    snapshot = await store.snapshot(group.keys, group.provider_names)
    now = call.runtime.clock()
    order = group.algorithm.order(
        SelectionView(ticket=ticket, inflight=snapshot.inflight, latency_ms=snapshot.latency_ms)
    )
    sticky = await store.affinity_get(call.session) if call.session else None
    for choice in choose(
        [c.key for c in order],
        snapshot.verdicts(group.members, now),
        now,
        sticky=sticky,
        excluded=excluded(call),
    ):
        target = group.by_key[choice.key]
        if choice.use is Use.SERVE:
            if target.key not in snapshot.targets:
                call.clean.add(target.key)
            return target, False
        if choice.use is Use.PROBE:
            lease = min(target.provider.timeouts.total_s, PROBE_LEASE_CAP_S)
            if await store.try_begin_probe(target.key, now, lease):
                return target, True
            continue
        # Nothing eligible: force-revive the cooling target that expires first, so the
        # model stays up instead of failing while a route may well have recovered. It is
        # the only REVIVE offered, once per cooling window: if the store refuses (another
        # call or process won it), this call gets the fast 503.
        events = await store.force_revive(target.key, now)
        if events:
            call.runtime.hub.publish_all(events)
            return target, True
    return None


def excluded(call: CallState) -> set[str]:
    """Targets ``call`` may not use: failed or skipped, or too small for its context."""
    limit = call.context_limit
    if limit is None:
        return call.failed
    return call.failed | {t.key for t in call.group.targets if not limit.allows(t.context_window)}


async def has_alternative(call: CallState, target: TargetSpec) -> bool:
    """Whether another target of the chain could take ``call`` now (only asked after a
    failure, so a call that does not fail pays nothing for it)."""
    group = call.group
    if len(group.targets) < 2:
        return False
    snapshot = await call.runtime.store.snapshot(group.keys, group.provider_names)
    now = call.runtime.clock()
    verdicts = snapshot.verdicts(group.members, now)
    return any_alternative(group.keys, verdicts, now, excluded(call) | {target.key})
