"""A call that retries twice and then fails over leaves exactly one call row with four
attempts, one fallback event and the health events — in the database, the admin,
``/api/v1/calls`` and ``/api/v1/events``."""

from __future__ import annotations

import pytest
from django.test import Client

from routing.audit.models import Attempt, Call, Fallback, HealthTransition
from routing.simulator.script import Fail, Reply
from tests.audit.conftest import MESSAGES, RETRY_TWICE, Audit


@pytest.fixture
def failed_over(audit: Audit) -> tuple[Audit, str]:
    audit.h.configure(RETRY_TWICE)
    audit.h.upstream.script("a", Fail(503), Fail(503), Fail(503))
    audit.h.upstream.script("b", Reply("from b"))
    raw = audit.h.client().chat.completions.with_raw_response.create(
        model="auto", messages=MESSAGES
    )
    assert raw.parse().choices[0].message.content == "from b"
    audit.flush()
    return audit, raw.headers["x-switchyard-request-id"]


def test_one_call_row_with_four_attempts(failed_over: tuple[Audit, str]) -> None:
    _, call_id = failed_over
    [call] = Call.objects.all()
    assert (call.call_id, call.group, call.outcome, call.served_by) == (
        call_id,
        "auto",
        "ok",
        "p2/b",
    )
    assert call.attempt_count == 4 and call.http_status == 200
    assert call.elapsed_ms > 0 and call.ttft_ms is not None and call.ttft_ms > 0
    assert call.total_tokens is not None and call.total_tokens > 0
    attempts = list(Attempt.objects.filter(call=call).order_by("index"))
    assert [(a.index, a.target, a.try_number, a.ok, a.code) for a in attempts] == [
        (1, "p1/a", 1, False, "SERVER"),
        (2, "p1/a", 2, False, "SERVER"),
        (3, "p1/a", 3, False, "SERVER"),
        (4, "p2/b", 1, True, ""),
    ]
    assert [a.will_retry for a in attempts] == [True, True, False, False]
    assert [a.switched for a in attempts] == [False, False, True, False]
    assert attempts[2].switched_to == "p2/b" and attempts[2].reason == "retry-exhausted"
    assert {a.status for a in attempts[:3]} == {503}


def test_one_fallback_event_and_the_health_events(failed_over: tuple[Audit, str]) -> None:
    audit, call_id = failed_over
    [fallback] = Fallback.objects.all()
    assert (fallback.call_id, fallback.group, fallback.from_target, fallback.to_target) == (
        call_id,
        "auto",
        "p1/a",
        "p2/b",
    )
    assert (fallback.reason, fallback.code, fallback.status) == ("retry-exhausted", "SERVER", 503)
    assert fallback.cooldown_s == pytest.approx(10.0)  # circuit opened: base cooldown 10 s
    [cooling] = HealthTransition.objects.all()
    assert (cooling.kind, cooling.target, cooling.provider, cooling.code) == (
        "cooling",
        "p1/a",
        "p1",
        "SERVER",
    )
    assert cooling.until is not None
    assert (cooling.until - cooling.at).total_seconds() == pytest.approx(10.0, abs=0.01)


def test_the_call_and_its_attempts_in_the_calls_api(failed_over: tuple[Audit, str]) -> None:
    audit, call_id = failed_over
    reply = audit.api.get("/api/v1/calls", params={"group": "auto", "limit": 10})
    assert reply.status_code == 200, reply.text
    [call] = reply.json()
    assert call["call_id"] == call_id and call["served_by"] == "p2/b" and call["outcome"] == "ok"
    assert [(a["target"], a["ok"], a["code"], a["will_retry"]) for a in call["attempts"]] == [
        ("p1/a", False, "SERVER", True),
        ("p1/a", False, "SERVER", True),
        ("p1/a", False, "SERVER", False),
        ("p2/b", True, None, False),
    ]
    assert call["attempts"][2]["switched_to"] == "p2/b"
    assert call["usage"]["total_tokens"] > 0
    assert audit.api.get("/api/v1/calls", params={"group": "other"}).json() == []


def test_the_events_in_the_events_api(failed_over: tuple[Audit, str]) -> None:
    audit, call_id = failed_over
    events = audit.api.get("/api/v1/events").json()
    configs = [e for e in events if e["kind"] == "config"]
    assert configs and {e["path"] for e in configs} == {"file"}  # the harness's config load
    assert sorted(e["kind"] for e in events if e["kind"] != "config") == ["fallback", "health"]
    [fallback] = audit.api.get("/api/v1/events", params={"kind": "fallback"}).json()
    assert (fallback["call_id"], fallback["from_target"], fallback["to_target"]) == (
        call_id,
        "p1/a",
        "p2/b",
    )
    assert fallback["reason"] == "retry-exhausted" and fallback["cooldown_s"] == pytest.approx(10.0)
    [health] = audit.api.get("/api/v1/events", params={"kind": "health"}).json()
    assert (health["transition"], health["target"], health["code"]) == ("cooling", "p1/a", "SERVER")
    assert health["until"] is not None


def test_everything_in_the_admin(failed_over: tuple[Audit, str], admin_client: Client) -> None:
    _, call_id = failed_over
    call = Call.objects.get()
    page = admin_client.get(f"/admin/audit/call/{call.pk}/change/")
    assert page.status_code == 200
    html = page.content.decode()
    assert html.count("p1/a") >= 3 and "p2/b" in html  # the attempts, inline
    assert "retry exhausted" in html
    listing = admin_client.get("/admin/audit/call/", {"q": call_id[:12]})
    assert listing.status_code == 200 and call_id in listing.content.decode()
    assert call_id in admin_client.get("/admin/audit/fallback/").content.decode()
    health = admin_client.get(
        "/admin/audit/healthtransition/", {"kind__exact": "cooling"}
    ).content.decode()
    assert "p1/a" in health
