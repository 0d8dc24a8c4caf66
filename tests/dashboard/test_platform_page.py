"""The providers page's platform fields (SPEC §19): shown, checked like every write path,
and the edit form keeps a provider's kind (it offers it, so a save never resets it)."""

from __future__ import annotations

from django.test import Client

from routing.models import Provider

HTMX = {"HTTP_HX_REQUEST": "true"}


def test_the_edit_form_offers_the_kind_and_the_platform_and_checks_them(
    staff_client: Client, db: None
) -> None:
    provider = Provider.objects.create(name="c", kind="anthropic", base_url="http://x.test")
    page = staff_client.get("/providers/c/").content.decode()
    assert '<option value="anthropic" selected>' in page
    assert 'name="platform"' in page and '<option value="direct" selected>' in page
    assert 'name="aws_secret_access_key"' in page and 'type="password"' in page
    refused = staff_client.post(
        "/providers/c/",
        {
            "base_url": "",
            "kind": "anthropic",
            "platform": "direct",
            "region": "eu-west-1",
            "based_on": provider.version,
        },
        **HTMX,
    )
    assert refused.status_code == 422
    html = refused.content.decode()
    assert "platform &#x27;direct&#x27; needs a base_url" in html
    assert 'data-errors-for="region"' in html and "does not use region" in html
    provider.refresh_from_db()
    assert provider.base_url == "http://x.test" and provider.region == ""  # nothing changed
    saved = staff_client.post(
        "/providers/c/",
        {
            "base_url": "http://y.test",
            "kind": "anthropic",
            "platform": "direct",
            "based_on": provider.version,
        },
        **HTMX,
    )
    assert saved.status_code == 200, saved.content
    provider.refresh_from_db()
    assert provider.kind == "anthropic" and provider.base_url == "http://y.test"
