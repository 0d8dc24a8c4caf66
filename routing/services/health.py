"""Operator health actions: reset a target, re-enable a provider.

Health lives in the (async) state store, shared by every gateway process; these sync
functions drive it with ``async_to_sync`` and publish the resulting events on the runtime
hub, so the audit writer records them (with the actor, which the health machine writes
into the event message) and live pages see them. Call them from a worker thread.
"""

from __future__ import annotations

from asgiref.sync import async_to_sync

from routing.config.errors import NotFound
from routing.engine.targets import target_key
from routing.models import Provider, Target


async def _enable(provider: str, by: str) -> None:
    from routing.gateway.runtime import get_runtime

    runtime = get_runtime()
    runtime.hub.publish_all(await runtime.store.enable_provider(provider, runtime.clock(), by=by))


async def _reset(key: str, by: str) -> None:
    from routing.gateway.runtime import get_runtime

    runtime = get_runtime()
    runtime.hub.publish_all(await runtime.store.reset_target(key, runtime.clock(), by=by))


def enable_in_store(provider: str, *, by: str) -> None:
    async_to_sync(_enable)(provider, by)


def provider_enable(*, name: str, actor: str) -> None:
    """Lift a credential-disabled provider (AUTH / QUOTA / FORBIDDEN). The health event
    names the actor; when the provider was not disabled nothing happens."""
    if not Provider.objects.filter(name=name).exists():
        raise NotFound("provider", name)
    enable_in_store(name, by=actor)


def target_reset(*, target_id: int, actor: str) -> None:
    """Forget a target's health (cooling, counters) so the next call may use it. Health is
    per ``provider/model``, so every group with that route sees the reset."""
    target = Target.objects.select_related("provider").filter(pk=target_id).first()
    if target is None:
        raise NotFound("target", target_id)
    async_to_sync(_reset)(target_key(target.provider.name, target.model), actor)
