"""Versions, ETags and preconditions: stale writes change nothing, concurrent writers never
both win, and writes without a precondition are refused."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from django.db import connection

from routing import services
from routing.audit import writer
from routing.audit.models import ConfigChange
from routing.models import GlobalSettings, Group, Provider
from tests.api.conftest import Api
from tests.conftest import Harness


@pytest.fixture
def auto(api: Api) -> Api:
    api.provider("p1", models=["a", "b", "c"])
    api.group("auto")
    return api


def changes_recorded() -> int:
    assert writer.flush(10)
    return ConfigChange.objects.count()


def test_every_single_object_read_and_write_carries_the_version_as_etag(auto: Api) -> None:
    assert auto.get("/groups/auto")["ETag"] == 'W/"1"'
    assert auto.get("/providers/p1")["ETag"] == 'W/"1"'
    assert auto.get("/global")["ETag"] == 'W/"1"'
    written = auto.patch("/groups/auto", {"commit": "complete"}, if_match='W/"1"')
    assert written.status_code == 200 and written["ETag"] == 'W/"2"'
    assert written.json()["version"] == 2
    # strong and bare forms of the same version are accepted too
    assert (
        auto.patch("/groups/auto", {"commit": "first-content"}, if_match='"2"').status_code == 200
    )
    assert auto.patch("/groups/auto", {"deadline_s": 30.0}, if_match="3").status_code == 200


WRITES: list[tuple[str, str, Any]] = [
    ("PATCH", "/groups/auto", {"retry": {"max_retries": 1}}),
    ("POST", "/groups/auto/restore-default", {"fields": None}),
    ("PUT", "/groups/auto/switch-codes", {"codes": ["SERVER"]}),
    ("DELETE", "/groups/auto/switch-codes", None),
    ("POST", "/groups/auto/targets", {"provider": "p1", "model": "b"}),
    ("PUT", "/groups/auto/targets/order", {"order": [1]}),
    ("DELETE", "/groups/auto", None),
    ("PATCH", "/providers/p1", {"base_url": "http://127.0.0.1:10/v1"}),
    ("DELETE", "/providers/p1", None),
    ("PATCH", "/global", {"commit": "complete"}),
    ("POST", "/global/restore-default", {}),
]


def _snapshot() -> tuple[Any, ...]:
    g, p, s = Group.objects.get(), Provider.objects.get(), GlobalSettings.load()
    return (
        g.version,
        g.policy,
        list(g.targets.values_list("model", "position")),
        p.version,
        p.base_url,
        s.version,
        s.policy,
    )


@pytest.mark.parametrize(("method", "path", "body"), WRITES)
def test_a_stale_write_answers_412_and_changes_nothing(
    auto: Api, method: str, path: str, body: Any
) -> None:
    # move every object to version 2 first, so W/"1" is stale everywhere
    assert auto.patch("/groups/auto", {"commit": "complete"}, if_match='W/"1"').status_code == 200
    assert auto.patch("/providers/p1", {"models": ["a", "b"]}, if_match='W/"1"').status_code == 200
    GlobalSettings.load()
    assert auto.patch("/global", {"deadline_s": 60.0}, if_match='W/"1"').status_code == 200
    before, recorded = _snapshot(), changes_recorded()

    response = auto.call(method, path, body, if_match='W/"1"')

    assert response.status_code == 412, response.content
    assert response.json() == {"detail": response.json()["detail"], "current_version": 2}
    assert response["ETag"] == 'W/"2"'
    assert _snapshot() == before
    assert changes_recorded() == recorded


@pytest.mark.parametrize(("method", "path", "body"), WRITES)
def test_a_write_without_if_match_answers_428_with_the_current_version(
    auto: Api, method: str, path: str, body: Any
) -> None:
    before = _snapshot()
    for if_match in (None, "*", "garbage", 'W/"1", W/"2"'):
        response = auto.call(method, path, body, if_match=if_match)
        assert response.status_code == 428, (if_match, response.content)
        assert response.json()["current_version"] == 1
        assert 'W/"1"' in response.json()["detail"]
    assert _snapshot() == before


def test_unknown_objects_are_404_before_any_precondition(auto: Api) -> None:
    assert auto.patch("/groups/ghost", {"commit": "complete"}).status_code == 404
    assert auto.patch("/groups/ghost", {"commit": "complete"}, if_match='W/"1"').status_code == 404
    assert auto.get("/groups/no%20such%20name").status_code == 404
    assert auto.delete("/providers/ghost", if_match='W/"1"').status_code == 404
    assert (
        auto.patch("/groups/auto/targets/999", {"enabled": False}, if_match='W/"1"').status_code
        == 404
    )
    assert auto.post("/targets/999/reset").status_code == 404


def test_a_write_that_changes_nothing_keeps_the_version(auto: Api) -> None:
    recorded = changes_recorded()
    response = auto.patch("/groups/auto", {"algorithm": "priority"}, if_match='W/"1"')
    assert response.status_code == 200 and response.json()["version"] == 2
    same = auto.patch("/groups/auto", {"algorithm": "priority"}, if_match='W/"2"')
    assert same.status_code == 200 and same["ETag"] == 'W/"2"'
    assert changes_recorded() == recorded + 1
    # unchanged, yet still based on a stale version: refused all the same
    assert (
        auto.patch("/groups/auto", {"algorithm": "priority"}, if_match='W/"1"').status_code == 412
    )


# --- concurrency ---------------------------------------------------------------------------


def race(*writers: Callable[[], Any]) -> list[Any]:
    """Run the writers at the same moment, each in its own thread and DB connection."""
    barrier = threading.Barrier(len(writers))
    results: list[Any] = [None] * len(writers)

    def run(index: int, write: Callable[[], Any]) -> None:
        try:
            barrier.wait(timeout=10)
            results[index] = write()
        except Exception as exc:  # noqa: BLE001 - collected and asserted on below
            results[index] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i, w)) for i, w in enumerate(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return results


@pytest.mark.parametrize("round_", range(5))
def test_two_concurrent_policy_writers_exactly_one_wins(auto: Api, round_: int) -> None:
    def write(retries: int) -> Callable[[], Any]:
        return lambda: services.group_update_policy(
            name="auto",
            changes={"retry.max_retries": retries},
            based_on=1,
            actor=f"writer-{retries}",
            path="api",
        )

    results = race(write(1), write(2))

    winners = [r for r in results if isinstance(r, Group)]
    losers = [r for r in results if isinstance(r, services.VersionConflict)]
    assert len(winners) == 1 and len(losers) == 1, results
    assert losers[0].current_version == 2
    group = Group.objects.get()
    assert group.version == 2
    assert group.policy == {"retry.max_retries": winners[0].policy["retry.max_retries"]}


def test_a_target_write_and_a_policy_write_racing_on_one_version_never_both_win(
    auto: Api,
) -> None:
    results = race(
        lambda: services.target_add(
            group="auto", provider="p1", model="b", based_on=1, actor="a", path="api"
        ),
        lambda: services.group_update_policy(
            name="auto", changes={"commit": "complete"}, based_on=1, actor="b", path="api"
        ),
    )
    assert sum(isinstance(r, services.VersionConflict) for r in results) == 1, results
    group = Group.objects.get()
    assert group.version == 2
    landed = [group.targets.count() == 2, group.policy == {"commit": "complete"}]
    assert landed.count(True) == 1


def test_two_http_writers_racing_on_one_group_one_gets_412(live: Harness) -> None:
    from routing.services.api_keys import generate_key

    live.configure("""
providers:
  - {name: p1, kind: openai, base_url: "{upstream}"}
groups:
  - name: auto
    targets:
      - {provider: p1, model: a}
""")
    _, admin = generate_key(name="ops", kind="admin")
    url = live.gateway.url + "/api/v1/groups/auto"
    headers = {"authorization": f"Bearer {admin}", "if-match": 'W/"1"'}

    def write(value: int) -> Callable[[], httpx.Response]:
        return lambda: httpx.patch(url, json={"retry": {"max_retries": value}}, headers=headers)

    statuses = sorted(r.status_code for r in race(write(3), write(4)))
    assert statuses == [200, 412]
    assert Group.objects.get().version == 2
