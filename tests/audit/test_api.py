"""``/api/v1/status``, ``/api/v1/calls`` and ``/api/v1/events``: authenticated reads."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import httpx
import openai
import pytest
from django.test import Client

from routing.services.api_keys import generate_key
from routing.simulator.script import Fail
from tests.audit.conftest import MESSAGES, RETRY_TWICE, Audit


class FakeClock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(audit: Audit) -> Iterator[FakeClock]:
    runtime = audit.h.runtime
    original = runtime.clock  # type: ignore[attr-defined]
    runtime.clock = fake = FakeClock(1_700_000_000.0)  # type: ignore[attr-defined]
    yield fake
    runtime.clock = original  # type: ignore[attr-defined]


def test_status_shows_chains_policy_and_live_health(audit: Audit, clock: FakeClock) -> None:
    audit.h.configure(RETRY_TWICE)
    audit.h.upstream.script("a", Fail(503), Fail(503), Fail(503))
    audit.h.client().chat.completions.create(model="auto", messages=MESSAGES)
    clock.now += 4

    reply = audit.api.get("/api/v1/status")
    assert reply.status_code == 200, reply.text
    status = reply.json()
    groups = {g["name"]: g for g in status["groups"]}
    assert set(groups) == {"auto", "other"}
    auto = groups["auto"]
    assert [t["key"] for t in auto["targets"]] == ["p1/a", "p2/b"]
    assert auto["algorithm"] == "priority"
    assert auto["policy"]["retry.max_retries"] == 2
    assert auto["policy"]["circuit.failure_threshold"] == 1
    first, second = auto["targets"]
    assert (first["state"], first["availability"], first["last_code"]) == (
        "cooling",
        "cooling",
        "SERVER",
    )
    assert first["remaining_cooldown_s"] == pytest.approx(6.0)
    assert (second["state"], second["remaining_cooldown_s"], second["last_code"]) == (
        "healthy",
        0,
        None,
    )
    assert groups["other"]["policy"]["retry.max_retries"] == 5
    store = audit.h.runtime.store  # type: ignore[attr-defined]
    assert status["store"]["store"] == store.name and status["store"]["degraded"] is False
    assert datetime.fromisoformat(status["at"]) == datetime.fromtimestamp(clock.now, tz=UTC)

    clock.now += 7  # the deadline passed: probe-eligible, no time left
    first = audit.api.get("/api/v1/status").json()["groups"][0]["targets"][0]
    assert (first["state"], first["availability"], first["remaining_cooldown_s"]) == (
        "cooling",
        "probe-eligible",
        0,
    )


def test_a_disabled_provider_disables_its_targets_in_status(audit: Audit) -> None:
    audit.h.configure(RETRY_TWICE)
    audit.h.upstream.script("a", Fail(401, "bad key"))
    audit.h.client().chat.completions.create(model="auto", messages=MESSAGES)
    first = audit.api.get("/api/v1/status").json()["groups"][0]["targets"][0]
    assert (first["key"], first["state"], first["last_code"]) == ("p1/a", "disabled", "AUTH")


@pytest.mark.parametrize("path", ["/api/v1/status", "/api/v1/calls", "/api/v1/events"])
def test_reads_need_an_admin_key_or_a_staff_session(
    audit: Audit, path: str, admin_client: Client
) -> None:
    audit.h.configure(RETRY_TWICE)
    url = audit.h.gateway.url + path
    assert httpx.get(url).status_code == 401
    assert httpx.get(url, headers={"authorization": "Bearer sk-sy-not-a-key"}).status_code == 401
    _, client_key = generate_key(name="app", kind="client")
    assert httpx.get(url, headers={"authorization": f"Bearer {client_key}"}).status_code == 403
    assert audit.api.get(path).status_code == 200
    assert admin_client.get(path).status_code == 200
    assert Client().get(path).status_code == 401


def test_calls_are_newest_first_and_limited(audit: Audit) -> None:
    audit.h.configure(RETRY_TWICE)
    ids = []
    for _ in range(3):
        raw = audit.h.client().chat.completions.with_raw_response.create(
            model="other", messages=MESSAGES
        )
        ids.append(raw.headers["x-switchyard-request-id"])
    audit.h.client().chat.completions.create(model="auto", messages=MESSAGES)
    audit.flush()
    listed = audit.api.get("/api/v1/calls", params={"group": "other", "limit": 2}).json()
    assert [c["call_id"] for c in listed] == ids[::-1][:2]
    assert len(audit.api.get("/api/v1/calls").json()) == 4
    assert audit.api.get("/api/v1/calls", params={"limit": 0}).status_code == 422
    assert audit.api.get("/api/v1/calls", params={"limit": 501}).status_code == 422


def test_events_filter_by_kind_and_since(audit: Audit) -> None:
    audit.h.configure(RETRY_TWICE)
    audit.h.upstream.script("a", Fail(503), Fail(503), Fail(503))
    audit.h.client().chat.completions.create(model="auto", messages=MESSAGES)
    audit.flush()
    [first] = audit.api.get("/api/v1/events", params={"kind": "fallback"}).json()
    configs = audit.api.get("/api/v1/events", params={"kind": "config"}).json()
    assert configs and {e["path"] for e in configs} == {"file"}  # the harness's config load

    audit.h.upstream.script("b", Fail(500), Fail(500), Fail(500), Fail(500), Fail(500), Fail(500))
    with pytest.raises(openai.APIStatusError):  # the only route is exhausted
        audit.h.client().chat.completions.create(model="other", messages=MESSAGES)
    audit.flush()
    later = audit.api.get("/api/v1/events", params={"since": first["at"]}).json()
    assert later and all(e["at"] > first["at"] for e in later)
    # the last target's failure is on the call's record, not a fallback (SPEC §16)
    assert {(e["kind"], e.get("target") or e.get("from_target")) for e in later} == {
        ("health", "p2/b"),
    }
    assert [e["at"] for e in later] == sorted((e["at"] for e in later), reverse=True)
    assert audit.api.get("/api/v1/events", params={"kind": "bogus"}).status_code == 422
    everything = audit.api.get("/api/v1/events", params={"kind": "", "since": ""})
    assert everything.status_code == 200 and len(everything.json()) == 3 + len(configs)


def test_the_endpoints_are_in_the_openapi_document(audit: Audit) -> None:
    document = audit.api.get("/api/v1/openapi.json")
    assert document.status_code == 200
    paths = document.json()["paths"]
    assert {"/api/v1/status", "/api/v1/calls", "/api/v1/events"} <= set(paths)
