"""The pure check: which counters a call must pass, and the refusal when one is full.

A call's applicable limits (its key's, its group's, its session's) become a :class:`Plan`
of counter rules; a counter store (in process or Redis) applies the plan atomically:
every rule is checked first, and only when all pass is anything taken. The kinds::

    COUNT   rpm, session calls    refused when value + 1 > limit; admitting adds 1
    GAUGE   concurrency           as COUNT; the call's end gives the 1 back
    CAP     tokens and cost       refused when value >= limit; nothing taken at admit:
                                  the call's actual usage is added when it ends, so a
                                  call in flight may overshoot a budget by one call
    LOOP    loop guard            refused when the session's last body is this one and
                                  it was already sent ``limit`` times in a row

No clock is read here: ``now`` (epoch seconds, the runtime's clock) is passed in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import IntEnum, StrEnum

from routing.limits import windows
from routing.limits.spec import GroupLimits, LimitSet
from routing.limits.windows import Window

SESSION_TTL_S = 86_400  # a session's counters live a day past its last call
GAUGE_TTL_S = 3_600  # a crashed process's in-flight count expires instead of sticking


class LimitCode(StrEnum):
    """The refusal's error ``code`` (SPEC §17)."""

    RPM = "rpm_limit"
    TPM = "tpm_limit"
    CONCURRENCY = "concurrency_limit"
    BUDGET = "budget_exceeded"
    SESSION = "session_budget_exceeded"
    LOOP = "loop_detected"


# Waiting helps with these (the SDKs may retry after Retry-After); not with the others.
RETRYABLE = frozenset({LimitCode.RPM, LimitCode.TPM, LimitCode.CONCURRENCY})


class Kind(IntEnum):
    COUNT = 1
    GAUGE = 2
    CAP = 3
    LOOP = 4


@dataclass(frozen=True, slots=True)
class Rule:
    counter: str
    kind: Kind
    limit: float
    ttl_s: int
    code: LimitCode
    name: str  # as configured: "rpm", "cost_per_day", "session_limits.tokens", "loop_guard"
    scope: str  # "key 'ci-agent'", "group 'agents'", "session 's1' of group 'agents'"
    window: Window
    resets_at: float | None


@dataclass(frozen=True, slots=True)
class Charge:
    """A counter the call's actual usage is added to when it ends."""

    counter: str
    cost: bool  # False: tokens
    ttl_s: int


@dataclass(frozen=True, slots=True)
class Plan:
    rules: tuple[Rule, ...]
    charges: tuple[Charge, ...]
    digest: str = ""  # the request body's, for the loop guard
    gauges: tuple[str, ...] = ()  # counters the call's end gives back (GAUGE rules')

    def with_digest(self, digest: str) -> Plan:
        return Plan(self.rules, self.charges, digest, self.gauges)


@dataclass(frozen=True, slots=True)
class Refusal:
    code: LimitCode
    name: str
    scope: str
    limit: float
    window: Window
    resets_at: float | None

    @classmethod
    def of(cls, rule: Rule) -> Refusal:
        return cls(rule.code, rule.name, rule.scope, rule.limit, rule.window, rule.resets_at)

    @property
    def retryable(self) -> bool:
        return self.code in RETRYABLE

    def retry_after_s(self, now: float) -> int | None:
        """Whole seconds until the window frees (at least 1); None when waiting cannot
        help (a session's caps, a loop)."""
        if self.window is Window.IN_FLIGHT:
            return 1
        if self.resets_at is None:
            return None
        return max(1, math.ceil(self.resets_at - now))

    def message(self) -> str:
        value = f"{self.limit:g}"
        if self.code is LimitCode.LOOP:
            return (
                f"Loop detected: {self.scope} sent the same request {value} times in a row "
                f"(loop_guard: {value}); change the request or start a new session."
            )
        if self.window is Window.IN_FLIGHT:
            return (
                f"Concurrency limit of {self.scope} reached: {self.name} {value} calls in "
                "flight; one frees when a call ends."
            )
        if self.resets_at is None:
            return (
                f"Session budget of {self.scope} exhausted: {self.name} {value} for the "
                "session's life; start a new session."
            )
        return (
            f"Limit {self.name} of {self.scope} reached: {value} per {self.window}; "
            f"the window resets at {windows.when(self.resets_at)}."
        )


RULE_OF_LIMIT = {  # each LimitSet field -> (kind, window, code, tokens/cost charged at the end)
    "rpm": (Kind.COUNT, Window.MINUTE, LimitCode.RPM, None),
    "tpm": (Kind.CAP, Window.MINUTE, LimitCode.TPM, False),
    "concurrency": (Kind.GAUGE, Window.IN_FLIGHT, LimitCode.CONCURRENCY, None),
    "tokens_per_day": (Kind.CAP, Window.DAY, LimitCode.BUDGET, False),
    "cost_per_day": (Kind.CAP, Window.DAY, LimitCode.BUDGET, True),
    "tokens_per_month": (Kind.CAP, Window.MONTH, LimitCode.BUDGET, False),
    "cost_per_month": (Kind.CAP, Window.MONTH, LimitCode.BUDGET, True),
}


def _window(window: Window, now: float) -> tuple[str, float | None, int]:
    """(counter suffix, reset time, ttl) of the window ``now`` falls in."""
    if window is Window.MINUTE:
        number, reset = windows.minute(now)
        return f"m{number}", reset, 120
    if window is Window.DAY:
        number, reset = windows.day(now)
        return f"d{number}", reset, 2 * windows.DAY_S
    if window is Window.MONTH:
        number, reset = windows.month(now)
        return f"M{number}", reset, 32 * windows.DAY_S
    return "", None, GAUGE_TTL_S


def _limit_set_rules(
    prefix: str, scope: str, limits: LimitSet, now: float, rules: list[Rule], charges: list[Charge]
) -> None:
    for name, (kind, window, code, cost) in RULE_OF_LIMIT.items():
        limit = getattr(limits, name)
        if limit is None:
            continue
        suffix, resets_at, ttl = _window(window, now)
        counter = f"{prefix}:{name}:{suffix}"
        rules.append(Rule(counter, kind, float(limit), ttl, code, name, scope, window, resets_at))
        if cost is not None:
            charges.append(Charge(counter, cost, ttl))


def counter_prefix(kind: str, name: str) -> str:
    """``k:<key id>``, ``g:<group>``, ``s:<group>:<session>``: where a scope's counters live."""
    return f"{kind}:{name}"


def plan_for(
    *,
    key_id: int | None,
    key_name: str,
    key_limits: LimitSet | None,
    group: str,
    group_limits: GroupLimits | None,
    session: str | None,
    digest: str,
    now: float,
) -> Plan | None:
    """The rules a call must pass; None when nothing limits it."""
    rules: list[Rule] = []
    charges: list[Charge] = []
    if key_limits is not None and key_id is not None:
        _limit_set_rules(
            counter_prefix("k", str(key_id)), f"key '{key_name}'", key_limits, now, rules, charges
        )
    if group_limits is not None:
        if group_limits.limits is not None:
            _limit_set_rules(
                counter_prefix("g", group),
                f"group '{group}'",
                group_limits.limits,
                now,
                rules,
                charges,
            )
        if session:
            _session_rules(group, session, group_limits, digest, rules, charges)
    if not rules:
        return None
    gauges = tuple(r.counter for r in rules if r.kind is Kind.GAUGE)
    return Plan(tuple(rules), tuple(charges), digest, gauges)


def _session_rules(
    group: str,
    session: str,
    limits: GroupLimits,
    digest: str,
    rules: list[Rule],
    charges: list[Charge],
) -> None:
    prefix = counter_prefix("s", f"{group}:{session}")
    scope = f"session '{session}' of group '{group}'"
    if limits.loop_guard is not None:
        rules.append(
            Rule(
                f"{prefix}:loop",
                Kind.LOOP,
                float(limits.loop_guard),
                SESSION_TTL_S,
                LimitCode.LOOP,
                "loop_guard",
                scope,
                Window.SESSION,
                None,
            )
        )
    caps = limits.session
    if caps is None:
        return
    for name, kind, cost in (
        ("calls", Kind.COUNT, None),
        ("tokens", Kind.CAP, False),
        ("cost", Kind.CAP, True),
    ):
        limit = getattr(caps, name)
        if limit is None:
            continue
        counter = f"{prefix}:{name}"
        rules.append(
            Rule(
                counter,
                kind,
                float(limit),
                SESSION_TTL_S,
                LimitCode.SESSION,
                f"session_limits.{name}",
                scope,
                Window.SESSION,
                None,
            )
        )
        if cost is not None:
            charges.append(Charge(counter, cost, SESSION_TTL_S))


def refuses(rule: Rule, value: float, loop: tuple[str, int] | None, digest: str) -> bool:
    """Whether ``rule`` refuses a call, given its counter's current value (the loop
    guard's: the session's last digest and streak)."""
    if rule.kind is Kind.LOOP:
        return loop is not None and loop[0] == digest and loop[1] >= rule.limit
    if rule.kind is Kind.CAP:
        return value >= rule.limit
    return value + 1 > rule.limit
