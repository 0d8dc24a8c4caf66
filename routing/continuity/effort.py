"""Per-target reasoning-effort policy (SPEC §13), applied on every attempt.

``inherit`` passes the client's value, ``max`` sends the highest of the target's
``efforts`` (ordered ``minimal < low < medium < high < xhigh``), ``drop`` removes it. A
target with an ``efforts`` list never receives a value outside it: an unsupported one is
dropped (and said so in the rewrites) rather than sent to fail with a 400 — which is not
a switch code, so it would end the very failover meant to rescue the call.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Any

EFFORT_ORDER: tuple[str, ...] = ("minimal", "low", "medium", "high", "xhigh")
EFFORT_FIELD = "reasoning_effort"


class EffortPolicy(StrEnum):
    INHERIT = "inherit"
    MAX = "max"
    DROP = "drop"


def highest(efforts: Sequence[str]) -> str | None:
    ranked = [e for e in EFFORT_ORDER if e in efforts]
    return ranked[-1] if ranked else None


def apply_effort(
    body: dict[str, Any], policy: EffortPolicy, efforts: Sequence[str]
) -> tuple[dict[str, Any], list[str]]:
    """The body with the policy applied (a copy when changed) and the rewrites made."""
    present = EFFORT_FIELD in body
    value = body.get(EFFORT_FIELD)
    if policy is EffortPolicy.DROP:
        if not present:
            return body, []
        return _without(body), [f"effort:{value}->dropped"]
    if policy is EffortPolicy.MAX and (top := highest(efforts)) is not None:
        if value == top:
            return body, []
        return {**body, EFFORT_FIELD: top}, [f"effort:{value if present else '-'}->{top}"]
    if present and efforts and value not in efforts:
        return _without(body), [f"effort:{value}->dropped(unsupported)"]
    return body, []


def _without(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k != EFFORT_FIELD}
