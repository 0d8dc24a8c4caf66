"""A configuration the gateway cannot read must not turn ``/v1`` into Django's HTML 500
(issue 11 §4): a credential the secret key cannot decrypt is that provider's configuration
failure, and a process with no table at all answers an OpenAI-shaped 503.

Over real sockets: the official SDK or httpx -> the live gateway -> the loopback upstream.
The same over separate processes (a daphne started with another secret key, or on an
unmigrated database) is in ``tests/config/test_config_processes.py``."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from django.db import OperationalError

from routing.gateway.events import CallRecord
from routing.gateway.runtime import Runtime, install_runtime
from routing.gateway.table import RoutingTable
from routing.state.memory import MemoryStore
from tests.conftest import TWO_ROUTES, Harness, off_loop

MESSAGES = [{"role": "user", "content": "hi"}]


def test_a_credential_the_secret_cannot_decrypt_fails_over_as_a_configuration_failure(
    harness: Harness, settings: Any
) -> None:
    from routing.models import Provider

    harness.configure(TWO_ROUTES)  # both credentials encrypted under the first secret
    settings.SWITCHYARD = {**settings.SWITCHYARD, "SECRET_KEY": "another-secret"}

    def set_p2_again() -> None:  # the operator set p2's credential again; p1's is unreadable
        row = Provider.objects.get(name="p2")
        row.set_api_key("upstream-key-p2")
        row.save()

    off_loop(set_p2_again)
    harness.runtime.invalidate()  # type: ignore[attr-defined]
    reply = harness.client().chat.completions.create(model="auto", messages=MESSAGES)
    assert reply.choices[0].message.content == "Hello from b."
    assert harness.upstream.count("a") == 0
    [call] = harness.events(CallRecord, at_least=1)
    assert call.outcome == "ok"
    assert call.attempts[0].code == "MISSING_CREDENTIAL"
    assert "cannot be decrypted with SWITCHYARD_SECRET_KEY" in call.attempts[0].message
    assert harness.upstream.requests[-1].headers["authorization"] == "Bearer upstream-key-p2"


def test_with_no_table_at_all_every_door_answers_a_503_in_its_own_shape(
    harness: Harness,
) -> None:
    def cannot_compile() -> RoutingTable:
        raise OperationalError("no such table: routing_configversion")

    broken = Runtime(store=MemoryStore(), compile=cannot_compile)
    broken.background_checks = False
    install_runtime(broken)
    try:
        headers = {"authorization": f"Bearer {harness.key}"}
        base = harness.gateway.base_url
        with httpx.Client(base_url=base, headers=headers, timeout=30) as client:
            answers = [
                client.post("/chat/completions", json={"model": "auto", "messages": MESSAGES}),
                client.get("/models"),
                client.post("/responses", json={"model": "auto", "input": "hi"}),
            ]
            messages = client.post(
                "/messages", json={"model": "auto", "max_tokens": 8, "messages": MESSAGES}
            )
    finally:
        install_runtime(harness.runtime)  # type: ignore[arg-type]
    for answer in answers:
        assert answer.status_code == 503, answer.text
        assert answer.headers["content-type"] == "application/json"
        error = answer.json()["error"]
        assert (error["type"], error["code"]) == ("server_error", "configuration_unavailable")
        assert "cannot read its configuration (OperationalError)" in error["message"]
        assert "routing_configversion" not in error["message"]  # details stay in the log
    assert messages.status_code == 503
    assert messages.json()["type"] == "error"
    assert "cannot read its configuration" in messages.json()["error"]["message"]
    # the next call compiles again: a database that answers again ends the outage
    reply = harness.client().models.list()
    assert reply.data == []


async def test_with_no_table_calls_arriving_together_try_one_compile_per_second() -> None:
    """While the database is away, calls do not each queue a compile (and a log line): one
    try per COMPILE_RETRY_S on the runtime's clock; a configuration change retries at once."""
    from routing.gateway.runtime import COMPILE_RETRY_S, TableUnavailable

    tries: list[int] = []
    now = [1000.0]

    def cannot_compile() -> RoutingTable:
        tries.append(1)
        raise OperationalError("the database is away")

    runtime = Runtime(store=MemoryStore(), compile=cannot_compile, clock=lambda: now[0])
    runtime.background_checks = False
    for _ in range(5):
        with pytest.raises(TableUnavailable, match="OperationalError"):
            await runtime.current_table()
    assert len(tries) == 1
    now[0] += COMPILE_RETRY_S
    with pytest.raises(TableUnavailable):
        await runtime.current_table()
    assert len(tries) == 2
    runtime.invalidate()
    with pytest.raises(TableUnavailable):
        await runtime.current_table()
    assert len(tries) == 3
