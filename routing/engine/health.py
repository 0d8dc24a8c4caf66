"""Per-target health as a pure state machine, and per-provider credential state.

Every transition is a function ``(state, facts, now) -> (new state, events)``: nothing is
stored, pushed or logged here. A state store applies a transition atomically and hands
the :class:`HealthEvent` values to whoever records and broadcasts them.

- HEALTHY: at start, after any success (counters reset), after an operator reset.
- COOLING until ``until``: after ``failure_threshold`` consecutive failed calls, at once
  after a 429 (for its ``Retry-After`` when given), or after a failed probe (next,
  doubled duration: ``base · 2^(n−1)`` capped, ``n`` = consecutive openings).
- PROBING: one call was let through after cooling ended (:func:`begin_probe`), or the
  driver force-revived the target because nothing else was eligible
  (:func:`force_revive`). Success -> HEALTHY; failure -> COOLING, doubled. A window opened
  by a failed force-revive is marked (``revived``): it is not force-revived again, and
  selection revives no other target of the chain while it runs (SPEC §16).
- Active checks (:func:`begin_check`): off the client's path a cooling target is pinged
  once per check interval; a success makes it HEALTHY (so recovery after an outage of
  any length is bounded by the interval, not by the doubled cooling window). Neither a
  check nor a force-revive goes out before a ``Retry-After`` the provider gave
  (``hold_until``, from any failure that carried one: a 429, a 503...).
- DISABLED: a 403 (``FORBIDDEN``) on this target — the key may not use this model; only an
  operator reset brings it back. The provider's other targets are untouched.

``availability()`` folds time into the picture: a COOLING target past ``until``, or a
PROBING one whose lease expired (its prober died), is PROBE_ELIGIBLE. Only one probe is
in flight per target because :func:`begin_probe` demands eligibility and takes a lease.

Credential failures (AUTH, QUOTA) disable the *provider* (:class:`ProviderHealth`), since
every target of it shares the broken credential; only an operator re-enables it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from enum import StrEnum
from typing import Any

from .failures import Failure, FailureCode
from .targets import provider_of

FORCE_REVIVE_LEASE_S = 30.0
_MAX_EXPONENT = 62


class HealthState(StrEnum):
    HEALTHY = "healthy"
    COOLING = "cooling"
    PROBING = "probing"
    DISABLED = "disabled"


class Availability(StrEnum):
    AVAILABLE = "available"
    COOLING = "cooling"
    PROBE_ELIGIBLE = "probe-eligible"
    PROBING = "probing"
    DISABLED = "disabled"


class HealthTransitionError(ValueError):
    """A transition was asked of a state that does not allow it (e.g. probing a healthy target)."""


@dataclass(frozen=True, slots=True)
class CircuitPolicy:
    """Cooling parameters. The defaults are the engine's own (stdlib only);
    tests/config/test_policy_fields.py holds them to ``routing.config.schema.CircuitPolicyIn``."""

    failure_threshold: int = 1
    cooldown_base_ms: int = 10_000
    cooldown_cap_ms: int = 600_000


@dataclass(frozen=True, slots=True)
class TargetHealth:
    state: HealthState = HealthState.HEALTHY
    consecutive_failures: int = 0
    openings: int = 0  # consecutive circuit openings (n in base*2^(n-1)); reset by success
    until: float = 0.0  # cooling deadline (epoch s)
    probe_lease_until: float = 0.0
    last_code: str | None = None
    last_message: str = ""
    # The latest ``Retry-After`` deadline the provider itself gave: not even a force-revive
    # sends a call before it (SPEC §4). Cleared by a success.
    hold_until: float = 0.0
    # When the next active health check of this cooling target may run (0: not yet armed).
    next_check: float = 0.0
    # This cooling window was opened by a failed force-revive (or one is in flight): no
    # call force-revives it, or any target sharing a chain with it, until the window ends
    # (SPEC §16: one client call per cooling window into a dead route). Cleared by a
    # success and by an ordinary probe.
    revived: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "state": self.state.value}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TargetHealth:
        """Inverse of :meth:`to_dict`; unknown keys are ignored so stores survive upgrades."""
        return cls(
            state=HealthState(d.get("state", HealthState.HEALTHY)),
            consecutive_failures=int(d.get("consecutive_failures", 0)),
            openings=int(d.get("openings", 0)),
            until=float(d.get("until", 0.0)),
            probe_lease_until=float(d.get("probe_lease_until", 0.0)),
            last_code=d.get("last_code"),
            last_message=str(d.get("last_message", "")),
            hold_until=float(d.get("hold_until", 0.0)),
            next_check=float(d.get("next_check", 0.0)),
            revived=bool(d.get("revived", False)),
        )


@dataclass(frozen=True, slots=True)
class ProviderHealth:
    disabled: bool = False
    code: str | None = None
    since: float = 0.0
    message: str = ""  # the upstream's own (scrubbed) words, for the exhaustion message

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ProviderHealth:
        return cls(
            disabled=bool(d.get("disabled", False)),
            code=d.get("code"),
            since=float(d.get("since", 0.0)),
            message=str(d.get("message", "")),
        )


class EventKind(StrEnum):
    COOLING = "cooling"
    DISABLED = "disabled"
    REVIVED = "revived"
    PROBE = "probe"
    RESET = "reset"
    ENABLED = "enabled"
    FORCE_REVIVED = "force-revived"


@dataclass(frozen=True, slots=True)
class HealthEvent:
    kind: EventKind
    target: str | None  # "provider/model" key, None for provider-level events
    provider: str | None
    at: float
    until: float | None = None
    code: str | None = None
    ok: bool | None = None  # probe result
    cooldown_s: float | None = None
    message: str = ""
    actor: str = ""  # who, for operator actions (reset, re-enable)
    call_id: str = ""  # the call whose failure or probe caused it ("" for checks, operators)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "kind": self.kind.value}


def cooling_duration_s(policy: CircuitPolicy, openings: int) -> float:
    """``base · 2^(n−1)`` capped, in seconds; ``n`` below 1 counts as 1."""
    exponent = min(max(openings, 1) - 1, _MAX_EXPONENT)
    return float(min(policy.cooldown_base_ms * 2**exponent, policy.cooldown_cap_ms)) / 1000.0


def availability(h: TargetHealth, now: float) -> Availability:
    if h.state is HealthState.HEALTHY:
        return Availability.AVAILABLE
    if h.state is HealthState.DISABLED:
        return Availability.DISABLED
    if h.state is HealthState.COOLING:
        return Availability.COOLING if now < h.until else Availability.PROBE_ELIGIBLE
    return Availability.PROBING if now < h.probe_lease_until else Availability.PROBE_ELIGIBLE


def begin_probe(h: TargetHealth, now: float, *, lease_s: float) -> TargetHealth:
    """Take the single probe slot for ``lease_s`` seconds. Raises unless probe-eligible."""
    if availability(h, now) is not Availability.PROBE_ELIGIBLE:
        raise HealthTransitionError(f"cannot probe a target that is {availability(h, now)}")
    return replace(h, state=HealthState.PROBING, probe_lease_until=now + lease_s, revived=False)


def begin_check(h: TargetHealth, now: float, *, interval_s: float) -> tuple[TargetHealth, bool]:
    """Claim the next active health check of a cooling target: ``(state, due)``.

    The first sighting of a cooling target only arms the timer (``next_check = now +
    interval``), so a target is not pinged the instant it failed; after that a check is
    due once per ``interval_s``, and never before ``hold_until``: the provider said when to
    come back, and a ping that succeeded early would revive the target for client calls
    too. Only COOLING targets are checked — a PROBING one already
    has a call testing it, and healthy/disabled ones need no ping. A failed check records
    nothing: the cooling window, and so the pace of client calls into a dead route, stays
    the circuit's; a successful one is an ordinary :func:`record_success`.
    """
    if h.state is not HealthState.COOLING or interval_s <= 0:
        return h, False
    if h.next_check == 0.0:
        return replace(h, next_check=max(now + interval_s, h.hold_until)), False
    if now < h.next_check or now < h.hold_until:
        return h, False
    return replace(h, next_check=now + interval_s), True


def release_probe(h: TargetHealth, now: float) -> TargetHealth:
    """The prober went away without a verdict (its client disconnected): hand the probe
    slot back at once instead of leaving the target unusable until the lease expires. The
    target stays unproven, so the next call probes it; nothing is counted either way."""
    if h.state is not HealthState.PROBING:
        return h
    return replace(h, state=HealthState.COOLING, until=min(h.until, now), probe_lease_until=0.0)


def record_success(h: TargetHealth, key: str, now: float) -> tuple[TargetHealth, list[HealthEvent]]:
    """Any success makes the target healthy with every counter reset."""
    fresh = TargetHealth()
    provider = provider_of(key)
    if h.state is HealthState.HEALTHY:
        return fresh, []
    events: list[HealthEvent] = []
    if h.state is HealthState.PROBING:
        events.append(HealthEvent(EventKind.PROBE, key, provider, now, ok=True))
    events.append(HealthEvent(EventKind.REVIVED, key, provider, now))
    return fresh, events


def _hold(h: TargetHealth, failure: Failure, now: float) -> float:
    """The provider's own "not before": the ``Retry-After`` of any failure that carried one
    (a 429, a 503 "back in two minutes"), never shortened."""
    if failure.retry_after_s is not None:
        return max(h.hold_until, now + failure.retry_after_s)
    return h.hold_until


def _cool(
    h: TargetHealth, key: str, failure: Failure, now: float, seconds: float, consecutive: int
) -> tuple[TargetHealth, HealthEvent]:
    # A new deadline never shortens one in force (e.g. a long Retry-After), not even after
    # a force-revived probe fails, and never ends before a ``Retry-After`` the provider
    # gave (any failure's: a 503 "back in two minutes" too), so no call probes it early.
    # A deadline already past is below ``now + seconds``.
    hold = _hold(h, failure, now)
    until = max(h.until, now + seconds, hold)
    new = TargetHealth(
        revived=h.state is HealthState.PROBING and h.revived,
        # The active checks keep their cadence: a failed client probe re-arming them would
        # push the next check a whole interval later, and recovery with it (SPEC §4: back
        # in service within 15 s of recovering).
        next_check=h.next_check,
        state=HealthState.COOLING,
        consecutive_failures=consecutive,
        openings=h.openings + 1,
        until=until,
        last_code=failure.code.value,
        last_message=failure.message,
        hold_until=hold,
    )
    event = HealthEvent(
        EventKind.COOLING,
        key,
        provider_of(key),
        now,
        until=until,
        code=failure.code.value,
        cooldown_s=until - now,
        message=failure.message,
    )
    return new, event


def record_failure(
    h: TargetHealth,
    key: str,
    failure: Failure,
    policy: CircuitPolicy,
    now: float,
    *,
    was_probe: bool = False,
) -> tuple[TargetHealth, list[HealthEvent]]:
    """Charge one failed call to the target.

    - a failed probe cools again at once for the next, doubled duration (a 429's
      ``Retry-After`` if it is longer);
    - RATE_LIMIT cools at once, for ``Retry-After`` when given (honoured as is, uncapped),
      else for the next doubled duration;
    - anything else counts toward ``failure_threshold``.

    A failure reported while a cooling deadline is still in force (a straggler dispatched
    before the circuit opened) is not a new opening — ten concurrent failures must not
    jump straight to the cap — but a 429 may still push the deadline later.
    """
    consecutive = h.consecutive_failures + 1
    provider = provider_of(key)
    if failure.code is FailureCode.FORBIDDEN:
        return _disable_target(h, key, failure, now)
    is_rate_limit = failure.code is FailureCode.RATE_LIMIT
    next_duration = cooling_duration_s(policy, h.openings + 1)
    if was_probe:
        seconds = next_duration
        if is_rate_limit and failure.retry_after_s is not None:
            seconds = max(seconds, failure.retry_after_s)
        new, cooling = _cool(h, key, failure, now, seconds, consecutive)
        probe = HealthEvent(
            EventKind.PROBE,
            key,
            provider,
            now,
            code=failure.code.value,
            ok=False,
            message=failure.message,
        )
        return new, [probe, cooling]
    if h.state is HealthState.COOLING and h.until > now:
        return _note_straggler(h, key, failure, now, consecutive)
    if is_rate_limit:
        seconds = failure.retry_after_s if failure.retry_after_s is not None else next_duration
        new, event = _cool(h, key, failure, now, seconds, consecutive)
        return new, [event]
    if consecutive >= policy.failure_threshold:
        new, event = _cool(h, key, failure, now, next_duration, consecutive)
        return new, [event]
    counted = replace(
        h,
        consecutive_failures=consecutive,
        last_code=failure.code.value,
        last_message=failure.message,
        hold_until=_hold(h, failure, now),
    )
    return counted, []


def _disable_target(
    h: TargetHealth, key: str, failure: Failure, now: float
) -> tuple[TargetHealth, list[HealthEvent]]:
    """403: this key may not use this model. The target is DISABLED until an operator
    resets it; the provider's other targets keep serving."""
    if h.state is HealthState.DISABLED:
        return h, []
    disabled = TargetHealth(
        state=HealthState.DISABLED, last_code=failure.code.value, last_message=failure.message
    )
    event = HealthEvent(
        EventKind.DISABLED,
        key,
        provider_of(key),
        now,
        code=failure.code.value,
        message=failure.message,
    )
    return disabled, [event]


def _note_straggler(
    h: TargetHealth, key: str, failure: Failure, now: float, consecutive: int
) -> tuple[TargetHealth, list[HealthEvent]]:
    noted = replace(
        h,
        consecutive_failures=consecutive,
        last_code=failure.code.value,
        last_message=failure.message,
        hold_until=_hold(h, failure, now),
    )
    wait = failure.retry_after_s if failure.code is FailureCode.RATE_LIMIT else None
    if wait is None or now + wait <= h.until:
        return noted, []
    noted = replace(noted, until=now + wait)
    return noted, [
        HealthEvent(
            EventKind.COOLING,
            key,
            provider_of(key),
            now,
            until=noted.until,
            code=failure.code.value,
            cooldown_s=wait,
            message=failure.message,
        )
    ]


def force_revive(
    h: TargetHealth, key: str, now: float, *, lease_s: float = FORCE_REVIVE_LEASE_S
) -> tuple[TargetHealth, list[HealthEvent]]:
    """Nothing else is eligible: probe this cooling target now instead of failing the call
    — unless the provider asked for a wait (``Retry-After``) that has not passed, or this
    window was already opened by a failed force-revive (once per cooling window): then
    nothing changes and no event is returned."""
    if h.state is not HealthState.COOLING:
        raise HealthTransitionError(f"only a cooling target can be force-revived, not {h.state}")
    if now < h.hold_until or h.revived:
        return h, []
    new = replace(h, state=HealthState.PROBING, probe_lease_until=now + lease_s, revived=True)
    event = HealthEvent(
        EventKind.FORCE_REVIVED,
        key,
        provider_of(key),
        now,
        until=h.until,
        code=h.last_code,
        message=f"cooling until {h.until:.3f} cut short",
    )
    return new, [event]


def reset(
    h: TargetHealth, key: str, now: float, *, by: str = ""
) -> tuple[TargetHealth, list[HealthEvent]]:
    """Operator action: a fresh healthy target. Always recorded, even if already healthy."""
    message = f"reset by {by}" if by else "reset"
    return TargetHealth(), [
        HealthEvent(
            EventKind.RESET,
            key,
            provider_of(key),
            now,
            code=h.last_code,
            message=message,
            actor=by,
        )
    ]


def disable_provider(
    p: ProviderHealth, provider: str, failure: Failure, now: float
) -> tuple[ProviderHealth, list[HealthEvent]]:
    """Disable every target of ``provider``. Idempotent: the first failure's code is kept."""
    if p.disabled:
        return p, []
    new = ProviderHealth(disabled=True, code=failure.code.value, since=now, message=failure.message)
    return new, [
        HealthEvent(
            EventKind.DISABLED,
            None,
            provider,
            now,
            code=failure.code.value,
            message=failure.message,
        )
    ]


def enable_provider(
    p: ProviderHealth, provider: str, now: float, *, by: str = ""
) -> tuple[ProviderHealth, list[HealthEvent]]:
    """Operator action (or a changed credential). No event if it was not disabled."""
    if not p.disabled:
        return p, []
    message = f"enabled by {by}" if by else "enabled"
    return ProviderHealth(), [
        HealthEvent(EventKind.ENABLED, None, provider, now, code=p.code, message=message, actor=by)
    ]
