"""A slow or failing database never delays or fails a call: records wait in the queue
(or are counted as lost) while calls complete at normal speed."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator

import pytest

from routing.audit import writer
from routing.audit.models import Attempt, Call
from routing.audit.rows import Rows, rows_write
from routing.audit.writer import AuditWriter
from routing.simulator.script import Reply
from tests.audit.conftest import MESSAGES, RETRY_TWICE, Audit

CALLS = 5


class Database:
    """The audit writer's database as these tests see it: real, stuck until released,
    or down."""

    def __init__(self) -> None:
        self.released = threading.Event()
        self.released.set()
        self.entered = threading.Event()
        self.down = False

    def write(self, rows: Rows) -> None:
        self.entered.set()
        self.released.wait(30)
        if self.down:
            raise ConnectionError("database is down")
        rows_write(rows)


@pytest.fixture
def database(audit: Audit) -> Iterator[Database]:
    fake = Database()
    previous = writer.install(AuditWriter(write=fake.write))
    yield fake
    fake.down = False
    fake.released.set()
    writer.flush(10)
    if previous is not None:
        writer.install(previous).stop(10)  # type: ignore[union-attr]


def test_calls_run_at_normal_speed_while_the_database_is_stuck(
    audit: Audit, database: Database
) -> None:
    audit.h.configure(RETRY_TWICE)
    client = audit.h.client(timeout=5)
    client.chat.completions.create(model="auto", messages=MESSAGES)  # warm: table, pools
    audit.flush()
    Attempt.objects.all().delete()
    Call.objects.all().delete()

    database.entered.clear()
    database.released.clear()  # stuck from the next batch on
    durations = []
    try:
        for _ in range(CALLS):
            audit.h.upstream.script("a", Reply("ok"))
            started = time.perf_counter()
            client.chat.completions.create(model="auto", messages=MESSAGES)
            durations.append(time.perf_counter() - started)
        assert database.entered.wait(5), "the writer never tried to write"
        # Every call finished while the writer was blocked inside its first batch.
        assert max(durations) < 10, durations  # stuck would be 30 s; loose for a busy machine
        assert Call.objects.count() == 0
        assert writer.get_writer().stats().pending >= CALLS
    finally:
        database.released.set()
    audit.flush()
    assert Call.objects.count() == CALLS
    assert Attempt.objects.count() == CALLS


def test_a_failing_database_loses_records_not_calls(
    audit: Audit, database: Database, caplog: pytest.LogCaptureFixture
) -> None:
    audit.h.configure(RETRY_TWICE)
    audit.flush()  # what configuring recorded lands first: only the calls meet the outage
    before = writer.get_writer().stats()

    database.down = True
    caplog.set_level(logging.ERROR, logger="switchyard.audit")
    for _ in range(3):
        reply = audit.h.client().chat.completions.create(model="auto", messages=MESSAGES)
        assert reply.choices[0].message.content
    audit.flush()
    after = writer.get_writer().stats()
    assert after.failed - before.failed >= 3
    assert after.written == before.written
    assert Call.objects.count() == 0
    lines = [r for r in caplog.records if r.name == "switchyard.audit"]
    assert lines and all(
        "database is down" in r.getMessage() and "\n" not in r.getMessage() for r in lines
    )

    database.down = False  # the database is back: records flow again
    audit.h.client().chat.completions.create(model="auto", messages=MESSAGES)
    audit.flush()
    assert Call.objects.count() == 1
