"""What the API and the console show about limits: a key's detail (its limits, their use
in the current windows, its spend today and this month) and a group's use against its
limits. Reads, off the request path: the counters (this process's, or Redis) and the
ledger.

A selector: the caller passes the gate to read (the gateway's runtime's,
``get_runtime().limit_gate``), and "now" is the gate's clock — the one the counters'
windows were taken by, so a test that moves the runtime's clock moves these reads too.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from asgiref.sync import async_to_sync

from routing.limits.gate import LimitGate, LimitUse, limits_use
from routing.limits.spec import GroupLimits, LimitSet


def _when(epoch: float | None) -> dt.datetime | None:
    return None if epoch is None else dt.datetime.fromtimestamp(epoch, tz=dt.UTC)


def use_out(use: dict[str, LimitUse]) -> dict[str, dict[str, Any]]:
    return {
        name: {
            "limit": item.limit,
            "used": item.used,
            "window": item.window,
            "resets_at": _when(item.resets_at),
        }
        for name, item in use.items()
    }


async def key_use(
    gate: LimitGate, *, key_id: int, name: str, limits: LimitSet | None
) -> dict[str, LimitUse]:
    if limits is None:
        return {}
    return await limits_use(gate, key_id=key_id, key_name=name, key_limits=limits)


async def group_use(
    gate: LimitGate, *, name: str, limits: GroupLimits | None
) -> dict[str, LimitUse]:
    if limits is None or limits.limits is None:
        return {}
    return await limits_use(gate, group=name, group_limits=GroupLimits(limits.limits))


def key_detail(key_id: int, *, gate: LimitGate) -> dict[str, Any]:
    """``GET /api/v1/keys/{id}`` (sync: called from the management API's thread)."""
    from routing import selectors
    from routing.audit.spend import day_start, month_start, spend_totals
    from routing.config.errors import NotFound
    from routing.models import ApiKey

    key = ApiKey.objects.filter(pk=key_id).first()
    if key is None:
        raise NotFound("API key", key_id)
    limits = LimitSet.of(key.limits or {})
    use = async_to_sync(key_use)(gate, key_id=key.pk, name=key.name, limits=limits)
    now = dt.datetime.fromtimestamp(gate.clock(), tz=dt.UTC)
    return {
        **selectors.key_out(key),
        "use": use_out(use),
        "spend": {
            "today": spend_totals(since=day_start(now), key_id=key.pk),
            "month": spend_totals(since=month_start(now), key_id=key.pk),
        },
    }
