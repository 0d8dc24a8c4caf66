"""The configuration version: bumped by every committed write, followed by each process."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import transaction

from routing.gateway import runtime as runtime_module
from routing.gateway import sync
from routing.gateway.runtime import Runtime, install_runtime
from routing.gateway.table import RoutingTable
from routing.models import ConfigVersion, Group
from routing.state.memory import MemoryStore


def test_the_watcher_hands_every_read_on_and_survives_failing_reads(
    caplog: pytest.LogCaptureFixture,
) -> None:
    reads: Iterator[int | Exception] = iter([1, RuntimeError("gone"), RuntimeError("gone"), 2])
    seen: list[int] = []

    def read() -> int:
        value = next(reads)
        if isinstance(value, Exception):
            raise value
        return value

    watcher = sync.VersionWatcher(read=read, on_version=lambda v: seen.append(v) or True)
    with caplog.at_level(logging.INFO, logger="switchyard.sync"):
        assert [watcher.check() for _ in range(4)] == [True, False, False, True]
    assert seen == [1, 2] and watcher.seen == 2 and watcher.checks == 2
    messages = [r.getMessage() for r in caplog.records]
    assert sum("check failed" in m for m in messages) == 1  # once per outage, not per read
    assert any("works again" in m for m in messages)


def test_a_table_is_invalidated_only_when_compiled_before_the_version() -> None:
    previous = runtime_module.installed_runtime()
    runtime = Runtime(store=MemoryStore())
    install_runtime(runtime)
    try:
        assert sync.follow_version(5) is False  # no table yet: nothing to invalidate
        runtime.table = RoutingTable(groups={}, providers={}, keys={}, config_version=5)
        assert sync.follow_version(5) is False  # this process's own write, already followed
        assert runtime.table is not None
        assert sync.follow_version(6) is True
        assert runtime.table is None
    finally:
        install_runtime(previous)


def test_the_check_interval_is_at_most_a_second(settings: Any) -> None:
    assert sync.check_interval() == 0.5
    settings.SWITCHYARD = {**settings.SWITCHYARD, "CONFIG_CHECK_S": 30}
    assert sync.check_interval() == sync.MAX_CHECK_S == 1.0


@pytest.mark.django_db(transaction=True)
def test_a_committed_write_bumps_the_version_and_a_rolled_back_one_does_not() -> None:
    start = sync.read_config_version()
    Group.objects.create(name="g1")
    assert sync.read_config_version() > start
    after_create = sync.read_config_version()

    class Refused(Exception):
        pass

    with pytest.raises(Refused), transaction.atomic():
        Group.objects.create(name="g2")
        raise Refused
    assert sync.read_config_version() == after_create
    assert ConfigVersion.objects.count() == 1


def test_a_failed_compile_keeps_the_last_good_table(caplog: pytest.LogCaptureFixture) -> None:
    good = RoutingTable(groups={}, providers={}, keys={}, config_version=1)
    outcomes: list[RoutingTable | Exception] = [good, RuntimeError("database away")]

    def compile_next() -> RoutingTable:
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    runtime = Runtime(store=MemoryStore(), compile=compile_next)
    assert runtime.reload() is good
    runtime.invalidate()
    assert runtime.reload() is good and runtime.table is good
    assert any("last good" in r.getMessage() for r in caplog.records)

    first_ever = Runtime(store=MemoryStore(), compile=compile_next)
    outcomes.append(RuntimeError("no table yet"))
    with pytest.raises(RuntimeError):
        first_ever.reload()
