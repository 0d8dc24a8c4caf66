"""Classification table: status first, then structured fields, then message text."""

from __future__ import annotations

import json
from email.utils import formatdate
from typing import Any

import pytest

from routing.engine.failures import (
    CREDENTIAL_CODES,
    DEFAULT_RETRY_CODES,
    DEFAULT_SWITCH_CODES,
    Failure,
    FailureCode,
    classify_error_object,
    classify_http,
    parse_retry_after,
    scrub,
)

F = FailureCode
CWE = F.CONTEXT_WINDOW_EXCEEDED
NOW = 1_700_000_000.0


def err(message: str = "", *, code: Any = None, type: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"message": message, "param": None}
    if code is not None:
        body["code"] = code
    if type is not None:
        body["type"] = type
    return {"error": body}


CLASSIFY: list[tuple[str, int, Any, dict[str, str], FailureCode, float | None]] = [
    # id, status, body, headers, code, retry_after_s
    ("429-seconds", 429, err("slow down"), {"retry-after": "7"}, F.RATE_LIMIT, 7.0),
    ("429-float-header-case", 429, None, {"Retry-After": "1.5"}, F.RATE_LIMIT, 1.5),
    (
        "429-http-date",
        429,
        None,
        {"retry-after": formatdate(NOW + 30, usegmt=True)},
        F.RATE_LIMIT,
        30.0,
    ),
    ("429-ms-wins", 429, None, {"Retry-After-Ms": "250", "retry-after": "9"}, F.RATE_LIMIT, 0.25),
    ("429-negative", 429, None, {"retry-after": "-3"}, F.RATE_LIMIT, 0.0),
    ("429-garbage-header", 429, None, {"retry-after": "soon"}, F.RATE_LIMIT, None),
    (
        "429-no-header",
        429,
        err("Rate limit reached", code="rate_limit_exceeded", type="requests"),
        {},
        F.RATE_LIMIT,
        None,
    ),
    (
        "429-insufficient-quota",
        429,
        err(
            "You exceeded your current quota", code="insufficient_quota", type="insufficient_quota"
        ),
        {"retry-after": "1"},
        F.QUOTA,
        1.0,
    ),
    ("400-billing", 400, err("billing", code="billing_hard_limit_reached"), {}, F.QUOTA, None),
    ("402", 402, err("Payment required"), {}, F.QUOTA, None),
    ("500", 500, err("boom", type="server_error"), {}, F.SERVER, None),
    ("502-empty", 502, b"", {}, F.SERVER, None),
    ("503-retry-after", 503, "Service Unavailable", {"retry-after": "5"}, F.SERVER, 5.0),
    (
        "529-overloaded",
        529,
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
        {},
        F.SERVER,
        None,
    ),
    ("500-garbage", 500, b"\xff\xfe<html>oops", {}, F.SERVER, None),
    ("404", 404, err("Not found"), {}, F.UNKNOWN_MODEL, None),
    ("401", 401, err("Incorrect API key provided"), {}, F.AUTH, None),
    ("400-invalid-api-key", 400, err("bad key", code="invalid_api_key"), {}, F.AUTH, None),
    ("403", 403, {"detail": "Forbidden"}, {}, F.FORBIDDEN, None),
    (
        "400-context-code",
        400,
        err("too long", code="context_length_exceeded", type="invalid_request_error"),
        {},
        CWE,
        None,
    ),
    (
        "400-context-text",
        400,
        err(
            "This model's maximum context length is 8192 tokens. However, "
            "your messages resulted in 9000 tokens.",
            type="invalid_request_error",
        ),
        {},
        CWE,
        None,
    ),
    (
        "400-prompt-too-long",
        400,
        {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": "prompt is too long: 210000 tokens > 200000",
            },
        },
        {},
        F.CONTEXT_WINDOW_EXCEEDED,
        None,
    ),
    (
        "400-context-window-text",
        400,
        {"message": "input exceeds the context window"},
        {},
        F.CONTEXT_WINDOW_EXCEEDED,
        None,
    ),
    (
        "422-too-many-tokens",
        422,
        {"detail": "Too many tokens in prompt"},
        {},
        F.CONTEXT_WINDOW_EXCEEDED,
        None,
    ),
    ("413-empty", 413, None, {}, F.CONTEXT_WINDOW_EXCEEDED, None),
    ("413-text", 413, "Request Entity Too Large", {}, F.CONTEXT_WINDOW_EXCEEDED, None),
    (
        "400-content-filter-code",
        400,
        err("filtered", code="content_filter"),
        {},
        F.CONTENT_FILTER,
        None,
    ),
    (
        "400-content-policy-type",
        400,
        err("no", type="content_policy_violation"),
        {},
        F.CONTENT_FILTER,
        None,
    ),
    (
        "400-safety-text",
        400,
        err("Your request was rejected as a result of our safety system."),
        {},
        F.CONTENT_FILTER,
        None,
    ),
    (
        "400-azure-content-management",
        400,
        err(
            "The response was filtered due to the prompt "
            "triggering Azure OpenAI's content management "
            "policy."
        ),
        {},
        F.CONTENT_FILTER,
        None,
    ),
    (
        "400-model-not-found-code",
        400,
        err("nope", code="model_not_found"),
        {},
        F.UNKNOWN_MODEL,
        None,
    ),
    (
        "400-model-does-not-exist",
        400,
        err("The model `gpt-9` does not exist or you do not have access to it."),
        {},
        F.UNKNOWN_MODEL,
        None,
    ),
    (
        "400-ollama-model-not-found",
        400,
        {"error": "model 'llama9' not found"},
        {},
        F.UNKNOWN_MODEL,
        None,
    ),
    (
        "422-model-text-is-bad-request",
        422,
        err("The model `x` does not exist"),
        {},
        F.BAD_REQUEST,
        None,
    ),
    (
        "400-plain-bad-request",
        400,
        err("Invalid type for 'messages[0].content'", type="invalid_request_error"),
        {},
        F.BAD_REQUEST,
        None,
    ),
    ("400-error-string", 400, {"error": "temperature must be <= 2"}, {}, F.BAD_REQUEST, None),
    (
        "422-detail-list",
        422,
        {"detail": [{"loc": ["body", "model"], "msg": "field required"}]},
        {},
        F.BAD_REQUEST,
        None,
    ),
    ("400-garbage-bytes", 400, b"\xff\x00<html>bad gateway-ish", {}, F.BAD_REQUEST, None),
    ("400-json-list", 400, "[1, 2]", {}, F.BAD_REQUEST, None),
    ("200-is-unknown", 200, {"choices": []}, {}, F.UNKNOWN, None),
    ("418-unknown", 418, "I'm a teapot", {}, F.UNKNOWN, None),
    ("409-fields-decide", 409, err("slow", code="rate_limit_exceeded"), {}, F.RATE_LIMIT, None),
]


@pytest.mark.parametrize(
    ("status", "body", "headers", "code", "retry_after"),
    [row[1:] for row in CLASSIFY],
    ids=[row[0] for row in CLASSIFY],
)
def test_classify_http(
    status: int, body: Any, headers: dict[str, str], code: FailureCode, retry_after: float | None
) -> None:
    failure = classify_http(status, body, headers, now=NOW)
    assert failure.code is code
    assert failure.status == status
    if retry_after is None:
        assert failure.retry_after_s is None
    else:
        assert failure.retry_after_s == pytest.approx(retry_after)


@pytest.mark.parametrize(
    ("status", "body", "message"),
    [
        (500, err("  upstream exploded  "), "upstream exploded"),
        (503, b"", "HTTP 503"),
        (502, None, "HTTP 502"),
        (400, {"error": "plain text"}, "plain text"),
        (400, {"message": "top-level"}, "top-level"),
        (403, {"detail": "nope"}, "nope"),
        (400, json.dumps(err("from bytes")).encode(), "from bytes"),
        (500, "x" * 900, "x" * 500),
        (500, "Bad Gateway\n", "Bad Gateway"),
    ],
)
def test_classify_http_message(status: int, body: Any, message: str) -> None:
    assert classify_http(status, body, {}, now=NOW).message == message


def test_retry_after_only_kept_for_429_and_5xx() -> None:
    assert classify_http(400, None, {"retry-after": "3"}, now=NOW).retry_after_s is None
    assert classify_http(429, None, {"retry-after": "3"}, now=NOW).retry_after_s == 3.0


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({}, None),
        ({"retry-after": "0"}, 0.0),
        ({"retry-after": " 12 "}, 12.0),
        ({"retry-after": "nan"}, None),
        ({"retry-after": "inf"}, None),
        ({"retry-after": ""}, None),
        ({"retry-after": formatdate(NOW - 60, usegmt=True)}, 0.0),  # date in the past
        ({"retry-after": formatdate(NOW + 90)}, 90.0),  # numeric zone "-0000"/"+0000"
        ({"retry-after-ms": "1500"}, 1.5),
        ({"retry-after-ms": "-5"}, 0.0),
        ({"retry-after-ms": "junk", "retry-after": "4"}, 4.0),  # unusable ms falls back
        ({"RETRY-AFTER": "2"}, 2.0),
    ],
)
def test_parse_retry_after(headers: dict[str, str], expected: float | None) -> None:
    got = parse_retry_after(headers, NOW)
    if expected is None:
        assert got is None
    else:
        assert got == pytest.approx(expected)


ERROR_OBJECTS = [
    (
        {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"},
        None,
        F.RATE_LIMIT,
        None,
    ),
    ({"type": "rate_limit_error", "message": "slow"}, None, F.RATE_LIMIT, None),
    ({"type": "overloaded_error", "message": "Overloaded"}, None, F.SERVER, None),
    ({"type": "server_error", "message": "oops"}, None, F.SERVER, None),
    ({"error": {"code": 502, "message": "Provider returned error"}}, None, F.SERVER, 502),
    ({"code": "429", "message": "busy"}, None, F.RATE_LIMIT, 429),
    ({"code": "context_length_exceeded", "message": "x"}, None, F.CONTEXT_WINDOW_EXCEEDED, None),
    (
        {"type": "invalid_request_error", "message": "maximum context length is 4096"},
        None,
        F.CONTEXT_WINDOW_EXCEEDED,
        None,
    ),
    ({"type": "invalid_request_error", "message": "bad parameter"}, None, F.BAD_REQUEST, None),
    ({"type": "authentication_error", "message": "x"}, None, F.AUTH, None),
    ({"code": "insufficient_quota", "message": "x"}, None, F.QUOTA, None),
    ({"message": "whatever"}, 429, F.RATE_LIMIT, 429),
    ({"message": "whatever"}, 503, F.SERVER, 503),
    ("stream died", None, F.UNKNOWN, None),
    ({}, None, F.UNKNOWN, None),
]


@pytest.mark.parametrize(("error", "status", "code", "out_status"), ERROR_OBJECTS)
def test_classify_error_object(
    error: Any, status: int | None, code: FailureCode, out_status: int | None
) -> None:
    failure = classify_error_object(error, status)
    assert failure.code is code
    assert failure.status == out_status
    assert failure.retry_after_s is None


def test_classify_error_object_messages() -> None:
    assert classify_error_object({"message": "Overloaded", "type": "x"}).message == "Overloaded"
    assert classify_error_object({}).message == "upstream error"
    assert classify_error_object({}, 500).message == "HTTP 500"


@pytest.mark.parametrize(
    ("text", "secrets", "expected"),
    [
        ("key sk-abc123 leaked", ["sk-abc123"], "key [redacted] leaked"),
        ("a sk-1 b", ["sk-1"], "a [redacted] b"),
        ("short abc stays", ["abc", ""], "short abc stays"),
        ("twice: tok1 tok1", ["tok1"], "twice: [redacted] [redacted]"),
        ("long secret-long", ["secret", "secret-long"], "long [redacted]"),
        ("nothing here", [], "nothing here"),
    ],
)
def test_scrub(text: str, secrets: list[str], expected: str) -> None:
    assert scrub(text, secrets) == expected


def test_default_code_sets() -> None:
    assert {F.EMPTY_RESPONSE, F.RATE_LIMIT, F.SERVER, F.TRANSPORT} == DEFAULT_RETRY_CODES
    assert set(FailureCode) - DEFAULT_SWITCH_CODES == {F.ABORTED, F.BAD_REQUEST, F.CONTENT_FILTER}
    assert {F.AUTH, F.QUOTA, F.FORBIDDEN} == CREDENTIAL_CODES
    assert all(code.value == code.name for code in FailureCode)
    assert len(FailureCode) == 16


def test_failure_is_frozen() -> None:
    failure = Failure(F.SERVER, "x")
    with pytest.raises(AttributeError):
        failure.code = F.AUTH  # type: ignore[misc]
