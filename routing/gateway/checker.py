"""Active health checks: bring a recovered target back without sending clients into it.

A cooling target is only tried by a client call when its cooling window ends, and the
window doubles after every failed probe (10 → 20 → 40 s …), so after a long outage a
recovered route could sit unused for minutes. The checker closes that gap off the
client's path: every ``interval_s`` (per provider: its ``health_check_s``, else
``SWITCHYARD_HEALTH_CHECK_S``, default 10 s; 0 = off) it sends each cooling target one
cheap request — a non-streaming
request in the target's own protocol (the provider "test" body: ``max_tokens: 1`` for chat
and Messages, a short ``input`` for Responses) through the provider's pooled client — and a success
makes the target healthy at once. A failed check changes nothing: the cooling window (and
so the rate of client calls into a dead route, one per window) is the circuit's. No check
goes out before a ``Retry-After`` the provider gave (``routing.engine.health.begin_check``),
and none to a provider whose credential or headers no request can carry (its
``config_error``: it needs an operator, and building its client would fail).

Coordination: the slot for a target's next check is claimed through the state store
(``try_begin_check``, atomic in Redis too), so N gateway processes check a target once per
interval between them, not N times.

Recovery bound: a target that recovers at ``R`` is checked by ``R + interval_s`` (plus one
checker tick, 1 s) and serves the next call: within 15 s with the defaults.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import orjson

from routing.engine.failures import FailureCode
from routing.engine.health import Availability, availability
from routing.engine.plan import CommitPoint
from routing.gateway.attempt import run_attempt
from routing.upstream.openai import UpstreamFailure

if TYPE_CHECKING:
    from routing.engine.health import HealthEvent
    from routing.gateway.table import ProviderSpec, RoutingTable, TargetSpec
    from routing.state import HealthStore
    from routing.upstream.openai import OpenAIClient

log = logging.getLogger("switchyard.health")

TICK_S = 1.0
# A check asks for one token: a target that has not answered it in a minute is not back,
# whatever first_token_s allows a thinking model (docs/outages.md).
CHECK_CAP_S = 60.0


@dataclass(frozen=True, slots=True)
class Checks:
    """What a pass of checks uses of the gateway, read from it for each pass
    (``Runtime.health_checks``): the table served now, the health store, the providers'
    pooled clients, where health events go, and the two clocks."""

    table: RoutingTable | None
    store: HealthStore
    client_for: Callable[[ProviderSpec], OpenAIClient]
    publish: Callable[[list[HealthEvent]], None]
    clock: Callable[[], float]  # wall-clock seconds: health and check slots
    monotonic: Callable[[], float]  # a check's deadline


def _targets(table: RoutingTable | None) -> dict[str, TargetSpec]:
    """Every distinct target of ``table`` (groups share targets) whose provider is
    checked at all: an interval above 0 and a configuration a request can carry."""
    if table is None:
        return {}
    found: dict[str, TargetSpec] = {}
    for group in table.groups.values():
        for target in group.targets:
            provider = target.provider
            if provider.check_interval_s > 0 and not provider.config_error:
                found.setdefault(target.key, target)
    return found


async def check_once(checks: Checks) -> list[str]:
    """One pass: check every cooling target whose check is due. Returns the keys checked."""
    targets = _targets(checks.table)
    if not targets:
        return []
    store = checks.store
    providers = tuple(dict.fromkeys(t.provider.name for t in targets.values()))
    snapshot = await store.snapshot(tuple(targets), providers)
    now = checks.clock()
    due: list[TargetSpec] = []
    for key, health in snapshot.targets.items():
        target = targets.get(key)
        if target is None:
            continue
        provider_health = snapshot.providers.get(target.provider.name)
        if provider_health is not None and provider_health.disabled:
            continue  # a broken credential needs an operator, not a ping
        if availability(health, now) not in (Availability.COOLING, Availability.PROBE_ELIGIBLE):
            continue
        if await store.try_begin_check(key, now, target.provider.check_interval_s):
            due.append(target)
    if due:
        await asyncio.gather(*(_check(checks, target) for target in due))
    return [t.key for t in due]


async def _check(checks: Checks, target: TargetSpec) -> None:
    client = checks.client_for(target.provider)
    body = orjson.dumps(client.test_body(target.model))  # each kind speaks its own protocol
    timeouts = target.provider.timeouts
    deadline = checks.monotonic() + min(timeouts.first_token_s, timeouts.total_s, CHECK_CAP_S)
    try:
        await run_attempt(
            client,
            body,
            stream=False,
            commit=CommitPoint.FIRST_CONTENT,
            model=target.model,
            deadline=deadline,
            door=client.protocol.kind,
            kind=client.protocol.kind,
            clock=checks.monotonic,
        )
    except UpstreamFailure as exc:
        if exc.failure.code is not FailureCode.EMPTY_RESPONSE:  # a 1-token answer may be empty
            return
    except Exception:  # a check must never take the checker down
        log.exception("health check of %s crashed", target.key)
        return
    events = await checks.store.record_success(target.key, checks.clock(), None)
    checks.publish(events)


async def run_forever(checks: Callable[[], Checks]) -> None:
    """A pass every tick, each with what ``checks()`` gives then (the runtime's table,
    store, hub and clocks may be replaced between passes)."""
    while True:
        try:
            await check_once(checks())
        except Exception:  # the store may be down for a while; try again next tick
            log.debug("health check pass failed", exc_info=True)
        await asyncio.sleep(TICK_S)
