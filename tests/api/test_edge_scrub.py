"""Credentials in a query string never reach an access log line (issue 37 item 14); the
servers' own log lines are checked on real processes in tests/management/test_server_edge.py."""

from __future__ import annotations

import logging

import pytest

from routing.api.edge import ScrubQueryFilter, scrub_query


@pytest.mark.parametrize(
    ("target", "scrubbed"),
    [
        (
            "/v1beta/models/g:generateContent?key=AIzaSy123",
            "/v1beta/models/g:generateContent?key=[scrubbed]",
        ),
        (
            "/v1/models?x=1&api_key=sk-1&API-KEY=sk-2",
            "/v1/models?x=1&api_key=[scrubbed]&API-KEY=[scrubbed]",
        ),
        (
            "/cb?access_token=abc&token=def;secret=ghi",
            "/cb?access_token=[scrubbed]&token=[scrubbed];secret=[scrubbed]",
        ),
        ('GET /v1/models?key=sk-1 HTTP/1.1" 401', 'GET /v1/models?key=[scrubbed] HTTP/1.1" 401'),
        ("/v1/models?monkey=1&keys=2", "/v1/models?monkey=1&keys=2"),  # other parameters stay
        ("/v1/models", "/v1/models"),
    ],
)
def test_scrub_query_replaces_credential_values_only(target: str, scrubbed: str) -> None:
    assert scrub_query(target) == scrubbed


def test_the_filter_scrubs_uvicorns_access_record() -> None:
    record = logging.LogRecord(
        "uvicorn.access", logging.INFO, __file__, 1, '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5000", "GET", "/v1/models?key=sk-secret", "1.1", 401), None,
    )  # fmt: skip
    assert ScrubQueryFilter().filter(record)
    assert record.getMessage() == '127.0.0.1:5000 - "GET /v1/models?key=[scrubbed] HTTP/1.1" 401'
