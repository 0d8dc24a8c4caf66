"""SPEC §13's keys through the management API: validated like the file, warnings returned."""

from __future__ import annotations

from tests.api.conftest import Api


def test_the_api_validates_the_same_keys_and_returns_warnings(api: Api) -> None:
    api.provider("p1")
    created = api.group(
        "auto",
        targets=[{"provider": "p1", "model": "a", "keep_thinking": True, "efforts": ["low"]}],
        compact_window=10000,
    )
    assert created["targets"][0]["options"] == {"keep_thinking": True, "efforts": ["low"]}
    assert created["warnings"] and "below 12484" in created["warnings"][0]
    assert created["fields"]["compact_window"]["value"] == 10000
    refused = api.post(
        "/groups", {"name": "seed", "targets": [{"provider": "p1", "model": "a"}], "routes": []}
    )
    assert refused.status_code == 422 and "targets" in refused.content.decode()
    target_id = created["targets"][0]["id"]
    etag = api.etag("/groups/auto")
    patched = api.patch(f"/groups/auto/targets/{target_id}", {"keepThinking": False}, if_match=etag)
    assert patched.status_code == 422 and "keep_thinking" in patched.content.decode()
    patched = api.patch(
        f"/groups/auto/targets/{target_id}",
        {"keep_thinking": None, "reasoning_effort": "max"},
        if_match=etag,
    )
    assert patched.status_code == 200, patched.content
    assert patched.json()["targets"][0]["options"] == {
        "reasoning_effort": "max",
        "efforts": ["low"],
    }
