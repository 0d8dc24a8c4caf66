"""The console's side of limits (SPEC §17): a key's limits on the Keys page, the Spend
page's chart and table, and each group's use against its limits on the groups page."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

import openai
import pytest
from django.contrib.auth.models import User
from django.test import Client

from routing.models import ApiKey
from tests.conftest import Harness
from tests.dashboard.conftest import PASSWORD

MESSAGES = [{"role": "user", "content": "hi"}]
HTMX = {"HTTP_HX_REQUEST": "true"}
CONFIG = """
providers:
  - {name: p1, kind: openai, base_url: "{upstream}"}
groups:
  - name: capped
    limits: {rpm: 5, cost_per_day: 10}
    targets:
      - {provider: p1, model: a, price: {input: 3.0, output: 15.0}}
  - name: free
    targets:
      - {provider: p1, model: b}
"""


@pytest.fixture
def console(harness: Harness) -> Iterator[tuple[Harness, Client]]:
    from routing.audit import writer

    writer.flush(10)
    writer.attach(harness.runtime.hub)  # type: ignore[attr-defined]
    harness.configure(CONFIG)
    client = Client()
    client.force_login(User.objects.create_user("operator", password=PASSWORD, is_staff=True))
    yield harness, client
    writer.flush(10)


def test_a_key_gets_limits_on_the_page_and_bad_ones_change_nothing(
    console: tuple[Harness, Client],
) -> None:
    h, client = console
    bad = client.post("/keys/create/", {"name": "agent", "limits": "rpm=-1"}, **HTMX)
    assert bad.status_code == 422
    assert 'data-error-for="limits"' in bad.content.decode()
    assert "limits.rpm" in bad.content.decode()
    assert not ApiKey.objects.filter(name="agent").exists()

    created = client.post("/keys/create/", {"name": "agent", "limits": "rpm=1"}, **HTMX)
    assert created.status_code == 200
    key = ApiKey.objects.get(name="agent")
    assert key.limits == {"rpm": 1}
    secret = re.search(r"<code data-secret>(sk-sy-[\w-]+)</code>", created.content.decode())
    assert secret is not None
    agent = openai.OpenAI(base_url=h.gateway.base_url, api_key=secret.group(1), max_retries=0)
    agent.chat.completions.create(model="free", messages=MESSAGES)
    # rpm counts calendar minutes (docs/limits.md): two calls may straddle a minute's end
    # on a busy machine, so the refusal comes by the third call at the latest
    refused = 0
    for _ in range(2):
        try:
            agent.chat.completions.create(model="free", messages=MESSAGES)
        except openai.RateLimitError:
            refused += 1
            break
    assert refused == 1

    unknown = client.post(f"/keys/{key.pk}/limits/", {"limits": "burst=3"}, **HTMX)
    assert unknown.status_code == 422 and "limits.burst: unknown limit" in unknown.content.decode()
    key.refresh_from_db()
    assert key.limits == {"rpm": 1}
    raised = client.post(f"/keys/{key.pk}/limits/", {"limits": "rpm=100, tpm=5000"}, **HTMX)
    assert raised.status_code == 200 and "Limits saved" in raised.content.decode()
    key.refresh_from_db()
    assert key.limits == {"rpm": 100, "tpm": 5000}
    agent.chat.completions.create(model="free", messages=MESSAGES)  # the new limit applies


def test_the_spend_page_charts_and_tabulates_cost_by_group(console: tuple[Harness, Client]) -> None:
    from routing.audit import writer

    h, client = console
    for _ in range(2):
        h.client().chat.completions.create(model="capped", messages=MESSAGES)
    h.client().chat.completions.create(model="free", messages=MESSAGES)
    writer.flush(10)
    html = client.get("/spend/", {"by": "group"}).content.decode()
    assert "data-spend-chart" in html and "<rect" in html
    capped = re.search(r'data-spend-row="capped">.*?</tr>', html, re.S)
    free = re.search(r'data-spend-row="free">.*?</tr>', html, re.S)
    assert capped is not None and free is not None
    assert '<td class="num">2</td>' in capped.group(0)
    assert "–" in free.group(0)  # no price: no cost, never 0
    assert re.search(r"data-cost>0\.\d{4}<", capped.group(0))
    partial = client.get("/spend/", {"by": "target", "days": "7"}, **HTMX).content.decode()
    assert (
        partial.lstrip().startswith('<div id="spend-panel"') and 'data-spend-row="p1/a"' in partial
    )
    # Live like the rest of the console: reloaded on a call's push, never polled.
    assert 'hx-trigger="switchyard:spend"' in partial and "every " not in partial


def test_the_groups_page_shows_use_against_limits(
    console: tuple[Harness, Client], minute_begun: Callable[[], float]
) -> None:
    h, client = console
    for _ in range(3):  # in one calendar minute (``minute_begun``), as the page shows
        h.client().chat.completions.create(model="capped", messages=MESSAGES)
    html = client.get("/groups/").content.decode()
    use = re.search(r"data-limit-use[^>]*>(.*?)</p>", html, re.S)
    assert use is not None
    # Reloaded when a call of the group is pushed (dashboard.js), never polled.
    assert 'data-limit-use="capped"' in html and 'hx-trigger="switchyard:limits"' in html
    assert 'hx-trigger="every' not in html
    assert "rpm 3 / 5 this minute" in use.group(1), use.group(1)
    assert "cost_per_day" in use.group(1)
    h.client().chat.completions.create(model="capped", messages=MESSAGES)
    fresh = client.get("/groups/capped/limits/", **HTMX).content.decode()  # the live reload
    assert fresh.startswith('<p class="limit-use"') and "rpm 4 / 5 this minute" in fresh, fresh
    assert client.get("/groups/free/limits/", **HTMX).status_code == 286  # none: the line goes


def test_a_target_is_added_with_a_price_on_the_page(console: tuple[Harness, Client]) -> None:
    from routing.models import Group, Provider

    h, client = console
    provider = Provider.objects.get(name="p1")
    provider.models = ["a", "b", "c"]
    provider.save(update_fields=["models"])
    group = Group.objects.get(name="free")

    def add(**price: str) -> tuple[int, str]:
        fields = {"provider": "p1", "model": "c", "based_on": group.version, **price}
        response = client.post("/groups/free/targets/add/", fields, **HTMX)
        return response.status_code, response.content.decode()

    status, html = add(price_input="-1", price_output="2")
    assert status == 422 and "Not saved: must be greater than or equal to 0" in html
    status, html = add(price_input="cheap", price_output="2")
    assert status == 422 and "price: enter numbers" in html
    assert not group.targets.filter(model="c").exists()
    status, _ = add(price_input="0.5", price_output="2")
    assert status == 200
    assert group.targets.get(model="c").options == {"price": {"input": 0.5, "output": 2.0}}


def test_a_keys_page_shows_its_limits_use_and_spend(
    console: tuple[Harness, Client], minute_begun: Callable[[], float]
) -> None:
    from routing.audit import writer
    from routing.services.api_keys import generate_key

    h, client = console
    key, secret = generate_key(name="agent", limits={"rpm": 10, "cost_per_day": 2})
    agent = openai.OpenAI(base_url=h.gateway.base_url, api_key=secret, max_retries=0)
    for _ in range(2):  # in one calendar minute (``minute_begun``), as the page shows
        agent.chat.completions.create(model="capped", messages=MESSAGES)
    writer.flush(10)
    html = client.get(f"/keys/{key.pk}/").content.decode()
    assert "rpm=10, cost_per_day=2" in html
    rpm = re.search(r'data-limit="rpm">(.*?)</tr>', html, re.S)
    assert rpm is not None and '<td class="num">2</td>' in rpm.group(1)
    today = re.search(r'data-spend="today">(.*?)</span>', html, re.S)
    assert today is not None and today.group(1).startswith("2 calls")
    assert "data-spend-chart" in html
    assert client.get("/keys/999/").status_code == 404
