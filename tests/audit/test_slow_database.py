"""A slow or failing database never delays or fails a call: records wait in the queue
(or are counted as lost) while calls complete at normal speed."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from routing.audit import writer
from routing.audit.models import Attempt, Call
from routing.simulator.script import Reply
from tests.audit.conftest import MESSAGES, RETRY_TWICE, Audit

CALLS = 5


def test_calls_run_at_normal_speed_while_the_database_is_stuck(audit: Audit) -> None:
    audit.h.configure(RETRY_TWICE)
    client = audit.h.client(timeout=5)
    client.chat.completions.create(model="auto", messages=MESSAGES)  # warm: table, pools
    audit.flush()
    Attempt.objects.all().delete()
    Call.objects.all().delete()

    released = threading.Event()
    entered = threading.Event()

    def stuck_database(batch: list[object]) -> None:
        entered.set()
        released.wait(30)

    writer.get_writer().before_flush = stuck_database
    durations = []
    try:
        for _ in range(CALLS):
            audit.h.upstream.script("a", Reply("ok"))
            started = time.perf_counter()
            client.chat.completions.create(model="auto", messages=MESSAGES)
            durations.append(time.perf_counter() - started)
        assert entered.wait(5), "the writer never tried to write"
        # Every call finished while the writer was blocked inside its first batch.
        assert max(durations) < 1.0, durations
        assert Call.objects.count() == 0
        assert writer.get_writer().stats().pending >= CALLS
    finally:
        released.set()
    writer.get_writer().before_flush = None
    audit.flush()
    assert Call.objects.count() == CALLS
    assert Attempt.objects.count() == CALLS


def test_a_failing_database_loses_records_not_calls(
    audit: Audit, caplog: pytest.LogCaptureFixture
) -> None:
    audit.h.configure(RETRY_TWICE)
    before = writer.get_writer().stats()

    def broken_database(batch: list[object]) -> None:
        raise ConnectionError("database is down")

    writer.get_writer().before_flush = broken_database
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

    writer.get_writer().before_flush = None  # the database is back: records flow again
    audit.h.client().chat.completions.create(model="auto", messages=MESSAGES)
    audit.flush()
    assert Call.objects.count() == 1
