"""Layered configuration through the API: per-field value, source and override for every
layer (built-in default → config file → global settings → group), restore-default at the
group and global layers (one field and all), and one set of validation rules and
messages on every write path."""

from __future__ import annotations

from typing import Any

import pytest

from routing import services
from routing.config.errors import ConfigError
from routing.config.policy import BUILTIN_DEFAULTS, POLICY_FIELDS
from routing.config.yaml import load_text
from routing.models import GlobalSettings, Group
from routing.services.config_file import config_apply
from tests.api.conftest import Api, field_view

CONFIG = """
defaults:
  retry: {max_retries: 3}
  circuit: {failure_threshold: 2}
providers:
  - {name: p1, kind: openai, base_url: "http://127.0.0.1:9/v1", models: [a, b]}
groups:
  - name: auto
    commit: complete
    targets:
      - {provider: p1, model: a}
"""


@pytest.fixture
def layered(api: Api) -> Api:
    config_apply(load_text(CONFIG), source="switchyard.yaml")
    return api


def group(api: Api) -> dict[str, Any]:
    response = api.get("/groups/auto")
    assert response.status_code == 200
    return dict(response.json())


def global_(api: Api) -> dict[str, Any]:
    response = api.get("/global")
    assert response.status_code == 200
    return dict(response.json())


def test_each_field_reports_its_value_and_the_layer_it_comes_from(layered: Api) -> None:
    detail = group(layered)
    assert list(detail["fields"]) == list(POLICY_FIELDS)
    assert field_view(detail, "algorithm") == ("priority", "default", False)
    assert field_view(detail, "retry.max_retries") == (3, "file", False)
    assert field_view(detail, "commit") == ("complete", "group", True)
    for name in POLICY_FIELDS:
        if name not in ("retry.max_retries", "circuit.failure_threshold", "commit"):
            assert field_view(detail, name) == (BUILTIN_DEFAULTS[name], "default", False)

    assert (
        layered.patch(
            "/global", {"retry.max_retries": 4}, if_match=layered.etag("/global")
        ).status_code
        == 200
    )
    assert field_view(group(layered), "retry.max_retries") == (4, "global", False)
    settings = global_(layered)
    assert settings["config_source"] == "switchyard.yaml"
    assert field_view(settings, "retry.max_retries") == (4, "global", True)
    assert field_view(settings, "circuit.failure_threshold") == (2, "file", False)
    assert field_view(settings, "algorithm") == ("priority", "default", False)

    assert (
        layered.patch("/groups/auto", {"retry": {"max_retries": 7}}, if_match='W/"1"').status_code
        == 200
    )
    assert field_view(group(layered), "retry.max_retries") == (7, "group", True)


def test_restore_default_peels_one_layer_at_a_time(layered: Api) -> None:
    layered.patch(
        "/global",
        {"retry.max_retries": 4, "algorithm": "round-robin"},
        if_match=layered.etag("/global"),
    )
    layered.patch("/groups/auto", {"retry.max_retries": 7, "deadline_s": 30.0}, if_match='W/"1"')

    # group, one field: the global value shows through
    one = layered.post(
        "/groups/auto/restore-default", {"fields": ["retry.max_retries"]}, if_match='W/"2"'
    )
    assert one.status_code == 200 and one.json()["version"] == 3
    assert field_view(one.json(), "retry.max_retries") == (4, "global", False)
    assert field_view(one.json(), "deadline_s") == (30.0, "group", True)

    # global, one field: the file value shows through (to the group as well)
    glob = layered.post(
        "/global/restore-default",
        {"fields": ["retry.max_retries"]},
        if_match=layered.etag("/global"),
    )
    assert glob.status_code == 200
    assert field_view(glob.json(), "retry.max_retries") == (3, "file", False)
    assert field_view(glob.json(), "algorithm") == ("round-robin", "global", True)
    assert field_view(group(layered), "retry.max_retries") == (3, "file", False)

    # group, every field (no body): the group overrides nothing any more
    everything = layered.post("/groups/auto/restore-default", if_match='W/"3"')
    assert everything.status_code == 200, everything.content
    assert not any(f["overridden"] for f in everything.json()["fields"].values())
    assert field_view(everything.json(), "commit") == ("first-content", "default", False)
    assert Group.objects.get().policy == {}

    # global, every field: only the file and the built-ins remain
    layered.post("/global/restore-default", {"fields": None}, if_match=layered.etag("/global"))
    assert GlobalSettings.load().policy == {}
    assert field_view(group(layered), "algorithm") == ("priority", "default", False)


def test_switch_codes_have_their_own_resource(layered: Api) -> None:
    put = layered.put(
        "/groups/auto/switch-codes", {"codes": ["SERVER", "TIMEOUT"]}, if_match='W/"1"'
    )
    assert put.status_code == 200
    assert field_view(put.json(), "switch_codes") == (["SERVER", "TIMEOUT"], "group", True)
    bad = layered.put(
        "/groups/auto/switch-codes", {"codes": ["server", "SERVER", "SERVER"]}, if_match='W/"2"'
    )
    assert bad.status_code == 422
    messages = {tuple(e["loc"]): e["msg"] for e in bad.json()["detail"]}
    assert "write SERVER" in messages[("body", "codes", 0)]
    empty = layered.put("/groups/auto/switch-codes", {"codes": []}, if_match='W/"2"')
    assert empty.json()["detail"][0]["msg"] == "must list at least one failure code"
    restored = layered.delete("/groups/auto/switch-codes", if_match='W/"2"')
    assert field_view(restored.json(), "switch_codes")[1:] == ("default", False)


def test_a_restore_that_would_leave_an_invalid_policy_is_refused(layered: Api) -> None:
    layered.patch(
        "/groups/auto", {"retry": {"initial_delay_ms": 100, "max_delay_ms": 200}}, if_match='W/"1"'
    )
    layered.patch("/global", {"retry.initial_delay_ms": 5000}, if_match=layered.etag("/global"))
    response = layered.post(
        "/groups/auto/restore-default", {"fields": ["retry.initial_delay_ms"]}, if_match='W/"2"'
    )
    assert response.status_code == 422
    assert response.json()["detail"] == [
        {
            "loc": ["body", "retry", "max_delay_ms"],
            "msg": "must be >= retry.initial_delay_ms (5000, from global settings)",
            "type": "value_error",
        }
    ]
    assert Group.objects.get().version == 2


def test_a_global_write_that_would_break_a_group_is_refused(layered: Api) -> None:
    ok = layered.patch("/groups/auto", {"retry": {"max_delay_ms": 600}}, if_match='W/"1"')
    assert ok.status_code == 200
    response = layered.patch(
        "/global", {"retry": {"initial_delay_ms": 5000}}, if_match=layered.etag("/global")
    )
    assert response.status_code == 422
    [error] = response.json()["detail"]
    assert error["loc"] == ["body", "retry", "initial_delay_ms"]
    assert error["msg"].startswith("group 'auto' would break: ")
    assert GlobalSettings.load().policy == {} and GlobalSettings.load().version == 2


RENAMED = [
    (
        {"switchCodes": ["SERVER"]},
        ["body", "switchCodes"],
        "`switchCodes` was renamed: write `switch_codes` instead",
    ),
    (
        {"max_retries": 2},
        ["body", "max_retries"],
        "`max_retries` was renamed: write `retry.max_retries` instead",
    ),
    (
        {"circuit": {"cooldownMs": 5}},
        ["body", "circuit", "cooldownMs"],
        "`cooldownMs` was renamed: write `circuit.cooldown_base_ms` instead",
    ),
]


@pytest.mark.parametrize(("body", "loc", "message"), RENAMED)
def test_renamed_keys_fail_with_the_key_to_write_on_every_path(
    layered: Api, body: dict[str, Any], loc: list[Any], message: str
) -> None:
    # the API (group and global), the service the page calls, and the config file agree
    for path in ("/groups/auto", "/global"):
        response = layered.patch(path, body, if_match=layered.etag(path))
        assert response.status_code == 422
        assert {"loc": loc, "msg": message, "type": "value_error"} in response.json()["detail"]
    with pytest.raises(ConfigError) as page:
        services.group_update_policy(name="auto", changes=body, based_on=1, actor="u", path="page")
    assert [(e.path, e.message) for e in page.value.errors] == [(".".join(loc[1:]), message)]
    yaml_block = "\n".join(f"  {k}: {v}" for k, v in body.items()).replace("'", "")
    with pytest.raises(ConfigError) as file:
        load_text(f"defaults:\n{yaml_block}\n")
    assert [e.message for e in file.value.errors] == [message]


INVALID = [
    ({"retry": {"max_retries": 21}}, ["body", "retry", "max_retries"]),
    ({"retry.max_retries": "5"}, ["body", "retry", "max_retries"]),
    ({"retry": {"retry_codes": []}}, ["body", "retry", "retry_codes"]),
    ({"switch_codes": ["SERVER", "SERVER"]}, ["body", "switch_codes"]),
    ({"algorithm": "fastest"}, ["body", "algorithm"]),
    ({"commit": None}, ["body", "commit"]),
    ({"retry": {"initial_delay_ms": 20_000}}, ["body", "retry", "initial_delay_ms"]),
    ({"targets": []}, ["body", "targets"]),
    ({"retry": {"switch_after_ms": -1}}, ["body", "retry", "switch_after_ms"]),
    ({"retry.switch_after_ms": 3_600_001}, ["body", "retry", "switch_after_ms"]),
]


def test_the_switch_budget_is_layered_like_every_policy_field(layered: Api) -> None:
    assert field_view(group(layered), "retry.switch_after_ms") == (2000, "default", False)
    patched = layered.patch("/groups/auto", {"retry": {"switch_after_ms": 500}}, if_match='W/"1"')
    assert patched.status_code == 200, patched.content
    assert field_view(patched.json(), "retry.switch_after_ms") == (500, "group", True)
    restored = layered.post(
        "/groups/auto/restore-default", {"fields": ["retry.switch_after_ms"]}, if_match='W/"2"'
    )
    assert field_view(restored.json(), "retry.switch_after_ms") == (2000, "default", False)


@pytest.mark.parametrize(("body", "loc"), INVALID)
def test_invalid_policy_is_a_field_level_422_and_changes_nothing(
    layered: Api, body: dict[str, Any], loc: list[Any]
) -> None:
    response = layered.patch("/groups/auto", body, if_match='W/"1"')
    assert response.status_code == 422, response.content
    assert [e["loc"] for e in response.json()["detail"]] == [loc]
    assert Group.objects.get().version == 1


def test_malformed_bodies_are_422_at_the_body(layered: Api) -> None:
    for raw in (b"{not json", b"[1, 2]", b'"text"', b'{"commit": "\\ud800"}'):
        response = layered.call("PATCH", "/groups/auto", raw=raw, if_match='W/"1"')
        assert response.status_code == 422, raw
        assert response.json()["detail"][0]["loc"] == ["body"]
    assert layered.call("PATCH", "/groups/auto", if_match='W/"1"').status_code == 422
