"""Google's error shape (Gemini API, Vertex) classified into the taxonomy (SPEC §19)."""

from __future__ import annotations

from typing import Any

import pytest

from routing.engine.failures import FailureCode as F
from routing.engine.failures import classify_error_object, classify_http


def google(
    code: int, status: str, message: str, details: list[Any] | None = None
) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message, "status": status}
    if details is not None:
        error["details"] = details
    return {"error": error}


RETRY = {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "17s"}
KEY = {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID"}


@pytest.mark.parametrize(
    ("status", "body", "code"),
    [
        (
            429,
            google(429, "RESOURCE_EXHAUSTED", "Resource has been exhausted (e.g. check quota)."),
            F.RATE_LIMIT,
        ),
        (
            429,
            google(
                429,
                "RESOURCE_EXHAUSTED",
                "You exceeded your current quota, please check your plan and billing details.",
                [RETRY],
            ),
            F.RATE_LIMIT,
        ),
        (
            429,
            google(
                429,
                "RESOURCE_EXHAUSTED",
                "Your prepayment credits are depleted. Please go to AI Studio to manage your billing.",
            ),
            F.QUOTA,
        ),
        (
            503,
            google(503, "UNAVAILABLE", "The model is overloaded. Please try again later."),
            F.SERVER,
        ),
        (500, google(500, "INTERNAL", "An internal error has occurred."), F.SERVER),
        (
            403,
            google(403, "PERMISSION_DENIED", "Method doesn't allow unregistered callers."),
            F.AUTH,
        ),
        (
            401,
            google(401, "UNAUTHENTICATED", "Request had invalid authentication credentials."),
            F.AUTH,
        ),
        (
            400,
            google(
                400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.", [KEY]
            ),
            F.AUTH,
        ),
        (
            400,
            google(
                400,
                "INVALID_ARGUMENT",
                "* GenerateContentRequest.contents: contents is not specified",
            ),
            F.BAD_REQUEST,
        ),
        (
            400,
            google(
                400,
                "INVALID_ARGUMENT",
                "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).",
            ),
            F.CONTEXT_WINDOW_EXCEEDED,
        ),
        (
            404,
            google(404, "NOT_FOUND", "models/gemini-9 is not found for API version v1beta"),
            F.UNKNOWN_MODEL,
        ),
        (
            400,
            google(400, "FAILED_PRECONDITION", "User location is not supported for the API use."),
            F.FORBIDDEN,
        ),
    ],
)
def test_google_errors_by_status_name_and_details(
    status: int, body: dict[str, Any], code: F
) -> None:
    failure = classify_http(status, body, {}, now=0.0)
    assert failure.code is code
    assert failure.message == body["error"]["message"]


def test_retry_info_is_the_wait_when_no_header_says_one() -> None:
    body = google(
        429,
        "RESOURCE_EXHAUSTED",
        "Quota exceeded for metric: generate_content_free_tier_requests",
        [RETRY],
    )
    assert classify_http(429, body, {}, now=0.0).retry_after_s == 17.0
    assert classify_http(429, body, {"retry-after": "3"}, now=0.0).retry_after_s == 3.0


def test_a_google_error_inside_a_stream() -> None:
    failure = classify_error_object(google(503, "UNAVAILABLE", "overloaded"))
    assert failure.code is F.SERVER and failure.status == 503


def test_a_status_word_that_is_not_googles_leaves_the_old_rules() -> None:
    body = {"error": {"message": "denied", "type": "permission_error", "status": "denied"}}
    assert classify_http(403, body, {}, now=0.0).code is F.FORBIDDEN
