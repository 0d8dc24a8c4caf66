"""Redis health store: several gateway processes share cooldowns, probe leases, round-robin
tickets, in-flight counts, latency averages and session affinity.

Key layout, all under ``prefix`` (default ``switchyard:``)::

    target:<provider/model>     JSON TargetHealth   (no key = healthy and never failed)
    provider:<name>             JSON ProviderHealth (no key = enabled)
    ticket:<group>              INCR counter
    inflight:<provider/model>   counter, never below 0, expires when idle
    latency:<provider/model>    time-to-first-token moving average (ms)
    affinity:<session>          target key, expires after the affinity TTL
    prov:<scope>                hash fingerprint -> target key of served assistant turns
    provseq:<scope>             list of those fingerprints, oldest first (bounds the hash)
    provt:<scope>               set of the targets that produced them
    resp:<response id>          target key that produced the response

Atomic transitions. The pure functions of ``routing.engine.health`` stay the only place
that knows the state machine: a transition reads the target's JSON, applies the pure
function here in Python, and writes the result back with ``lua/cas.lua`` only if the value
is still the one read; otherwise it re-reads and re-applies. That is lock-free: a lost
compare-and-set means another writer committed, so the system always advances. It was
chosen over WATCH/MULTI because WATCH pins a pooled connection for the whole
read-modify-write; a CAS script runs on any pooled connection. The probe lease is part of
the state (``probe_lease_until``), so taking it *is* that compare-and-set: of fifty
callers who all read "probe-eligible", exactly one write lands (the ``SET NX`` of the
lease, folded into the state update); the others re-read "probing" and get False. A prober
that dies leaves a lease that simply runs out, and the pure ``availability()`` then
reports the target probe-eligible again.

Connections. One client (one blocking pool of up to ``max_connections``) per event loop:
a redis-py asyncio connection belongs to the loop that opened it. A served process has one
loop, hence one pool; tests and ``async_to_sync`` helpers with loops of their own get
theirs, and pools of closed loops are dropped. Redis Cluster is not supported (keys are
not hash-tagged).

Redis unreachable. Routing must not stop because shared state is gone, so every operation
falls back to an in-process :class:`MemoryStore` when Redis raises a connection error or
times out (connect and socket timeouts are short). The store is then *degraded*: one
warning is logged, ``describe()`` says so and why, and Redis is tried again by at most one
call every ``retry_s`` seconds, so a dead Redis costs no connect timeout per call. When a
trial succeeds, the store switches back and the local state is dropped. That is
acceptable because health state is soft state: forgetting a cooldown costs at most one
more failed attempt before the target cools again (now in Redis, for every process), and
merging local deadlines back would race with what the other processes wrote meanwhile.
In-flight counts that went up in one place and down in the other are floored at 0, and
leftovers expire with the counter's idle TTL.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import re
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.commands.core import AsyncScript
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from routing.engine import health as machine
from routing.engine.failures import Failure
from routing.engine.health import CircuitPolicy, HealthEvent, ProviderHealth, TargetHealth
from routing.state.base import LATENCY_ALPHA, HealthStore, Snapshot
from routing.state.memory import MemoryStore
from routing.state.outage import RedisOutage

log = logging.getLogger("switchyard.state")

# What "Redis is unreachable" looks like; anything else (a script error, a bug) propagates.
REDIS_DOWN: tuple[type[BaseException], ...] = (RedisConnectionError, RedisTimeoutError, OSError)

_LUA_DIR = Path(__file__).with_name("lua")
_CAS_LUA = (_LUA_DIR / "cas.lua").read_text()
_SUCCESS_LUA = (_LUA_DIR / "success.lua").read_text()
_INFLIGHT_LUA = (_LUA_DIR / "inflight.lua").read_text()
_PROVENANCE_LUA = (_LUA_DIR / "provenance.lua").read_text()

T = TypeVar("T")
# A transition on raw stored values: (value read or None) -> (value to store or None, result).
RawStep = Callable[[str | None], tuple[str | None, T]]


@dataclass(frozen=True, slots=True)
class _Connection:
    """A client bound to one event loop, with the scripts registered on it."""

    client: Redis
    cas: AsyncScript
    success: AsyncScript
    inflight: AsyncScript
    provenance: AsyncScript


def _encode(state: TargetHealth | ProviderHealth) -> str | None:
    """JSON for Redis; the default state is stored as no key at all."""
    if state == type(state)():
        return None
    return json.dumps(state.to_dict(), sort_keys=True, separators=(",", ":"))


def _target(raw: str | None) -> TargetHealth:
    return TargetHealth() if raw is None else TargetHealth.from_dict(json.loads(raw))


def _provider(raw: str | None) -> ProviderHealth:
    return ProviderHealth() if raw is None else ProviderHealth.from_dict(json.loads(raw))


def _on_target(fn: Callable[[TargetHealth], tuple[TargetHealth, T]]) -> RawStep[T]:
    def step(raw: str | None) -> tuple[str | None, T]:
        new, result = fn(_target(raw))
        return _encode(new), result

    return step


def _on_provider(fn: Callable[[ProviderHealth], tuple[ProviderHealth, T]]) -> RawStep[T]:
    def step(raw: str | None) -> tuple[str | None, T]:
        new, result = fn(_provider(raw))
        return _encode(new), result

    return step


def redact_url(url: str) -> str:
    """The URL without its password, for logs and the status API."""
    return re.sub(r"//[^@/]*@", "//***@", url)


class RedisStore(HealthStore):
    name = "redis"

    def __init__(
        self,
        url: str = "",
        *,
        prefix: str = "switchyard:",
        retry_s: float = 2.0,
        connect_timeout_s: float = 0.25,
        socket_timeout_s: float = 0.5,
        max_connections: int = 50,
        inflight_ttl_s: int = 900,
        latency_ttl_s: int = 7 * 86_400,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not url:
            raise ValueError(
                "RedisStore needs a url (set REDIS_URL, e.g. redis://127.0.0.1:6379/0)"
            )
        self.url = url
        self.prefix = prefix
        self.retry_s = retry_s
        self._connect_timeout_s = connect_timeout_s
        self._socket_timeout_s = socket_timeout_s
        self._max_connections = max_connections
        self._inflight_ttl_s = inflight_ttl_s
        self._latency_ttl_s = latency_ttl_s
        self._clock = clock
        self._lock = threading.Lock()
        self._connections: dict[asyncio.AbstractEventLoop, _Connection] = {}
        self._local = MemoryStore(clock=clock)
        self._outage = RedisOutage(retry_s=retry_s, clock=clock)

    # ------------------------------------------------------------------ the contract
    async def snapshot(self, keys: Sequence[str], providers: Sequence[str]) -> Snapshot:
        return await self._call(
            lambda c: self._snapshot(c, keys, providers),
            lambda: self._local.snapshot(keys, providers),
        )

    async def next_ticket(self, group: str) -> int:
        async def remote(c: _Connection) -> int:
            return int(await c.client.incr(self._key("ticket", group))) - 1  # first ticket is 0

        return await self._call(remote, lambda: self._local.next_ticket(group))

    async def peek_ticket(self, group: str) -> int:
        async def remote(c: _Connection) -> int:
            value = await c.client.get(self._key("ticket", group))
            return int(value) if value is not None else 0

        return await self._call(remote, lambda: self._local.peek_ticket(group))

    async def try_begin_probe(self, key: str, now: float, lease_s: float) -> bool:
        def begin(h: TargetHealth) -> tuple[TargetHealth, bool]:
            if machine.availability(h, now) is not machine.Availability.PROBE_ELIGIBLE:
                return h, False
            return machine.begin_probe(h, now, lease_s=lease_s), True

        return await self._call(
            lambda c: self._update(c, self._key("target", key), _on_target(begin)),
            lambda: self._local.try_begin_probe(key, now, lease_s),
        )

    async def record_success(
        self, key: str, now: float, ttft_ms: float | None
    ) -> list[HealthEvent]:
        async def remote(c: _Connection) -> list[HealthEvent]:
            sample = "" if ttft_ms is None or not math.isfinite(ttft_ms) else repr(float(ttft_ms))
            target_key = self._key("target", key)
            raw = await c.success(
                keys=[self._key("latency", key), target_key],
                args=[sample, LATENCY_ALPHA, self._latency_ttl_s],
            )
            if raw is None:
                return []  # healthy and never failed: one round trip, no write
            step = _on_target(lambda h: machine.record_success(h, key, now))
            return await self._update(c, target_key, step, raw, fresh=True)

        return await self._call(remote, lambda: self._local.record_success(key, now, ttft_ms))

    async def record_failure(
        self, key: str, failure: Failure, policy: CircuitPolicy, now: float, *, was_probe: bool
    ) -> list[HealthEvent]:
        step = _on_target(
            lambda h: machine.record_failure(h, key, failure, policy, now, was_probe=was_probe)
        )
        return await self._call(
            lambda c: self._update(c, self._key("target", key), step),
            lambda: self._local.record_failure(key, failure, policy, now, was_probe=was_probe),
        )

    async def force_revive(self, key: str, now: float) -> list[HealthEvent]:
        def revive(h: TargetHealth) -> tuple[TargetHealth, list[HealthEvent]]:
            if machine.availability(h, now) is not machine.Availability.COOLING:
                return h, []  # someone else revived it first (or it needs no revival)
            return machine.force_revive(h, key, now)

        step = _on_target(revive)
        return await self._call(
            lambda c: self._update(c, self._key("target", key), step),
            lambda: self._local.force_revive(key, now),
        )

    async def try_begin_check(self, key: str, now: float, interval_s: float) -> bool:
        def claim(h: TargetHealth) -> tuple[TargetHealth, bool]:
            return machine.begin_check(h, now, interval_s=interval_s)

        step = _on_target(claim)
        return await self._call(
            lambda c: self._update(c, self._key("target", key), step),
            lambda: self._local.try_begin_check(key, now, interval_s),
        )

    async def release_probe(self, key: str, now: float) -> None:
        def release(h: TargetHealth) -> tuple[TargetHealth, None]:
            return machine.release_probe(h, now), None

        step = _on_target(release)
        await self._call(
            lambda c: self._update(c, self._key("target", key), step),
            lambda: self._local.release_probe(key, now),
        )

    async def reset_target(self, key: str, now: float, *, by: str = "") -> list[HealthEvent]:
        step = _on_target(lambda h: machine.reset(h, key, now, by=by))
        return await self._call(
            lambda c: self._update(c, self._key("target", key), step),
            lambda: self._local.reset_target(key, now, by=by),
        )

    async def disable_provider(
        self, provider: str, failure: Failure, now: float
    ) -> list[HealthEvent]:
        step = _on_provider(lambda p: machine.disable_provider(p, provider, failure, now))
        return await self._call(
            lambda c: self._update(c, self._key("provider", provider), step),
            lambda: self._local.disable_provider(provider, failure, now),
        )

    async def enable_provider(
        self, provider: str, now: float, *, by: str = ""
    ) -> list[HealthEvent]:
        step = _on_provider(lambda p: machine.enable_provider(p, provider, now, by=by))
        return await self._call(
            lambda c: self._update(c, self._key("provider", provider), step),
            lambda: self._local.enable_provider(provider, now, by=by),
        )

    async def inflight_add(self, key: str, delta: int) -> None:
        async def remote(c: _Connection) -> None:
            key_name = self._key("inflight", key)
            await c.inflight(keys=[key_name], args=[int(delta), self._inflight_ttl_s])

        await self._call(remote, lambda: self._local.inflight_add(key, delta))

    async def affinity_get(self, session: str) -> str | None:
        async def remote(c: _Connection) -> str | None:
            value = await c.client.get(self._key("affinity", session))
            return None if value is None else str(value)

        return await self._call(remote, lambda: self._local.affinity_get(session))

    async def affinity_set(self, session: str, key: str, ttl_s: float) -> None:
        async def remote(c: _Connection) -> None:
            await c.client.set(self._key("affinity", session), key, px=max(1, round(ttl_s * 1000)))

        await self._call(remote, lambda: self._local.affinity_set(session, key, ttl_s))

    async def provenance_targets(self, scope: str) -> frozenset[str]:
        async def remote(c: _Connection) -> frozenset[str]:
            return frozenset(str(v) for v in await c.client.smembers(self._key("provt", scope)))

        return await self._call(remote, lambda: self._local.provenance_targets(scope))

    async def provenance_lookup(self, scope: str, fingerprints: Sequence[str]) -> dict[str, str]:
        async def remote(c: _Connection) -> dict[str, str]:
            if not fingerprints:
                return {}
            values = await c.client.hmget(self._key("prov", scope), list(fingerprints))
            return {fp: str(v) for fp, v in zip(fingerprints, values, strict=True) if v}

        return await self._call(remote, lambda: self._local.provenance_lookup(scope, fingerprints))

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
        async def remote(c: _Connection) -> None:
            await c.provenance(
                keys=[
                    self._key("prov", scope),
                    self._key("provseq", scope),
                    self._key("provt", scope),
                    self._key("resp", response_id) if response_id else "",
                ],
                args=[fingerprint or "", key, limit, max(1, round(ttl_s * 1000))],
            )

        await self._call(
            remote,
            lambda: self._local.provenance_record(
                scope, fingerprint, key, response_id=response_id, ttl_s=ttl_s, limit=limit
            ),
        )

    async def provenance_by_response(self, response_id: str) -> str | None:
        async def remote(c: _Connection) -> str | None:
            value = await c.client.get(self._key("resp", response_id))
            return None if value is None else str(value)

        return await self._call(remote, lambda: self._local.provenance_by_response(response_id))

    async def clear(self) -> None:
        """Delete every key under the prefix (and nothing else), and the local fallback."""

        async def remote(c: _Connection) -> None:
            pattern = re.sub(r"([*?\[\]\\])", r"\\\1", self.prefix) + "*"
            batch: list[str] = []
            async for name in c.client.scan_iter(match=pattern, count=1000):
                batch.append(name)
                if len(batch) >= 500:
                    await c.client.delete(*batch)
                    batch.clear()
            if batch:
                await c.client.delete(*batch)

        await self._local.clear()
        await self._call(remote, _nothing)

    async def describe(self) -> dict[str, object]:
        """Pings Redis (or waits for the next trial while degraded), then reports."""

        async def ping(c: _Connection) -> None:
            await c.client.ping()

        await self._call(ping, _nothing)
        where = f"{redact_url(self.url)} (prefix {self.prefix!r})"
        down_since = self._outage.down_since
        if down_since is None:
            detail = f"shared state in Redis at {where}"
            return {"store": self.name, "degraded": False, "detail": detail}
        seconds = max(0.0, self._clock() - down_since)
        detail = (
            f"Redis unreachable at {where} for {seconds:.0f} s: {self._outage.reason}; "
            f"serving from in-process state, retrying every {self.retry_s:g} s"
        )
        return {"store": self.name, "degraded": True, "detail": detail}

    @property
    def degraded(self) -> bool:
        return self._outage.degraded

    def redis_client(self) -> Redis:
        """The running loop's client (its pool), for the limit counters that share this
        server and prefix (``routing.limits.redis_counters``)."""
        return self._connection().client

    async def aclose(self) -> None:
        """Close the running loop's client and its pool (tests; shutdown)."""
        with self._lock:
            conn = self._connections.pop(asyncio.get_running_loop(), None)
        if conn is not None:
            await conn.client.aclose()

    # ------------------------------------------------------------------ Redis or local
    async def _call(
        self, remote: Callable[[_Connection], Awaitable[T]], local: Callable[[], Awaitable[T]]
    ) -> T:
        """Run ``remote`` against Redis, or ``local`` against the fallback while degraded."""
        use_redis, trial = self._outage.route()
        if not use_redis:
            return await local()
        try:
            result = await remote(self._connection())
        except REDIS_DOWN as exc:
            self._went_down(exc)
            return await local()
        if trial:
            self._came_back()
        return result

    def _went_down(self, exc: BaseException) -> None:
        if self._outage.went_down(exc):
            log.warning(
                "state store: Redis unreachable at %s (%s); routing on in-process state, "
                "retrying every %g s",
                redact_url(self.url),
                self._outage.reason,
                self.retry_s,
            )

    def _came_back(self) -> None:
        if not self._outage.came_back():
            return
        self._local = MemoryStore(clock=self._clock)  # soft state: dropped, see the docstring
        log.warning(
            "state store: Redis at %s is reachable again; shared routing state resumed",
            redact_url(self.url),
        )

    # ------------------------------------------------------------------ Redis operations
    def _key(self, kind: str, name: str) -> str:
        return f"{self.prefix}{kind}:{name}"

    async def _snapshot(
        self, c: _Connection, keys: Sequence[str], providers: Sequence[str]
    ) -> Snapshot:
        names = (
            [self._key("target", k) for k in keys]
            + [self._key("provider", p) for p in providers]
            + [self._key("inflight", k) for k in keys]
            + [self._key("latency", k) for k in keys]
        )
        if not names:
            return Snapshot()
        values: list[Any] = await c.client.mget(names)  # the one round trip of every call
        n, m = len(keys), len(providers)
        targets, provs = values[:n], values[n : n + m]
        inflight, latency = values[n + m : 2 * n + m], values[2 * n + m :]
        return Snapshot(
            targets={k: _target(v) for k, v in zip(keys, targets, strict=True) if v},
            providers={p: _provider(v) for p, v in zip(providers, provs, strict=True) if v},
            inflight={k: int(v) for k, v in zip(keys, inflight, strict=True) if v},
            latency_ms={k: float(v) for k, v in zip(keys, latency, strict=True) if v},
        )

    async def _update(
        self,
        c: _Connection,
        redis_key: str,
        step: RawStep[T],
        raw: str | None = None,
        *,
        fresh: bool = False,
    ) -> T:
        """Apply ``step`` atomically by compare-and-set; ``fresh``: ``raw`` was just read."""
        if not fresh:
            raw = await _get(c, redis_key)
        while True:
            new, result = step(raw)
            if new == raw:
                return result  # nothing to write (not eligible, already in that state...)
            if await c.cas(keys=[redis_key], args=[raw or "", new or ""]):
                return result
            raw = await _get(c, redis_key)  # someone else committed first: redo on theirs

    def _connection(self) -> _Connection:
        loop = asyncio.get_running_loop()
        conn = self._connections.get(loop)
        if conn is not None:
            return conn
        with self._lock:
            for stale in [lp for lp in self._connections if lp.is_closed()]:
                del self._connections[stale]  # its sockets died with its loop
            conn = self._connections.get(loop)
            if conn is None:
                # A blocking pool: a burst beyond ``max_connections`` queues for a
                # connection instead of failing (pool exhaustion is not "Redis is down").
                pool = BlockingConnectionPool.from_url(
                    self.url,
                    max_connections=self._max_connections,
                    timeout=None,
                    decode_responses=True,
                    socket_connect_timeout=self._connect_timeout_s,
                    socket_timeout=self._socket_timeout_s,
                    # One immediate retry: a pooled connection may be stale after a Redis
                    # restart. No backoff: a dead Redis must fail fast (then we go local).
                    retry=Retry(NoBackoff(), 1),
                )
                client = Redis.from_pool(pool)
                conn = _Connection(
                    client=client,
                    cas=client.register_script(_CAS_LUA),
                    success=client.register_script(_SUCCESS_LUA),
                    inflight=client.register_script(_INFLIGHT_LUA),
                    provenance=client.register_script(_PROVENANCE_LUA),
                )
                self._connections[loop] = conn
        return conn


async def _get(c: _Connection, name: str) -> str | None:
    value = await c.client.get(name)
    return None if value is None else str(value)  # decode_responses: already a str


async def _nothing() -> None:
    return None
