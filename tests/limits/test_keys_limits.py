"""A key's limits on every path (API, createkey), its detail, and spend (SPEC §17)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import openai
import pytest
from django.core.management import CommandError, call_command

from routing.audit import writer
from routing.audit.models import ConfigChange
from routing.models import ApiKey
from tests.api.conftest import Api
from tests.conftest import Harness

BAD_LIMITS: list[tuple[Any, list[str]]] = [
    ({"rpm": -1}, ["body", "limits", "rpm"]),
    ({"rpm": "sixty"}, ["body", "limits", "rpm"]),
    ({"cost_per_day": -0.5}, ["body", "limits", "cost_per_day"]),
    ({"rpd": 5}, ["body", "limits", "rpd"]),
    ({"rpm": True}, ["body", "limits", "rpm"]),
    ({"²": 1}, ["body", "limits", "²"]),  # a digit to str.isdigit, not to int()
    ("rpm=5", ["body", "limits"]),
]


def test_a_key_is_created_and_patched_with_limits_and_shows_them(api: Api) -> None:
    created = api.post("/keys", {"name": "agent", "limits": {"rpm": 60, "cost_per_day": 5}})
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["limits"] == {"rpm": 60, "cost_per_day": 5.0}
    patched = api.patch(f"/keys/{body['id']}", {"limits": {"tokens_per_month": 1000}})
    assert patched.status_code == 200, patched.content
    assert patched.json()["limits"] == {"tokens_per_month": 1000}
    detail = api.get(f"/keys/{body['id']}").json()
    assert detail["limits"] == {"tokens_per_month": 1000}
    assert detail["use"]["tokens_per_month"]["used"] == 0
    assert detail["use"]["tokens_per_month"]["window"] == "month"
    assert detail["spend"]["today"] == {"calls": 0, "tokens": 0, "cost": None}
    changes = ConfigChange.objects.filter(object_type="key", object_name__startswith="agent")
    deadline = time.monotonic() + 10
    while changes.count() < 2 and time.monotonic() < deadline:
        writer.flush(1)
    assert [c.path for c in changes.order_by("id")] == ["api", "api"]  # created, limited
    cleared = api.patch(f"/keys/{body['id']}", {"limits": None})
    assert cleared.json()["limits"] == {}


@pytest.mark.parametrize(("limits", "loc"), BAD_LIMITS)
def test_bad_limits_are_field_errors_and_change_nothing(
    api: Api, limits: Any, loc: list[str]
) -> None:
    response = api.post("/keys", {"name": "x", "limits": limits})
    assert response.status_code == 422, response.content
    assert response.json()["detail"][0]["loc"] == loc
    key = api.post("/keys", {"name": "y", "limits": {"rpm": 1}}).json()
    patched = api.patch(f"/keys/{key['id']}", {"limits": limits})
    assert patched.status_code == 422
    assert patched.json()["detail"][0]["loc"] == loc
    assert ApiKey.objects.get(pk=key["id"]).limits == {"rpm": 1}
    assert not ApiKey.objects.filter(name="x").exists()


def test_an_unknown_key_is_a_404(api: Api) -> None:
    assert api.get("/keys/999").status_code == 404
    assert api.patch("/keys/999", {"limits": {}}).status_code == 404


@pytest.mark.django_db
def test_createkey_takes_limits(capsys: Any) -> None:
    call_command("createkey", "agent", "--limit", "rpm=60", "--limit", "cost_per_day=5")
    out = capsys.readouterr().out
    assert "limits rpm=60, cost_per_day=5.0" in out
    assert ApiKey.objects.get(name="agent").limits == {"rpm": 60, "cost_per_day": 5.0}


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("rpm=-1", "limits.rpm"),
        ("rpm=lots", "limits.rpm"),
        ("burst=3", "limits.burst: unknown limit"),
        ("rpm", "NAME=VALUE"),
    ],
)
def test_createkey_refuses_bad_limits(option: str, message: str) -> None:
    with pytest.raises(CommandError, match=message):
        call_command("createkey", "agent", "--limit", option)
    assert not ApiKey.objects.filter(name="agent").exists()


GROUP = """
providers:
  - {name: p1, kind: openai, base_url: "{upstream}"}
groups:
  - name: auto
    targets:
      - {provider: p1, model: a, price: {input: 1.0, output: 1.0}}
"""


@pytest.mark.parametrize(
    ("now", "reads"),
    [
        (1_764_936_030.5, 1_764_936_001.0),  # 12:00:30.5: back to the minute's second 1
        (1_764_936_000.0, 1_764_936_001.0),  # a minute's first instant: forward 1 s
        (1_764_936_059.9, 1_764_936_001.0),
        (1_764_892_820.0, 1_764_892_861.0),  # 00:00:20, a UTC day's first minute: the next
        (1_764_892_800.5, 1_764_892_861.0),
    ],
)
def test_the_minute_begun_clock_moves_within_the_day(now: float, reads: float) -> None:
    from tests.limits.conftest import minute_begun_clock

    clock = minute_begun_clock(now)
    moved = now + (clock() - time.time())  # what it read when called at ``now``
    assert moved == pytest.approx(reads, abs=0.01)
    assert moved % 60 == pytest.approx(1.0, abs=0.01)  # a second past a minute's start
    assert abs(moved - now) < 61 and moved // 86400 == now // 86400  # the same UTC day


def test_a_key_limit_refuses_its_calls_and_spend_is_reported(
    live: Harness, minute_begun: Callable[[], float]
) -> None:
    """Two calls a minute: the third is refused (on a clock just past a minute's start,
    so a slow machine cannot let the minute end between them)."""
    from django.test import Client

    from routing.services.api_keys import generate_key

    live.configure(GROUP)
    key, secret = generate_key(name="agent", limits={"rpm": 2})
    _, admin = generate_key(name="ops", kind="admin")
    client = openai.OpenAI(base_url=live.gateway.base_url, api_key=secret, max_retries=0)
    for _ in range(2):
        client.chat.completions.create(model="auto", messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(openai.RateLimitError) as caught:
        client.chat.completions.create(model="auto", messages=[{"role": "user", "content": "hi"}])
    assert "rpm of key 'agent'" in caught.value.message
    # Another key is not limited by this one's.
    live.client().chat.completions.create(
        model="auto", messages=[{"role": "user", "content": "hi"}]
    )
    from tests.conftest import settle_calls

    settle_calls(live.runtime)
    http = Client()
    auth = {"HTTP_AUTHORIZATION": f"Bearer {admin}"}
    rows = http.get("/api/v1/spend?by=key", **auth).json()
    by_key = {row["key"]: row for row in rows}
    assert by_key["agent"]["calls"] == 2  # the refused call cost nothing and is left out
    assert by_key["agent"]["tokens"] > 0
    assert by_key["agent"]["cost"] == pytest.approx(by_key["agent"]["tokens"] / 1e6)
    days = http.get("/api/v1/spend?by=day", **auth).json()
    assert sum(row["calls"] for row in days) == 3
    assert http.get("/api/v1/spend?by=planet", **auth).status_code == 422
    assert http.get("/api/v1/spend?since=0.5", **auth).status_code == 422  # not a time
    # An offset PostgreSQL cannot store is read in UTC, not sent to the database (a 500 there).
    far = http.get("/api/v1/spend", {"until": "0335-07-03T10:24:47+19:19"}, **auth)
    assert far.status_code == 200 and far.json() == []
    detail = http.get(f"/api/v1/keys/{key.pk}", **auth).json()
    assert detail["use"]["rpm"]["used"] == 2
    assert detail["spend"]["today"]["calls"] == 2


def test_a_price_or_group_limit_that_is_bad_is_a_field_error_on_the_api(api: Api) -> None:
    api.provider()
    cases = [
        (
            {"targets": [{"provider": "p1", "model": "a", "price": {"input": -1, "output": 1}}]},
            ["body", "targets", 0, "price", "input"],
        ),
        (
            {"targets": [{"provider": "p1", "model": "a", "price": {"input": "x", "output": 1}}]},
            ["body", "targets", 0, "price", "input"],
        ),
        ({"limits": {"rpm": -1}}, ["body", "limits", "rpm"]),
        ({"limits": {"rpd": 3}}, ["body", "limits", "rpd"]),
        ({"session_limits": {"cost": -2}}, ["body", "session_limits", "cost"]),
        ({"loop_guard": 0}, ["body", "loop_guard"]),
    ]
    for extra, loc in cases:
        body = {"name": "g", "targets": [{"provider": "p1", "model": "a"}], **extra}
        response = api.post("/groups", body)
        assert response.status_code == 422, (extra, response.content)
        assert response.json()["detail"][0]["loc"] == loc, response.json()
    assert api.get("/groups/g").status_code == 404  # nothing was created
    created = api.group(
        "g",
        targets=[{"provider": "p1", "model": "a", "price": {"input": 1.5, "output": 6}}],
        limits={"rpm": 10},
        loop_guard=3,
    )
    assert created["targets"][0]["options"]["price"] == {"input": 1.5, "output": 6.0}
    assert created["fields"]["limits.rpm"]["value"] == 10
    assert created["fields"]["loop_guard"]["value"] == 3
