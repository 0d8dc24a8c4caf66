"""``POST /api/v1/route/explain``: the order the next call would try and why, computed
from the routing table and one health snapshot, without touching any state."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import async_to_sync

from routing.engine.failures import Failure, FailureCode
from routing.engine.health import CircuitPolicy
from tests.api.conftest import Api


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(runtime_state: Any) -> Clock:
    runtime_state.clock = fake = Clock()
    return fake


@pytest.fixture
def chain(api: Api, clock: Clock) -> Api:
    api.provider("p1", models=["a"])
    api.provider("p2", models=["b"])
    api.provider("p3", models=["c"])
    api.group(
        "auto",
        targets=[
            {"provider": "p1", "model": "a"},
            {"provider": "p2", "model": "b"},
            {"provider": "p3", "model": "c", "enabled": False},
        ],
    )
    return api


def explain(api: Api, **body: Any) -> dict[str, Any]:
    response = api.post("/route/explain", body)
    assert response.status_code == 200, response.content
    return dict(response.json())


def cool(runtime: Any, key: str, *, code: FailureCode = FailureCode.SERVER) -> None:
    async_to_sync(runtime.store.record_failure)(
        key,
        Failure(code, "boom", 503),
        CircuitPolicy(cooldown_base_ms=10_000),
        runtime.clock(),
        was_probe=False,
    )


def rows(result: dict[str, Any]) -> list[tuple[str, bool, str]]:
    return [(c["target"], c["eligible"], c["state"]) for c in result["candidates"]]


def test_a_healthy_chain_in_priority_order(chain: Api) -> None:
    result = explain(chain, model="auto")
    assert (result["group"], result["algorithm"], result["rotates"]) == ("auto", "priority", False)
    assert result["next_target"] == "p1/a" and result["force_revive"] is False
    assert rows(result) == [
        ("p1/a", True, "healthy"),
        ("p2/b", True, "healthy"),
        ("p3/c", False, "disabled-in-config"),
    ]


def test_cooling_and_disabled_targets_say_why(chain: Api, runtime_state: Any, clock: Clock) -> None:
    cool(runtime_state, "p1/a")
    clock.now += 4
    result = explain(chain, model="auto")
    first = result["candidates"][0]
    assert (first["eligible"], first["state"], first["remaining_s"]) == (False, "cooling", 6.0)
    assert first["reason"] == "cooling after SERVER for 6 s"
    assert result["next_target"] == "p2/b"

    async_to_sync(runtime_state.store.disable_provider)(
        "p2", Failure(FailureCode.AUTH, "bad key", 401), clock.now
    )
    result = explain(chain, model="auto")
    assert result["candidates"][1]["state"] == "disabled"
    assert "disabled after AUTH" in result["candidates"][1]["reason"]
    # nothing eligible: the next call would force-revive the cooling target — not this one
    assert (result["next_target"], result["force_revive"]) == ("p1/a", True)
    snapshot = async_to_sync(runtime_state.store.snapshot)(["p1/a"], [])
    assert snapshot.targets["p1/a"].state == "cooling"


def test_explaining_has_no_side_effects(chain: Api, runtime_state: Any, clock: Clock) -> None:
    group_etag = chain.etag("/groups/auto")
    chain.patch("/groups/auto", {"algorithm": "round-robin"}, if_match=group_etag)
    cool(runtime_state, "p1/a")
    clock.now += 11  # the cooldown is over: probe-eligible
    store = runtime_state.store

    for _ in range(3):
        result = explain(chain, model="auto")
        assert result["rotates"] is True
        assert rows(result)[0] == ("p1/a", True, "probe-eligible")

    assert async_to_sync(store.next_ticket)("auto") == 0  # no ticket was taken
    assert async_to_sync(store.try_begin_probe)("p1/a", clock.now, 30.0)  # nor the probe lease
    probing = explain(chain, model="auto")["candidates"][0]
    assert (probing["eligible"], probing["state"], probing["remaining_s"]) == (
        False,
        "probing",
        30.0,
    )


def test_session_affinity_moves_the_sticky_target_first(chain: Api, runtime_state: Any) -> None:
    async_to_sync(runtime_state.store.affinity_set)("conversation-7", "p2/b", 3600)
    sticky = explain(chain, model="auto", session="conversation-7")
    assert sticky["sticky"] == "p2/b" and sticky["next_target"] == "p2/b"
    assert sticky["candidates"][0]["reason"] == "healthy; served this session last (affinity)"
    assert explain(chain, model="auto", session="someone-else")["next_target"] == "p1/a"
    assert explain(chain, model="auto")["next_target"] == "p1/a"


def test_direct_addresses_and_unknown_models(chain: Api) -> None:
    direct = explain(chain, model="p2/b")
    assert rows(direct) == [("p2/b", True, "healthy")]
    missing = chain.post("/route/explain", {"model": "nope"})
    assert missing.status_code == 404 and "nope" in missing.json()["detail"]
    invalid = chain.post("/route/explain", {"model": "", "extra": 1})
    assert invalid.status_code == 422
    assert sorted(e["loc"][-1] for e in invalid.json()["detail"]) == ["extra", "model"]
