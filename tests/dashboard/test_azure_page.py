"""An Azure OpenAI provider on the page (SPEC §19): the platform and its one field,
``entra``, under the check every write path shares."""

from __future__ import annotations

from collections.abc import Callable

from django.test import Client

from routing.models import Provider

HTMX = {"HTTP_HX_REQUEST": "true"}
BASE = "https://my-resource.openai.azure.com/openai/v1"


def test_an_azure_provider_is_made_on_the_page_with_entra(
    staff_client: Client, configure: Callable[..., None]
) -> None:
    configure()
    made = staff_client.post(
        "/providers/",
        {
            "name": "az",
            "kind": "openai-responses",
            "platform": "azure",
            "base_url": BASE,
            "entra": "1",
        },
        **HTMX,
    )
    assert made.status_code == 200, made.content
    provider = Provider.objects.get(name="az")
    assert (provider.platform, provider.entra, provider.has_api_key) == ("azure", True, False)
    page = staff_client.get("/providers/az/").content.decode()
    assert '<option value="azure" selected>' in page


def test_the_page_refuses_what_azure_does_not_carry(
    staff_client: Client, configure: Callable[..., None]
) -> None:
    configure()
    refused = staff_client.post(
        "/providers/",
        {"name": "az", "kind": "anthropic", "platform": "azure", "base_url": ""},
        **HTMX,
    )
    assert refused.status_code == 422
    html = refused.content.decode()
    assert (
        "platform &#x27;azure&#x27; carries openai, openai-responses, not &#x27;anthropic&#x27;"
        in html
    )
    assert "platform &#x27;azure&#x27; needs a base_url" in html
    assert not Provider.objects.filter(name="az").exists()
