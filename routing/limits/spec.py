"""Prices and limits as compiled, immutable values (from the validated configuration).

A key or group without limits compiles to ``None``, so the call path pays one ``is None``
test and behaves exactly as before limits existed.

Also here: how a canonical usage splits into uncached input, output, cache reads and
cache writes (``usage_parts``). Pricing needs it, and this module imports nothing but the
standard library (the limits' pure rules sit beside the engine), so the protocols that
report usage in Anthropic's shape read it from here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from enum import StrEnum
from typing import Any, NamedTuple

PER_MILLION = 1_000_000.0


class PriceSource(StrEnum):
    """Where a target's price came from (SPEC §17, §19): the operator's ``price``, or the
    genai-prices catalogue when the routing table compiled (``routing.limits.catalogue``)."""

    CONFIGURED = "configured"
    CATALOGUE = "catalogue"


@dataclass(frozen=True, slots=True)
class Price:
    """Currency units per million tokens. ``cached_input`` None: cache reads priced as
    input; ``cache_write`` None: cache writes priced as input (a configured price has no
    cache-write field; the catalogue's have one). ``tiers``: the catalogue's long-context
    prices, ascending — a prompt over a tier's ``above`` tokens (cache reads and writes
    included) pays that tier's price on all of its tokens, as the providers bill it."""

    input: float
    output: float
    cached_input: float | None = None
    cache_write: float | None = None
    tiers: tuple[PriceTier, ...] = ()
    source: PriceSource = PriceSource.CONFIGURED
    origin: str = ""  # a catalogue price: the catalogue, its version and the entry used

    def for_prompt(self, prompt_tokens: int) -> Price:
        """The price a prompt of ``prompt_tokens`` pays (its tier's, else this one)."""
        for tier in reversed(self.tiers):
            if prompt_tokens > tier.above:
                return tier.price
        return self

    def as_dict(self) -> dict[str, Any]:
        """For the status API and pages: the numbers and where they came from."""
        out: dict[str, Any] = {"input": self.input, "output": self.output}
        out["cached_input"] = self.cached_input
        out["cache_write"] = self.cache_write
        out["tiers"] = [
            {"above": tier.above, "input": tier.price.input, "output": tier.price.output}
            for tier in self.tiers
        ]
        out["source"] = self.source.value
        out["origin"] = self.origin or None
        return out

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
    "unknown"). Cache reads are priced as ``cached_input``, cache writes as
    ``cache_write`` (each as input when absent); reasoning tokens are output tokens."""
    if not usage or price is None:
        return None
    uncached, output, cache_read, cache_write = usage_parts(dict(usage))
    price = price.for_prompt(uncached + cache_read + cache_write)
    cached_price = price.input if price.cached_input is None else price.cached_input
    write_price = price.input if price.cache_write is None else price.cache_write
    return (
        uncached * price.input
        + cache_write * write_price
        + cache_read * cached_price
        + output * price.output
    ) / PER_MILLION


class PriceTier(NamedTuple):
    """A long-context price: a prompt of more than ``above`` tokens pays ``price``."""

    above: int
    price: Price


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


def billed_usage(usages: Iterable[Mapping[str, Any] | None]) -> dict[str, int] | None:
    """The tokens of every attempt that reported usage, summed (None: none did): what the
    upstreams billed, so what a call's cost, its token budgets and the ledger count alike.
    ``total_tokens`` is each attempt's :func:`usage_tokens`, the number a budget is charged."""
    billed: dict[str, int] | None = None
    for usage in usages:
        if not usage:
            continue
        if billed is None:
            billed = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
        for name in ("prompt_tokens", "completion_tokens"):
            value = usage.get(name)
            billed[name] += value if isinstance(value, int) and value > 0 else 0
        billed["total_tokens"] += usage_tokens(usage)
    return billed


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
