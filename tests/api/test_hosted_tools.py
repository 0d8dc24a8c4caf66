"""A group's ``hosted_tools`` (SPEC §15): ``drop`` by default, ``skip`` when set, in the
file and through the API, validated like every policy field."""

from __future__ import annotations

import pytest

from routing.config.errors import ConfigError
from routing.config.yaml import load_text
from routing.models import Group
from routing.services.config_file import config_apply
from tests.api.conftest import Api

CONFIG = """
providers:
  - {name: p1, kind: openai, base_url: "http://127.0.0.1:9/v1", models: [a]}
groups:
  - name: auto
    hosted_tools: skip
    targets:
      - {provider: p1, model: a}
"""


def test_the_file_sets_it_and_the_api_shows_and_changes_it(api: Api) -> None:
    config_apply(load_text(CONFIG), source="switchyard.yaml")
    assert Group.objects.get().policy["hosted_tools"] == "skip"
    assert api.get("/groups/auto").json()["fields"]["hosted_tools"]["value"] == "skip"
    response = api.patch("/groups/auto", {"hosted_tools": "drop"}, if_match='W/"1"')
    assert response.status_code == 200, response.content
    assert Group.objects.get().policy["hosted_tools"] == "drop"


def test_a_bad_value_is_refused_in_the_file_and_by_the_api(api: Api) -> None:
    with pytest.raises(ConfigError) as caught:
        load_text(CONFIG.replace("hosted_tools: skip", "hosted_tools: sometimes"))
    assert "hosted_tools" in str(caught.value)
    config_apply(load_text(CONFIG), source="switchyard.yaml")
    response = api.patch("/groups/auto", {"hosted_tools": "sometimes"}, if_match='W/"1"')
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"][-1] == "hosted_tools"
    assert Group.objects.get().policy["hosted_tools"] == "skip"
