"""A NUL in any text the management API takes — a path's name, a filter, a body's model —
is the client's error (404 or 422), never a 500: PostgreSQL refuses NUL in text, so a
value that reached a query or a row would fail in the database (the production leg runs
this on PostgreSQL; schemathesis found the model-list case there)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from tests.api.conftest import Api

NUL = "a%00b"  # in a path or query string
CASES: list[tuple[str, str, dict[str, Any] | None, int]] = [
    ("get", f"/groups/{NUL}", None, 404),
    ("patch", f"/groups/{NUL}", {"algorithm": "priority"}, 404),
    ("delete", f"/groups/{NUL}", None, 404),
    ("post", f"/groups/{NUL}/restore-default", {"fields": ["algorithm"]}, 404),
    ("put", f"/groups/{NUL}/switch-codes", {"codes": ["RATE_LIMIT"]}, 404),
    ("post", f"/groups/{NUL}/targets", {"provider": "p1", "model": "a"}, 404),
    ("patch", f"/groups/{NUL}/targets/1", {"weight": 2}, 404),
    ("get", f"/providers/{NUL}", None, 404),
    ("delete", f"/providers/{NUL}", None, 404),
    ("post", f"/providers/{NUL}/enable", {}, 404),
    ("get", f"/calls?group={NUL}", None, 422),
    ("get", f"/calls?target={NUL}", None, 422),
    ("get", f"/calls?code={NUL}", None, 422),
    ("get", f"/calls?session={NUL}", None, 422),
    ("get", f"/keys?prefix={NUL}", None, 422),
    ("patch", "/providers/p1", {"models": ["x\x00"]}, 422),
    ("post", "/groups", {"name": "g", "targets": [{"provider": "p1", "model": "a\x00"}]}, 422),
    ("post", "/keys", {"name": "a\x00b"}, 422),
]


@pytest.mark.parametrize(("method", "path", "body", "status"), CASES)
def test_a_nul_is_the_clients_error_never_a_database_error(
    api: Api, method: str, path: str, body: dict[str, Any] | None, status: int
) -> None:
    api.provider("p1")
    client = Client(raise_request_exception=False)
    headers = {"HTTP_AUTHORIZATION": f"Bearer {api.key}", "HTTP_IF_MATCH": 'W/"1"'}
    send = getattr(client, method)
    if body is None:
        response = send(f"/api/v1{path}", **headers)
    else:
        response = send(
            f"/api/v1{path}", json.dumps(body), content_type="application/json", **headers
        )
    assert response.status_code == status, response.content
    assert response.json()["detail"]
