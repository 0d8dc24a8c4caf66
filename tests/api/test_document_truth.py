"""The API document tells the truth (issue 23 item 6): each finding of schemathesis's run
against ``/api/v1/openapi.json`` with an admin key, pinned on its own so that a regression
names itself (``test_schemathesis.py`` runs the phases over everything)."""

from __future__ import annotations

import re
from typing import Any

import httpx
from django.test import Client

from tests.api.conftest import Api
from tests.conftest import Harness


def _document(key: str) -> dict[str, Any]:
    schema: dict[str, Any] = (
        Client().get("/api/v1/openapi.json", HTTP_AUTHORIZATION=f"Bearer {key}").json()
    )
    return schema


def _body(schema: dict[str, Any], path: str, method: str) -> dict[str, Any]:
    body: dict[str, Any] = schema["paths"][path][method]["requestBody"]["content"][
        "application/json"
    ]["schema"]
    return body


def test_the_document_states_what_the_validators_check(api: Api) -> None:
    api.provider("p1", models=["a", "b"])
    schema = _document(api.key)
    group = _body(schema, "/api/v1/groups", "post")["properties"]
    assert "" not in group["algorithm"]["enum"] and "priority" in group["algorithm"]["enum"]
    assert group["switch_codes"]["minItems"] == 1 and group["switch_codes"]["uniqueItems"]
    assert group["retry"]["properties"]["retry_codes"]["minItems"] == 1
    target = group["targets"]["items"]  # names no provider of this installation
    assert "enum" not in target["properties"]["provider"]
    assert "enum" not in target["properties"]["model"]
    provider = _body(schema, "/api/v1/providers", "post")["properties"]
    url = re.compile(provider["base_url"]["pattern"])
    assert url.match("https://api.example.com/v1") and url.match("http://127.0.0.1:9100/v1")
    assert not url.match("not a url") and not url.match("ftp://x.test")
    assert url.match("")  # the platform's own endpoint; direct refuses it (next test)


def test_the_bodies_the_document_refuses_are_refused(api: Api) -> None:
    api.provider("p1", models=["a"])
    target = [{"provider": "p1", "model": "a"}]
    for body in (
        {"name": "g", "targets": target, "algorithm": ""},
        {"name": "g", "targets": target, "switch_codes": []},
        {"name": "g", "targets": [{"provider": "nope", "model": "a"}]},
    ):
        assert api.post("/groups", body).status_code == 422, body
    assert api.post("/providers", {"name": "p2", "base_url": "x"}).status_code == 422


def test_if_match_is_documented_as_required_and_its_absence_as_428(api: Api) -> None:
    schema = _document(api.key)
    patch = schema["paths"]["/api/v1/groups/{name}"]["patch"]
    [if_match] = [p for p in patch["parameters"] if p["name"] == "If-Match"]
    assert if_match["required"] is True
    assert re.match(if_match["schema"]["pattern"], 'W/"3"')
    assert "428" in patch["responses"]
    api.group("auto", targets=[{"provider": api.provider("p1")["name"], "model": "a"}])
    assert api.patch("/groups/auto", {"commit": "complete"}).status_code == 428


def test_the_messages_door_documents_its_own_error_shape(api: Api, harness: Harness) -> None:
    schema = _document(api.key)
    forbidden = schema["paths"]["/v1/messages"]["post"]["responses"]["403"]
    ref = forbidden["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]
    documented = schema["components"]["schemas"][ref]
    assert documented["required"] == ["type", "error"]
    with httpx.Client(base_url=harness.gateway.url) as web:
        answer = web.post("/v1/messages", json={"model": "auto"}, headers={"x-api-key": "wrong"})
    assert answer.status_code == 401
    assert set(answer.json()) == {"type", "error"} and "code" not in answer.json()["error"]
    assert "403" in schema["paths"]["/v1/models"]["get"]["responses"]  # admin keys


def test_a_method_the_doors_do_not_take_is_a_405_allowing_post_only(harness: Harness) -> None:
    with httpx.Client(base_url=harness.gateway.url) as web:
        for path in ("/v1/chat/completions", "/v1/messages", "/v1/responses", "/v1/embeddings"):
            answer = web.options(path)
            assert answer.status_code == 405 and answer.headers["allow"] == "POST", path


def test_since_takes_a_date_and_time_not_a_number(api: Api) -> None:
    for path in ("/events", "/calls"):
        assert api.get(f"{path}?since=0.5").status_code == 422, path
        assert api.get(f"{path}?since=2026-12-01T00:00:00Z").status_code == 200, path
        assert api.get(f"{path}?since=").status_code == 200, path  # an empty filter


def test_a_whole_number_written_with_a_fraction_is_the_number(api: Api) -> None:
    """JSON Schema's ``integer`` is any number without a fraction, ``5.0`` included."""
    response = api.post("/providers", {"name": "p1", "base_url": "http://127.0.0.1:9/v1"})
    assert response.status_code == 201
    body = {"name": "auto", "targets": [{"provider": "p1", "model": "a", "weight": 3.0}]}
    created = api.post("/groups", body)
    assert created.status_code == 201, created.content
    assert created.json()["targets"][0]["weight"] == 3
    fraction = {"name": "g2", "targets": [{"provider": "p1", "model": "a", "weight": 2.5}]}
    assert api.post("/groups", fraction).status_code == 422
