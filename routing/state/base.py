"""The health-state store contract.

Everything a call needs to know or change about shared routing state goes through one
``HealthStore``: per-target health (keyed ``provider/model``, shared by every group),
per-provider credential state, probe leases, the per-group ticket counter that spreads
round-robin starts, in-flight counts, time-to-first-token averages, session affinity and
the provenance of served assistant turns (``routing.continuity.provenance``).

Transitions themselves are the pure functions of ``routing.engine.health``; a store only
makes read-modify-write atomic (a lock in process, WATCH/MULTI in Redis) and returns the
events the transition produced. Stores are chosen by name or dotted path
(``settings.SWITCHYARD["STATE_STORE"]``) and built lazily — see ``routing.state.build_store``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from routing.engine.failures import Failure
from routing.engine.health import CircuitPolicy, HealthEvent, ProviderHealth, TargetHealth
from routing.engine.select import Verdict, judge

LATENCY_ALPHA = 0.2  # weight of the newest time-to-first-token sample in the moving average


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What selection needs, read in one go (one round trip for a remote store)."""

    targets: Mapping[str, TargetHealth] = field(default_factory=dict)
    providers: Mapping[str, ProviderHealth] = field(default_factory=dict)
    inflight: Mapping[str, int] = field(default_factory=dict)
    latency_ms: Mapping[str, float] = field(default_factory=dict)

    def verdicts(self, targets: Iterable[tuple[str, str]], now: float) -> dict[str, Verdict]:
        """The engine's verdict on each ``(target key, provider name)`` at ``now``."""
        return {
            key: judge(self.targets.get(key), self.providers.get(provider), now)
            for key, provider in targets
        }


class HealthStore(ABC):
    """Shared routing state. Every method is atomic with respect to other callers."""

    name: str = "abstract"

    @abstractmethod
    async def snapshot(self, keys: Sequence[str], providers: Sequence[str]) -> Snapshot: ...

    @abstractmethod
    async def next_ticket(self, group: str) -> int:
        """Atomically return the group's counter and advance it (spreads concurrent calls)."""

    @abstractmethod
    async def peek_ticket(self, group: str) -> int:
        """The group's counter without advancing it (the round-robin cursor, for status)."""

    @abstractmethod
    async def try_begin_probe(self, key: str, now: float, lease_s: float) -> bool:
        """Take the single probe lease of a probe-eligible target; False if someone else has it."""

    @abstractmethod
    async def try_begin_check(self, key: str, now: float, interval_s: float) -> bool:
        """Claim a cooling target's next active health check (once per interval across
        every process sharing the store); False when it is not due or someone has it."""

    @abstractmethod
    async def release_probe(self, key: str, now: float) -> None:
        """Give back a probe lease whose call ended without a verdict (client gone)."""

    @abstractmethod
    async def record_success(
        self, key: str, now: float, ttft_ms: float | None
    ) -> list[HealthEvent]: ...

    @abstractmethod
    async def record_failure(
        self, key: str, failure: Failure, policy: CircuitPolicy, now: float, *, was_probe: bool
    ) -> list[HealthEvent]: ...

    @abstractmethod
    async def force_revive(self, key: str, now: float) -> list[HealthEvent]: ...

    @abstractmethod
    async def reset_target(self, key: str, now: float, *, by: str = "") -> list[HealthEvent]: ...

    @abstractmethod
    async def disable_provider(
        self, provider: str, failure: Failure, now: float
    ) -> list[HealthEvent]: ...

    @abstractmethod
    async def enable_provider(
        self, provider: str, now: float, *, by: str = ""
    ) -> list[HealthEvent]: ...

    @abstractmethod
    async def inflight_add(self, key: str, delta: int) -> None: ...

    @abstractmethod
    async def affinity_get(self, session: str) -> str | None: ...

    @abstractmethod
    async def affinity_set(self, session: str, key: str, ttl_s: float) -> None: ...

    @abstractmethod
    async def provenance_targets(self, scope: str) -> frozenset[str]:
        """Every target that produced a remembered turn in ``scope`` (a session key, or
        ``""`` for calls without one). One cheap read: a call whose session was only ever
        served by the target now chosen needs no look at its history at all."""

    @abstractmethod
    async def provenance_lookup(self, scope: str, fingerprints: Sequence[str]) -> dict[str, str]:
        """``fingerprint -> target key`` for the remembered ones among ``fingerprints``."""

    @abstractmethod
    async def provenance_record(
        self,
        scope: str,
        fingerprint: str | None,
        key: str,
        *,
        response_id: str | None,
        ttl_s: float,
        limit: int,
    ) -> None:
        """Remember that ``key`` produced a turn: by fingerprint in ``scope`` (at most
        ``limit`` turns per scope, the oldest forgotten) and by the upstream response id."""

    @abstractmethod
    async def provenance_by_response(self, response_id: str) -> str | None:
        """The target that produced the response with this id, if remembered."""

    @abstractmethod
    async def clear(self) -> None:
        """Forget everything (tests, and `manage.py` maintenance)."""

    async def describe(self) -> dict[str, object]:
        """Store health for the status API: name, whether it is degraded, and why."""
        return {"store": self.name, "degraded": False, "detail": ""}
