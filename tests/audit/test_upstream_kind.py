"""Each attempt's upstream kind and each call's front door, recorded and shown (SPEC §12):
the ledger row of every attempt, ``/api/v1/calls``, the admin's attempts inline, the call
detail page and the chain panel, stored (first render) and live (websocket push).

Calls come in over real sockets through the official SDKs (``anthropic`` on
``/v1/messages``, the ``openai`` ``responses`` client on ``/v1/responses``) and fail over
across kinds against the simulator; the live push is read by a websocket client connected
to the served gateway with a staff session, the way the page's script reads it.
"""

from __future__ import annotations

import json
import re
from typing import Any

import anthropic
import pytest
from django.contrib.auth.models import User
from django.test import Client
from websockets.sync.client import connect

from routing.audit.models import Attempt, Call
from routing.protocols.registry import PROTOCOLS
from routing.simulator.script import Fail, Reply
from tests.api.test_front_doors import THREE_KINDS
from tests.audit.conftest import Audit

MESSAGES = [{"role": "user", "content": "hi"}]


@pytest.fixture
def kinds(audit: Audit) -> Audit:
    audit.h.configure(THREE_KINDS)
    return audit


def _staff() -> Client:
    client = Client()
    client.force_login(User.objects.create_user("operator", password="pw-tests", is_staff=True))
    return client


def _kinds_in(html: str) -> list[str]:
    return re.findall(r'data-upstream-kind="([^"]+)"', html)


def _messages_call_failing_over(audit: Audit) -> str:
    """A Messages call whose Anthropic target fails (401: switched at once) and whose
    Responses target answers; its request id."""
    h = audit.h
    h.upstream.script("a-model", Fail(401, "bad key"))
    h.upstream.script("r-model", Reply("from responses"))
    client = anthropic.Anthropic(base_url=h.gateway.url, api_key=h.key, max_retries=0)
    raw = client.messages.with_raw_response.create(
        model="via-anthropic", max_tokens=100, messages=MESSAGES
    )
    assert raw.parse().content[0].text == "from responses"  # type: ignore[union-attr]
    audit.flush()
    return raw.headers["x-switchyard-request-id"]


def test_each_attempt_row_records_the_kind_its_target_spoke(kinds: Audit) -> None:
    call_id = _messages_call_failing_over(kinds)
    call = Call.objects.get(call_id=call_id)
    assert call.front_door == "messages"
    rows = Attempt.objects.filter(call_id=call_id).order_by("index")
    assert [(a.target, a.upstream_kind) for a in rows] == [
        ("claude/a-model", "anthropic"),
        ("resp/r-model", "openai-responses"),
    ]


def test_the_calls_api_gives_each_attempts_upstream_kind(kinds: Audit) -> None:
    call_id = _messages_call_failing_over(kinds)
    reply = kinds.api.get("/api/v1/calls", params={"front_door": "messages"})
    assert reply.status_code == 200, reply.text
    [call] = reply.json()
    assert call["call_id"] == call_id and call["front_door"] == "messages"
    assert [(a["target"], a["upstream_kind"]) for a in call["attempts"]] == [
        ("claude/a-model", "anthropic"),
        ("resp/r-model", "openai-responses"),
    ]
    schema = kinds.api.get("/api/v1/openapi.json").json()["components"]["schemas"]
    assert schema["AttemptOut"]["properties"]["upstream_kind"]["enum"] == [
        protocol.value
        for protocol in PROTOCOLS  # the registry's kinds, in its order
    ]


def test_the_admin_inline_and_the_call_detail_show_each_attempts_kind(
    kinds: Audit, admin_client: Client
) -> None:
    call_id = _messages_call_failing_over(kinds)
    call = Call.objects.get(call_id=call_id)
    inline = admin_client.get(f"/admin/audit/call/{call.pk}/change/").content.decode()
    assert "Upstream kind" in inline
    assert inline.index("Anthropic messages", inline.index("Upstream kind")) < inline.index(
        "OpenAI responses"
    )
    listing = admin_client.get("/admin/audit/attempt/", {"upstream_kind": "openai-responses"})
    assert listing.status_code == 200
    cells = re.findall(r'class="field-target">([^<]+)<', listing.content.decode())
    assert cells == ["resp/r-model"]

    detail = _staff().get(f"/calls/{call_id}/").content.decode()
    assert _kinds_in(detail) == ["anthropic", "openai-responses"]
    assert "Anthropic messages" in detail  # the front door


def test_the_stored_chain_panel_shows_the_door_and_each_steps_kind(kinds: Audit) -> None:
    call_id = _messages_call_failing_over(kinds)
    html = _staff().get("/groups/").content.decode()
    start = html.index(f'data-call-id="{call_id}"')
    item = html[start : html.index("</ol>", start)]
    assert 'data-front-door="messages"' in item
    assert _kinds_in(item) == ["anthropic", "openai-responses"]


def test_the_live_chain_panel_push_shows_the_door_and_each_steps_kind(kinds: Audit) -> None:
    h = kinds.h
    cookie = f"sessionid={_staff().cookies['sessionid'].value}"
    url = h.gateway.url.replace("http://", "ws://") + "/ws/dashboard/"
    with connect(url, additional_headers={"cookie": cookie, "origin": h.gateway.url}) as socket:
        h.upstream.script("r-model", Fail(401, "bad key"))
        h.upstream.script("c-model", Reply("from chat"))
        raw = h.client().responses.with_raw_response.create(
            model="via-openai-responses", input="hi"
        )
        assert raw.parse().output_text == "from chat"
        call_id = raw.headers["x-switchyard-request-id"]
        pushed = _next_call(socket, call_id)
    assert pushed["group"] == "via-openai-responses"
    assert 'data-front-door="responses"' in pushed["html"]
    assert _kinds_in(pushed["html"]) == ["openai-responses", "openai"]
    assert "<code>resp/r-model</code> ✕ AUTH (401) → 2" in pushed["html"]


def _next_call(socket: Any, call_id: str) -> dict[str, Any]:
    for _ in range(50):
        message = json.loads(socket.recv(timeout=10))
        if message.get("kind") == "call.recorded" and message.get("call_id") == call_id:
            return dict(message)
    raise AssertionError(f"call {call_id} was not pushed")
