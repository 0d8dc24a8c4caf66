"""Done-when: "an API script can build a whole configuration from nothing, read it back, and
the next /v1/chat/completions call follows it" — over real sockets: httpx → the live
gateway's management API, then the official openai SDK → /v1 → the fake upstream."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from routing.models import ApiKey, Group, Provider
from routing.simulator.script import Fail
from tests.conftest import Harness

MESSAGES = [{"role": "user", "content": "hi"}]


@pytest.fixture
def script(live: Harness) -> Iterator[httpx.Client]:
    from routing.services.api_keys import generate_key

    _, admin = generate_key(name="deploy-script", kind="admin")
    with httpx.Client(
        base_url=live.gateway.url + "/api/v1",
        headers={"authorization": f"Bearer {admin}"},
        timeout=10,
    ) as client:
        yield client


def ok(response: httpx.Response, status: int = 200) -> dict:  # type: ignore[type-arg]
    assert response.status_code == status, response.text
    return response.json() if response.content else {}


def served_by(h: Harness, key: str) -> str:
    from openai import OpenAI

    client = OpenAI(base_url=h.gateway.base_url, api_key=key, max_retries=0)
    raw = client.chat.completions.with_raw_response.create(model="auto", messages=MESSAGES)
    return raw.headers["x-switchyard-target"]


def test_a_script_builds_everything_from_nothing_and_v1_follows_it(
    live: Harness, script: httpx.Client
) -> None:
    assert not Provider.objects.exists() and not Group.objects.exists()
    upstream = live.upstream.base_url

    # providers, a group with one target, a second target, policy, global defaults
    ok(
        script.post(
            "/providers",
            json={
                "name": "p1",
                "base_url": upstream,
                "api_key": "upstream-key-p1-0123",
                "models": ["a"],
            },
        ),
        201,
    )
    ok(
        script.post(
            "/providers",
            json={
                "name": "p2",
                "base_url": upstream,
                "api_key": "upstream-key-p2-0123",
                "models": ["b"],
            },
        ),
        201,
    )
    group = script.post(
        "/groups", json={"name": "auto", "targets": [{"provider": "p1", "model": "a"}]}
    )
    assert ok(group, 201)["version"] == 1 and group.headers["etag"] == 'W/"1"'
    added = script.post(
        "/groups/auto/targets",
        json={"provider": "p2", "model": "b", "weight": 2},
        headers={"if-match": group.headers["etag"]},
    )
    patched = script.patch(
        "/groups/auto",
        json={"retry": {"max_retries": 0}},
        headers={"if-match": added.headers["etag"]},
    )
    ok(patched)
    glob = script.get("/global")
    ok(
        script.patch(
            "/global",
            json={"circuit.cooldown_base_ms": 20_000},
            headers={"if-match": glob.headers["etag"]},
        )
    )
    created = ok(script.post("/keys", json={"name": "app", "groups": ["auto"]}), 201)

    # read it back
    detail = ok(script.get("/groups/auto"))
    assert [(t["provider"], t["model"], t["weight"]) for t in detail["targets"]] == [
        ("p1", "a", 1),
        ("p2", "b", 2),
    ]
    assert detail["fields"]["retry.max_retries"] == {
        "value": 0,
        "source": "group",
        "overridden": True,
    }
    assert detail["fields"]["circuit.cooldown_base_ms"] == {
        "value": 20_000,
        "source": "global",
        "overridden": False,
    }
    assert detail["version"] == 3
    assert [p["name"] for p in ok(script.get("/providers"))] == ["p1", "p2"]
    assert ApiKey.objects.get(prefix=created["prefix"]).groups == ["auto"]

    # the next call follows it, with the created client key and the provider's credential
    assert served_by(live, created["secret"]) == "p1/a"
    assert live.upstream.requests[-1].headers["authorization"] == "Bearer upstream-key-p1-0123"

    # reorder → the very next call follows the new order
    ids = [t["id"] for t in detail["targets"]]
    reordered = script.put(
        "/groups/auto/targets/order", json={"order": ids[::-1]}, headers={"if-match": 'W/"3"'}
    )
    assert ok(reordered)["version"] == 4
    assert served_by(live, created["secret"]) == "p2/b"

    # disable that target → the next call goes back to p1/a
    ok(
        script.patch(
            f"/groups/auto/targets/{ids[1]}",
            json={"enabled": False},
            headers={"if-match": reordered.headers["etag"]},
        )
    )
    assert served_by(live, created["secret"]) == "p1/a"

    # re-enabled, first again — and the policy followed too: max_retries 0 means a 503 on
    # p2/b is one attempt, then the switch to p1/a
    live.upstream.script("b", Fail(503))
    ok(
        script.patch(
            f"/groups/auto/targets/{ids[1]}", json={"enabled": True}, headers={"if-match": 'W/"5"'}
        )
    )
    assert served_by(live, created["secret"]) == "p1/a"
    assert live.upstream.count("b") == 2  # the earlier success + exactly one failed attempt


def test_an_exported_configuration_loads_back_identically(
    live: Harness, script: httpx.Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The API's export round-trips through loadconfig (same text after a reload)."""
    from django.core.management import call_command

    upstream = live.upstream.base_url
    ok(
        script.post(
            "/providers",
            json={
                "name": "p1",
                "base_url": upstream,
                "api_key": "k-123456789012",
                "models": ["a", "b"],
                "headers": {"x-team": "ops"},
            },
        ),
        201,
    )
    ok(
        script.post(
            "/groups",
            json={
                "name": "auto",
                "algorithm": "round-robin",
                "targets": [
                    {"provider": "p1", "model": "a"},
                    {"provider": "p1", "model": "b", "weight": 3},
                ],
                "retry": {"max_retries": 2},
                "context_window": 64000,
            },
        ),
        201,
    )
    glob = script.get("/global")
    ok(
        script.patch(
            "/global", json={"commit": "complete"}, headers={"if-match": glob.headers["etag"]}
        )
    )
    exported = script.get("/config/export")
    assert exported.status_code == 200 and exported.headers["content-type"].startswith(
        "application/yaml"
    )
    path = tmp_path / "switchyard.yaml"
    path.write_text(exported.text)

    Group.objects.all().delete()
    Provider.objects.all().delete()
    monkeypatch.setenv("P1_API_KEY", "k-123456789012")
    monkeypatch.setenv("P1_HEADER_X_TEAM", "ops")  # header values are placeholders too
    call_command("loadconfig", str(path))
    assert script.get("/config/export").text == exported.text
