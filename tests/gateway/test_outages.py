"""SPEC §16 (issue 24) cases that have no better home: a third-party algorithm's state
across configuration changes, health shared across groups, a deleted group."""

from __future__ import annotations

from typing import Any

import openai
import pytest

from routing.simulator.script import Fail
from tests.conftest import Harness, off_loop
from tests.engine.fake_algorithms import Learning

MESSAGES = [{"role": "user", "content": "hi"}]


@pytest.fixture(autouse=True)
def _learning_registered(settings: Any) -> None:
    """A group may name only registered algorithms (issue 37 item 13)."""
    learning = "tests.engine.fake_algorithms.Learning"
    settings.SWITCHYARD = {**settings.SWITCHYARD, "ALGORITHMS": {"learning": learning}}


TWO_GROUPS = """
providers:
  - {name: p1, kind: openai, base_url: "{upstream}", api_key: k1}
  - {name: p2, kind: openai, base_url: "{upstream}", api_key: k2}
groups:
  - name: learned
    algorithm: tests.engine.fake_algorithms.Learning
    targets:
      - {provider: p1, model: a}
  - name: other
    targets:
      - {provider: p1, model: a}
      - {provider: p2, model: b}
"""


def ask(h: Harness, model: str) -> str:
    raw = h.client().chat.completions.with_raw_response.create(model=model, messages=MESSAGES)
    return raw.headers["x-switchyard-target"]


def algorithm_of(h: Harness, group: str) -> Learning:
    table = h.runtime.table
    assert table is not None
    algorithm = table.groups[group].algorithm
    assert isinstance(algorithm, Learning)
    return algorithm


def update_policy(h: Harness, group: str, changes: dict[str, object]) -> None:
    from routing import services
    from routing.models import Group

    def write() -> None:
        version = Group.objects.get(name=group).version
        services.group_update_policy(
            name=group, changes=changes, based_on=version, actor="test", path="api"
        )

    off_loop(write)  # the write tells the runtime (routing.signals)


def test_a_third_party_algorithm_keeps_its_state_across_changes_elsewhere(
    harness: Harness,
) -> None:
    harness.configure(TWO_GROUPS)
    for _ in range(3):
        assert ask(harness, "learned") == "p1/a"
    before = algorithm_of(harness, "learned")
    assert before.dispatches == 3
    update_policy(harness, "other", {"retry.max_retries": 1})  # another group changes
    assert ask(harness, "learned") == "p1/a"
    assert algorithm_of(harness, "learned") is before and before.dispatches == 4
    update_policy(harness, "learned", {"retry.max_retries": 1})  # its own group changes
    assert ask(harness, "learned") == "p1/a"
    assert algorithm_of(harness, "learned") is not before
    assert algorithm_of(harness, "learned").dispatches == 1


def test_health_is_shared_across_groups(harness: Harness) -> None:
    # SPEC §4: health is keyed by provider+model; a target cooled through one group is
    # skipped by every group that lists it.
    harness.configure(
        TWO_GROUPS.replace(
            "algorithm: tests.engine.fake_algorithms.Learning", "retry: {max_retries: 0}"
        )
    )
    harness.upstream.script("a", Fail(500))
    with pytest.raises(openai.APIStatusError):
        ask(harness, "learned")  # p1/a fails and cools, through group "learned"
    assert harness.upstream.count("a") == 1
    assert ask(harness, "other") == "p2/b"  # group "other" skips it without a try
    assert harness.upstream.count("a") == 1


def test_a_deleted_group_is_a_404_on_the_next_call(harness: Harness) -> None:
    from routing import services

    harness.configure(TWO_GROUPS)
    assert ask(harness, "other") == "p1/a"

    def delete() -> None:
        from routing.models import Group

        version = Group.objects.get(name="other").version
        services.group_delete(name="other", based_on=version, actor="test", path="api")

    off_loop(delete)  # the write itself tells the runtime: nobody invalidates by hand
    with pytest.raises(openai.NotFoundError) as caught:
        ask(harness, "other")
    assert caught.value.status_code == 404
    assert ask(harness, "learned") == "p1/a"  # the rest still serves
