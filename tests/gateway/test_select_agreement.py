"""route/explain and a real call agree on the next target, whatever the health states.

Both render ``routing.engine.select``; this property test drives the health store through
random sequences of real transitions (failures with and without ``Retry-After``, probes,
force-revives, a broken credential, the clock moving on), then asks explain what the next
call would do and lets the real target walker (``routing.gateway.walk.pick``) pick, on
the same store at the same instant.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from routing.config.policy import BUILTIN_DEFAULTS
from routing.engine.algorithms import Candidate
from routing.engine.failures import Failure, FailureCode
from routing.engine.health import Availability, CircuitPolicy
from routing.gateway.explain import route_explain
from routing.gateway.runtime import Runtime
from routing.gateway.state import CallState
from routing.gateway.table import ProviderSpec, RoutingTable, TargetSpec, _build_group
from routing.gateway.walk import pick
from routing.state.memory import MemoryStore
from routing.upstream.openai import Timeouts

TARGETS = [("p1", "a"), ("p1", "b"), ("p2", "c"), ("p3", "d")]
CIRCUIT = CircuitPolicy(failure_threshold=1, cooldown_base_ms=10_000, cooldown_cap_ms=80_000)
START = 1_700_000_000.0

target_index = st.integers(0, len(TARGETS) - 1)
operation = st.one_of(
    st.tuples(
        st.just("fail"),
        target_index,
        st.sampled_from([FailureCode.SERVER, FailureCode.RATE_LIMIT, FailureCode.FORBIDDEN]),
        st.none() | st.floats(1, 120),
    ),
    st.tuples(st.just("succeed"), target_index),
    st.tuples(st.just("probe"), target_index),
    st.tuples(st.just("revive"), target_index),
    st.tuples(st.just("credential"), st.sampled_from(["p1", "p2", "p3"])),
    st.tuples(st.just("wait"), st.floats(0, 90)),
)


def build_table(algorithm: str) -> RoutingTable:
    providers = {
        name: ProviderSpec(
            name=name,
            kind="openai",
            base_url="http://127.0.0.1:9/v1",
            api_key=f"key-{name}",
            headers={},
            timeouts=Timeouts(),
            version=1,
        )
        for name in ("p1", "p2", "p3")
    }
    targets = tuple(
        TargetSpec(Candidate(f"{p}/{m}", p, m, position), providers[p], m, None)
        for position, (p, m) in enumerate(TARGETS)
    )
    group = _build_group(
        name="auto", targets=targets, policy={**BUILTIN_DEFAULTS, "algorithm": algorithm}, version=0
    )
    return RoutingTable(groups={"auto": group}, providers=providers, keys={})


async def play(store: MemoryStore, operations: list[tuple[Any, ...]]) -> float:
    now = START
    for op in operations:
        kind = op[0]
        if kind == "wait":
            now += op[1]
            continue
        if kind == "credential":
            await store.disable_provider(op[1], Failure(FailureCode.AUTH, "bad key", 401), now)
            continue
        key = "/".join(TARGETS[op[1]])
        if kind == "fail":
            failure = Failure(op[2], "boom", 503, retry_after_s=op[3])
            await store.record_failure(key, failure, CIRCUIT, now, was_probe=False)
        elif kind == "succeed":
            await store.record_success(key, now, None)
        elif kind == "probe":
            await store.try_begin_probe(key, now, 30.0)
        else:
            await store.force_revive(key, now)
    return now


@pytest.fixture
def quiet_runtime_settings(settings: Any) -> None:
    settings.SWITCHYARD = {**settings.SWITCHYARD, "EVENT_SUBSCRIBERS": []}


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    operations=st.lists(operation, max_size=14),
    algorithm=st.sampled_from(["priority", "round-robin", "weighted"]),
    sticky=st.none() | target_index,
)
def test_explain_names_the_target_a_call_picks(
    quiet_runtime_settings: None,
    operations: list[tuple[Any, ...]],
    algorithm: str,
    sticky: int | None,
) -> None:
    async def scenario() -> None:
        store = MemoryStore()
        now = await play(store, operations)
        table = build_table(algorithm)
        runtime = Runtime(store=store, clock=lambda: now, compile=lambda: table)
        runtime.table = table
        group = table.groups["auto"]
        session = None
        if sticky is not None:
            session = "s-1"
            await store.affinity_set(session, "/".join(TARGETS[sticky]), 3600.0)
        explained = await route_explain(runtime, model="auto", session=session)
        assert explained is not None
        before = (await store.snapshot(group.keys, group.provider_names)).verdicts(
            group.members, now
        )
        call = CallState(
            runtime, group, {"model": "auto", "messages": []}, stream=False, session=session
        )
        picked = await pick(call, ticket=0)

        assert explained.next_target == (picked[0].key if picked else None)
        revived = picked is not None and before[picked[0].key].availability is Availability.COOLING
        assert explained.force_revive is revived
        eligible = {c.target for c in explained.candidates if c.eligible}
        assert eligible == {key for key, verdict in before.items() if verdict.eligible}

    asyncio.run(scenario())
