"""No record, header, log line or metric label carries a provider credential, even after
upstream 401s whose bodies echo the key back."""

from __future__ import annotations

import json
import logging

import httpx
import pytest
from django.core import serializers
from django.db.models import Model
from django.test import Client

from routing.audit.models import Attempt, Call, ConfigChange, Fallback, HealthTransition
from routing.audit.services import config_change_record
from routing.simulator.script import Fail
from tests.audit.conftest import MESSAGES, RETRY_TWICE, Audit

KEY_1 = "upstream-key-p1-0123456789"
KEY_2 = "upstream-key-p2-0123456789"
MODELS: list[type[Model]] = [Call, Attempt, Fallback, HealthTransition, ConfigChange]


def chat(audit: Audit, model: str, **extra: object) -> httpx.Response:
    return httpx.post(
        audit.h.gateway.base_url + "/chat/completions",
        headers={"authorization": f"Bearer {audit.h.key}"},
        json={"model": model, "messages": MESSAGES, **extra},
        timeout=10,
    )


def dump(response: httpx.Response) -> str:
    return json.dumps(dict(response.headers)) + "\n" + response.text


def test_no_credential_anywhere_after_echoing_401s(
    audit: Audit, admin_client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    caplog.set_level(logging.DEBUG, logger="switchyard")
    audit.h.configure(RETRY_TWICE)
    audit.h.upstream.script(
        "a",
        Fail(500, f"upstream saw key {KEY_1}"),
        Fail(500, f"upstream saw key {KEY_1}"),
        Fail(401, f"Incorrect API key provided: {KEY_1}.", code="invalid_api_key"),
    )
    audit.h.upstream.script(
        "b", Fail(401, body=json.dumps({"error": {"message": f"bad key {KEY_2}", "type": "auth"}}))
    )
    seen: list[str] = []
    first = chat(audit, "auto")
    assert first.status_code == 502  # both credentials broken: the routes are exhausted
    seen.append(dump(first))
    streamed = chat(audit, "other", stream=True)  # p2 is disabled now: nothing to try
    assert streamed.status_code == 503
    seen.append(dump(streamed))

    config_change_record(
        actor="user:alice",
        path="api",
        object_type="provider",
        object_name="p1",
        before={"base_url": "http://x", "api_key": KEY_1, "headers": {"x-api-key": KEY_1}},
        after={
            "base_url": "http://y",
            "api_key": KEY_2,
            "headers": {"x-api-key": KEY_2, "Accept": "json"},
        },
    )
    audit.flush()

    for model in MODELS:
        rows = model._default_manager.all()
        assert rows.exists(), model
        seen.append(serializers.serialize("json", rows))
        for row in rows:
            page = admin_client.get(f"/admin/audit/{model._meta.model_name}/{row.pk}/change/")
            assert page.status_code == 200
            seen.append(page.content.decode())
        seen.append(admin_client.get(f"/admin/audit/{model._meta.model_name}/").content.decode())
    for path in ("/api/v1/status", "/api/v1/calls", "/api/v1/events"):
        seen.append(dump(audit.api.get(path)))
    seen.append(dump(audit.api.get("/metrics")))
    seen.extend(repr(event) for event in audit.h.runtime.hub.recent)  # type: ignore[attr-defined]
    seen.extend(record.getMessage() for record in caplog.records)
    seen.append(caplog.text)

    everything = "\n".join(seen)
    assert KEY_1 not in everything
    assert KEY_2 not in everything
    # The scan is not vacuous: the echoes happened and were scrubbed on the way in.
    assert Attempt.objects.filter(code="AUTH", message__contains="[redacted]").count() == 2
    # ("upstream" itself is a 6-character fragment of these keys, so it goes too: SPEC §9)
    assert "[redacted] saw key [redacted]" in everything
    change = ConfigChange.objects.get(actor="user:alice")
    assert change.diff["api_key"] == {"before": "[redacted]", "after": "[redacted]"}
    assert change.diff["headers.x-api-key"] == {"before": "[redacted]", "after": "[redacted]"}
    assert change.diff["base_url"] == {"before": "http://x", "after": "http://y"}
