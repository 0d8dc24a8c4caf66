"""Management API fixtures: an admin-key client over Django's test client, a fresh runtime
state per test, and config builders.

Tests here use ``transactional_db`` (not ``db``): writes commit for real, so the
on-commit work the API promises — routing-table invalidation, config-change records,
health records — actually happens, as it does in production.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.db import connection
from django.test import Client

from tests.conftest import Harness

API = "/api/v1"


@dataclass
class Api:
    """The management API as a script sees it: JSON in, JSON out, Bearer auth."""

    client: Client
    key: str
    extra: dict[str, str] = field(default_factory=dict)

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        if_match: str | None = None,
        raw: bytes | None = None,
        key: str | None = None,
    ) -> Any:
        headers = dict(self.extra)
        token = self.key if key is None else key
        if token:
            headers["HTTP_AUTHORIZATION"] = f"Bearer {token}"
        if if_match is not None:
            headers["HTTP_IF_MATCH"] = if_match
        kwargs: dict[str, Any] = {}
        if method != "GET":  # no body = an empty one (the test client would send a form)
            data = raw if raw is not None else (json.dumps(body) if body is not None else "")
            kwargs = {"data": data, "content_type": "application/json"}
        return getattr(self.client, method.lower())(API + path, **kwargs, **headers)

    def get(self, path: str, **kw: Any) -> Any:
        return self.call("GET", path, **kw)

    def post(self, path: str, body: Any = None, **kw: Any) -> Any:
        return self.call("POST", path, body, **kw)

    def patch(self, path: str, body: Any = None, **kw: Any) -> Any:
        return self.call("PATCH", path, body, **kw)

    def put(self, path: str, body: Any = None, **kw: Any) -> Any:
        return self.call("PUT", path, body, **kw)

    def delete(self, path: str, **kw: Any) -> Any:
        return self.call("DELETE", path, **kw)

    def etag(self, path: str) -> str:
        response = self.get(path)
        assert response.status_code == 200, response.content
        return str(response["ETag"])

    # -- builders -------------------------------------------------------------------
    def provider(self, name: str = "p1", **fields: Any) -> dict[str, Any]:
        body = {"name": name, "base_url": "http://127.0.0.1:9/v1", **fields}
        response = self.post("/providers", body)
        assert response.status_code == 201, response.content
        return dict(response.json())

    def group(
        self, name: str = "auto", targets: list[dict[str, Any]] | None = None, **policy: Any
    ) -> dict[str, Any]:
        body = {"name": name, "targets": targets or [{"provider": "p1", "model": "a"}], **policy}
        response = self.post("/groups", body)
        assert response.status_code == 201, response.content
        return dict(response.json())


@pytest.fixture
def runtime_state() -> Iterator[Any]:
    """A fresh health store (the configured kind: Redis on the production leg) and hub on
    the process runtime, and a stale table."""
    from routing.gateway.events import EventHub
    from routing.gateway.runtime import get_runtime
    from tests.conftest import fresh_store

    runtime = get_runtime()
    saved = (runtime.store, runtime.hub, runtime.clock)
    runtime.store, runtime.hub = fresh_store(), EventHub()
    runtime.invalidate()
    yield runtime
    runtime.store, runtime.hub, runtime.clock = saved
    runtime.invalidate()


@pytest.fixture
def api(transactional_db: None, runtime_state: Any) -> Iterator[Api]:
    from routing.audit import writer
    from routing.services.api_keys import generate_key

    _, secret = generate_key(name="ops", kind="admin")
    yield Api(client=Client(), key=secret)
    writer.flush(10)  # audit rows of this test land before the next test's flush


@pytest.fixture
def live(harness: Harness) -> Iterator[Harness]:
    """The live gateway harness; the upstream clients this test made the runtime pool are
    closed afterwards, so later tests see only their own."""
    yield harness
    runtime, loop = harness.runtime, harness.gateway.loop
    asyncio.run_coroutine_threadsafe(runtime.aclose(), loop).result(timeout=10)  # type: ignore[attr-defined]


def field_view(detail: dict[str, Any], name: str) -> tuple[Any, str, bool]:
    """``(value, source, overridden)`` of one policy field in a group/global read."""
    item = detail["fields"][name]
    return item["value"], item["source"], item["overridden"]


def database_dump() -> str:
    """Every row of every table, as text (raw SQL: no model field is skipped)."""
    lines: list[str] = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names():
            cursor.execute(f'SELECT * FROM "{table}"')  # noqa: S608 - names from introspection
            lines.extend(f"{table}: {row!r}" for row in cursor.fetchall())
    return "\n".join(lines)
