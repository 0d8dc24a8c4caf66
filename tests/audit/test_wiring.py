"""Process wiring: every hub the runtime installs gets the writer attached (settings
SWITCHYARD["EVENT_SUBSCRIBERS"]), so records follow a replaced hub; a normal success logs
nothing."""

from __future__ import annotations

import logging

import pytest

from routing.audit import writer
from routing.audit.models import Call
from routing.gateway.events import EventHub
from tests.audit.conftest import MESSAGES, RETRY_TWICE, clear_audit_tables
from tests.conftest import Harness


def test_installing_a_hub_attaches_the_writer(harness: Harness) -> None:
    writer.flush(10)
    clear_audit_tables()
    writer.attach(EventHub())  # attached somewhere else: a new runtime hub must take it over
    harness.runtime.hub = EventHub()
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
