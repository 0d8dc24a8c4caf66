"""Retention bounds audit records by age and by count: on demand (``prune_records``) and
automatically in the writer thread."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from routing.audit.models import Attempt, Call, ConfigChange, Fallback, HealthTransition
from routing.audit.retention import records_prune, retention_from_settings
from routing.audit.writer import AuditWriter
from tests.audit.conftest import clear_audit_tables

pytestmark = pytest.mark.django_db(transaction=True)
NOW = datetime(2030, 1, 31, tzinfo=UTC)


def seed(days_ago: list[int]) -> None:
    """One call (with two attempts), fallback, health and config row per age, oldest first."""
    clear_audit_tables()
    for n, age in enumerate(days_ago):
        at = NOW - timedelta(days=age)
        call = Call.objects.create(
            call_id=f"c{n}", group="auto", outcome="ok", started_at=at, elapsed_ms=1
        )
        for index in (1, 2):
            Attempt.objects.create(
                call=call, index=index, target="p1/a", try_number=index, ok=index == 2, elapsed_ms=1
            )
        Fallback.objects.create(
            at=at,
            call_id=call.call_id,
            group="auto",
            from_target="p1/a",
            reason="probe",
            code="SERVER",
        )
        HealthTransition.objects.create(at=at, kind="cooling", target="p1/a", provider="p1")
        ConfigChange.objects.create(
            at=at, actor="user:a", path="api", object_type="group", object_name="auto"
        )


def remaining() -> dict[str, list[str] | int]:
    return {
        "calls": sorted(Call.objects.values_list("call_id", flat=True)),
        "attempts": Attempt.objects.count(),
        "fallbacks": Fallback.objects.count(),
        "health": HealthTransition.objects.count(),
        "config_changes": ConfigChange.objects.count(),
    }


def test_prune_by_age() -> None:
    seed([40, 31, 29, 1])
    deleted = records_prune(max_age=timedelta(days=30), max_rows=None, now=NOW)
    assert deleted == {"calls": 2, "attempts": 4, "fallbacks": 2, "health": 2, "config_changes": 2}
    assert remaining() == {
        "calls": ["c2", "c3"],
        "attempts": 4,
        "fallbacks": 2,
        "health": 2,
        "config_changes": 2,
    }


def test_prune_by_count_keeps_the_newest() -> None:
    seed([5, 4, 3, 2, 1])
    deleted = records_prune(max_age=None, max_rows=2, now=NOW)
    assert deleted["calls"] == 3 and deleted["attempts"] == 6
    assert remaining() == {
        "calls": ["c3", "c4"],
        "attempts": 4,
        "fallbacks": 2,
        "health": 2,
        "config_changes": 2,
    }


def test_no_bounds_prunes_nothing() -> None:
    seed([400, 1])
    assert sum(records_prune(max_age=None, max_rows=None, now=NOW).values()) == 0
    assert remaining()["calls"] == ["c0", "c1"]


def test_the_command_applies_the_bounds_it_is_given() -> None:
    seed([3 * 365, 2, 1])
    Call.objects.filter(call_id="c2").update(started_at=timezone.now())
    out = StringIO()
    call_command("prune_records", "--max-rows", "2", "--days", "0", stdout=out)
    assert remaining()["calls"] == ["c1", "c2"]
    assert "1 calls, 2 attempts" in out.getvalue()


def test_the_command_uses_the_configured_retention(settings) -> None:  # type: ignore[no-untyped-def]
    settings.SWITCHYARD = {**settings.SWITCHYARD, "AUDIT_MAX_AGE_DAYS": 7, "AUDIT_MAX_ROWS": 0}
    assert retention_from_settings() == {"max_age": timedelta(days=7), "max_rows": None}
    seed([0, 0])
    Call.objects.filter(call_id="c0").update(started_at=timezone.now() - timedelta(days=8))
    Call.objects.filter(call_id="c1").update(started_at=timezone.now() - timedelta(days=6))
    call_command("prune_records", stdout=StringIO())
    assert remaining()["calls"] == ["c1"]


def test_the_writer_prunes_on_its_own(settings) -> None:  # type: ignore[no-untyped-def]
    settings.SWITCHYARD = {**settings.SWITCHYARD, "AUDIT_MAX_AGE_DAYS": 0, "AUDIT_MAX_ROWS": 1}
    seed([3, 2, 1])
    writer = AuditWriter(prune_every_s=0.0, secrets=lambda: [], interval_s=0.01)
    writer.start()
    writer.offer(object())  # a batch to write; the thread prunes after each round
    writer.stop(10)  # returns once that round, pruning included, is over
    assert remaining() == {
        "calls": ["c2"],
        "attempts": 2,
        "fallbacks": 1,
        "health": 1,
        "config_changes": 1,
    }
