"""Over a real socket (no test-client CSRF shortcut): a bad bearer key on a write is a 401,
a client key is a 403, and a naive `since` is read as UTC."""

from __future__ import annotations

import httpx
import pytest

from routing.services.api_keys import generate_key
from tests.conftest import TWO_ROUTES, Harness


@pytest.mark.parametrize(
    ("method", "path"), [("POST", "groups"), ("PATCH", "groups/auto"), ("DELETE", "groups/auto")]
)
def test_wrong_bearer_key_on_a_write_is_401_not_a_csrf_403(
    harness: Harness, method: str, path: str
) -> None:
    harness.configure(TWO_ROUTES)
    response = httpx.request(
        method,
        harness.gateway.url + "/api/v1/" + path,
        headers={"authorization": "Bearer sk-sy-wrong"},
        json={},
        timeout=10,
    )
    assert response.status_code == 401


def test_client_key_on_the_admin_api_is_403(harness: Harness) -> None:
    response = httpx.post(
        harness.gateway.url + "/api/v1/groups",
        headers={"authorization": f"Bearer {harness.key}"},
        json={},
        timeout=10,
    )
    assert response.status_code == 403


def test_events_since_a_naive_timestamp(harness: Harness) -> None:
    _, admin = generate_key(name="ops", kind="admin")
    response = httpx.get(
        harness.gateway.url + "/api/v1/events",
        params={"since": "2026-01-01T00:00:00"},
        headers={"authorization": f"Bearer {admin}"},
        timeout=10,
    )
    assert response.status_code == 200, response.text
