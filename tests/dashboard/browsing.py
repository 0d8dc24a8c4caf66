"""What the browser tests share: Debian's Chromium, the screenshot folder, logging in
through the real login form, screenshots. The ``browser`` fixture is in ``conftest.py``."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any

from tests.conftest import Harness
from tests.dashboard.conftest import PASSWORD

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
# build/screenshots/ (ignored by git), so a test run never changes the tracked docs; `make
# screenshots` points this at docs/screenshots/ to refresh the ones docs/console.md shows.
SCREENSHOTS = Path(
    os.environ.get("SWITCHYARD_SCREENSHOTS")
    or Path(__file__).resolve().parents[2] / "build" / "screenshots"
)


def login(browser: Any, h: Harness, path: str, **options: object) -> Any:
    """A new browser context, logged in through the login form, showing ``path`` with its
    websocket connected. ``options`` go to ``new_context`` (viewport, color_scheme)."""
    from playwright.sync_api import expect

    options.setdefault("viewport", {"width": 1280, "height": 900})
    context = browser.new_context(**options)
    page = context.new_page()
    page.goto(h.gateway.url + path)
    page.fill("#id_username", "operator")
    page.fill("#id_password", PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(re.compile(re.escape(h.gateway.url + path.split("?")[0])))
    expect(page.locator("#live-status")).to_have_attribute("data-state", "live")
    return page


def shot(page: Any, name: str) -> None:
    """A full-page screenshot into ``SCREENSHOTS`` (each name written by one test)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / name), full_page=True)
