"""Redis gone mid-run, seen from the outside: the gateway keeps answering on local state,
/api/v1/status says the store is degraded, and both recover when Redis is back."""

from __future__ import annotations

import time

import httpx

from routing.services.api_keys import generate_key
from routing.state.redis import RedisStore
from tests.conftest import TWO_ROUTES, Harness
from tests.state.servers import RedisServer, free_port, unique_prefix

MESSAGES = [{"role": "user", "content": "hi"}]


def status(h: Harness, admin: str) -> dict:  # type: ignore[type-arg]
    response = httpx.get(
        h.gateway.url + "/api/v1/status", headers={"authorization": f"Bearer {admin}"}, timeout=10
    )
    assert response.status_code == 200, response.text
    return response.json()["store"]


def test_calls_survive_redis_going_away_and_coming_back(harness: Harness) -> None:
    server = RedisServer(port=free_port())
    server.start()
    harness.runtime.use_store(RedisStore(server.url, prefix=unique_prefix(), retry_s=0.2))
    _, admin = generate_key(name="ops", kind="admin")
    harness.configure(TWO_ROUTES)
    client = harness.client()
    try:
        assert (
            client.chat.completions.create(model="auto", messages=MESSAGES)
            .choices[0]
            .message.content
            == "Hello from a."
        )
        assert status(harness, admin)["degraded"] is False

        server.kill()
        for _ in range(5):  # served on local state, no error, no long connect wait
            started = time.monotonic()
            assert (
                client.chat.completions.create(model="auto", messages=MESSAGES)
                .choices[0]
                .message.content
                == "Hello from a."
            )
            assert time.monotonic() - started < 2
        store = status(harness, admin)
        assert store["degraded"] is True
        assert store["detail"]

        server.start()
        time.sleep(0.3)  # past retry_s: the next operation tries Redis again
        client.chat.completions.create(model="auto", messages=MESSAGES)
        assert status(harness, admin)["degraded"] is False
    finally:
        server.kill()
