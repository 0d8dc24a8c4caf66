"""Fixtures for the dashboard tests: a fresh runtime, a configuration, a staff client."""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.test import Client

TWO_GROUPS = """
defaults:
  circuit: {cooldown_base_ms: 15000}
providers:
  - name: p1
    kind: openai
    base_url: {upstream}
    api_key: sk-test-p1-0123456789abcdef
    models: [a, x]
  - name: p2
    kind: openai
    base_url: {upstream}
    api_key: sk-test-p2-0123456789abcdef
    models: [b]
groups:
  - name: auto
    circuit: {cooldown_base_ms: 20000}
    targets:
      - {provider: p1, model: a}
      - {provider: p2, model: b}
  - name: solo
    targets:
      - {provider: p2, model: b}
"""

PASSWORD = "correct horse battery staple"


@pytest.fixture
def fresh_runtime() -> Iterator[object]:
    """The process runtime with an empty health store and hub (restored afterwards)."""
    from routing.gateway.events import EventHub
    from routing.gateway.runtime import get_runtime
    from routing.state.memory import MemoryStore

    runtime = get_runtime()
    store, hub = runtime.store, runtime.hub
    runtime.store, runtime.hub = MemoryStore(), EventHub()
    runtime.invalidate()
    yield runtime
    runtime.store, runtime.hub = store, hub
    runtime.invalidate()


@pytest.fixture
def configure(tmp_path: Path, transactional_db: None) -> Iterator[Callable[..., None]]:
    """Apply a config file; afterwards wait for the audit writer, so no record of this test
    is written after its database is gone."""
    from routing.audit.writer import flush

    def apply(yaml_text: str = TWO_GROUPS, upstream: str = "http://127.0.0.1:9/v1") -> None:
        from routing.config.yaml import load_file
        from routing.services.config_file import config_apply

        path = tmp_path / "switchyard.yaml"
        path.write_text(textwrap.dedent(yaml_text).replace("{upstream}", upstream))
        config_apply(load_file(path), source=str(path))

    yield apply
    flush(5.0)


@pytest.fixture
def staff_user(transactional_db: None):  # type: ignore[no-untyped-def]
    from django.contrib.auth.models import User

    return User.objects.create_user("operator", password=PASSWORD, is_staff=True)


@pytest.fixture
def staff_client(staff_user: object, fresh_runtime: object) -> Client:
    client = Client()
    client.force_login(staff_user)  # type: ignore[arg-type]
    return client


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    """One headless Chromium (Debian's, driven by Playwright) per browser test module.

    Playwright's sync API keeps an event loop marked as running in this thread, which
    makes Django refuse the test's own (sync) database calls; the documented way out is
    ``DJANGO_ALLOW_ASYNC_UNSAFE`` while the browser is up. The views' own async safety is
    covered by the non-browser tests, which run without it.
    """
    import os

    from playwright.sync_api import sync_playwright

    from tests.dashboard.browsing import CHROMIUM, CHROMIUM_ARGS

    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            yield chromium
            chromium.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous
