"""The call ledger's console fields (key id + name, front door, served-by-fallback, tokens)
and ``/api/v1/calls`` filters with keyset pagination, over real sockets."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import openai
import pytest

from routing.audit.call_query import CallFilters, FilterError, call_facts
from routing.audit.models import Call
from routing.gateway.events import AttemptRecord, CallRecord
from routing.models import ApiKey
from routing.services.api_keys import generate_key
from routing.simulator.script import Fail
from tests.audit.conftest import MESSAGES, RETRY_TWICE, Audit


def _calls(audit: Audit, **params: object) -> list[dict[str, object]]:
    response = audit.api.get("/api/v1/calls", params=params)
    assert response.status_code == 200, response.text
    return response.json()


def test_a_call_records_its_key_tokens_door_and_the_fallback_mark(audit: Audit) -> None:
    audit.h.configure(RETRY_TWICE)
    audit.h.upstream.script("a", Fail(503), Fail(503), Fail(503))
    audit.h.client().chat.completions.create(model="auto", messages=MESSAGES)  # fails over
    audit.h.client().chat.completions.create(model="other", messages=MESSAGES)  # first try
    audit.flush()
    key = ApiKey.objects.get(name="test")
    over, direct = Call.objects.order_by("id")
    assert (over.key_id, over.key_name, over.front_door) == (key.pk, "test", "chat")
    assert over.served_by_fallback is True and direct.served_by_fallback is False
    assert over.prompt_tokens is not None and over.completion_tokens is not None
    assert over.total_tokens == over.prompt_tokens + over.completion_tokens
    rows = {c["call_id"]: c for c in _calls(audit)}
    listed = rows[over.call_id]
    assert (listed["key_id"], listed["key_name"], listed["front_door"]) == (key.pk, "test", "chat")
    assert listed["served_by_fallback"] is True
    assert rows[direct.call_id]["served_by_fallback"] is False
    assert key.hashed not in str(rows) and audit.h.key not in str(rows)


def test_a_call_that_failed_everywhere_is_not_served_by_fallback(audit: Audit) -> None:
    audit.h.configure(RETRY_TWICE)
    audit.h.upstream.script("b", *[Fail(500)] * 6)
    with pytest.raises(openai.APIStatusError):
        audit.h.client().chat.completions.create(model="other", messages=MESSAGES)
    audit.flush()
    [call] = Call.objects.all()
    assert call.outcome == "failed" and call.served_by_fallback is False


def test_filters_combine_and_pages_follow_the_keyset(audit: Audit) -> None:
    audit.h.configure(RETRY_TWICE)
    _, other_secret = generate_key(name="second", kind="client")
    second = openai.OpenAI(base_url=audit.h.gateway.base_url, api_key=other_secret, max_retries=0)
    for _ in range(5):
        audit.h.client().chat.completions.create(model="other", messages=MESSAGES)
    audit.h.upstream.script("b", *[Fail(500)] * 6)
    with pytest.raises(openai.APIStatusError):
        second.chat.completions.create(model="other", messages=MESSAGES, user="sess-9")
    audit.h.upstream.script("a", Fail(503), Fail(503), Fail(503))
    second.chat.completions.create(model="auto", messages=MESSAGES)
    audit.flush()
    second_id = ApiKey.objects.get(name="second").pk

    mine = _calls(audit, key_id=second_id)
    assert [c["group"] for c in mine] == ["auto", "other"]
    failed = _calls(audit, key_id=second_id, outcome="failed")
    assert [(c["group"], c["session"], c["error_code"]) for c in failed] == [
        ("other", "sess-9", "ROUTES_EXHAUSTED")
    ]
    assert _calls(audit, session="sess-9") == failed
    by_code = _calls(audit, code="SERVER")  # an attempt's code matches too
    assert {c["group"] for c in by_code} == {"auto", "other"}
    tried_a = _calls(audit, target="p1/a")  # failed on p1/a, served by p2/b
    assert [c["served_by"] for c in tried_a] == ["p2/b"]
    assert [c["group"] for c in _calls(audit, served_by_fallback=True)] == ["auto"]
    assert _calls(audit, front_door="messages") == []

    all_ids = [c["call_id"] for c in _calls(audit)]
    assert len(all_ids) == 7
    seen: list[str] = []
    before = None
    pages = 0
    while True:
        params: dict[str, object] = {"limit": 3}
        if before is not None:
            params["before"] = before
        response = audit.api.get("/api/v1/calls", params=params)
        seen += [c["call_id"] for c in response.json()]
        pages += 1
        before = response.headers.get("x-switchyard-next-before")
        if before is None:
            break
    assert seen == all_ids and pages == 3  # 3 + 3 + 1, newest first, no repeats


def test_time_range_and_bad_filters(audit: Audit) -> None:
    audit.h.configure(RETRY_TWICE)
    audit.h.client().chat.completions.create(model="other", messages=MESSAGES)
    audit.flush()
    [call] = Call.objects.all()
    started = call.started_at
    inside = _calls(
        audit,
        since=(started - timedelta(seconds=1)).isoformat(),
        until=(started + timedelta(seconds=1)).isoformat(),
    )
    assert [c["call_id"] for c in inside] == [call.call_id]
    assert _calls(audit, since=(started + timedelta(seconds=1)).isoformat()) == []
    assert _calls(audit, outcome="") != []  # an empty filter is no filter
    # Any offset a client may write is read as its instant (PostgreSQL stores only ±16 h).
    far_east = (started - timedelta(seconds=1)).astimezone(timezone(timedelta(hours=23, minutes=3)))
    assert [c["call_id"] for c in _calls(audit, since=far_east.isoformat())] == [call.call_id]
    for params in (
        {"since": "9999-12-31T23:59:59-23:59"},  # beyond the last representable instant
        {"until": "0001-01-01T00:00:00+23:59"},
        {"outcome": "maybe"},
        {"front_door": "fax"},
        {"key_id": "x"},
        {"before": 0},
        {"since": started.isoformat(), "until": started.isoformat()},
    ):
        assert audit.api.get("/api/v1/calls", params=params).status_code == 422, params


def _record(**overrides: object) -> CallRecord:
    record = CallRecord(
        call_id="c1",
        group="auto",
        session="s1",
        stream=False,
        started_at=datetime(2026, 12, 1, 14, 5, tzinfo=UTC).timestamp(),
        outcome="ok",
        served_by="p2/b",
        key_id=7,
        attempts=[
            AttemptRecord(target="p1/a", try_number=1, ok=False, elapsed_ms=5, code="SERVER"),
            AttemptRecord(target="p2/b", try_number=1, ok=True, elapsed_ms=5),
        ],
    )
    for name, value in overrides.items():
        setattr(record, name, value)
    return record


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        (CallFilters(), True),
        (CallFilters(group="auto", key_id=7, outcome="ok"), True),
        (CallFilters(group="other"), False),
        (CallFilters(target="p1/a"), True),
        (CallFilters(target="p3/c"), False),
        (CallFilters(code="SERVER"), True),
        (CallFilters(code="RATE_LIMIT"), False),
        (CallFilters(session="s2"), False),
        (CallFilters(front_door="chat", fallback=True), True),
        (CallFilters(fallback=False), False),
        (CallFilters(since=datetime(2026, 12, 1, 14, 0, tzinfo=UTC)), True),
        (CallFilters(until=datetime(2026, 12, 1, 14, 5, tzinfo=UTC)), False),
    ],
)
def test_live_matching_agrees_with_the_filters(filters: CallFilters, expected: bool) -> None:
    assert filters.matches(call_facts(_record())) is expected


def test_filter_values_are_checked() -> None:
    with pytest.raises(FilterError) as caught:
        CallFilters(outcome="maybe")
    assert caught.value.field == "outcome"
    with pytest.raises(FilterError):
        CallFilters(since=datetime(2026, 1, 1))  # naive
    when = datetime(2026, 1, 1, tzinfo=UTC)
    with pytest.raises(FilterError) as caught:
        CallFilters(since=when, until=when)
    assert caught.value.field == "until"


def test_each_front_door_is_recorded_and_filterable(audit: Audit) -> None:
    import httpx

    audit.h.configure(RETRY_TWICE)
    headers = {"authorization": f"Bearer {audit.h.key}"}
    base = audit.h.gateway.url + "/v1"
    messages = httpx.post(
        base + "/messages",
        headers={**headers, "anthropic-version": "2023-06-01"},
        json={"model": "other", "max_tokens": 16, "messages": MESSAGES},
    )
    assert messages.status_code == 200, messages.text
    embeddings = httpx.post(
        base + "/embeddings", headers=headers, json={"model": "other", "input": "hi"}
    )
    assert embeddings.status_code == 200, embeddings.text
    audit.h.client().chat.completions.create(model="other", messages=MESSAGES)
    audit.flush()
    key = ApiKey.objects.get(name="test")
    doors = list(Call.objects.order_by("id").values_list("front_door", "key_id"))
    assert doors == [("messages", key.pk), ("embeddings", key.pk), ("chat", key.pk)]
    for door in ("messages", "embeddings", "chat"):
        assert [c["front_door"] for c in _calls(audit, front_door=door)] == [door]
