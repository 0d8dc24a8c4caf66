"""The console under its Content-Security-Policy in a real browser (SPEC §9): every page
and the admin carry the header, and Chromium refuses nothing on them (no inline script,
event handler or style attribute is left), with the controls that used inline handlers
still working."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from tests.conftest import Harness
from tests.dashboard.browsing import login
from tests.dashboard.conftest import PASSWORD

pytestmark = pytest.mark.browser

CONFIG = """
providers:
  - name: sim
    kind: openai
    base_url: {upstream}
    api_key: upstream-key-sim-0123456789
    models: [steady-model]
groups:
  - name: auto
    targets:
      - {provider: sim, model: steady-model}
"""
PAGES = [
    "/groups/",
    "/calls/",
    "/keys/",
    "/spend/",
    "/providers/",
    "/providers/sim/",
    "/groups/auto/settings/",
    "/settings/",
    "/admin/",
    "/admin/routing/provider/",
    "/api/docs",
]


@pytest.fixture
def h(harness: Harness) -> Iterator[Harness]:
    from django.contrib.auth.models import User

    User.objects.create_user("operator", password=PASSWORD, is_staff=True, is_superuser=True)
    harness.configure(CONFIG)
    yield harness


def _pages_with_records(h: Harness) -> list[str]:
    """PAGES plus a call's detail and a key's page (one call made and recorded first)."""
    from routing.audit import writer
    from routing.audit.models import Call
    from routing.models import ApiKey

    h.client().chat.completions.create(model="auto", messages=[{"role": "user", "content": "hi"}])
    assert writer.flush(10)
    call = Call.objects.latest("id").call_id
    return [*PAGES, f"/calls/{call}/", f"/keys/{ApiKey.objects.get(name='test').pk}/"]


def test_no_page_breaks_the_content_security_policy(browser: object, h: Harness) -> None:
    pages = _pages_with_records(h)
    page = login(browser, h, "/groups/")
    refused: list[str] = []
    page.on("console", lambda m: refused.append(m.text) if "Content Security" in m.text else None)
    page.on("pageerror", lambda error: refused.append(str(error)))
    for path in pages:
        response = page.goto(h.gateway.url + path)
        assert response is not None and response.status == 200, path
        policy = response.headers.get("content-security-policy", "").split("; ")
        assert "script-src 'self'" in policy and "style-src 'self'" in policy, path
        page.wait_for_load_state("load")
    assert refused == []
    page.context.close()


def test_the_spend_pages_selects_still_apply_at_once(browser: object, h: Harness) -> None:
    from playwright.sync_api import expect

    page = login(browser, h, "/spend/")
    page.locator('select[name="days"]').select_option("7")
    expect(page).to_have_url(re.compile(r"/spend/\?.*days=7"))
    page.locator('select[name="by"]').select_option("key")
    expect(page).to_have_url(re.compile(r"/spend/\?.*by=key"))
    page.context.close()
