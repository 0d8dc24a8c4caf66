"""``manage.py check`` reports misconfigured Switchyard settings as ``routing.E00x``."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.checks import run_checks


def ids(settings: Any, **overrides: object) -> list[str]:
    settings.SWITCHYARD = {**settings.SWITCHYARD, **overrides}
    return sorted(m.id for m in run_checks() if m.id and m.id.startswith("routing."))


def test_the_default_settings_pass(settings: Any) -> None:
    assert ids(settings) == []


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"STATE_STORE": "nope.Store"}, ["routing.E001"]),
        ({"STATE_STORE": "routing.models.Provider"}, ["routing.E001"]),
        ({"STATE_STORE": "redis", "REDIS_URL": ""}, ["routing.E002"]),
        ({"ALGORITHMS": {"cheap": "nope.Cheap"}}, ["routing.E003"]),
        ({"ALGORITHMS": {"cheap": "routing.models.Provider"}}, ["routing.E003"]),
        ({"EVENT_SUBSCRIBERS": ["nope.attach"]}, ["routing.E004"]),
        ({"EVENT_SUBSCRIBERS": ["routing.gateway.sync.CHANNEL"]}, ["routing.E004"]),
        ({"SECRET_KEY": "   "}, ["routing.E005"]),
        ({"CONFIG_CHECK_S": 5}, ["routing.E006"]),
        ({"CONFIG_CHECK_S": 0}, ["routing.E006"]),
        ({"CONFIG_CHECK_S": "soon"}, ["routing.E006"]),
        ({"SECRET_KEY": 123}, ["routing.E005"]),
        ({"AUDIT_MAX_ROWS": "many"}, ["routing.E007"]),
        ({"EVENT_SUBSCRIBERS": "routing.audit.writer.attach"}, ["routing.E007"]),
        ({"AUDIT_MAX_ROWS": "many", "STATE_STORE": "nope.Store"}, ["routing.E001", "routing.E007"]),
    ],
)
def test_each_misconfiguration_is_one_error(
    settings: Any, overrides: dict[str, object], expected: list[str]
) -> None:
    assert ids(settings, **overrides) == expected


def test_a_misconfigured_secret_is_named_never_printed(settings: Any) -> None:
    secret = "sk-fallback-secret-0123456789"
    settings.SWITCHYARD = {**settings.SWITCHYARD, "SECRET_KEY_FALLBACKS": secret}
    messages = [m.msg for m in run_checks() if m.id == "routing.E007"]
    assert messages and "SECRET_KEY_FALLBACKS" in messages[0]
    assert all(secret not in m and secret[:12] not in m for m in messages)


def test_a_registered_algorithm_that_imports_passes(settings: Any) -> None:
    assert ids(settings, ALGORITHMS={"first": "routing.engine.algorithms.Priority"}) == []


@pytest.mark.django_db
def test_a_secret_that_cannot_decrypt_a_stored_credential_is_reported(settings: Any) -> None:
    from routing.models import Provider

    settings.SWITCHYARD = {**settings.SWITCHYARD, "SECRET_KEY": "the-first-secret"}
    for name in ("p1", "p2"):
        provider = Provider(name=name, base_url="http://127.0.0.1:9/v1")
        provider.set_api_key(f"sk-upstream-{name}-0123456789")
        provider.save()
    Provider.objects.create(name="p3", base_url="http://127.0.0.1:9/v1")  # no credential
    assert database_ids(settings) == []

    settings.SWITCHYARD = {**settings.SWITCHYARD, "SECRET_KEY": "another-secret"}
    (error,) = [m for m in run_checks(databases=["default"]) if m.id == "routing.E008"]
    assert "cannot decrypt the stored credential of provider(s) p1, p2" in error.msg
    assert "rotate_secret" in (error.hint or "")
    assert ids(settings) == []  # database checks run only when a database is named
    fallback = {"SECRET_KEY_FALLBACKS": ["the-first-secret"]}
    assert database_ids(settings, **fallback) == []  # the rotation window decrypts them


def database_ids(settings: Any, **overrides: object) -> list[str]:
    settings.SWITCHYARD = {**settings.SWITCHYARD, **overrides}
    found = run_checks(databases=["default"])
    return sorted(m.id for m in found if m.id and m.id.startswith("routing."))
