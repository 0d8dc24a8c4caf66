"""The gateway's ``Runtime`` builds its limit gate beside its health store (no gate
attached on a first call), and replacing the store moves the counters with it; the gate's
clock is the runtime's, even when a test replaces that clock after the gate was built."""

from __future__ import annotations

import pytest

from routing.gateway.runtime import Runtime
from routing.limits.counters import LocalCounters
from routing.limits.gate import limits_use
from routing.limits.redis_counters import RedisCounters
from routing.limits.spec import GroupLimits, LimitSet
from routing.state import build_store
from routing.state.redis import RedisStore

NOW = 1_796_405_430.0  # 2026-12-04 17:30:30 UTC


def _runtime() -> Runtime:
    return Runtime(store=build_store("memory"), compile=lambda: pytest.fail("no table here"))


def test_the_runtime_builds_its_gate_with_counters_beside_its_store() -> None:
    runtime = _runtime()
    first = runtime.limit_gate
    assert isinstance(first.counters, LocalCounters)
    assert not first.used  # nothing limited yet: the status shows no counters

    runtime.use_store(RedisStore("redis://127.0.0.1:9/0", prefix="gate-test:"))
    assert runtime.limit_gate is not first
    assert isinstance(runtime.limit_gate.counters, RedisCounters)
    assert runtime.limit_gate.counters.prefix == "gate-test:limit:"

    runtime.use_store(build_store("memory"))
    assert isinstance(runtime.limit_gate.counters, LocalCounters)


async def test_the_gate_reads_the_runtimes_clock_and_marks_itself_used() -> None:
    runtime = _runtime()
    runtime.clock = lambda: NOW  # after the gate was built: it still follows
    gate = runtime.limit_gate
    admitted = await gate.admit(
        key_id=None,
        key_name="",
        key_limits=None,
        group="g",
        group_limits=GroupLimits(LimitSet(rpm=1)),
        session=None,
        body={},
    )
    assert admitted is not None and gate.used
    use = await limits_use(gate, group="g", group_limits=GroupLimits(LimitSet(rpm=1)))
    assert use["rpm"].used == 1
    assert use["rpm"].resets_at == (NOW // 60 + 1) * 60  # the minute of the runtime's clock
