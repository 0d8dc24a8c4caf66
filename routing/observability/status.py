"""The live routing picture for ``GET /api/v1/status`` and the health gauge of ``/metrics``.

Chains come from the compiled routing table (never the database) and health from one
store snapshot, so a status read costs what a call's selection costs.

Each target is rendered from the engine's verdict (``routing.engine.select.judge``, the
one the call and route/explain use): ``state`` is the health state machine's (healthy /
cooling / probing / disabled), with a disabled *provider* overriding its targets: the
credential is broken for all of them. ``availability`` adds time to the picture (a
cooling target whose deadline passed is ``probe-eligible``), and
``remaining_cooldown_s`` counts down to the deadline, never below zero.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from routing.gateway.runtime import Runtime
from routing.gateway.table import GroupSpec


@dataclass(frozen=True, slots=True)
class TargetStatus:
    key: str
    provider: str
    model: str
    position: int
    weight: int
    context_window: int | None
    state: str
    availability: str
    remaining_cooldown_s: float
    last_code: str | None
    consecutive_failures: int
    # its price per million tokens and where it came from (configured, or the catalogue
    # with its version and entry: SPEC §19); None: unpriced, its calls' cost is null
    price: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class GroupStatus:
    name: str
    algorithm: str
    version: int
    policy: Mapping[str, Any]
    targets: list[TargetStatus]
    context_window: int = 0  # declared in /v1/models (SPEC §13)
    window_source: str = ""  # context_window | compact_window | targets | fallback
    rotation: int | None = None  # round-robin: position the next call starts at (seed 002)


@dataclass(frozen=True, slots=True)
class Status:
    now: float
    groups: list[GroupStatus]
    store: dict[str, object]
    unauthenticated_refusals: int = 0  # this process's, since its start (routing.engine.refusals)


async def _rotation(runtime: Runtime, group: GroupSpec) -> int | None:
    if not group.algorithm.uses_ticket or not group.targets:
        return None
    return await runtime.store.peek_ticket(group.name) % len(group.targets)


async def status_read(runtime: Runtime) -> Status:
    table = await runtime.current_table()
    keys = sorted({t.key for g in table.groups.values() for t in g.targets})
    providers = sorted({t.provider.name for g in table.groups.values() for t in g.targets})
    snapshot = await runtime.store.snapshot(keys, providers)
    now = runtime.clock()
    groups: list[GroupStatus] = []
    for group in table.groups.values():
        targets: list[TargetStatus] = []
        judged = snapshot.verdicts(group.members, now)
        for target in group.targets:
            verdict = judged[target.key]
            targets.append(
                TargetStatus(
                    key=target.key,
                    provider=target.provider.name,
                    model=target.model,
                    position=target.candidate.position,
                    weight=target.candidate.weight,
                    context_window=target.context_window,
                    state=verdict.state.value,
                    availability=verdict.availability.value,
                    remaining_cooldown_s=round(verdict.remaining_s, 3),
                    last_code=verdict.code,
                    consecutive_failures=verdict.consecutive_failures,
                    price=None if target.price is None else target.price.as_dict(),
                )
            )
        groups.append(
            GroupStatus(
                name=group.name,
                algorithm=str(group.policy.get("algorithm") or group.algorithm.name),
                version=group.version,
                policy=dict(group.policy),
                targets=targets,
                context_window=group.window.tokens,
                window_source=group.window.source,
                rotation=await _rotation(runtime, group),
            )
        )
    store = await runtime.store.describe()
    gate = runtime.limit_gate
    if gate.used:  # limits in use: where their counters are, degraded or not
        limits = gate.counters.describe()
        store["limits"] = limits
        store["degraded"] = bool(store.get("degraded")) or bool(limits.get("degraded"))
    return Status(
        now=now,
        groups=groups,
        store=store,
        unauthenticated_refusals=runtime.keyless.count,
    )
