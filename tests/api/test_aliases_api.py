"""``PUT /groups/{name}/aliases``: set, validated, overlaps refused (409) naming both groups."""

from __future__ import annotations

from tests.api.conftest import Api


def test_the_api_sets_aliases_and_refuses_overlaps(api: Api) -> None:
    api.provider()
    api.group("one", aliases=["claude-*"])
    api.group("two")
    assert api.get("/groups/one").json()["aliases"] == ["claude-*"]
    clash = api.put("/groups/two/aliases", {"aliases": ["claude-opus-*"]}, if_match='W/"1"')
    assert clash.status_code == 409  # valid, but another group's aliases clash with it
    (detail,) = clash.json()["detail"]
    assert detail["loc"] == ["body", "aliases", 0]
    assert "'one'" in detail["msg"] and "'two'" in detail["msg"]
    ok = api.put("/groups/two/aliases", {"aliases": ["gpt-*"]}, if_match='W/"1"')
    assert ok.status_code == 200 and ok.json()["aliases"] == ["gpt-*"]
    bad = api.put("/groups/two/aliases", {"aliases": "gpt-*"}, if_match=ok["ETag"])
    assert bad.status_code == 422
    assert api.get("/groups/two").json()["aliases"] == ["gpt-*"]  # nothing changed


def test_a_providers_betas_are_validated_and_shown(api: Api) -> None:
    bad = api.post(
        "/providers",
        {
            "name": "a",
            "kind": "anthropic",
            "base_url": "http://127.0.0.1:9",
            "betas": {"strip": ["x y"]},
        },
    )
    assert bad.status_code == 422
    assert bad.json()["detail"][0]["loc"][:3] == ["body", "betas", "strip"]
    made = api.provider("a", kind="anthropic", betas={"allow": ["b-1"], "strip": []})
    assert made["betas"] == {"allow": ["b-1"], "strip": []}
    changed = api.patch("/providers/a", {"betas": {"strip": ["b-2"]}}, if_match='W/"1"')
    assert changed.status_code == 200, changed.content
    assert changed.json()["betas"] == {"strip": ["b-2"]}
