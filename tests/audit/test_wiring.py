"""Process wiring: the first request of a serving process starts the writer and attaches
it to the runtime's current hub, following a replaced hub; a normal success logs nothing."""

from __future__ import annotations

import logging

import pytest

from routing.audit import writer
from routing.audit.models import Call
from routing.events import EventHub
from tests.audit.conftest import MESSAGES, RETRY_TWICE, clear_audit_tables
from tests.conftest import Harness


def test_a_request_attaches_the_writer_to_a_replaced_hub(harness: Harness) -> None:
    writer.flush(10)
    clear_audit_tables()
    writer.attach(EventHub())  # attached somewhere else: the harness hub is not heard yet
    harness.configure(RETRY_TWICE)
    harness.client().chat.completions.create(model="auto", messages=MESSAGES)
    assert writer.flush(10)
    assert Call.objects.filter(group="auto").count() == 1
    assert writer.get_writer().receive in harness.runtime.hub._subscribers  # type: ignore[attr-defined]


def test_a_normal_success_logs_nothing(harness: Harness, caplog: pytest.LogCaptureFixture) -> None:
    harness.configure(RETRY_TWICE)
    harness.client().chat.completions.create(model="auto", messages=MESSAGES)  # warm up
    assert writer.flush(10)
    caplog.clear()
    caplog.set_level(logging.DEBUG, logger="switchyard")
    harness.client().chat.completions.create(model="auto", messages=MESSAGES)
    assert writer.flush(10)
    ours = ("switchyard.events", "switchyard.audit")
    assert [r.getMessage() for r in caplog.records if r.name in ours] == []
