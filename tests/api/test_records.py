"""Every write through the API leaves a config-change record with who, the path and a diff;
the OpenAPI document describes every endpoint; /api/docs leads to it."""

from __future__ import annotations

from typing import Any

from routing.audit import writer
from routing.audit.models import ConfigChange
from tests.api.conftest import API, Api


def records() -> list[dict[str, Any]]:
    assert writer.flush(10)
    return list(
        ConfigChange.objects.order_by("id").values(
            "actor", "path", "object_type", "object_name", "diff"
        )
    )


def test_each_write_is_recorded_with_actor_path_and_diff(api: Api) -> None:
    api.provider("p1", api_key="sk-first-key-000000000", models=["a", "b"])
    api.group("auto")
    api.patch("/groups/auto", {"retry": {"max_retries": 2}}, if_match='W/"1"')
    api.post("/groups/auto/targets", {"provider": "p1", "model": "b"}, if_match='W/"2"')
    api.patch("/providers/p1", {"api_key": "sk-second-key-11111111"}, if_match='W/"1"')
    api.patch("/global", {"commit": "complete"}, if_match=api.etag("/global"))
    created = api.post("/keys", {"name": "app", "groups": ["auto"]}).json()

    rows = records()
    assert {(r["actor"], r["path"]) for r in rows} == {("key:ops", "api")}
    assert [(r["object_type"], r["object_name"]) for r in rows] == [
        ("provider", "p1"),
        ("group", "auto"),
        ("group", "auto"),
        ("group", "auto"),
        ("provider", "p1"),
        ("global", "global settings"),
        ("key", f"app ({created['prefix']}…)"),
    ]
    assert rows[2]["diff"] == {"policy.retry.max_retries": {"before": None, "after": 2}}
    assert rows[3]["diff"]["targets.p1/b.position"] == {"before": None, "after": 1}
    assert rows[4]["diff"] == {"api_key": {"before": "[redacted]", "after": "[redacted]"}}
    assert rows[5]["diff"] == {"policy.commit": {"before": None, "after": "complete"}}
    assert created["secret"] not in str(rows)


def test_a_write_that_changes_nothing_leaves_no_record(api: Api) -> None:
    api.provider("p1", models=["a"])
    api.group("auto")
    before = len(records())
    api.patch(
        "/groups/auto", {"algorithm": "priority", "commit": "first-content"}, if_match='W/"1"'
    )
    api.post("/groups/auto/restore-default", {"fields": ["deadline_s"]}, if_match='W/"2"')
    assert len(records()) == before + 1


def test_the_openapi_document_covers_every_endpoint(api: Api) -> None:
    assert api.client.get("/api/docs")["Location"] == "/api/v1/docs"
    schema = api.get("/openapi.json").json()
    paths = schema["paths"]
    expected = {
        "/providers": {"get", "post"},
        "/providers/{name}": {"get", "patch", "delete"},
        "/providers/{name}/enable": {"post"},
        "/providers/{name}/refresh-models": {"post"},
        "/providers/{name}/test": {"post"},
        "/groups": {"get", "post"},
        "/groups/{name}": {"get", "patch", "delete"},
        "/groups/{name}/restore-default": {"post"},
        "/groups/{name}/switch-codes": {"put", "delete"},
        "/groups/{name}/targets": {"post"},
        "/groups/{name}/targets/{target_id}": {"patch", "delete"},
        "/groups/{name}/targets/order": {"put"},
        "/targets/{target_id}/reset": {"post"},
        "/global": {"get", "patch"},
        "/global/restore-default": {"post"},
        "/config/export": {"get"},
        "/keys": {"get", "post"},
        "/keys/{key_id}": {"get", "patch", "delete"},
        "/route/explain": {"post"},
        "/groups/{name}/aliases": {"put"},
        "/spend": {"get"},
    }
    for path, methods in expected.items():
        assert set(paths[API + path]) == methods, path
    patch_group = paths[API + "/groups/{name}"]["patch"]
    body = patch_group["requestBody"]["content"]["application/json"]["schema"]
    assert body["additionalProperties"] is False and "retry" in body["properties"]
    assert {p["name"] for p in patch_group["parameters"]} == {"name", "If-Match"}
    assert set(patch_group["responses"]) == {"200", "401", "403", "404", "412", "422", "428"}
