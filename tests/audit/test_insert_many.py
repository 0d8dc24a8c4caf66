"""The audit writer's INSERT parameters are Django's own field preparation, whether a value
takes the plain path (read straight off the row) or Django's (``routing.audit.rows``)."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection, models

from routing.audit.models import Attempt, Call
from routing.audit.rows import Rows, _call_rows, _Cleaner, _columns, rows_write
from routing.engine.plan import SwitchReason
from routing.gateway.events import AttemptRecord, CallOutcome, CallRecord

pytestmark = pytest.mark.django_db(transaction=True)


def _records() -> list[CallRecord]:
    """Rows with every kind of value a field gets: text, enums, None, ints, floats, bools,
    a time, a foreign key, and an int where a float is stored."""
    failover = CallRecord(
        call_id="c-1", group="auto", session="s", started_at=1_764_000_000.25, stream=True,
        served_by="p/b", attempts=[
            AttemptRecord("p/a", 1, False, 3, code="SERVER", status=503, message="boom",
                          switched=True, reason=SwitchReason.RETRY_EXHAUSTED, switched_to="p/b"),
            AttemptRecord("p/b", 1, True, 2.5, rewrites=("max_tokens",)),
        ],
        usage={"prompt_tokens": 12, "completion_tokens": 9, "total_tokens": 21},
        ttft_ms=9.5, key_name="ci", key_id=7, trace_id="ab" * 16, cost=3,
    )  # fmt: skip
    failed = CallRecord(
        call_id="c-2", group="auto", session=None, started_at=1_764_000_001.0, stream=False,
        attempts=[], outcome=CallOutcome.FAILED, error_code="NO_TARGET", http_status=503,
        elapsed_ms=0,
    )  # fmt: skip
    return [failover, failed]


def _django_params(model: type[models.Model], obj: models.Model) -> tuple[Any, ...]:
    fields = [f for f in model._meta.concrete_fields if not f.primary_key]
    return tuple(f.get_db_prep_save(f.pre_save(obj, True), connection) for f in fields)


def test_the_parameters_are_django_s_own() -> None:
    rows = Rows()
    for record in _records():
        _call_rows(record, _Cleaner(["secret"]), rows)
    plain_taken = 0
    for model, objs in ((Call, rows.calls), (Attempt, rows.attempts)):
        columns = _columns(model, connection)
        for obj in objs:
            ours = tuple(column.value(obj, connection) for column in columns)
            assert ours == _django_params(model, obj)
            assert [type(v) for v in ours] == [type(v) for v in _django_params(model, obj)]
            plain_taken += sum(1 for c in columns if c.plain)
    assert plain_taken > 0  # the plain path is the one taken for most fields
    # A time, an enum and a foreign key always go through Django's preparation.
    by_name = {c.field.name: c for c in _columns(Call, connection) + _columns(Attempt, connection)}
    assert not by_name["started_at"].plain and not by_name["call"].plain


def test_written_rows_read_back_as_recorded() -> None:
    rows = Rows()
    for record in _records():
        _call_rows(record, _Cleaner([]), rows)
    rows_write(rows)
    first = Call.objects.get(call_id="c-1")
    assert (first.stream, first.served_by_fallback, first.key_id, first.ttft_ms) == (
        True,
        True,
        7,
        9.5,
    )
    assert first.started_at.timestamp() == 1_764_000_000.25
    assert first.outcome == "ok" and first.trace_id == "ab" * 16
    second = Call.objects.get(call_id="c-2")
    assert (second.session, second.elapsed_ms, second.http_status, second.outcome) == (
        "",
        0.0,
        503,
        "failed",
    )
    attempts = list(Attempt.objects.filter(call_id="c-1").order_by("index"))
    assert [(a.target, a.ok, a.status, a.elapsed_ms, a.switched) for a in attempts] == [
        ("p/a", False, 503, 3.0, True),
        ("p/b", True, None, 2.5, False),
    ]
    assert attempts[0].reason == SwitchReason.RETRY_EXHAUSTED.value
    assert attempts[1].rewrites == "max_tokens"
