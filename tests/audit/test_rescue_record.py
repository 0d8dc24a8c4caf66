"""Issue 41 item 4: the ``x-switchyard-trail`` header goes out at the commit point, so it
cannot name a continuation that came later; the stored record is where a rescue shows. A
real rescue through each door over real sockets: the header names the cut attempt only;
the ledger, ``/api/v1/calls`` and the call page name the continuation."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from routing.audit.models import Attempt
from routing.simulator.script import DropAfter, Reply
from tests.audit.conftest import Audit
from tests.gateway.test_rescue import RAW, SENT, WHOLE, raw_stream


@pytest.mark.parametrize("door", RAW)
def test_a_rescue_is_on_the_stored_record_the_api_and_the_page(audit: Audit, door: str) -> None:
    config, first, second, path, body = RAW[door]
    h = audit.h
    h.configure(config)
    h.upstream.script(first, DropAfter(2, content=SENT))
    h.upstream.script(second, Reply(WHOLE, chunks=6))
    header, _ = raw_stream(h, path, body)
    audit.flush()
    assert header.endswith(f"/{first}:ok") and "continuation" not in header

    rows = list(Attempt.objects.order_by("index").values_list("target", "ok", "continuation"))
    assert [(t.split("/")[1], ok, c) for t, ok, c in rows] == [
        (first, True, False),
        (second, True, True),
    ]
    [call] = audit.api.get("/api/v1/calls").json()
    assert [(a["target"].split("/")[1], a["continuation"]) for a in call["attempts"]] == [
        (first, False),
        (second, True),
    ]
    client = Client()
    client.force_login(User.objects.create_user("operator", password="pw-tests", is_staff=True))
    page = client.get(f"/calls/{call['call_id']}/").content.decode()
    assert page.count("data-continuation>(continuation)<") == 1
