"""The staff login locks out repeated failures (django-axes; SPEC §9, issue 37 item 7).

One username from one address: after ``AXES_FAILURE_LIMIT`` wrong passwords even the right
one is refused with the lockout page (429), on the console's login and the admin's alike,
until ``AXES_COOLOFF_TIME`` passes. Time passing is made by moving the recorded attempts
back by hand, never by waiting.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.hashers import MD5PasswordHasher
from django.test import Client

from tests.dashboard.conftest import PASSWORD

ATTACKER = "10.0.0.7"
WRONG = "not the password"


@dataclass(frozen=True)
class Attempt:
    status_code: int
    content: bytes
    headers: Any
    logged_in: bool

    def __getitem__(self, header: str) -> str:
        return str(self.headers[header])


def login(
    path: str = "/login/",
    *,
    username: str = "operator",
    password: str = PASSWORD,
    address: str = ATTACKER,
    **headers: str,
) -> Attempt:
    """One login through the form, from ``address``; whether it left a logged-in session."""
    client = Client(REMOTE_ADDR=address, **headers)
    response = client.post(path, {"username": username, "password": password, "next": "/groups/"})
    logged_in = "_auth_user_id" in client.session
    return Attempt(response.status_code, response.content, response.headers, logged_in)


def fail(times: int, path: str = "/login/", **who: str) -> None:
    for _ in range(times):
        response = login(path, password=WRONG, **who)
        assert response.status_code in (200, 429) and not response.logged_in


def _backdate_attempts(by: timedelta) -> None:
    from axes.models import AccessAttempt
    from django.utils import timezone

    AccessAttempt.objects.update(attempt_time=timezone.now() - by)


@pytest.fixture
def operator(staff_user: object, fresh_runtime: object) -> Any:
    return staff_user


def test_the_documented_defaults(settings: Any) -> None:
    """docs/operations.md, "Deploying safely": 5 failures, 15 minutes."""
    assert settings.AXES_FAILURE_LIMIT == 5
    assert settings.AXES_COOLOFF_TIME == timedelta(minutes=15)
    assert settings.AXES_LOCKOUT_PARAMETERS == [["username", "ip_address"]]


def test_the_failure_limit_then_the_right_password_is_refused_with_the_lockout_page(
    operator: object, settings: Any
) -> None:
    fail(settings.AXES_FAILURE_LIMIT - 1)
    assert login().logged_in  # one fewer failures: still admitted (and the count is reset)
    fail(settings.AXES_FAILURE_LIMIT)
    refused = login()
    assert refused.status_code == 429 and not refused.logged_in
    assert b"locked out" in refused.content and b"15 minutes" in refused.content
    assert "script-src 'self'" in refused["Content-Security-Policy"].split("; ")


def test_the_admin_login_shares_the_lockout(operator: object, settings: Any) -> None:
    fail(settings.AXES_FAILURE_LIMIT, "/admin/login/")
    for path in ("/admin/login/", "/login/"):
        refused = login(path)
        assert refused.status_code == 429 and not refused.logged_in


def test_another_user_or_another_address_is_unaffected(operator: object, settings: Any) -> None:
    from django.contrib.auth.models import User

    User.objects.create_user("second", password=PASSWORD, is_staff=True)
    fail(settings.AXES_FAILURE_LIMIT)
    assert login().status_code == 429
    assert login(address="10.0.0.8").logged_in
    assert login(username="second").logged_in


def test_a_claimed_forwarded_address_does_not_escape_the_lockout(
    operator: object, settings: Any
) -> None:
    fail(settings.AXES_FAILURE_LIMIT)
    assert login(HTTP_X_FORWARDED_FOR="198.51.100.9").status_code == 429


def test_the_limit_is_a_setting(operator: object, settings: Any) -> None:
    settings.AXES_FAILURE_LIMIT = 2
    fail(2)
    assert login().status_code == 429


def test_a_try_during_the_lockout_starts_the_wait_again(operator: object, settings: Any) -> None:
    from axes.models import AccessAttempt
    from django.utils import timezone

    fail(settings.AXES_FAILURE_LIMIT)
    _backdate_attempts(settings.AXES_COOLOFF_TIME - timedelta(minutes=1))
    assert login().status_code == 429
    latest = AccessAttempt.objects.get(username="operator").attempt_time
    assert timezone.now() - latest < timedelta(minutes=1)


def test_the_cool_off_lifts_the_lockout_once_it_has_passed(operator: object, settings: Any) -> None:
    cool_off = settings.AXES_COOLOFF_TIME
    fail(settings.AXES_FAILURE_LIMIT)
    _backdate_attempts(cool_off - timedelta(minutes=1))
    assert login().status_code == 429  # not yet
    _backdate_attempts(cool_off - timedelta(seconds=1))
    assert login().status_code == 429
    _backdate_attempts(cool_off + timedelta(seconds=1))
    assert login().logged_in


class CountingHasher(MD5PasswordHasher):
    """The suite's fast hasher (tests/conftest.py), counting how often a password is checked
    (in production each check is Django's PBKDF2, ~0.4 s of CPU)."""

    checked = 0

    def verify(self, password: str, encoded: str) -> bool:
        CountingHasher.checked += 1
        return super().verify(password, encoded)


def test_a_locked_out_try_costs_no_password_hashing(operator: object, settings: Any) -> None:
    settings.PASSWORD_HASHERS = [f"{__name__}.CountingHasher"]
    fail(settings.AXES_FAILURE_LIMIT)
    before = CountingHasher.checked
    assert before >= settings.AXES_FAILURE_LIMIT  # the failures were checked
    for _ in range(10):
        assert login().status_code == 429
    assert CountingHasher.checked == before


def test_no_password_is_kept_in_the_attempts(operator: object, settings: Any) -> None:
    from axes.models import AccessAttempt

    fail(settings.AXES_FAILURE_LIMIT)
    login()
    kept = " ".join(f"{a.get_data} {a.post_data}" for a in AccessAttempt.objects.all())
    assert kept and WRONG not in kept and PASSWORD not in kept
