"""The audit writer on its own: batching, bounded queue, failures, scrubbing, and the
mapping of events to rows. Each test builds its own writer (not the process one)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator

import pytest

from routing.audit.models import Attempt, Call, Fallback, HealthTransition
from routing.audit.rows import Rows, rows_write
from routing.audit.writer import AuditWriter
from routing.engine.health import EventKind, HealthEvent
from routing.gateway.events import AttemptRecord, CallRecord, EventHub, FallbackEvent, RetryEvent
from tests.audit.conftest import clear_audit_tables

pytestmark = pytest.mark.django_db(transaction=True)
NOW = 1_750_000_000.0


def call(call_id: str, *, attempts: int = 1, message: str = "") -> CallRecord:
    record = CallRecord(
        call_id=call_id,
        group="auto",
        session="s-1",
        stream=False,
        started_at=NOW,
        outcome="ok",
        served_by="p1/a",
        elapsed_ms=12.5,
        ttft_ms=10.0,
        overhead_ms=0.4,
        usage={"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7},
        # what ``CallState.finish`` sums over the attempts; the ledger's columns record it
        billed={"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7},
    )
    for n in range(1, attempts + 1):
        last = n == attempts
        record.attempts.append(
            AttemptRecord(
                target="p1/a",
                try_number=n,
                ok=last,
                elapsed_ms=1.0,
                code=None if last else "SERVER",
                status=None if last else 500,
                message="" if last else message,
                will_retry=not last,
            )
        )
    return record


@pytest.fixture
def make_writer() -> Iterator[type[AuditWriter]]:
    clear_audit_tables()
    writers: list[AuditWriter] = []

    def build(**options: object) -> AuditWriter:
        options.setdefault("prune_every_s", None)
        options.setdefault("secrets", lambda: [])
        writer = AuditWriter(**options)  # type: ignore[arg-type]
        writer.start()
        writers.append(writer)
        return writer

    yield build  # type: ignore[misc]
    for writer in writers:
        writer.stop(10)


def test_events_become_rows(make_writer) -> None:  # type: ignore[no-untyped-def]
    writer = make_writer()
    writer.offer(call("c1", attempts=3, message="boom"))
    writer.offer(
        FallbackEvent(
            call_id="c1",
            group="auto",
            from_target="p1/a",
            to_target=None,
            reason="probe",
            code="SERVER",
            status=500,
            message="boom",
            cooldown_s=20.0,
            at=NOW,
        )
    )
    writer.offer(
        HealthEvent(
            EventKind.COOLING, "p1/a", "p1", NOW, until=NOW + 20, code="SERVER", cooldown_s=20.0
        )
    )
    writer.offer(
        HealthEvent(
            EventKind.RESET, "p1/a", "p1", NOW, message="reset by user:alice", actor="user:alice"
        )
    )
    writer.offer(
        HealthEvent(
            EventKind.ENABLED,
            None,
            "p1",
            NOW,
            code="AUTH",
            message="enabled by key:ops",
            actor="key:ops",
        )
    )
    writer.offer(
        RetryEvent(
            call_id="c1",
            group="auto",
            target="p1/a",
            try_number=1,
            code="SERVER",
            status=500,
            delay_s=0.5,
            message="boom",
            at=NOW,
        )
    )
    writer.offer(object())  # unknown things are ignored, not fatal
    assert writer.flush(10)

    [row] = Call.objects.all()
    assert (row.call_id, row.session, row.attempt_count, row.total_tokens, row.prompt_tokens) == (
        "c1",
        "s-1",
        3,
        7,
        3,
    )
    assert row.started_at.timestamp() == NOW
    assert [
        (a.index, a.try_number, a.ok, a.code, a.will_retry)
        for a in Attempt.objects.order_by("index")
    ] == [
        (1, 1, False, "SERVER", True),
        (2, 2, False, "SERVER", True),
        (3, 3, True, "", False),
    ]
    [fallback] = Fallback.objects.all()
    assert (fallback.to_target, fallback.reason, fallback.cooldown_s) == ("", "probe", 20.0)
    health = {h.kind: h for h in HealthTransition.objects.all()}
    assert set(health) == {"cooling", "reset", "enabled"}
    assert health["cooling"].until is not None and health["cooling"].until.timestamp() == NOW + 20
    assert health["reset"].actor == "user:alice"
    assert (health["enabled"].actor, health["enabled"].target, health["enabled"].provider) == (
        "key:ops",
        "",
        "p1",
    )
    stats = writer.stats()
    assert (stats.accepted, stats.written, stats.failed, stats.dropped, stats.pending) == (
        7,
        7,
        0,
        0,
        0,
    )


def test_batches_hold_at_most_batch_size_records(make_writer) -> None:  # type: ignore[no-untyped-def]
    gate = threading.Event()
    sizes: list[int] = []

    def record_size(rows: Rows) -> None:
        gate.wait(10)
        sizes.append(len(rows.calls))
        rows_write(rows)

    writer = make_writer(batch_size=3, write=record_size)
    for n in range(8):
        writer.offer(call(f"c{n}"))
    gate.set()
    assert writer.flush(10)
    assert sum(sizes) == 8 and max(sizes) <= 3
    assert Call.objects.count() == 8


def test_a_full_queue_drops_new_records_and_counts_them(make_writer, caplog) -> None:  # type: ignore[no-untyped-def]
    gate, entered = threading.Event(), threading.Event()

    def stuck(rows: Rows) -> None:
        entered.set()
        gate.wait(10)
        rows_write(rows)

    writer = make_writer(capacity=5, batch_size=1, write=stuck)
    writer.offer(call("first"))
    assert entered.wait(5)  # the writer holds "first"; the queue is empty again
    caplog.set_level(logging.WARNING, logger="switchyard.audit")
    started = time.perf_counter()
    accepted = [writer.offer(call(f"c{n}")) for n in range(8)]
    assert time.perf_counter() - started < 0.5  # offering never waits for the database
    assert accepted == [True] * 5 + [False] * 3
    assert writer.stats().dropped == 3
    gate.set()
    assert writer.flush(10)
    assert Call.objects.count() == 6
    assert any("dropped 3 records" in r.getMessage() for r in caplog.records)


def test_a_failed_batch_is_logged_once_counted_and_dropped(make_writer, caplog) -> None:  # type: ignore[no-untyped-def]
    failures = iter([RuntimeError("disk I/O error")])

    def fail_once(rows: Rows) -> None:
        error = next(failures, None)
        if error is not None:
            raise error
        rows_write(rows)

    writer = make_writer(write=fail_once)
    caplog.set_level(logging.ERROR, logger="switchyard.audit")
    writer.offer(call("lost-1"))
    writer.offer(call("lost-2"))
    assert writer.flush(10)
    writer.offer(call("kept"))
    assert writer.flush(10)
    assert list(Call.objects.values_list("call_id", flat=True)) == ["kept"]
    stats = writer.stats()
    assert (stats.failed, stats.written) == (2, 1)
    [line] = [r for r in caplog.records if r.name == "switchyard.audit"]
    assert "2 records" in line.getMessage() and "disk I/O error" in line.getMessage()


def test_a_database_error_drops_only_that_batch(make_writer) -> None:  # type: ignore[no-untyped-def]
    writer = make_writer()
    writer.offer(call("same"))
    assert writer.flush(10)
    writer.offer(call("same"))  # a unique call id written twice: the batch is refused
    assert writer.flush(10)
    writer.offer(call("next"))
    assert writer.flush(10)
    assert sorted(Call.objects.values_list("call_id", flat=True)) == ["next", "same"]
    assert writer.stats().failed == 1


def test_every_configured_credential_is_scrubbed_again(make_writer) -> None:  # type: ignore[no-untyped-def]
    writer = make_writer(secrets=lambda: ["sk-other-provider-secret"])
    writer.offer(call("c1", attempts=2, message="echo sk-other-provider-secret"))
    writer.offer(
        FallbackEvent(
            call_id="c1",
            group="auto",
            from_target="p1/a",
            to_target="p2/b",
            reason="not-retryable",
            code="AUTH",
            status=401,
            message="x" * 5000 + "sk-other-provider-secret",
            cooldown_s=None,
            at=NOW,
        )
    )
    assert writer.flush(10)
    assert Attempt.objects.get(index=1).message == "echo [redacted]"
    assert len(Fallback.objects.get().message) == 2000


def test_attach_follows_a_replaced_hub() -> None:
    from routing.audit import writer as module

    first, second = EventHub(), EventHub()
    module.attach(first)
    module.attach(first)  # idempotent
    assert first._subscribers == [module.get_writer().receive]  # the metrics attach apart
    module.attach(second)
    assert first._subscribers == [] and second._subscribers == [module.get_writer().receive]
    pending = module.get_writer().stats().accepted
    second.publish(
        RetryEvent(
            call_id="c",
            group="g",
            target="t",
            try_number=1,
            code="SERVER",
            status=500,
            delay_s=0.1,
            message="",
            at=NOW,
        )
    )
    first.publish(
        RetryEvent(
            call_id="c",
            group="g",
            target="t",
            try_number=1,
            code="SERVER",
            status=500,
            delay_s=0.1,
            message="",
            at=NOW,
        )
    )
    assert module.get_writer().stats().accepted == pending + 1
    assert module.flush(10)


def test_the_metrics_attach_apart_and_follow_a_replaced_hub() -> None:
    """The metrics are an event subscriber of their own (``EVENT_SUBSCRIBERS``), not the
    writer's: attaching one leaves the other alone."""
    from routing.audit import writer
    from routing.observability import metrics

    first, second = EventHub(), EventHub()
    metrics.attach(first)
    metrics.attach(first)  # idempotent
    assert first._subscribers == [metrics.observe]
    metrics.attach(second)
    assert first._subscribers == [] and second._subscribers == [metrics.observe]
    writer.attach(second)
    assert second._subscribers == [metrics.observe, writer.get_writer().receive]
