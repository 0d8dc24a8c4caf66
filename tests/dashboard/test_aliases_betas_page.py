"""The settings page's aliases form and the providers page's betas fields."""

from __future__ import annotations

import re
from collections.abc import Callable

from django.test import Client

from routing.models import Group, Provider

HTMX = {"HTTP_HX_REQUEST": "true"}


def _version(html: str) -> str:
    found = re.search(
        r'data-aliases-form>\s*<input type="hidden" name="based_on" value="(\d+)"', html
    )
    assert found is not None
    return found.group(1)


def test_the_settings_page_sets_aliases_and_refuses_overlaps(
    staff_client: Client, configure: Callable[..., None]
) -> None:
    configure()
    html = staff_client.get("/groups/auto/settings/").content.decode()
    assert 'name="aliases"' in html
    saved = staff_client.post(
        "/groups/auto/settings/aliases/",
        {"aliases": "claude-*, sonnet", "based_on": _version(html)},
        **HTMX,
    )
    assert saved.status_code == 200, saved.content
    assert Group.objects.get(name="auto").aliases == ["claude-*", "sonnet"]
    assert 'value="claude-* sonnet"' in saved.content.decode()
    other = Group.objects.exclude(name="auto").first()
    assert other is not None
    page = staff_client.get(f"/groups/{other.name}/settings/").content.decode()
    clash = staff_client.post(
        f"/groups/{other.name}/settings/aliases/",
        {"aliases": "claude-opus-*", "based_on": _version(page)},
        **HTMX,
    )
    assert clash.status_code == 422
    assert "could match the same model names" in clash.content.decode()
    assert Group.objects.get(name=other.name).aliases == []


def test_the_providers_page_edits_betas(
    staff_client: Client, configure: Callable[..., None]
) -> None:
    configure()
    provider = Provider.objects.first()
    assert provider is not None
    page = staff_client.get(f"/providers/{provider.name}/")
    assert page.status_code == 200 and 'name="betas.strip"' in page.content.decode()
    saved = staff_client.post(
        f"/providers/{provider.name}/",
        {
            "base_url": provider.base_url,
            "kind": provider.kind,
            "betas.strip": "mid-conversation-system-2026-04-07",
            "based_on": provider.version,
        },
        **HTMX,
    )
    assert saved.status_code == 200, saved.content
    provider.refresh_from_db()
    assert provider.betas == {"strip": ["mid-conversation-system-2026-04-07"]}
