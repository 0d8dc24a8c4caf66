"""``/v1`` answers only to the host names ``ALLOWED_HOSTS`` lists, as the page does: the
lean handler skips Django's middleware, and with it the only ``get_host()`` that checked
(DNS rebinding: a page on another name reaching a gateway on loopback). A refused host is
a 400 in the door's own shape, before the body is read or anything is recorded."""

from __future__ import annotations

import httpx
import pytest
from django.test import override_settings

from routing.audit.models import Call
from tests.conftest import TWO_ROUTES, Harness, settle_calls

MESSAGES = [{"role": "user", "content": "hi"}]


def _post(h: Harness, path: str, host: str) -> httpx.Response:
    return httpx.post(
        h.gateway.base_url + path,
        json={"model": "auto", "messages": MESSAGES, "max_tokens": 5},
        headers={"authorization": f"Bearer {h.key}", "host": host},
        timeout=30,
    )


@pytest.mark.parametrize("host", ["evil.example", "evil.example:80", "127.0.0.1.nip.io", ""])
def test_another_host_name_is_refused_in_the_doors_shape(harness: Harness, host: str) -> None:
    harness.configure(TWO_ROUTES)
    chat = _post(harness, "/chat/completions", host)
    assert chat.status_code == 400, chat.text
    assert chat.json()["error"]["code"] == "invalid_host"
    assert set(chat.json()["error"]) == {"message", "type", "code", "param"}
    messages = _post(harness, "/messages", host)
    assert messages.status_code == 400
    assert messages.json()["type"] == "error"
    assert messages.json()["error"]["type"] == "invalid_request_error"
    models = httpx.get(
        harness.gateway.base_url + "/models",
        headers={"authorization": f"Bearer {harness.key}", "host": host},
        timeout=30,
    )
    assert models.status_code == 400
    assert harness.upstream.count() == 0
    settle_calls(harness.runtime)
    assert Call.objects.count() == 0


def test_the_loopback_names_are_served(harness: Harness) -> None:
    harness.configure(TWO_ROUTES)
    port = harness.gateway.url.rsplit(":", 1)[1]
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", "localhost"):
        assert _post(harness, "/chat/completions", host).status_code == 200, host


def test_the_list_is_the_settings(harness: Harness) -> None:
    harness.configure(TWO_ROUTES)
    with override_settings(ALLOWED_HOSTS=["gw.example.com"]):
        assert _post(harness, "/chat/completions", "gw.example.com").status_code == 200
        assert _post(harness, "/chat/completions", "127.0.0.1").status_code == 400
    assert _post(harness, "/chat/completions", "127.0.0.1").status_code == 200
    assert _post(harness, "/chat/completions", "gw.example.com").status_code == 400
