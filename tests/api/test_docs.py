"""``/api/docs`` works without internet (Swagger UI from the installed package) and
documents ``/v1`` beside the management API."""

from __future__ import annotations

import re

import httpx
from django.test import Client

from tests.api.conftest import Api
from tests.conftest import Harness


def test_the_docs_page_loads_nothing_from_a_cdn(harness: Harness) -> None:
    """Over the real server (static files included): every script and stylesheet of the
    page comes from this gateway."""
    with httpx.Client(base_url=harness.gateway.url, follow_redirects=True) as web:
        page = web.get("/api/docs")
        assert page.status_code == 200
        sources = re.findall(r'(?:src|href)="([^"]+)"', page.text)
        assert any("swagger-ui-bundle.js" in s for s in sources)
        assert all(s.startswith("/") for s in sources), sources  # same origin, no CDN
        for asset in (s for s in sources if s.endswith((".js", ".css"))):
            fetched = web.get(asset)
            assert fetched.status_code == 200 and len(fetched.content) > 1000, asset


def test_the_schema_documents_v1_next_to_the_management_api(api: Api) -> None:
    schema = Client().get("/api/v1/openapi.json").json()
    chat = schema["paths"]["/v1/chat/completions"]["post"]
    assert chat["security"] == [{"ClientKey": []}]
    request = chat["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    assert request == "#/components/schemas/ChatCompletionRequest"
    assert {"model", "messages"} <= set(
        schema["components"]["schemas"]["ChatCompletionRequest"]["required"]
    )
    assert "x-switchyard-trail" in chat["responses"]["200"]["headers"]
    assert "502" in chat["responses"]
    assert {"/v1/models", "/v1/messages", "/v1/responses", "/v1/embeddings"} <= set(schema["paths"])
    assert "/api/v1/providers" in schema["paths"]  # the management API is still there
