"""The operator's console in a real browser (headless Debian Chromium via Playwright, the
gateway over real sockets, the websocket live): the calls page with filters, live append
and a call's detail; live statistics with the degraded badge and "test this target"; keys
and groups created and removed, bad input included; dark mode; a 420 px wide screen.

Screenshots go to ``build/screenshots/`` (``make screenshots``: to ``docs/screenshots/``,
shown by docs/console.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import openai
import pytest

from routing.models import ApiKey, Group
from routing.simulator.script import Fail, Reply
from tests.conftest import Harness
from tests.dashboard.browsing import login, shot
from tests.dashboard.conftest import PASSWORD

pytestmark = pytest.mark.browser

MESSAGES = [{"role": "user", "content": "hi"}]
CONSOLE = """
providers:
  - name: sim
    kind: openai
    base_url: {upstream}
    api_key: upstream-key-sim-0123456789
    models: [flaky-model, steady-model]
groups:
  - name: auto
    retry: {max_retries: 2}
    targets:
      - {provider: sim, model: flaky-model}
      - {provider: sim, model: steady-model}
  - name: failover
    retry: {max_retries: 0}
    targets:
      - {provider: sim, model: flaky-model}
      - {provider: sim, model: steady-model}
"""
LIVE_TIMEOUT_MS = 15_000  # pushes and the 5 s statistics refresh, on a loaded machine


@pytest.fixture
def h(harness: Harness) -> Iterator[Harness]:
    from django.contrib.auth.models import User

    from routing.audit import writer
    from tests.audit.conftest import clear_audit_tables

    writer.flush(10)
    clear_audit_tables()
    User.objects.create_user("operator", password=PASSWORD, is_staff=True)
    harness.configure(CONSOLE)
    yield harness
    writer.flush(10)


def flush() -> None:
    from routing.audit import writer

    assert writer.flush(10)


def test_what_failed_for_whom_since_when_on_the_calls_page(browser: object, h: Harness) -> None:
    from playwright.sync_api import expect

    agents_key, agents_secret = _key("agents")
    agents = openai.OpenAI(base_url=h.gateway.base_url, api_key=agents_secret, max_retries=0)
    h.client().chat.completions.create(model="auto", messages=MESSAGES)
    h.upstream.script("flaky-model", Fail(503))
    h.upstream.script("steady-model", Fail(500), Fail(500), Fail(500))
    with pytest.raises(openai.APIStatusError):
        agents.chat.completions.create(model="failover", messages=MESSAGES, user="agent-7")
    flush()

    page = login(browser, h, "/calls/")
    rows = page.locator("[data-call-rows] > tr")
    expect(rows).to_have_count(2)
    form = page.locator("[data-calls-filters]")
    form.locator('select[name="key"]').select_option(str(agents_key.pk))
    form.locator('select[name="outcome"]').select_option("failed")
    form.get_by_role("button", name="Filter").click()
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("ROUTES_EXHAUSTED")
    expect(rows.first).to_contain_text(re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC"))

    # Live: a matching call is appended, one for another key is not.
    h.client().chat.completions.create(model="auto", messages=MESSAGES)
    h.upstream.script("flaky-model", Fail(503))
    h.upstream.script("steady-model", Fail(500), Fail(500), Fail(500))
    with pytest.raises(openai.APIStatusError):
        agents.chat.completions.create(model="failover", messages=MESSAGES)
    expect(rows).to_have_count(2, timeout=LIVE_TIMEOUT_MS)
    expect(rows.first).to_contain_text("agents")
    shot(page, "calls.png")

    # Bad input: field errors, nothing listed, the URL keeps what was typed.
    form.locator('input[name="since"]').fill("yesterday-ish")
    form.get_by_role("button", name="Filter").click()
    expect(page.locator('[data-error-for="since"]')).to_contain_text("a date and time")
    expect(rows).to_have_count(0)
    page.context.close()


def test_a_calls_detail_shows_the_fallback_mark_and_timings(browser: object, h: Harness) -> None:
    from playwright.sync_api import expect

    h.upstream.script("flaky-model", Fail(503))
    raw = h.client().chat.completions.with_raw_response.create(model="failover", messages=MESSAGES)
    assert raw.headers["x-switchyard-target"] == "sim/steady-model"
    flush()
    page = login(browser, h, "/calls/?fallback=1")
    rows = page.locator("[data-call-rows] > tr")
    expect(rows).to_have_count(1)
    expect(rows.first.locator(".mark-fallback")).to_be_visible()
    rows.first.get_by_role("link").click()
    detail = page.locator("[data-call-detail]")
    expect(detail.locator("[data-fallback-mark]")).to_have_text("served by fallback")
    expect(detail.locator("[data-attempt]")).to_have_count(2)
    expect(detail.locator('[data-timing="ttft"]')).to_have_text(re.compile(r"\d"))
    expect(detail.locator("[data-tokens]")).to_contain_text("completion")
    shot(page, "call-detail.png")
    page.context.close()


def test_live_statistics_show_a_flaky_target_degraded_and_test_this_target(
    browser: object, h: Harness
) -> None:
    from playwright.sync_api import expect

    page = login(browser, h, "/groups/")
    card = page.locator('[data-group="auto"]')
    flaky = card.locator('tr[data-target="sim/flaky-model"]')
    expect(flaky.locator(".badge-healthy")).to_be_visible()
    expect(flaky.locator("[data-degraded]")).to_have_count(0)
    for _ in range(3):  # fails 2 of 3 tries, each call retried into a success: never cools
        h.upstream.script("flaky-model", Fail(503), Fail(503), Reply("ok"))
        assert h.client().chat.completions.create(model="auto", messages=MESSAGES)
    expect(flaky.locator("[data-degraded]")).to_be_visible(timeout=LIVE_TIMEOUT_MS)
    expect(flaky.locator(".badge-healthy")).to_be_visible()  # degraded while not cooling
    expect(flaky.locator('[data-success="5"]')).to_have_text("33 %")
    expect(flaky.locator('[data-attempts="5"]')).to_have_text("9")
    expect(flaky.locator("svg.spark polyline, svg.spark circle").first).to_be_attached()

    steady = card.locator('tr[data-target="sim/steady-model"]')
    steady.get_by_role("button", name="Test").click()
    expect(steady.locator("[data-test-result]")).to_contain_text(
        re.compile(r"✓ answered in \d+ ms")
    )
    shot(page, "groups.png")
    page.context.close()


def _key(name: str) -> tuple[ApiKey, str]:
    from routing.services.api_keys import generate_key

    return generate_key(name=name, kind="client")


def test_keys_created_with_the_secret_shown_once_and_revoked(browser: object, h: Harness) -> None:
    from playwright.sync_api import expect

    page = login(browser, h, "/keys/")
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    create = page.locator("#key-create")
    create.get_by_role("button", name="Create key").click()  # no name
    expect(create.locator('[data-error-for="name"]')).to_contain_text("name")
    expect(create.locator("[data-rejected]")).to_contain_text("Nothing was changed")
    assert not ApiKey.objects.filter(name="").exists()

    create = page.locator("#key-create")
    create.locator('input[name="name"]').fill("mobile-app")
    create.locator('input[name="groups"][value="auto"]').check()
    create.get_by_role("button", name="Create key").click()
    secret = page.locator("[data-secret]")
    expect(secret).to_have_text(re.compile(r"^sk-sy-"))
    value = secret.inner_text()
    page.get_by_role("button", name="Copy").click()
    expect(page.get_by_role("button", name="Copied")).to_be_visible()
    assert page.evaluate("navigator.clipboard.readText()") == value
    key = ApiKey.objects.get(name="mobile-app")
    assert key.groups == ["auto"]
    shot(page, "keys.png")

    app = openai.OpenAI(base_url=h.gateway.base_url, api_key=value, max_retries=0)
    assert app.chat.completions.create(model="auto", messages=MESSAGES)
    flush()
    page.reload()
    assert value not in page.content()  # shown once
    row = page.locator(f'tr[data-key="{key.pk}"]')
    expect(row.locator("[data-calls]")).to_have_text("1")
    expect(row.locator("[data-last-used]")).to_have_text(re.compile(r"\d{4}-\d\d-\d\d .* UTC"))
    page.once("dialog", lambda dialog: dialog.accept())
    row.get_by_role("button", name="Revoke").click()
    expect(page.locator(f'tr[data-key="{key.pk}"] [data-row-notice]')).to_contain_text("Revoked")
    with pytest.raises(openai.AuthenticationError):
        app.chat.completions.create(model="auto", messages=MESSAGES)
    page.context.close()


def test_groups_created_and_deleted_on_the_page(browser: object, h: Harness) -> None:
    from playwright.sync_api import expect

    page = login(browser, h, "/groups/")
    create = page.locator("#group-create")
    create.locator('input[name="name"]').fill("bad name!")
    create.locator('select[name="target"]').select_option("sim/steady-model")
    create.get_by_role("button", name="Create group").click()
    expect(page.locator('#group-create [data-error-for="name"]')).to_be_visible()
    assert not Group.objects.filter(name="bad name!").exists()

    create = page.locator("#group-create")
    create.locator('input[name="name"]').fill("coding")
    create.locator('select[name="target"]').select_option("sim/steady-model")
    create.get_by_role("button", name="Create group").click()
    expect(page.locator("#group-create").get_by_role("status")).to_contain_text(
        "Created group coding"
    )
    card = page.locator('[data-group="coding"]')
    expect(card).to_be_visible()
    assert h.client().chat.completions.create(model="coding", messages=MESSAGES)

    page.once("dialog", lambda dialog: dialog.accept())
    card.get_by_role("button", name="Delete group").click()
    expect(page.locator('[data-group="coding"][data-deleted]')).to_contain_text("deleted")
    assert not Group.objects.filter(name="coding").exists()
    page.context.close()


def test_dark_mode_follows_the_operators_colour_scheme(browser: object, h: Harness) -> None:
    page = login(browser, h, "/groups/", color_scheme="dark")
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    card = page.evaluate("getComputedStyle(document.querySelector('.card')).backgroundColor")
    assert background == "rgb(18, 22, 29)" and card == "rgb(27, 33, 43)"
    shot(page, "dark.png")
    page.context.close()
    light = login(browser, h, "/groups/", color_scheme="light")
    assert light.evaluate("getComputedStyle(document.body).backgroundColor") == "rgb(246, 247, 249)"
    light.context.close()


# Every visible element in dark mode: no light surface, no dark text (a hard-coded light
# colour that the dark palette forgot shows up here).
UNFIT_FOR_DARK = r"""() => {
  const rgb = (c) => (c.match(/[\d.]+/g) || []).map(Number);
  const out = [];
  for (const el of document.querySelectorAll("body *")) {
    const box = el.getBoundingClientRect();
    if (!box.width || !box.height || el.closest("[hidden]")) continue;
    const style = getComputedStyle(el);
    const [r, g, b, a = 1] = rgb(style.backgroundColor);
    const tag = el.tagName.toLowerCase() + (el.className ? "." + el.className : "");
    if (a > 0 && Math.min(r, g, b) > 200) out.push(["light surface", tag, style.backgroundColor]);
    const own = [...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
    const [fr, fg, fb] = rgb(style.color);
    if (own && Math.max(fr, fg, fb) < 110) out.push(["dark text", tag, style.color]);
  }
  return out;
}"""


@pytest.mark.parametrize("path", ["/calls/", "/keys/"])
def test_the_calls_and_keys_pages_in_dark_mode(browser: object, h: Harness, path: str) -> None:
    from playwright.sync_api import expect

    _key("agents")
    h.client().chat.completions.create(model="auto", messages=MESSAGES)
    h.upstream.script("flaky-model", Fail(503))
    h.client().chat.completions.create(model="failover", messages=MESSAGES)  # by fallback
    h.upstream.script("flaky-model", Fail(503))
    h.upstream.script("steady-model", Fail(500))
    with pytest.raises(openai.APIStatusError):
        h.client().chat.completions.create(model="failover", messages=MESSAGES)
    flush()
    page = login(browser, h, path, color_scheme="dark")
    expect(page.locator("table tbody tr").first).to_be_visible()

    def colour(selector: str, prop: str) -> str:
        return str(page.locator(selector).first.evaluate(f"e => getComputedStyle(e).{prop}"))

    assert colour("body", "backgroundColor") == "rgb(18, 22, 29)"
    assert colour("main .card", "backgroundColor") == "rgb(27, 33, 43)"
    assert colour("main select, main input[type=text]", "backgroundColor") == "rgb(35, 42, 53)"
    assert colour("table tbody td", "color") == "rgb(227, 232, 240)"  # --fg
    assert colour("table th", "color") == "rgb(154, 166, 182)"  # --muted
    if path == "/calls/":
        assert colour(".outcome-failed", "color") == "rgb(255, 143, 150)"  # --bad
        assert colour(".outcome-ok", "color") == "rgb(111, 213, 143)"  # --ok
        assert colour(".mark-fallback", "backgroundColor") == "rgb(58, 46, 18)"  # --warn-bg
    assert page.evaluate(UNFIT_FOR_DARK) == []
    page.context.close()


def _latest_call_path() -> str:
    from routing.audit.models import Call

    return f"/calls/{Call.objects.latest('id').call_id}/"


@pytest.mark.parametrize(
    "path",
    [
        "/groups/",
        "/calls/",
        "call-detail",
        "/keys/",
        "/providers/",
        "/groups/auto/settings/",
        "/settings/",
    ],
)
def test_every_page_fits_a_420_px_wide_screen(browser: object, h: Harness, path: str) -> None:
    h.upstream.script("flaky-model", Fail(503))
    h.client().chat.completions.create(model="failover", messages=MESSAGES)  # two attempts
    flush()
    if path == "call-detail":
        path = _latest_call_path()
    page = login(browser, h, path, viewport={"width": 420, "height": 860})
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 420, f"{path} is {width} px wide"
    for control in page.locator("main button, main input, main select").all()[:60]:
        if control.is_visible():
            box = control.bounding_box()
            assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 420, (
                control.evaluate("b => b.outerHTML.slice(0, 200)"),
                control.evaluate("b => b.parentElement.outerHTML.slice(0, 300)"),
            )
    # Small tables inside a stacked row keep their own rows and columns.
    for cell in page.locator("table .stats table.mini td").all()[:6]:
        assert cell.evaluate("c => getComputedStyle(c).display") == "table-cell"
    if path == "/groups/":
        shot(page, "narrow.png")
    page.context.close()


def test_api_docs_render_offline_and_document_v1(browser: object, h: Harness) -> None:
    from playwright.sync_api import expect

    page = login(browser, h, "/groups/")
    elsewhere: list[str] = []

    def offline(route):  # type: ignore[no-untyped-def]
        if route.request.url.startswith(h.gateway.url):
            route.continue_()
        else:  # no internet: anything from another origin fails
            elsewhere.append(route.request.url)
            route.abort()

    page.context.route("**/*", offline)
    page.goto(h.gateway.url + "/api/docs")
    expect(page.get_by_text("/v1/chat/completions").first).to_be_visible(timeout=LIVE_TIMEOUT_MS)
    expect(page.get_by_text("/api/v1/providers").first).to_be_visible()
    assert elsewhere == []
    page.context.close()
