"""Save/conflict feedback where the user clicked, in a real browser (headless Debian
Chromium via Playwright, the gateway over real sockets, the websocket live).

The policy form is about 2,000 px tall: with Save on screen its banners are far above the
viewport. Every answer (saved, rejected, stale version, network error) must show up beside
the button that was pressed (``dashboard.feedback``), and so must a row action's answer on
a group card and a provider form's on a short screen.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from routing import services
from routing.models import GlobalSettings, Group, Provider
from tests.conftest import TWO_ROUTES, Harness
from tests.dashboard.browsing import login
from tests.dashboard.conftest import PASSWORD

pytestmark = pytest.mark.browser


@pytest.fixture
def h(harness: Harness) -> Iterator[Harness]:
    from django.contrib.auth.models import User

    User.objects.create_user("operator", password=PASSWORD, is_staff=True)
    harness.configure(TWO_ROUTES)
    yield harness


def save_far_from_the_banners(page: Any) -> None:
    """Scroll to Save and click it, checking first that the banners' place is off screen
    (else this test would prove nothing)."""
    from playwright.sync_api import expect

    save = page.get_by_role("button", name="Save", exact=True)
    save.scroll_into_view_if_needed()
    expect(page.locator("#policy-form .card-head")).not_to_be_in_viewport()
    save.click()


def stale_write(path: str) -> None:
    """Another window's save: the version the open form was rendered from is now old."""
    if path.startswith("/groups/"):
        version = Group.objects.get(name="auto").version
        services.group_update_policy(
            name="auto",
            changes={"retry.max_retries": 5},
            based_on=version,
            actor="user:other",
            path="page",
        )
    else:
        version = GlobalSettings.load().version
        services.global_update_policy(
            changes={"retry.max_retries": 5}, based_on=version, actor="user:other", path="page"
        )


@pytest.mark.parametrize("path", ["/groups/auto/settings/", "/settings/"])
def test_policy_form_answers_beside_save(browser: object, h: Harness, path: str) -> None:
    from playwright.sync_api import expect

    page = login(browser, h, path)
    line = page.locator("#policy-form .form-actions [data-feedback]")
    expect(line).to_be_hidden()

    # Saved.
    page.fill("#f-circuit-cooldown-base-ms", "25000")
    save_far_from_the_banners(page)
    expect(line).to_contain_text("Saved cooldown")
    expect(line).to_have_attribute("data-tone", "ok")
    expect(line).to_be_in_viewport()
    expect(page.locator("[data-saved]")).not_to_be_in_viewport()  # the banner alone was unseen

    # A field error: said beside Save, the field itself marked.
    page.fill("#f-circuit-cooldown-base-ms", "-5")
    save_far_from_the_banners(page)
    expect(line).to_contain_text("Not saved: fix the fields marked above")
    expect(line).to_have_attribute("data-tone", "error")
    expect(line).to_be_in_viewport()
    expect(page.locator('[data-errors-for="circuit.cooldown_base_ms"]')).to_be_visible()

    # A network error never reaches the server: the page says it beside Save too.
    page.fill("#f-circuit-cooldown-base-ms", "26000")
    page.context.route("**" + path, lambda route: route.abort())
    save_far_from_the_banners(page)
    expect(line).to_contain_text("network error")
    expect(line).to_have_attribute("data-tone", "transport")
    expect(line).to_be_in_viewport()
    page.context.unroute("**" + path)

    # A stale version: announced live beside Save, then refused when saved anyway.
    stale_write(path)
    expect(line).to_contain_text("Changed in another window")
    save_far_from_the_banners(page)
    expect(line).to_contain_text("Not saved: changed in another window — reload to see it.")
    expect(line).to_have_attribute("data-tone", "conflict")
    expect(line).to_be_in_viewport()
    expect(line.get_by_role("link", name="Reload")).to_be_visible()
    expect(page.locator("#f-circuit-cooldown-base-ms")).to_have_value("26000")  # kept
    page.context.close()


def test_a_restored_field_says_so_in_its_own_row(browser: object, h: Harness) -> None:
    from playwright.sync_api import expect

    group = Group.objects.get(name="auto")
    services.group_update_policy(
        name="auto",
        changes={"switch_codes": ["RATE_LIMIT", "SERVER"]},
        based_on=group.version,
        actor="user:other",
        path="page",
    )
    page = login(browser, h, "/groups/auto/settings/")
    field = page.locator('[data-field="switch_codes"]')
    restore = field.get_by_role("button", name="Restore default")
    restore.scroll_into_view_if_needed()
    restore.click()
    line = page.locator('[data-field="switch_codes"] [data-feedback]')
    expect(line).to_contain_text("Restored")
    expect(line).to_be_in_viewport()
    expect(page.locator(".form-actions [data-feedback]")).to_be_hidden()  # said once, here
    page.context.close()


def test_a_target_rows_action_answers_in_that_row_on_a_phone(browser: object, h: Harness) -> None:
    from playwright.sync_api import expect

    page = login(browser, h, "/groups/", viewport={"width": 420, "height": 700})
    card = page.locator('[data-group="auto"]')
    row = card.locator('tr[data-target="p2/b"]')
    disable = row.get_by_role("button", name="Disable")
    disable.scroll_into_view_if_needed()
    expect(card.locator(".card-head")).not_to_be_in_viewport()
    disable.click()
    line = card.locator('tr[data-target="p2/b"] [data-feedback]')
    expect(line).to_contain_text("Target disabled")
    expect(line).to_be_in_viewport()

    # A move: said in the moved target's row, wherever it went.
    up = card.get_by_role("button", name="Move p2/b up")
    up.scroll_into_view_if_needed()
    up.click()
    expect(card.locator("tbody tr").first).to_have_attribute("data-target", "p2/b")
    expect(line).to_contain_text("Order saved")
    expect(line).to_be_in_viewport()
    expect(card.get_by_role("status")).to_have_count(1)  # one announcement, not two
    page.context.close()


def test_the_provider_form_answers_beside_save_on_a_short_screen(
    browser: object, h: Harness
) -> None:
    from playwright.sync_api import expect

    page = login(browser, h, "/providers/p1/", viewport={"width": 1280, "height": 300})
    form = page.locator("#provider-edit")
    line = form.locator(".form-actions [data-feedback]")
    save = form.get_by_role("button", name="Save")

    base_url = form.locator('input[name="base_url"]')
    upstream = base_url.input_value()
    base_url.fill("nope")
    save.scroll_into_view_if_needed()
    expect(form.locator(".card-head")).not_to_be_in_viewport()
    save.click()
    expect(line).to_contain_text("Not saved: fix the fields marked above")
    expect(line).to_be_in_viewport()

    base_url.fill(upstream)
    form.locator('input[name="timeouts.connect_s"]').fill("3")
    save.scroll_into_view_if_needed()
    save.click()
    expect(line).to_have_text("Saved.")
    expect(line).to_be_in_viewport()
    assert Provider.objects.get(name="p1").connect_timeout_s == 3
    page.context.close()
