"""Keys and authentication: client keys limited to groups, admin keys, both hashed, shown
once, listed by prefix, revocable at once; the management API's 401/403; staff sessions
with CSRF."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import openai
import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from routing.models import ApiKey
from routing.services.api_keys import hash_secret
from tests.api.conftest import API, Api
from tests.conftest import Harness

MESSAGES = [{"role": "user", "content": "hi"}]
TWO_GROUPS = """
providers:
  - {name: p1, kind: openai, base_url: "{upstream}"}
groups:
  - name: a
    targets:
      - {provider: p1, model: m}
  - name: b
    targets:
      - {provider: p1, model: m}
"""


def test_a_created_key_is_shown_once_stored_hashed_and_listed_by_prefix(api: Api) -> None:
    created = api.post("/keys", {"name": "ci", "kind": "admin"})
    assert created.status_code == 201
    body = created.json()
    secret = body.pop("secret")
    assert secret.startswith("sk-sy-") and body["prefix"] == secret[:12]
    row = ApiKey.objects.get(pk=body["id"])
    assert row.hashed == hash_secret(secret)
    assert secret not in {
        str(v) for v in ApiKey.objects.values_list("name", "prefix", "hashed").get(pk=row.pk)
    }

    listed = api.get("/keys").json()
    assert {k["name"] for k in listed} == {"ops", "ci"}
    assert (
        all("secret" not in k for k in listed) and secret not in api.get("/keys").content.decode()
    )
    assert [k["name"] for k in api.get(f"/keys?prefix={body['prefix']}").json()] == ["ci"]
    assert api.get("/keys?prefix=%00").status_code == 422


def test_invalid_key_requests_are_field_level_422s(api: Api) -> None:
    cases = [
        ({"name": "x", "kind": "admin", "groups": ["auto"]}, ["body", "groups"]),
        ({"name": "x", "groups": ["ghost"]}, ["body", "groups"]),
        ({"name": "x", "kind": "root"}, ["body", "kind"]),
        ({"name": ""}, ["body", "name"]),
        ({"name": "tab\there"}, ["body", "name"]),
    ]
    for body, loc in cases:
        response = api.post("/keys", body)
        assert response.status_code == 422, body
        assert response.json()["detail"][0]["loc"] == loc
    assert ApiKey.objects.count() == 1  # only the fixture's admin key


def test_wrong_or_missing_keys_are_401_and_client_keys_403(api: Api) -> None:
    assert api.get("/groups", key="").status_code == 401
    assert api.get("/groups", key="").json() == {"detail": "Unauthorized"}
    assert api.get("/groups", key="sk-sy-not-a-real-key").status_code == 401
    client_secret = api.post("/keys", {"name": "app"}).json()["secret"]
    forbidden = api.get("/groups", key=client_secret)
    assert forbidden.status_code == 403
    assert "client key" in forbidden.json()["detail"]


def test_a_revoked_admin_key_is_refused_on_the_next_request(api: Api) -> None:
    created = api.post("/keys", {"name": "temp", "kind": "admin"}).json()
    assert api.get("/groups", key=created["secret"]).status_code == 200
    revoked = api.delete(f"/keys/{created['id']}")
    assert revoked.status_code == 200 and revoked.json()["active"] is False
    assert api.get("/groups", key=created["secret"]).status_code == 401
    assert api.delete(f"/keys/{created['id']}").json()["revoked_at"] == revoked.json()["revoked_at"]
    assert api.delete("/keys/999999").status_code == 404


@pytest.fixture
def keyed(live: Harness) -> Iterator[tuple[Harness, httpx.Client]]:
    from routing.services.api_keys import generate_key

    live.configure(TWO_GROUPS)
    _, admin = generate_key(name="ops", kind="admin")
    with httpx.Client(
        base_url=live.gateway.url + API, headers={"authorization": f"Bearer {admin}"}, timeout=10
    ) as client:
        yield live, client


def test_a_client_key_limited_to_group_a_gets_the_same_404_for_b_as_for_nothing(
    keyed: tuple[Harness, httpx.Client],
) -> None:
    live, api = keyed
    secret = api.post("/keys", json={"name": "app", "groups": ["a"]}).json()["secret"]
    client = openai.OpenAI(base_url=live.gateway.base_url, api_key=secret, max_retries=0)
    assert client.chat.completions.create(model="a", messages=MESSAGES).choices
    with pytest.raises(openai.NotFoundError) as hidden:
        client.chat.completions.create(model="b", messages=MESSAGES)
    with pytest.raises(openai.NotFoundError) as missing:
        client.chat.completions.create(model="nope", messages=MESSAGES)
    assert hidden.value.status_code == missing.value.status_code == 404
    assert hidden.value.body == {  # type: ignore[comparison-overlap]
        **missing.value.body,  # type: ignore[dict-item]
        "message": "The model 'b' does not exist.",
    }
    assert [m.id for m in client.models.list()] == ["a"]


def test_a_revoked_client_key_gets_401_at_once(keyed: tuple[Harness, httpx.Client]) -> None:
    live, api = keyed
    created = api.post("/keys", json={"name": "app"}).json()
    client = openai.OpenAI(base_url=live.gateway.base_url, api_key=created["secret"], max_retries=0)
    assert client.chat.completions.create(model="a", messages=MESSAGES).choices
    assert api.delete(f"/keys/{created['id']}").status_code == 200
    with pytest.raises(openai.AuthenticationError) as refused:
        client.chat.completions.create(model="a", messages=MESSAGES)
    assert refused.value.status_code == 401


def test_staff_sessions_work_with_csrf(api: Api) -> None:
    user_model = get_user_model()
    staff = user_model.objects.create_user("alice", password="pw-123456789", is_staff=True)
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(staff)
    assert browser.get(f"{API}/groups").status_code == 200

    body = '{"name": "from-the-page"}'
    without = browser.post(f"{API}/keys", body, content_type="application/json")
    assert without.status_code == 403  # no CSRF token: refused, nothing created
    token = "x" * 32
    browser.cookies["csrftoken"] = token
    with_token = browser.post(
        f"{API}/keys", body, content_type="application/json", HTTP_X_CSRFTOKEN=token
    )
    assert with_token.status_code == 201
    assert ApiKey.objects.filter(name="from-the-page").count() == 1

    visitor = Client()
    visitor.force_login(user_model.objects.create_user("bob", password="pw-123456789"))
    assert visitor.get(f"{API}/groups").status_code == 401
