"""JSON nested deeper than the gateway can write (orjson parses 1,024 levels, writes 254)
is the client's error: a 400 in the door's own shape, at every door and on the management
API — never a 500 with two ERROR tracebacks, as a body of 255–1,023 levels used to get."""

from __future__ import annotations

import logging

import httpx
import pytest

from routing.api.pipeline import JSON_DEPTH_MAX
from routing.services.api_keys import generate_key
from tests.conftest import TWO_ROUTES, Harness

HI = '[{"role": "user", "content": "hi"}]'


def deep(levels: int) -> str:
    return "[" * levels + "]" * levels


# Each door's body, with a value nested DEEP levels where the door keeps it.
DOORS = {
    "/chat/completions": '{"model": "auto", "messages": HI, "metadata": {"x": DEEP}}',
    "/messages": '{"model": "auto", "max_tokens": 5, "messages": HI, "tools": [{"name": "t", '
    '"input_schema": {"type": "object", "properties": {"x": {"enum": DEEP}}}}]}',
    "/messages/count_tokens": '{"model": "auto", "messages": HI, "system": DEEP}',
    "/responses": '{"model": "auto", "input": HI, "tools": [{"type": "function", "name": "t", '
    '"parameters": {"type": "object", "properties": {"x": {"enum": DEEP}}}}]}',
    "/responses/compact": '{"model": "auto", "input": HI, "metadata": DEEP}',
    "/embeddings": '{"model": "auto", "input": "hi", "user": DEEP}',
}
ANTHROPIC = {"/messages", "/messages/count_tokens"}


@pytest.mark.parametrize("levels", [JSON_DEPTH_MAX + 1, 300, 1000])
@pytest.mark.parametrize("path", list(DOORS))
def test_too_deep_is_a_400_in_the_doors_shape(
    harness: Harness, caplog: pytest.LogCaptureFixture, path: str, levels: int
) -> None:
    harness.configure(TWO_ROUTES)
    body = DOORS[path].replace("HI", HI).replace("DEEP", deep(levels))
    caplog.set_level(logging.INFO)
    reply = httpx.post(
        harness.gateway.base_url + path,
        content=body,
        headers={"authorization": f"Bearer {harness.key}", "content-type": "application/json"},
        timeout=30,
    )
    assert reply.status_code == 400, reply.text
    answer = reply.json()
    if path in ANTHROPIC:
        assert answer["type"] == "error"
        assert answer["error"]["type"] == "invalid_request_error"
        assert "nested too deeply" in answer["error"]["message"]
    else:
        assert set(answer["error"]) == {"message", "type", "code", "param"}
        assert answer["error"]["code"] == "invalid_json"
        assert "nested too deeply" in answer["error"]["message"]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert harness.upstream.count() == 0


def test_as_deep_as_can_be_written_is_served(harness: Harness) -> None:
    harness.configure(TWO_ROUTES)
    body = DOORS["/chat/completions"].replace("HI", HI).replace("DEEP", deep(JSON_DEPTH_MAX - 2))
    reply = httpx.post(
        harness.gateway.base_url + "/chat/completions",
        content=body,
        headers={"authorization": f"Bearer {harness.key}", "content-type": "application/json"},
        timeout=30,
    )
    assert reply.status_code == 200, reply.text


@pytest.mark.parametrize("levels", [JSON_DEPTH_MAX + 1, 1000])
@pytest.mark.parametrize(
    "path",
    ["/groups", "/route/explain", "/keys"],
)
def test_too_deep_on_the_management_api(
    harness: Harness, caplog: pytest.LogCaptureFixture, path: str, levels: int
) -> None:
    harness.configure(TWO_ROUTES)
    _, admin = generate_key(name="ops", kind="admin")
    caplog.set_level(logging.INFO)
    reply = httpx.post(
        harness.gateway.url + "/api/v1" + path,
        content='{"name": "g", "model": "auto", "headers": {"x": DEEP}}'.replace(
            "DEEP", deep(levels)
        ),
        headers={"authorization": f"Bearer {admin}", "content-type": "application/json"},
        timeout=30,
    )
    assert 400 <= reply.status_code < 500, reply.text
    assert "nested too deeply" in reply.text
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
