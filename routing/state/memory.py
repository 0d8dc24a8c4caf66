"""In-process health store: the embedded default for a single gateway process.

All state lives in dicts guarded by one lock. The lock is a ``threading.Lock`` rather than
an asyncio one because operator actions (management API, admin) may run in worker
threads; every critical section is a few dict operations and never awaits.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from routing.engine import health as machine
from routing.engine.failures import Failure
from routing.engine.health import CircuitPolicy, HealthEvent, ProviderHealth, TargetHealth
from routing.state.base import LATENCY_ALPHA, HealthStore, Snapshot

AFFINITY_LIMIT = 100_000  # sessions remembered; the oldest are dropped beyond this
PROVENANCE_SCOPES_LIMIT = 100_000  # sessions with remembered turns
RESPONSES_LIMIT = 100_000  # response ids remembered


@dataclass(slots=True)
class _Scope:
    """Remembered turns of one session: fingerprint -> target key, oldest first."""

    turns: OrderedDict[str, str] = field(default_factory=OrderedDict)
    targets: set[str] = field(default_factory=set)
    expires: float = 0.0


class MemoryStore(HealthStore):
    name = "memory"

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        """``clock`` is monotonic seconds: it expires sessions and remembered turns (health
        deadlines are not its business: every transition is given ``now``)."""
        self._clock = clock
        self._lock = threading.Lock()
        self._targets: dict[str, TargetHealth] = {}
        self._providers: dict[str, ProviderHealth] = {}
        self._tickets: dict[str, int] = {}
        self._inflight: dict[str, int] = {}
        self._latency: dict[str, float] = {}
        self._affinity: dict[str, tuple[str, float]] = {}
        self._scopes: OrderedDict[str, _Scope] = OrderedDict()
        self._responses: OrderedDict[str, tuple[str, float]] = OrderedDict()

    async def snapshot(self, keys: Sequence[str], providers: Sequence[str]) -> Snapshot:
        # Values are immutable dataclasses and numbers: picking them out is enough.
        targets, health = self._targets, {}
        for key in keys:
            if (state := targets.get(key)) is not None:
                health[key] = state
        credentials = {}
        for name in providers:
            if (provider := self._providers.get(name)) is not None:
                credentials[name] = provider
        return Snapshot(
            targets=health,
            providers=credentials,
            inflight={k: n for k in keys if (n := self._inflight.get(k))},
            latency_ms={k: ms for k in keys if (ms := self._latency.get(k)) is not None},
        )

    async def next_ticket(self, group: str) -> int:
        with self._lock:
            ticket = self._tickets.get(group, 0)
            self._tickets[group] = ticket + 1
            return ticket

    async def peek_ticket(self, group: str) -> int:
        return self._tickets.get(group, 0)

    async def try_begin_probe(self, key: str, now: float, lease_s: float) -> bool:
        with self._lock:
            current = self._targets.get(key, TargetHealth())
            if machine.availability(current, now) is not machine.Availability.PROBE_ELIGIBLE:
                return False
            self._targets[key] = machine.begin_probe(current, now, lease_s=lease_s)
            return True

    async def try_begin_check(self, key: str, now: float, interval_s: float) -> bool:
        with self._lock:
            current = self._targets.get(key)
            if current is None:
                return False
            updated, due = machine.begin_check(current, now, interval_s=interval_s)
            self._targets[key] = updated
            return due

    async def release_probe(self, key: str, now: float) -> None:
        with self._lock:
            current = self._targets.get(key)
            if current is not None:
                self._targets[key] = machine.release_probe(current, now)

    async def record_success(
        self, key: str, now: float, ttft_ms: float | None
    ) -> list[HealthEvent]:
        with self._lock:
            if ttft_ms is not None:
                old = self._latency.get(key)
                self._latency[key] = (
                    ttft_ms if old is None else old + LATENCY_ALPHA * (ttft_ms - old)
                )
            current = self._targets.get(key)
            if current is None:
                return []  # healthy and never failed: nothing to change, the common case
            updated, events = machine.record_success(current, key, now)
            if updated == TargetHealth():
                del self._targets[key]
            else:
                self._targets[key] = updated
            return events

    async def record_failure(
        self, key: str, failure: Failure, policy: CircuitPolicy, now: float, *, was_probe: bool
    ) -> list[HealthEvent]:
        with self._lock:
            updated, events = machine.record_failure(
                self._targets.get(key, TargetHealth()),
                key,
                failure,
                policy,
                now,
                was_probe=was_probe,
            )
            self._targets[key] = updated
            return events

    async def force_revive(self, key: str, now: float) -> list[HealthEvent]:
        with self._lock:
            current = self._targets.get(key, TargetHealth())
            if machine.availability(current, now) is not machine.Availability.COOLING:
                return []  # someone else revived it first
            updated, events = machine.force_revive(current, key, now)
            self._targets[key] = updated
            return events

    async def reset_target(self, key: str, now: float, *, by: str = "") -> list[HealthEvent]:
        with self._lock:
            _, events = machine.reset(self._targets.get(key, TargetHealth()), key, now, by=by)
            self._targets.pop(key, None)
            return events

    async def disable_provider(
        self, provider: str, failure: Failure, now: float
    ) -> list[HealthEvent]:
        with self._lock:
            updated, events = machine.disable_provider(
                self._providers.get(provider, ProviderHealth()), provider, failure, now
            )
            self._providers[provider] = updated
            return events

    async def enable_provider(
        self, provider: str, now: float, *, by: str = ""
    ) -> list[HealthEvent]:
        with self._lock:
            _, events = machine.enable_provider(
                self._providers.get(provider, ProviderHealth()), provider, now, by=by
            )
            self._providers.pop(provider, None)
            return events

    async def inflight_add(self, key: str, delta: int) -> None:
        with self._lock:
            self._inflight[key] = max(0, self._inflight.get(key, 0) + delta)

    async def affinity_get(self, session: str) -> str | None:
        entry = self._affinity.get(session)
        if entry is None or entry[1] < self._clock():
            return None
        return entry[0]

    async def affinity_set(self, session: str, key: str, ttl_s: float) -> None:
        with self._lock:
            if len(self._affinity) >= AFFINITY_LIMIT:
                self._affinity.pop(next(iter(self._affinity)))
            self._affinity[session] = (key, self._clock() + ttl_s)

    def _scope(self, scope: str) -> _Scope | None:
        entry = self._scopes.get(scope)
        if entry is not None and entry.expires < self._clock():
            with self._lock:
                self._scopes.pop(scope, None)
            return None
        return entry

    async def provenance_targets(self, scope: str) -> frozenset[str]:
        entry = self._scope(scope)
        return frozenset(entry.targets) if entry is not None else frozenset()

    async def provenance_lookup(self, scope: str, fingerprints: Sequence[str]) -> dict[str, str]:
        entry = self._scope(scope)
        if entry is None:
            return {}
        turns = entry.turns
        return {fp: key for fp in fingerprints if (key := turns.get(fp)) is not None}

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
        expires = self._clock() + ttl_s
        with self._lock:
            if fingerprint is not None:
                entry = self._scopes.get(scope)
                if entry is None or entry.expires < self._clock():
                    entry = self._scopes[scope] = _Scope()
                    while len(self._scopes) > PROVENANCE_SCOPES_LIMIT:
                        self._scopes.popitem(last=False)
                entry.turns[fingerprint] = key
                entry.turns.move_to_end(fingerprint)
                while len(entry.turns) > limit:
                    entry.turns.popitem(last=False)
                entry.targets.add(key)
                entry.expires = expires
            if response_id:
                self._responses[response_id] = (key, expires)
                while len(self._responses) > RESPONSES_LIMIT:
                    self._responses.popitem(last=False)

    async def provenance_by_response(self, response_id: str) -> str | None:
        entry = self._responses.get(response_id)
        if entry is None or entry[1] < self._clock():
            return None
        return entry[0]

    async def clear(self) -> None:
        with self._lock:
            for table in (
                self._targets,
                self._providers,
                self._tickets,
                self._inflight,
                self._latency,
                self._affinity,
                self._scopes,
                self._responses,
            ):
                table.clear()
