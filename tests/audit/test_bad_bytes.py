"""One bad value in a client's field never costs another client's record (SPEC §9).

PostgreSQL refuses a NUL in text (and ``\\u0000`` in jsonb); a call whose ``user``,
session or model carries one used to make the audit writer drop its whole batch, and
every other call in it vanished from ``/api/v1/calls`` and from spend. The writer now
stores what the database can hold and isolates what it still cannot. A NUL in a header
(``x-session-id``) reaches the same session field; uvicorn, which these tests serve on,
refuses such a header itself, daphne passes it on. The production leg of ``make test``
runs this file on PostgreSQL too (``tests/audit`` is in it)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import httpx
import pytest
from django.db import DataError

from routing.audit.models import Call, ConfigChange
from routing.audit.rows import Rows, rows_write
from routing.audit.writer import AuditWriter
from routing.simulator.script import Reply
from tests.audit.conftest import MESSAGES, RETRY_TWICE, Audit, clear_audit_tables
from tests.audit.test_writer import call

NUL = "\x00"


def test_six_calls_one_with_a_nul_in_each_field_six_rows_and_spend_counts_all(
    audit: Audit,
) -> None:
    audit.h.configure(RETRY_TWICE)
    audit.flush()
    clear_audit_tables()
    failed_before = writer_failed()  # the process's writer: earlier tests may have counted
    for _ in range(6):
        audit.h.upstream.script("a", Reply("ok"))
    url, key = audit.h.gateway.base_url, audit.h.key
    bodies: list[dict[str, object]] = [
        {"model": "auto", "messages": MESSAGES},
        {"model": "auto", "messages": MESSAGES, "user": f"alice{NUL}"},
        {"model": "auto", "messages": MESSAGES, "metadata": {"session_id": f"s{NUL}1"}},
        {"model": f"auto{NUL}", "messages": MESSAGES},  # unknown: refused, but recorded
        {"model": "auto", "messages": MESSAGES},
        {"model": "auto", "messages": MESSAGES},
    ]
    statuses = []
    with httpx.Client(headers={"authorization": f"Bearer {key}"}, timeout=30) as client:
        for body in bodies:
            statuses.append(client.post(f"{url}/chat/completions", json=body).status_code)
    assert statuses == [200, 200, 200, 404, 200, 200]
    audit.flush()

    answered = len(bodies)
    assert Call.objects.count() == answered
    sessions = set(Call.objects.values_list("session", flat=True))
    assert {"alice\ufffd", "s\ufffd1"} <= sessions  # kept, the NUL marked
    calls = audit.api.get("/api/v1/calls", params={"limit": 50}).json()
    assert len(calls) == answered
    [spent] = audit.api.get("/api/v1/spend", params={"by": "group"}).json()
    assert spent["calls"] == answered - 1  # all but the refused one
    assert writer_failed() == failed_before


def writer_failed() -> int:
    from routing.audit import writer

    return writer.get_writer().stats().failed


@pytest.fixture
def own_writer(transactional_db: None) -> Iterator[list[AuditWriter]]:
    clear_audit_tables()
    writers: list[AuditWriter] = []
    yield writers
    for writer in writers:
        writer.stop(10)


def _writer(writers: list[AuditWriter], **options: object) -> AuditWriter:
    options.setdefault("prune_every_s", None)
    options.setdefault("secrets", lambda: [])
    writer = AuditWriter(**options)  # type: ignore[arg-type]
    writers.append(writer)
    return writer


def test_nul_in_every_text_and_json_value_is_stored_marked(own_writer: list[AuditWriter]) -> None:
    from routing.audit.rows import ConfigChangeNote
    from routing.gateway.events import FallbackEvent

    writer = _writer(own_writer)
    record = call("c1", attempts=2, message=f"upstream said {NUL}")
    record.group, record.session, record.reason = f"g{NUL}", f"s{NUL}", f"r{NUL}"
    writer.offer(record)
    writer.offer(
        FallbackEvent(
            call_id="c1",
            group="auto",
            from_target=f"p1/a{NUL}",
            to_target=None,
            reason="probe",
            code="SERVER",
            status=500,
            message=f"m{NUL}",
            cooldown_s=None,
            at=1_750_000_000.0,
        )
    )
    writer.offer(
        ConfigChangeNote(
            at=record_time(),
            actor="key:ops",
            path="api",
            object_type="group",
            object_name=f"g{NUL}",
            before=None,
            after={f"k{NUL}": [f"v{NUL}", {"n": 1}]},
            diff={"name": [None, f"g{NUL}"]},
        )
    )
    writer.start()
    assert writer.flush(10)
    assert writer.stats().failed == 0
    row = Call.objects.get(call_id="c1")
    assert (row.group, row.session, row.reason) == ("g\ufffd", "s\ufffd", "r\ufffd")
    change = ConfigChange.objects.get()
    assert change.after == {"k\ufffd": ["v\ufffd", {"n": 1}]}
    assert change.object_name == "g\ufffd"


def record_time():  # type: ignore[no-untyped-def]
    from datetime import UTC, datetime

    return datetime(2026, 12, 7, tzinfo=UTC)


class RefusesOne:
    """A database that refuses one record's data (as PostgreSQL refuses what it cannot
    hold) and takes the others: the writer's seam, over the real database."""

    def __init__(self, bad: str) -> None:
        self.bad = bad
        self.batches: list[int] = []

    def __call__(self, rows: Rows) -> None:
        self.batches.append(len(rows.calls))
        if any(c.call_id == self.bad for c in rows.calls):
            raise DataError("value the database cannot hold")
        rows_write(rows)


def test_a_refused_record_is_dropped_alone_logged_once_and_counted(
    own_writer: list[AuditWriter], caplog: pytest.LogCaptureFixture
) -> None:
    database = RefusesOne("bad")
    writer = _writer(own_writer, write=database)
    for n in range(6):
        writer.offer(call("bad" if n == 2 else f"ok-{n}"))
    caplog.set_level(logging.WARNING, logger="switchyard.audit")
    writer.start()
    assert writer.flush(10)
    assert sorted(Call.objects.values_list("call_id", flat=True)) == [
        "ok-0",
        "ok-1",
        "ok-3",
        "ok-4",
        "ok-5",
    ]
    stats = writer.stats()
    assert (stats.written, stats.failed) == (5, 1)
    assert database.batches[0] == 6  # one batch first, then record by record
    lines = [r.getMessage() for r in caplog.records if r.name == "switchyard.audit"]
    assert len(lines) == 1 and "bad" in lines[0] and "DataError" in lines[0], lines


def test_a_record_that_cannot_become_a_row_costs_only_itself(
    own_writer: list[AuditWriter],
) -> None:
    writer = _writer(own_writer)
    broken = call("broken")
    broken.started_at = float("nan")  # no datetime can hold it
    for record in (call("first"), broken, call("last")):
        writer.offer(record)
    writer.start()
    assert writer.flush(10)
    assert sorted(Call.objects.values_list("call_id", flat=True)) == ["first", "last"]
    assert writer.stats().failed == 1


def test_a_database_that_is_down_is_not_retried_record_by_record(
    own_writer: list[AuditWriter],
) -> None:
    tries: list[int] = []

    def down(rows: Rows) -> None:
        tries.append(len(rows.calls))
        raise ConnectionError("database is down")

    writer = _writer(own_writer, write=down)
    for n in range(4):
        writer.offer(call(f"c{n}"))
    writer.start()
    assert writer.flush(10)
    assert tries == [4] and writer.stats().failed == 4
