"""Vertex AI's URLs, bodies and error classification (``routing.platforms.vertex``): SPEC §19's
table, Google's error shapes (plain and inside a list) and Claude's own passed through."""

from __future__ import annotations

import json

import orjson
import pytest

from routing.engine.failures import FailureCode
from routing.platforms import vertex

BASE = "https://us-east5-aiplatform.googleapis.com/v1/projects/my-proj/locations/us-east5"


@pytest.mark.parametrize(
    ("region", "expected"),
    [
        ("us-east5", BASE),
        ("global", "https://aiplatform.googleapis.com/v1/projects/my-proj/locations/global"),
        ("eu", "https://aiplatform.eu.rep.googleapis.com/v1/projects/my-proj/locations/eu"),
        (
            "europe-west4",
            "https://europe-west4-aiplatform.googleapis.com/v1/projects/my-proj/locations/europe-west4",
        ),
    ],
)
def test_the_base_follows_the_region(region: str, expected: str) -> None:
    assert vertex.vertex_base("my-proj", region) == expected


def test_a_base_url_replaces_the_host_and_keeps_the_project_path() -> None:
    assert (
        vertex.vertex_base("my-proj", "us-east5", "http://127.0.0.1:8080/")
        == "http://127.0.0.1:8080/v1/projects/my-proj/locations/us-east5"
    )
    assert (
        vertex.vertex_base("my-proj", "us-east5", "https://psc.example/v1")
        == "https://psc.example/v1/projects/my-proj/locations/us-east5"
    )
    full = "https://proxy.example/v1/projects/other/locations/global"
    assert vertex.vertex_base("my-proj", "us-east5", full) == full


def test_model_urls_for_both_publishers() -> None:
    claude = "claude-sonnet-4-5@20250929"
    assert (
        vertex.model_url(BASE, "anthropic", claude, False)
        == f"{BASE}/publishers/anthropic/models/{claude}:rawPredict"
    )
    assert vertex.model_url(BASE, "anthropic", claude, True).endswith(
        "/publishers/anthropic/models/claude-sonnet-4-5@20250929:streamRawPredict"
    )
    assert (
        vertex.model_url(BASE, "gemini", "gemini-2.5-pro", False)
        == f"{BASE}/publishers/google/models/gemini-2.5-pro:generateContent"
    )
    assert (
        vertex.model_url(BASE, "gemini", "models/gemini-2.5-pro", True)
        == f"{BASE}/publishers/google/models/gemini-2.5-pro:streamGenerateContent?alt=sse"
    )
    assert vertex.model_url(BASE, "anthropic", "a/b", False).endswith("/models/a%2Fb:rawPredict")
    assert vertex.count_tokens_url(BASE) == (
        f"{BASE}/publishers/anthropic/models/count-tokens:rawPredict"
    )


def test_the_messages_body_on_vertex() -> None:
    body = orjson.dumps({"model": "claude-x", "max_tokens": 5, "stream": True, "messages": []})
    sent = orjson.loads(vertex.anthropic_body(body))
    assert sent == {
        "max_tokens": 5,
        "stream": True,
        "messages": [],
        "anthropic_version": "vertex-2023-10-16",
    }
    counted = orjson.loads(vertex.anthropic_body(body, count_tokens=True))
    assert counted["model"] == "claude-x" and counted["anthropic_version"] == "vertex-2023-10-16"


@pytest.mark.parametrize(
    ("region", "ok"),
    [
        ("us-east5", True),
        ("global", True),
        ("eu", True),
        ("europe-west4", True),
        ("us east", False),
        ("US-EAST5", False),
        ("moon", False),
        ("", False),
    ],
)
def test_what_a_region_is(region: str, ok: bool) -> None:
    assert bool(vertex.REGION.fullmatch(region)) is ok


def _google(status: int, name: str, message: str, **extra: object) -> bytes:
    return json.dumps(
        {"error": {"code": status, "message": message, "status": name, **extra}}
    ).encode()


# SPEC §19's table, as Vertex sends it: Google's error object, alone or (from its streaming
# endpoints) as the first element of a JSON list. The object alone is the engine's
# (tests/engine/test_google_failures.py); here, what the platform adds.
SECTION_19 = [
    (
        429,
        "RESOURCE_EXHAUSTED",
        "Quota exceeded for aiplatform.googleapis.com/online_prediction_requests_per_base_model with base model: anthropic-claude-sonnet-4-5.",
        FailureCode.RATE_LIMIT,
    ),
    (
        429,
        "RESOURCE_EXHAUSTED",
        "The billing account's prepayment credits are depleted.",
        FailureCode.QUOTA,
    ),
    (503, "UNAVAILABLE", "The service is currently unavailable.", FailureCode.SERVER),
    (
        403,
        "PERMISSION_DENIED",
        "Permission 'aiplatform.endpoints.predict' denied.",
        FailureCode.AUTH,
    ),
    (401, "UNAUTHENTICATED", "Request had invalid authentication credentials.", FailureCode.AUTH),
]


@pytest.mark.parametrize(("status", "name", "message", "code"), SECTION_19)
def test_a_listed_google_error_is_classified(
    status: int, name: str, message: str, code: FailureCode
) -> None:
    listed = b"[" + _google(status, name, message) + b"]"
    failure = vertex.classify(status, listed, {}, now=0.0)
    assert failure.code is code and failure.message == message


@pytest.mark.parametrize(
    ("status", "body", "code"),
    [
        (
            529,
            b'{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}',
            FailureCode.SERVER,
        ),
        (
            400,
            b'{"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too long: 210000 tokens > 200000 maximum"}}',
            FailureCode.CONTEXT_WINDOW_EXCEEDED,
        ),
        (500, b"upstream connect error", FailureCode.SERVER),
        (400, b"[]", FailureCode.BAD_REQUEST),
    ],
)
def test_claudes_own_errors_pass_through_vertex(
    status: int, body: bytes, code: FailureCode
) -> None:
    assert vertex.classify(status, body, {}, now=0.0).code is code


def test_a_retry_delay_rides_on_a_rate_limit() -> None:
    body = _google(
        429,
        "RESOURCE_EXHAUSTED",
        "Resource exhausted.",
        details=[{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "7s"}],
    )
    failure = vertex.classify(429, b"[" + body + b"]", {}, now=0.0)
    assert failure.code is FailureCode.RATE_LIMIT and failure.retry_after_s == 7.0


def test_an_echoed_access_token_is_cut_from_the_message() -> None:
    body = _google(401, "UNAUTHENTICATED", "bad credential (presented: ya29.a0AfH6SMB-x_y.z)")
    failure = vertex.classify(401, body, {}, now=0.0)
    assert failure.code is FailureCode.AUTH
    assert "ya29" not in failure.message and "[token]" in failure.message
