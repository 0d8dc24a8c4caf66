"""Issue 41 item 5: every failed attempt's record carries the cooling it earned, and every
health transition names the call that caused it: the ledger rows, ``/api/v1/calls``,
``/api/v1/events`` and the call page, for an exhausted call over real sockets."""

from __future__ import annotations

import openai
import pytest
from django.contrib.auth.models import User
from django.test import Client

from routing.audit.models import Attempt, HealthTransition
from routing.simulator.script import Fail
from tests.audit.conftest import Audit
from tests.conftest import TWO_ROUTES

MESSAGES = [{"role": "user", "content": "hi"}]


def _exhausted_call(audit: Audit) -> str:
    """Both targets answer 429 with Retry-After 30 (beyond max_delay_ms: no retry in place):
    each earns a 30 s cooling, the second as the last target, with no switch to carry it."""
    h = audit.h
    h.configure(TWO_ROUTES)
    slow_down = Fail(429, "slow down", headers={"Retry-After": "30"})
    h.upstream.script("a", then=slow_down)
    h.upstream.script("b", then=slow_down)
    with pytest.raises(openai.APIStatusError) as caught:
        h.client().with_options(max_retries=0).chat.completions.create(
            model="auto", messages=MESSAGES
        )
    audit.flush()
    return caught.value.response.headers["x-switchyard-request-id"]


def test_the_ledger_and_the_api_give_each_attempt_its_cooling_and_each_transition_its_call(
    audit: Audit,
) -> None:
    call_id = _exhausted_call(audit)
    rows = Attempt.objects.filter(call_id=call_id).order_by("index")
    assert [(a.target, round(a.cooldown_s or 0)) for a in rows] == [("p1/a", 30), ("p2/b", 30)]
    cooling = HealthTransition.objects.filter(kind="cooling").order_by("id")
    assert [(t.target, t.call_id) for t in cooling] == [("p1/a", call_id), ("p2/b", call_id)]

    [call] = audit.api.get("/api/v1/calls", params={"group": "auto"}).json()
    assert [round(a["cooldown_s"]) for a in call["attempts"]] == [30, 30]
    events = audit.api.get("/api/v1/events", params={"kind": "health"}).json()
    assert {(e["target"], e["call_id"]) for e in events if e["transition"] == "cooling"} == {
        ("p1/a", call_id),
        ("p2/b", call_id),
    }


def test_the_call_page_shows_the_cooling_each_attempt_earned(audit: Audit) -> None:
    call_id = _exhausted_call(audit)
    client = Client()
    client.force_login(User.objects.create_user("operator", password="pw-tests", is_staff=True))
    page = client.get(f"/calls/{call_id}/").content.decode()
    assert page.count("data-cooldown>· cooling 30 s<") == 2
