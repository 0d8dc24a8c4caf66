"""``settings.SWITCHYARD`` is read through one validated object (``routing.conf``) that
follows setting changes, takes defaults for keys left out and reports unreadable keys."""

from __future__ import annotations

from typing import Any

from django.conf import settings as django_settings
from django.test import override_settings

from routing.audit.retention import retention_from_settings
from routing.conf import SwitchyardSettings, settings_problems, switchyard_settings, validate
from routing.gateway import sync


def test_the_project_settings_read_as_written() -> None:
    raw = django_settings.SWITCHYARD
    assert settings_problems() == {}
    assert set(raw) <= set(SwitchyardSettings.model_fields)  # every key is declared
    conf = switchyard_settings()
    for key, value in raw.items():
        read = getattr(conf, key)
        assert read == (tuple(value) if isinstance(value, list) else value), key


def test_a_settings_fixture_change_takes_effect_and_is_undone(settings: Any) -> None:
    settings.SWITCHYARD = {**settings.SWITCHYARD, "CONFIG_CHECK_S": 0.25}
    assert switchyard_settings().CONFIG_CHECK_S == 0.25
    assert sync.check_interval() == 0.25
    with override_settings(SWITCHYARD={**settings.SWITCHYARD, "CONFIG_CHECK_S": 0.75}):
        assert sync.check_interval() == 0.75
    assert sync.check_interval() == 0.25


def test_a_key_left_out_takes_its_declared_default(settings: Any) -> None:
    settings.SWITCHYARD = {
        k: v for k, v in settings.SWITCHYARD.items() if k not in ("AUDIT_MAX_ROWS", "ALGORITHMS")
    }
    assert switchyard_settings().AUDIT_MAX_ROWS == 200_000
    assert switchyard_settings().ALGORITHMS == {}
    assert retention_from_settings()["max_rows"] == 200_000


def test_an_unreadable_key_keeps_its_default_and_spares_the_others(settings: Any) -> None:
    settings.SWITCHYARD = {
        **settings.SWITCHYARD,
        "AUDIT_MAX_ROWS": "many",
        "CONFIG_CHECK_S": "0.3",  # lax: a number written as text still reads
    }
    conf = switchyard_settings()
    assert conf.AUDIT_MAX_ROWS == 200_000
    assert conf.CONFIG_CHECK_S == 0.3
    problems = settings_problems()
    assert list(problems) == ["AUDIT_MAX_ROWS"]
    assert problems["AUDIT_MAX_ROWS"].value == "many"


def test_settings_that_are_not_a_dict_read_as_defaults() -> None:
    conf, problems = validate(["not", "a", "dict"])
    assert conf == SwitchyardSettings()
    assert list(problems) == [""]
