"""``/api/docs`` works without internet (Swagger UI from the installed package) and
documents ``/v1`` beside the management API; the document and its page need an admin key
or a staff session, and name nothing of the installation (issue 37 item 3)."""

from __future__ import annotations

import json
import re

import httpx
from django.contrib.auth import get_user_model
from django.test import Client

from routing.services import key_create
from tests.api.conftest import Api
from tests.conftest import Harness

DOCUMENT, PAGE = "/api/v1/openapi.json", "/api/v1/docs"


def _staff_browser() -> Client:
    browser = Client()
    user = get_user_model().objects.create_user("docs-reader", password="pw-1234567", is_staff=True)
    browser.force_login(user)
    return browser


def test_the_docs_page_loads_nothing_from_a_cdn(harness: Harness) -> None:
    """Over the real server (static files included): every script and stylesheet of the
    page comes from this gateway."""
    session = {name: morsel.value for name, morsel in _staff_browser().cookies.items()}
    with httpx.Client(base_url=harness.gateway.url, follow_redirects=True, cookies=session) as web:
        page = web.get("/api/docs")
        assert page.status_code == 200
        sources = re.findall(r'(?:src|href)="([^"]+)"', page.text)
        assert any("swagger-ui-bundle.js" in s for s in sources)
        assert all(s.startswith("/") for s in sources), sources  # same origin, no CDN
        for asset in (s for s in sources if s.endswith((".js", ".css"))):
            fetched = web.get(asset)
            assert fetched.status_code == 200 and len(fetched.content) > 1000, asset


def test_the_schema_documents_v1_next_to_the_management_api(api: Api) -> None:
    schema = api.client.get(DOCUMENT, HTTP_AUTHORIZATION=f"Bearer {api.key}").json()
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


def test_the_document_and_its_page_need_an_admin_key_or_a_staff_session(api: Api) -> None:
    api.provider("p1", models=["a"])
    api.group("auto")
    _, client_key = key_create(name="app", kind="client", actor="t")
    _, scoped_key = key_create(name="narrow", kind="client", groups=["auto"], actor="t")
    anonymous = Client()
    for path in (DOCUMENT, PAGE):
        assert anonymous.get(path, HTTP_AUTHORIZATION="Bearer sk-sy-wrong").status_code == 401
        for key in (client_key, scoped_key):
            refused = anonymous.get(path, HTTP_AUTHORIZATION=f"Bearer {key}")
            assert refused.status_code == 403, path
            assert "components" not in refused.content.decode()
        assert anonymous.get(path, HTTP_AUTHORIZATION=f"Bearer {api.key}").status_code == 200
    assert anonymous.get(DOCUMENT).status_code == 401
    assert anonymous.get(DOCUMENT).json() == {"detail": "Unauthorized"}
    to_login = anonymous.get(PAGE)  # a browser without a session: the login page
    assert to_login.status_code == 302 and to_login["Location"] == f"/login/?next={PAGE}"
    staff = _staff_browser()
    assert staff.get(PAGE).status_code == 200 and staff.get(DOCUMENT).status_code == 200


def test_the_document_names_nothing_of_the_installation(api: Api) -> None:
    """The same document for every reader: what a scoped key may not see (other groups,
    providers, their models) is not in it, in enums, examples or anywhere else."""
    before = api.client.get(DOCUMENT, HTTP_AUTHORIZATION=f"Bearer {api.key}").json()
    api.provider("hidden-provider", models=["hidden-model-x"])
    api.group("secret-group", targets=[{"provider": "hidden-provider", "model": "hidden-model-x"}])
    key_create(name="narrow", kind="client", groups=["secret-group"], actor="t")
    after = api.client.get(DOCUMENT, HTTP_AUTHORIZATION=f"Bearer {api.key}").json()
    assert after == before
    text = json.dumps(after)
    for name in ("hidden-provider", "hidden-model-x", "secret-group"):
        assert name not in text
