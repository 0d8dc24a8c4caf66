"""The settings page in a real browser: headless Chromium (Debian's package, driven by
Playwright) against the gateway served over real sockets, with the websocket live.

Each test maps to a line of the dashboard issue's "done when" list. Screenshots of the
chain panel during a failover and of the settings form go to ``build/screenshots/``
(``make screenshots``: to ``docs/screenshots/``, shown by docs/console.md).
"""

from __future__ import annotations

import re

import pytest

from routing.engine.health import EventKind, HealthEvent
from routing.models import Group
from routing.simulator.script import Fail, Reply
from tests.conftest import TWO_ROUTES, Harness
from tests.dashboard.browsing import shot
from tests.dashboard.conftest import PASSWORD

pytestmark = pytest.mark.browser

MESSAGES = [{"role": "user", "content": "hi"}]
SECRET = "sk-browser-SECRET-credential-9876"

LAYERED = (
    TWO_ROUTES.replace("groups:\n", "groups:\n", 1)
    .replace("providers:\n", "defaults:\n  circuit: {cooldown_base_ms: 15000}\nproviders:\n", 1)
    .replace("  - name: auto\n", "  - name: auto\n    circuit: {cooldown_base_ms: 20000}\n", 1)
)


@pytest.fixture
def h(harness: Harness) -> Harness:
    from django.contrib.auth.models import User

    User.objects.create_user("operator", password=PASSWORD, is_staff=True)
    harness.configure(TWO_ROUTES)
    return harness


def open_page(browser: object, h: Harness, path: str):  # type: ignore[no-untyped-def]
    """A new browser context, logged in through the real login form, showing ``path``
    with its websocket connected."""
    from playwright.sync_api import expect

    context = browser.new_context(viewport={"width": 1280, "height": 900})  # type: ignore[attr-defined]
    page = context.new_page()
    page.goto(h.gateway.url + path)
    expect(page).to_have_url(re.compile(r"/login/\?next="))
    page.fill("#id_username", "operator")
    page.fill("#id_password", PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(h.gateway.url + path)
    expect(page.locator("#live-status")).to_have_attribute("data-state", "live")
    return page


def group_state(name: str = "auto") -> tuple[dict[str, object], int, list[str]]:
    group = Group.objects.get(name=name)
    order = [f"{t.provider.name}/{t.model}" for t in group.targets.order_by("position")]
    return dict(group.policy), group.version, order


def test_reorder_and_cooldown_change_the_next_call(browser: object, h: Harness) -> None:
    from playwright.sync_api import expect

    page = open_page(browser, h, "/groups/")
    card = page.locator('[data-group="auto"]')
    card.get_by_role("button", name="Move p1/a down").click()
    expect(card.locator("tbody tr").first).to_have_attribute("data-target", "p2/b")
    expect(card.get_by_role("status")).to_contain_text("Order saved")

    page.get_by_role("link", name="Settings").first.click()
    expect(page).to_have_url(h.gateway.url + "/groups/auto/settings/")
    page.fill("#f-circuit-cooldown-base-ms", "30000")
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.locator("[data-saved]")).to_contain_text("Saved cooldown")

    raw = h.client().chat.completions.with_raw_response.create(model="auto", messages=MESSAGES)
    assert raw.headers["x-switchyard-target"] == "p2/b"  # the new order

    h.upstream.script("b", Fail(404, "model b does not exist"))  # switchable, not retried
    reply = h.client().chat.completions.create(model="auto", messages=MESSAGES)
    assert reply.choices[0].message.content == "Hello from a."
    [cooling] = [e for e in h.events(HealthEvent) if e.kind is EventKind.COOLING]
    assert cooling.target == "p2/b"
    assert cooling.cooldown_s == pytest.approx(30.0, abs=0.5)  # the new cooldown
    page.context.close()


def test_restore_default_shows_the_inherited_value_without_the_mark(
    browser: object, h: Harness
) -> None:
    from playwright.sync_api import expect

    h.configure(LAYERED)
    page = open_page(browser, h, "/groups/auto/settings/")
    field = page.locator('[data-field="circuit.cooldown_base_ms"]')
    expect(field.locator("input")).to_have_value("20000")
    expect(field.locator("[data-overridden]")).to_be_visible()
    shot(page, "settings-form.png")

    field.get_by_role("button", name="Restore default").click()

    expect(field.locator("input")).to_have_value("15000")
    expect(field).to_contain_text("inherited from config file")
    expect(field.locator("[data-overridden]")).to_have_count(0)
    policy, _, _ = group_state()
    assert "circuit.cooldown_base_ms" not in policy
    page.context.close()


def test_a_save_in_one_window_raises_the_conflict_banner_in_the_other(
    browser: object, h: Harness
) -> None:
    from playwright.sync_api import expect

    first = open_page(browser, h, "/groups/auto/settings/")
    second = open_page(browser, h, "/groups/auto/settings/")
    banner = second.locator("[data-conflict-banner]")
    expect(banner).to_be_hidden()

    first.fill("#f-retry-max-retries", "2")
    first.get_by_role("button", name="Save", exact=True).click()
    expect(first.locator("[data-saved]")).to_be_visible()
    saved = group_state()
    assert saved[0]["retry.max_retries"] == 2

    # Told over the websocket, before trying to save.
    expect(banner).to_be_visible(timeout=2000)
    expect(banner).to_contain_text("Changed in another window — reload to see it.")

    second.fill("#f-retry-max-retries", "7")
    second.get_by_role("button", name="Save", exact=True).click()
    expect(second.locator("[data-conflict-text]")).to_have_text(
        "Not saved: changed in another window — reload to see it."
    )
    expect(second.locator("#f-retry-max-retries")).to_have_value("7")  # nothing typed is lost
    assert group_state() == saved  # the stale save changed nothing
    first.context.close()
    second.context.close()


def test_a_failover_shows_up_live_as_cooling_and_in_the_chain_panel(
    browser: object, h: Harness
) -> None:
    from playwright.sync_api import expect

    page = open_page(browser, h, "/groups/")
    card = page.locator('[data-group="auto"]')
    expect(card.locator("[data-calls-empty]")).to_be_visible()
    records = card.locator("[data-record-count]")
    expect(records).to_contain_text("0 records kept")

    h.upstream.script("a", Fail(429, "slow down", headers={"Retry-After": "45"}))
    reply = h.client().chat.completions.create(model="auto", messages=MESSAGES)
    assert reply.choices[0].message.content == "Hello from b."

    badge = card.locator('[data-badge="p1/a"] .badge')
    expect(badge).to_have_class(re.compile("badge-cooling"), timeout=2000)
    countdown = badge.locator("[data-countdown]")
    expect(countdown).to_have_text(re.compile(r"^(4[0-5]) s$"))
    first = countdown.inner_text()
    page.wait_for_function(  # the countdown runs in the browser, from the server's deadline
        '(old) => document.querySelector(\'[data-group="auto"] [data-badge="p1/a"] [data-countdown]\')'
        ".textContent !== old",
        arg=first,
        timeout=3000,
    )
    call = card.locator("[data-calls] > li").first
    expect(call).to_contain_text("p1/a ✕ RATE_LIMIT (429) → 2", timeout=2000)
    expect(call).to_contain_text("p2/b ✓")
    expect(card.locator("[data-calls-empty]")).to_be_hidden()
    expect(records).to_contain_text("1 record kept")  # the count follows the live list
    shot(page, "chain-panel.png")

    from routing.audit.writer import flush

    assert flush(10)
    page.reload()  # the ledger agrees with what the live page counted
    expect(page.locator('[data-group="auto"] [data-record-count]')).to_contain_text("1 record kept")
    page.context.close()


def test_invalid_input_shows_field_errors_and_changes_nothing(browser: object, h: Harness) -> None:
    from playwright.sync_api import expect

    before = group_state()
    page = open_page(browser, h, "/groups/auto/settings/")
    for box in page.locator('[data-field="switch_codes"] input[type="checkbox"]').all():
        box.uncheck()
    page.fill("#f-circuit-cooldown-base-ms", "-5")
    page.get_by_role("button", name="Save", exact=True).click()

    expect(page.locator('[data-errors-for="switch_codes"]')).to_contain_text(
        "at least one failure code"
    )
    expect(page.locator('[data-errors-for="circuit.cooldown_base_ms"]')).to_contain_text(
        "greater than or equal to 0"
    )
    expect(page.locator("[data-rejected]")).to_contain_text("Nothing was changed")
    assert group_state() == before
    page.context.close()


def test_the_credential_never_reaches_the_browser(browser: object, h: Harness) -> None:
    from playwright.sync_api import expect

    bodies: list[tuple[str, str]] = []
    page = open_page(browser, h, "/providers/")

    def spy(route):  # type: ignore[no-untyped-def]
        response = route.fetch()
        bodies.append((route.request.url, response.text()))
        route.fulfill(response=response)

    page.context.route("**/*", spy)
    h.upstream.script("c", Reply("pong"))
    page.reload()
    create = page.locator("#provider-create")
    create.locator('input[name="name"]').fill("p3")
    create.locator('input[name="base_url"]').fill(h.upstream.base_url)
    create.locator('input[name="api_key"]').fill(SECRET)
    create.get_by_role("button", name="Add provider").click()

    provider = page.locator('[data-provider="p3"]')
    expect(provider.locator("[data-credential]")).to_have_text("set …9876")
    provider.get_by_role("button", name="Refresh models").click()
    expect(provider.get_by_role("status")).to_contain_text("Loaded")
    expect(provider.locator("[data-models]")).to_contain_text("c")
    provider.get_by_role("button", name="Test").click()
    expect(provider.locator("[data-test-result]")).to_contain_text(
        re.compile(r"✓ test passed in \d+ ms")
    )

    page.goto(h.gateway.url + "/groups/")
    card = page.locator('[data-group="auto"]')
    provider_select = card.locator('select[name="provider"]')
    model_select = card.locator('select[name="model"]')
    assert provider_select.input_value() == ""  # nothing pre-selected
    provider_select.select_option("p3")
    expect(model_select.locator('option[value="c"]')).to_have_count(1)
    assert model_select.input_value() == "c"  # the provider's only model is adopted (issue 13)
    card.get_by_role("button", name="Add target").click()
    expect(card.locator('tr[data-target="p3/c"]')).to_be_visible()

    page.goto(h.gateway.url + "/providers/p3/")
    assert bodies, "the spy saw no responses"
    pages = [text for _, text in bodies] + [page.content()]
    assert all(SECRET not in text for text in pages)
    assert sum(1 for url, _ in bodies if "/providers/" in url) >= 4
    page.context.close()


def test_credential_failures_show_live_and_operator_actions_and_network_errors_are_visible(
    browser: object, h: Harness
) -> None:
    from playwright.sync_api import expect

    page = open_page(browser, h, "/groups/")
    card = page.locator('[data-group="auto"]')
    h.upstream.script("a", Fail(401, "invalid api key"))
    reply = h.client().chat.completions.create(model="auto", messages=MESSAGES)
    assert reply.choices[0].message.content == "Hello from b."

    health = card.locator('[data-badge="p1/a"]')
    expect(health.locator(".badge")).to_have_text("disabled: AUTH", timeout=2000)
    health.get_by_role("button", name="Re-enable p1").click()  # pushed content is live htmx
    expect(health.locator(".badge")).to_have_text("healthy")

    page.context.route("**/targets/reorder/", lambda route: route.abort())
    card.get_by_role("button", name="Move p1/a down").click()
    expect(card.locator("[data-transport-banner]")).to_contain_text("network error")
    assert group_state()[2] == ["p1/a", "p2/b"]
    page.context.close()
