"""Issue 10 item 9: every status a management API operation answers is one its OpenAPI
document lists. The test walks the served schema, so an operation added later is held to
it too, and calls each operation the ways a script gets wrong: without credentials, with
a client key, with query and path parameters of the wrong type, and without a body or
``If-Match``. Any answer whose status the operation does not document fails the test."""

from __future__ import annotations

import re
from typing import Any

import pytest

from routing.services.api_keys import generate_key
from tests.api.conftest import Api

METHODS = ("get", "post", "put", "patch", "delete")
# A value of the wrong type (or shape) for each kind of query parameter.
WRONG_QUERY = {
    "integer": "not-a-number",
    "boolean": "perhaps",
    "date-time": "yesterday-ish",
    "enum": "no-such-value",
    "pattern": "bad prefix!",
}


def _operations(api: Api) -> list[tuple[str, str, dict[str, Any]]]:
    schema = api.get("/openapi.json").json()
    return [
        (method.upper(), path, operation)
        for path, item in schema["paths"].items()
        if path.startswith("/api/v1/")
        for method, operation in item.items()
        if method in METHODS
    ]


def _concrete(path: str, **override: str) -> str:
    """The schema's path template with plausible names and ids (or ``override``s)."""
    values = {"name": "p1" if "/providers/" in path else "auto", "target_id": "1", "key_id": "1"}
    values.update(override)
    for name, value in values.items():
        path = path.replace("{" + name + "}", value)
    return path.removeprefix("/api/v1")


def _kind(schema: dict[str, Any]) -> str | None:
    """The wrong-value kind for a query parameter's schema, if it has a type to violate."""
    options = schema.get("anyOf", [schema])
    for option in options:
        if "enum" in option:
            return "enum"
        if option.get("format") == "date-time":
            return "date-time"
        if "pattern" in option:
            return "pattern"
        if option.get("type") in ("integer", "boolean"):
            return str(option["type"])
    return None


def _violating(schema: dict[str, Any]) -> str:
    """A query value (URL-encoded) that the parameter's documented pattern refuses."""
    patterns = [o["pattern"] for o in schema.get("anyOf", [schema]) if "pattern" in o]
    for raw, value in (("bad prefix!", "bad prefix!"), ("a%00b", "a\x00b")):
        if not any(re.search(pattern, value) for pattern in patterns):
            return raw
    raise AssertionError(f"no wrong value for the patterns {patterns}")


@pytest.fixture
def seeded(api: Api) -> Api:
    api.provider("p1", models=["a"])
    api.group("auto")
    return api


def test_every_status_an_operation_answers_is_documented(seeded: Api) -> None:
    api = seeded
    _, client_key = generate_key(name="app", kind="client")
    operations = _operations(api)
    assert len(operations) >= 30  # the walk really covers the management API
    undocumented: list[str] = []
    seen: set[tuple[str, int]] = set()

    def check(method: str, template: str, operation: dict[str, Any], response: Any) -> None:
        status = response.status_code
        seen.add((template, status))
        assert response["content-type"].startswith("application/json"), (method, template)
        if str(status) not in operation["responses"]:
            body = response.content[:200].decode(errors="replace")
            undocumented.append(f"{method} {template} answered {status}: {body}")

    for method, template, operation in operations:
        path = _concrete(template)
        # no credentials, then a client key: 401 and 403 everywhere
        anonymous = api.call(method, path, key="")
        assert anonymous.status_code == 401, (method, template)
        check(method, template, operation, anonymous)
        wrong_key = api.call(method, path, key=client_key)
        assert wrong_key.status_code == 403, (method, template)
        check(method, template, operation, wrong_key)
        # no body and no If-Match (what a first try from a script looks like)
        if method != "GET":
            check(method, template, operation, api.call(method, path))
        # each query parameter of the wrong type: a 422
        for parameter in operation.get("parameters", []):
            kind = _kind(parameter.get("schema", {}))
            if parameter["in"] == "query" and kind is not None:
                wrong = _violating(parameter["schema"]) if kind == "pattern" else WRONG_QUERY[kind]
                bad = api.call(method, f"{path}?{parameter['name']}={wrong}")
                assert bad.status_code == 422, (method, template, parameter["name"])
                check(method, template, operation, bad)
            if parameter["in"] == "path" and kind == "integer":
                wrong_id = _concrete(template, **{parameter["name"]: "1.5"})
                check(method, template, operation, api.call(method, wrong_id))

    assert undocumented == []
    assert ("/api/v1/calls", 422) in seen and ("/api/v1/route/explain", 401) in seen
