"""``GET /healthz`` and ``GET /readyz`` (SPEC §8): no authentication, no secrets, no
configuration; readiness follows the database, the state store and the routing table."""

from __future__ import annotations

import httpx

from routing.state.memory import MemoryStore
from tests.conftest import TWO_ROUTES, Harness


class DegradedStore(MemoryStore):
    """A store serving from its fallback (what the Redis store reports while Redis is down)."""

    async def describe(self) -> dict[str, object]:
        return {"store": "redis", "degraded": True, "detail": "redis://secret-host:6379 down"}


def test_healthz_and_readyz_answer_without_credentials(harness: Harness) -> None:
    harness.configure(TWO_ROUTES)
    alive = httpx.get(harness.gateway.url + "/healthz")
    assert alive.status_code == 200 and alive.json() == {"status": "alive"}
    ready = httpx.get(harness.gateway.url + "/readyz")
    assert ready.status_code == 200
    assert ready.json() == {
        "status": "ready",
        "checks": {"database": True, "state_store": True, "routing_table": True},
    }
    assert harness.runtime.table is not None  # type: ignore[attr-defined]
    for response in (alive, ready):
        text = response.text
        assert "upstream-key" not in text and "p1" not in text and "auto" not in text


def test_readyz_is_503_while_the_state_store_is_degraded(harness: Harness) -> None:
    harness.configure(TWO_ROUTES)
    harness.runtime.use_store(DegradedStore())  # type: ignore[attr-defined]
    response = httpx.get(harness.gateway.url + "/readyz")
    assert response.status_code == 503
    assert response.json()["checks"] == {
        "database": True,
        "state_store": False,
        "routing_table": True,
    }
    assert "secret-host" not in response.text
    assert httpx.get(harness.gateway.url + "/healthz").status_code == 200


def test_probes_only_answer_get(harness: Harness) -> None:
    assert httpx.post(harness.gateway.url + "/healthz").status_code == 405
    assert httpx.post(harness.gateway.url + "/readyz").status_code == 405
