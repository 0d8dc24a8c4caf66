"""Prices and limits as compiled, immutable values (from the validated configuration).

A key or group without limits compiles to ``None``, so the call path pays one ``is None``
test and behaves exactly as before limits existed.

Also here: how a canonical usage splits into uncached input, output, cache reads and
cache writes (``usage_parts``). Pricing needs it, and this module imports nothing but the
standard library (the limits' pure rules sit beside the engine), so the protocols that
report usage in Anthropic's shape read it from here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

PER_MILLION = 1_000_000.0


@dataclass(frozen=True, slots=True)
class Price:
    """Currency units per million tokens. ``cached_input`` None: priced as input."""

    input: float
    output: float
    cached_input: float | None = None

    @classmethod
    def of(cls, raw: Any) -> Price | None:
        if not isinstance(raw, Mapping) or "input" not in raw or "output" not in raw:
            return None
        cached = raw.get("cached_input")
        return cls(
            float(raw["input"]), float(raw["output"]), None if cached is None else float(cached)
        )


def usage_parts(usage: dict[str, Any] | None) -> tuple[int, int, int, int]:
    """(uncached input, output, cache read, cache write) of a canonical usage."""
    if not usage:
        return 0, 0, 0, 0
    details = usage.get("prompt_tokens_details") or {}
    cache_read = int(details.get("cached_tokens") or 0)
    cache_write = int(usage.get("cache_creation_input_tokens") or 0)
    prompt = int(usage.get("prompt_tokens") or 0)
    return (
        max(prompt - cache_read - cache_write, 0),
        int(usage.get("completion_tokens") or 0),
        cache_read,
        cache_write,
    )


def cost_of(usage: Mapping[str, Any] | None, price: Price | None) -> float | None:
    """A call's cost from its canonical usage; None without usage or price (never 0 for
    "unknown"). Cache reads are priced as ``cached_input``; cache writes as input."""
    if not usage or price is None:
        return None
    uncached, output, cache_read, cache_write = usage_parts(dict(usage))
    cached_price = price.input if price.cached_input is None else price.cached_input
    return (
        (uncached + cache_write) * price.input + cache_read * cached_price + output * price.output
    ) / PER_MILLION


def usage_tokens(usage: Mapping[str, Any] | None) -> int:
    """Tokens a call used, for token limits: prompt + completion (0 without usage)."""
    if not usage:
        return 0
    total = usage.get("total_tokens")
    if isinstance(total, int) and total >= 0:
        return total
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    return (prompt if isinstance(prompt, int) else 0) + (
        completion if isinstance(completion, int) else 0
    )


@dataclass(frozen=True, slots=True)
class LimitSet:
    """A group's or key's ``limits`` (each optional). Names as in SPEC §17."""

    rpm: int | None = None
    tpm: int | None = None
    concurrency: int | None = None
    tokens_per_day: int | None = None
    cost_per_day: float | None = None
    tokens_per_month: int | None = None
    cost_per_month: float | None = None

    @classmethod
    def of(cls, values: Mapping[str, Any]) -> LimitSet | None:
        """From ``{"rpm": 60, ...}`` (validated); None when no limit is set."""
        found = {f.name: values[f.name] for f in fields(cls) if values.get(f.name) is not None}
        return cls(**found) if found else None

    def as_dict(self) -> dict[str, int | float]:
        return {
            f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None
        }


@dataclass(frozen=True, slots=True)
class SessionCaps:
    tokens: int | None = None
    cost: float | None = None
    calls: int | None = None


@dataclass(frozen=True, slots=True)
class GroupLimits:
    """Everything a group limits: its own window limits, per-session caps, loop guard."""

    limits: LimitSet | None = None
    session: SessionCaps | None = None
    loop_guard: int | None = None

    @classmethod
    def of_policy(cls, policy: Mapping[str, Any]) -> GroupLimits | None:
        """From a group's effective flat policy (``limits.rpm``, ``session_limits.calls``…)."""
        limits = LimitSet.of({k[7:]: v for k, v in policy.items() if k.startswith("limits.")})
        caps = {name: policy.get(f"session_limits.{name}") for name in ("tokens", "cost", "calls")}
        session = SessionCaps(**caps) if any(v is not None for v in caps.values()) else None
        guard = policy.get("loop_guard")
        loop_guard = int(guard) if isinstance(guard, int) and guard > 0 else None
        if limits is None and session is None and loop_guard is None:
            return None
        return cls(limits, session, loop_guard)
