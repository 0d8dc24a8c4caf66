"""Limits and spend in the console, in a real browser (headless Chromium via Playwright):
a key's limits set on the Keys page (a bad one refused in place), the Spend page's chart
and table, and a group's use against its limits on the groups page."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from routing.models import ApiKey
from routing.services.api_keys import generate_key
from tests.conftest import Harness
from tests.dashboard.browsing import login, shot
from tests.dashboard.conftest import PASSWORD

pytestmark = pytest.mark.browser

MESSAGES = [{"role": "user", "content": "hi"}]
CONFIG = """
providers:
  - {name: sim, kind: openai, base_url: "{upstream}"}
groups:
  - name: capped
    limits: {rpm: 50, cost_per_day: 10}
    targets:
      - {provider: sim, model: a, price: {input: 3.0, output: 15.0}}
"""


@pytest.fixture
def h(harness: Harness) -> Iterator[Harness]:
    from django.contrib.auth.models import User

    from routing.audit import writer

    writer.flush(10)
    writer.attach(harness.runtime.hub)  # type: ignore[attr-defined]
    User.objects.create_user("operator", password=PASSWORD, is_staff=True)
    harness.configure(CONFIG)
    yield harness
    writer.flush(10)


def test_limits_on_the_keys_page(browser: object, h: Harness) -> None:
    from playwright.sync_api import expect

    key, _ = generate_key(name="agent")
    page = login(browser, h, "/keys/")
    row = page.locator(f'tr[data-key="{key.pk}"]')
    field = row.locator('input[name="limits"]')
    field.fill("rpm=-5")
    row.get_by_role("button", name="Set").click()
    row = page.locator(f'tr[data-key="{key.pk}"]')
    expect(row.locator('[data-error-for="limits"]')).to_contain_text("limits.rpm")
    key.refresh_from_db()
    assert key.limits == {}
    row.locator('input[name="limits"]').fill("rpm=60, cost_per_day=5")
    row.get_by_role("button", name="Set").click()
    expect(page.locator(f'tr[data-key="{key.pk}"] [data-row-notice]')).to_contain_text(
        "Limits saved"
    )
    assert ApiKey.objects.get(pk=key.pk).limits == {"rpm": 60, "cost_per_day": 5.0}
    expect(page.locator(f'tr[data-key="{key.pk}"] input[name="limits"]')).to_have_value(
        "rpm=60, cost_per_day=5"
    )


def test_the_spend_page_and_the_groups_use(
    browser: object, h: Harness, minute_begun: Callable[[], float]
) -> None:
    from playwright.sync_api import expect

    from routing.audit import writer

    for _ in range(3):
        h.client().chat.completions.create(model="capped", messages=MESSAGES)
    writer.flush(10)
    page = login(browser, h, "/spend/?by=group")
    expect(page.locator("[data-spend-chart] rect")).to_have_count(1)  # today, one group
    row = page.locator('[data-spend-row="capped"]')
    expect(row).to_contain_text("3")
    expect(row.locator("[data-cost]")).not_to_have_text("–")
    h.client().chat.completions.create(model="capped", messages=MESSAGES)  # pushed: reloads
    expect(row.locator("td").nth(1)).to_have_text("4")
    page.locator('select[name="by"]').select_option("target")
    expect(page.locator('[data-spend-row="sim/a"]')).to_be_visible()
    shot(page, "spend.png")
    page.goto(h.gateway.url + "/groups/")
    use = page.locator('[data-group="capped"] [data-limit-use]')
    # rpm counts calendar minutes (docs/limits.md): the four calls fall in one
    # (``minute_begun``: the runtime's clock a second past a minute's start)
    expect(use).to_contain_text("rpm 4 / 50 this minute")
    expect(use).to_contain_text("cost_per_day")
    # Live: a call's push over the websocket reloads the line (no polling, no reload)
    h.client().chat.completions.create(model="capped", messages=MESSAGES)
    expect(use).to_contain_text("rpm 5 / 50 this minute")
