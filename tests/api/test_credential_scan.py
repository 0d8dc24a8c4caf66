"""Done-when: "the credential never appears in any response body, header, export, log line
or database column in plain text (tested by scanning)".

A provider gets a distinctive credential (and a header value: issue 37 item 14) through the API and points at an upstream that
rejects it *and echoes it back* in its error text, the worst case for leaks. Then every
read, list, export and action is exercised, a /v1 call fails through it, and the whole
output — bodies, headers, logs, ``exportconfig``, every column of every table — is
searched for the plaintext.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from io import StringIO

import httpx
import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client

from routing.audit import writer
from routing.models import Provider
from routing.simulator.server import FakeUpstream
from tests.api.conftest import API, database_dump
from tests.conftest import Harness

CANARY = "sk-CANARY-plaintext-7f3e9a1c5b2d"
NEW_CANARY = "sk-CANARY-rotated-0a9b8c7d6e5f"
HEADER_CANARY = "hdr-CANARY-value-5e6f7a8b9c0d"  # header values are secrets too (issue 37)


@pytest.fixture
def echoing() -> Iterator[FakeUpstream]:
    with FakeUpstream(api_key="the-only-accepted-key", models=["m"]) as server:
        yield server


def _seen(response: httpx.Response) -> str:
    headers = "\n".join(f"{k}: {v}" for k, v in response.headers.items())
    request = f"{response.request.method} {response.request.url} {response.status_code}"
    return f"{request}\n{headers}\n{response.text}"


# Each kind sends the key its own way (a bearer token; Gemini's x-goog-api-key, which the
# simulator echoes in Google's 400 "API key not valid" text).
BASES = {"openai": "", "gemini": "/v1"}


@pytest.mark.parametrize("kind", list(BASES))
def test_the_credential_is_never_shown_anywhere(
    live: Harness, echoing: FakeUpstream, caplog: pytest.LogCaptureFixture, kind: str
) -> None:
    from routing.services.api_keys import generate_key

    caplog.set_level(logging.DEBUG)
    writer.attach(live.runtime.hub)  # type: ignore[attr-defined]
    _, admin = generate_key(name="ops", kind="admin")
    seen: list[str] = []
    api = httpx.Client(
        base_url=live.gateway.url + API, headers={"authorization": f"Bearer {admin}"}, timeout=10
    )
    v1 = httpx.Client(
        base_url=live.gateway.base_url,
        headers={"authorization": f"Bearer {live.key}"},
        timeout=10,
    )

    def hit(response: httpx.Response) -> httpx.Response:
        seen.append(_seen(response))
        return response

    with api, v1:
        created = hit(
            api.post(
                "/providers",
                json={
                    "name": "leaky",
                    "kind": kind,
                    "base_url": echoing.base_url.removesuffix(BASES[kind]),
                    "api_key": CANARY,
                    "headers": {"x-org-token": HEADER_CANARY},
                    "models": ["m"],
                },
            )
        )
        assert created.status_code == 201, created.text
        assert (
            hit(
                api.post(
                    "/groups",
                    json={
                        "name": "auto",
                        "targets": [{"provider": "leaky", "model": "m"}],
                    },
                )
            ).status_code
            == 201
        )

        # actions whose upstream answers echo the credential
        assert hit(api.post("/providers/leaky/refresh-models")).status_code == 424
        assert hit(api.post("/providers/leaky/test")).json()["ok"] is False
        failed = hit(
            v1.post(
                "/chat/completions",
                json={
                    "model": "auto",
                    "messages": [{"role": "user", "content": "hi"}],
                },
            )
        )
        assert failed.status_code == 502 and "[redacted]" in failed.text
        assert hit(api.post("/providers/leaky/enable")).status_code == 200
        assert hit(api.post("/route/explain", json={"model": "auto"})).status_code == 200

        # a rotated credential: the new one must not leak either
        rotated = hit(
            api.patch(
                "/providers/leaky",
                json={"api_key": NEW_CANARY},
                headers={"if-match": created.headers["etag"]},
            )
        )
        assert rotated.status_code == 200

        # every read, list and export
        for path in (
            "/providers",
            "/providers/leaky",
            "/groups",
            "/groups/auto",
            "/global",
            "/keys",
            "/status",
            "/calls",
            "/events",
            "/config/export",
            "/openapi.json",
        ):
            assert hit(api.get(path)).status_code == 200, path
        assert hit(api.get("/groups/auto/nope")).status_code == 404
        shown = api.get("/providers/leaky").json()["headers"]
        assert shown == {"x-org-token": ""}  # the name, never the value

        # an update without the value keeps it, as an absent api_key keeps the credential
        kept = hit(
            api.patch(
                "/providers/leaky",
                json={"headers": shown, "timeouts": {"idle_s": 9}},
                headers={"if-match": rotated.headers["etag"]},
            )
        )
        assert kept.status_code == 200 and kept.json()["headers"] == shown

    # the admin's list and change pages
    staff = Client()
    staff.force_login(get_user_model().objects.create_superuser("scan", password="pw-1234567"))
    provider_pk = Provider.objects.get().pk
    for page in ("/admin/routing/provider/", f"/admin/routing/provider/{provider_pk}/change/"):
        answer = staff.get(page)
        assert answer.status_code == 200, page
        seen.append(f"{page}\n{answer.content.decode()}")
    assert "x-org-token" in seen[-1]  # the admin shows the header's name

    exported = StringIO()
    call_command("exportconfig", stdout=exported)
    assert "${LEAKY_API_KEY}" in exported.getvalue()
    assert writer.flush(10)

    texts = {
        "responses": "\n".join(seen),
        "exportconfig": exported.getvalue(),
        "logs": "\n".join(f"{r.name} {r.getMessage()} {r.exc_text or ''}" for r in caplog.records),
        "database": database_dump(),
    }
    assert "[redacted]" in texts["responses"]  # the scrubber really had something to do
    assert "leaky" in texts["database"]
    for where, text in texts.items():
        for secret in (CANARY, NEW_CANARY, HEADER_CANARY):
            assert secret not in text, f"the credential leaked into {where}"
            assert secret[3:] not in text, f"part of the credential leaked into {where}"

    stored = Provider.objects.get().api_key_encrypted
    assert stored.startswith("gAAAAA")  # a Fernet token
    assert Provider.objects.get().get_api_key() == NEW_CANARY
    assert Provider.objects.get().headers_encrypted["x-org-token"].startswith("gAAAAA")
    assert Provider.objects.get().get_headers() == {"x-org-token": HEADER_CANARY}
