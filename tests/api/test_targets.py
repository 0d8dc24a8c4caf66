"""Targets through the API: add, change, remove, reorder (under the group's version), and
the operator's health reset."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import async_to_sync

from routing.engine.failures import Failure, FailureCode
from routing.engine.health import CircuitPolicy, EventKind, HealthEvent
from routing.models import Group, Target
from tests.api.conftest import Api


@pytest.fixture
def auto(api: Api) -> Api:
    api.provider("p1", models=["a", "b", "c"])
    api.provider("open")  # no model list: any model goes
    api.group("auto")
    return api


def targets(api: Api) -> list[tuple[str, str, int]]:
    return [
        (t["provider"], t["model"], t["position"])
        for t in api.get("/groups/auto").json()["targets"]
    ]


def test_add_appends_and_bumps_the_group_version(auto: Api) -> None:
    added = auto.post(
        "/groups/auto/targets",
        {"provider": "p1", "model": "b", "weight": 3, "context_window": 8000},
        if_match='W/"1"',
    )
    assert added.status_code == 201 and added["ETag"] == 'W/"2"'
    assert added.json()["targets"][1] | {"id": 0} == {
        "id": 0,
        "provider": "p1",
        "model": "b",
        "position": 1,
        "weight": 3,
        "enabled": True,
        "context_window": 8000,
        "options": {},
    }
    assert (
        auto.post(
            "/groups/auto/targets", {"provider": "open", "model": "anything"}, if_match='W/"2"'
        ).status_code
        == 201
    )
    assert targets(auto) == [("p1", "a", 0), ("p1", "b", 1), ("open", "anything", 2)]


@pytest.mark.parametrize(
    ("body", "loc", "message"),
    [
        (
            {"provider": "p1", "model": "zzz"},
            ["body", "model"],
            "'zzz' is not in provider 'p1''s model list (refresh its models, or fix the name)",
        ),
        (
            {"provider": "ghost", "model": "a"},
            ["body", "provider"],
            "unknown provider 'ghost' (not defined under providers)",
        ),
        (
            {"provider": "p1", "model": "b", "weight": 0},
            ["body", "weight"],
            "must be greater than or equal to 1",
        ),
        (
            {"provider": "p1", "model": " b"},
            ["body", "model"],
            "must be non-empty, without surrounding spaces",
        ),
        (
            {"provider": "p1", "model": "b\x00"},
            ["body", "model"],
            "must not contain control characters",
        ),
        ({"provider": "p1", "model": "b", "position": 0}, ["body", "position"], None),
    ],
)
def test_invalid_targets_are_refused_field_by_field(
    auto: Api, body: dict[str, Any], loc: list[Any], message: str | None
) -> None:
    response = auto.post("/groups/auto/targets", body, if_match='W/"1"')
    assert response.status_code == 422, response.content
    [error] = response.json()["detail"]
    assert error["loc"] == loc
    if message is not None:
        assert error["msg"] == message
    assert Group.objects.get().version == 1 and Target.objects.count() == 1


def test_a_target_already_in_the_group_is_a_conflict(auto: Api) -> None:
    response = auto.post("/groups/auto/targets", {"provider": "p1", "model": "a"}, if_match='W/"1"')
    assert response.status_code == 409, response.content
    [error] = response.json()["detail"]
    assert error == {
        "loc": ["body", "model"],
        "msg": "p1/a is already a target of 'auto'",
        "type": "value_error",
    }
    assert Group.objects.get().version == 1 and Target.objects.count() == 1


def test_update_changes_tuning_but_not_identity(auto: Api) -> None:
    target_id = auto.get("/groups/auto").json()["targets"][0]["id"]
    path = f"/groups/auto/targets/{target_id}"
    changed = auto.patch(
        path, {"weight": 5, "enabled": False, "context_window": 32000}, if_match='W/"1"'
    )
    assert changed.status_code == 200
    assert changed.json()["targets"][0] | {"id": 0} == {
        "id": 0,
        "provider": "p1",
        "model": "a",
        "position": 0,
        "weight": 5,
        "enabled": False,
        "context_window": 32000,
        "options": {},
    }
    for body, loc in (
        ({"model": "b"}, ["body", "model"]),
        ({"weight": "5"}, ["body", "weight"]),
        ({"colour": "red"}, ["body", "colour"]),
    ):
        refused = auto.patch(path, body, if_match='W/"2"')
        assert refused.status_code == 422 and refused.json()["detail"][0]["loc"] == loc
    assert auto.patch(path, {"weight": 5}, if_match='W/"2"').json()["version"] == 2  # no change


def test_remove_keeps_positions_dense_and_refuses_the_last_target(auto: Api) -> None:
    for model, version in (("b", 1), ("c", 2)):
        auto.post(
            "/groups/auto/targets", {"provider": "p1", "model": model}, if_match=f'W/"{version}"'
        )
    ids = [t["id"] for t in auto.get("/groups/auto").json()["targets"]]
    removed = auto.delete(f"/groups/auto/targets/{ids[1]}", if_match='W/"3"')
    assert removed.status_code == 200 and removed["ETag"] == 'W/"4"'
    assert targets(auto) == [("p1", "a", 0), ("p1", "c", 1)]
    auto.delete(f"/groups/auto/targets/{ids[0]}", if_match='W/"4"')
    last = auto.delete(f"/groups/auto/targets/{ids[2]}", if_match='W/"5"')
    assert last.status_code == 422
    assert (
        last.json()["detail"][0]["msg"]
        == "a group needs at least one target: delete the group instead"
    )


def test_reorder_is_one_atomic_permutation(auto: Api) -> None:
    for model, version in (("b", 1), ("c", 2)):
        auto.post(
            "/groups/auto/targets", {"provider": "p1", "model": model}, if_match=f'W/"{version}"'
        )
    a, b, c = (t["id"] for t in auto.get("/groups/auto").json()["targets"])
    for order in ([a, b], [a, b, b], [a, b, c, 999], [c, b, a + 1000], []):
        refused = auto.put("/groups/auto/targets/order", {"order": order}, if_match='W/"3"')
        assert refused.status_code == 422, order
        assert refused.json()["detail"][0]["loc"] == ["body", "order"]
    assert targets(auto) == [("p1", "a", 0), ("p1", "b", 1), ("p1", "c", 2)]
    done = auto.put("/groups/auto/targets/order", {"order": [c, a, b]}, if_match='W/"3"')
    assert done.status_code == 200 and done.json()["version"] == 4
    assert targets(auto) == [("p1", "c", 0), ("p1", "a", 1), ("p1", "b", 2)]


def test_reset_makes_a_cooling_target_healthy_and_names_who(auto: Api, runtime_state: Any) -> None:
    store, now = runtime_state.store, runtime_state.clock()
    async_to_sync(store.record_failure)(
        "p1/a", Failure(FailureCode.SERVER, "boom", 503), CircuitPolicy(), now, was_probe=False
    )
    assert async_to_sync(store.snapshot)(["p1/a"], []).targets["p1/a"].state == "cooling"
    target_id = auto.get("/groups/auto").json()["targets"][0]["id"]
    response = auto.post(f"/targets/{target_id}/reset")
    assert response.status_code == 200
    assert "p1/a" not in async_to_sync(store.snapshot)(["p1/a"], []).targets
    [event] = [e for e in runtime_state.hub.recent if isinstance(e, HealthEvent)]
    assert (event.kind, event.target, event.message) == (
        EventKind.RESET,
        "p1/a",
        "reset by key:ops",
    )
