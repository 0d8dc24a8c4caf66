"""The request path never touches the database and reuses each provider's pooled client."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator

import pytest
from django.db.backends.base.base import BaseDatabaseWrapper

from routing.simulator.script import Fail
from tests.conftest import TWO_ROUTES, Harness

MESSAGES = [{"role": "user", "content": "hi"}]
AUDIT_THREAD_PREFIX = "switchyard-audit"
# Background threads, not the request path: the audit writer and the config version check.
BACKGROUND_THREADS = (AUDIT_THREAD_PREFIX, "switchyard-config-version")


@pytest.fixture
def queries_by_thread(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[str]]:
    """Django's query capture is per connection (per thread); the gateway serves on other
    threads, so count every cursor opened in the process, by thread name."""
    seen: Counter[str] = Counter()
    original = BaseDatabaseWrapper.cursor

    def counting_cursor(self: BaseDatabaseWrapper):  # type: ignore[no-untyped-def]
        seen[threading.current_thread().name] += 1
        return original(self)

    monkeypatch.setattr(BaseDatabaseWrapper, "cursor", counting_cursor)
    yield seen


def test_a_routed_call_issues_no_database_query(
    harness: Harness, queries_by_thread: Counter[str]
) -> None:
    harness.configure(TWO_ROUTES)
    client = harness.client()
    client.chat.completions.create(model="auto", messages=MESSAGES)  # compiles the table once
    list(client.chat.completions.create(model="auto", messages=MESSAGES, stream=True))
    queries_by_thread.clear()

    for _ in range(10):
        client.chat.completions.create(model="auto", messages=MESSAGES)
        list(client.chat.completions.create(model="auto", messages=MESSAGES, stream=True))
    harness.upstream.script("a", Fail(503))
    client.chat.completions.create(model="auto", messages=MESSAGES)  # a retry and a record or two

    on_request_path = {
        name: n for name, n in queries_by_thread.items() if not name.startswith(BACKGROUND_THREADS)
    }
    assert on_request_path == {}


def test_calls_reuse_the_providers_pooled_client(harness: Harness) -> None:
    # a direct address names a model its provider lists
    harness.configure(
        TWO_ROUTES.replace("api_key: upstream-key-p2", "api_key: k2\n    models: [b]")
    )
    client = harness.client()
    client.chat.completions.create(model="auto", messages=MESSAGES)
    client.chat.completions.create(model="p2/b", messages=MESSAGES)
    clients = harness.runtime._clients  # type: ignore[attr-defined]
    pooled = {name: clients[name][1] for name in ("p1", "p2")}
    for _ in range(5):
        client.chat.completions.create(model="auto", messages=MESSAGES)
        client.chat.completions.create(model="p2/b", messages=MESSAGES)
    assert {name: clients[name][1] for name in ("p1", "p2")} == pooled
    assert all(clients[name][1] is pooled[name] for name in pooled)
