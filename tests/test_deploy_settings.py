"""Production defaults (SPEC §9, issue 37 item 12): the var dir and its files are the
owner's alone, Django's secret key is generated there instead of a public default (and the
public value is refused outside DEBUG), and ``SWITCHYARD_HTTPS`` turns on secure cookies,
HSTS and the trusted proxy header.

Settings are read once per process, so what depends on the environment at start runs in a
fresh interpreter (``manage.py``'s settings, a var dir of the test's own).
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.checks import run_checks

from routing.checks import DEVELOPMENT_SECRET_KEY
from routing.var_files import (
    EmptySecretFile,
    owner_only_dir,
    owner_only_sqlite,
    read_or_create_secret,
)

ROOT = Path(__file__).resolve().parents[1]
SUBPROCESS_TIMEOUT_S = 120  # a Django start on a loaded machine


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def loose_umask() -> Iterator[None]:
    """The usual umask (files 0644, folders 0755): what the owner-only modes must beat."""
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def start(var_dir: Path, code: str, **env: str) -> Any:
    """Run ``code`` after ``django.setup()`` in a fresh process with its own var dir (the
    database its SQLite file there); returns what it printed, as JSON."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "SWITCHYARD_"))}
    environ.pop("DATABASE_URL", None)
    environ.update(
        SWITCHYARD_VAR_DIR=str(var_dir), DJANGO_SETTINGS_MODULE="router_project.settings"
    )
    environ.update(env)
    script = f"import json, django\ndjango.setup()\nfrom django.conf import settings\n{code}"
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=SUBPROCESS_TIMEOUT_S,
        umask=0o022,  # the usual one: what the owner-only modes must beat
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------- the var dir
def test_a_fresh_start_makes_the_var_dir_and_the_database_owner_only(tmp_path: Path) -> None:
    var = tmp_path / "var"
    seen = start(
        var,
        "import os, stat\n"
        "from django.db import connection\n"
        "with connection.cursor() as c:\n"
        "    c.execute('CREATE TABLE t (x)'); c.execute('INSERT INTO t VALUES (1)')\n"
        "    names = ['', 'switchyard.sqlite3', 'switchyard.sqlite3-wal', 'switchyard.sqlite3-shm',"
        " 'django-secret.key']\n"
        "    modes = {n: oct(stat.S_IMODE(os.stat(settings.VAR_DIR / n).st_mode)) for n in names}\n"
        "print(json.dumps({'modes': modes, 'secret': settings.SECRET_KEY}))",
    )
    assert seen["modes"] == {
        "": "0o700",
        "switchyard.sqlite3": "0o600",
        "switchyard.sqlite3-wal": "0o600",  # SQLite gives these the database's mode
        "switchyard.sqlite3-shm": "0o600",
        "django-secret.key": "0o600",
    }
    assert (var / "django-secret.key").read_text().strip() == seen["secret"]
    assert seen["secret"] != DEVELOPMENT_SECRET_KEY and len(seen["secret"]) >= 50


def test_the_wal_and_shared_memory_files_take_the_databases_mode(
    tmp_path: Path, loose_umask: None
) -> None:
    database = tmp_path / "db.sqlite3"
    owner_only_sqlite(database)
    connection = sqlite3.connect(database)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("CREATE TABLE t (x)")
    connection.commit()
    try:
        for name in ("db.sqlite3", "db.sqlite3-wal", "db.sqlite3-shm"):
            assert mode(tmp_path / name) == 0o600, name
    finally:
        connection.close()


def test_an_existing_var_dir_and_database_are_narrowed(tmp_path: Path, loose_umask: None) -> None:
    var = tmp_path / "var"
    var.mkdir(mode=0o755)
    database = var / "switchyard.sqlite3"
    for file in (database, var / "switchyard.sqlite3-wal"):
        file.write_bytes(b"")
        os.chmod(file, 0o644)
    owner_only_dir(var)
    owner_only_sqlite(database)
    assert (mode(var), mode(database), mode(var / "switchyard.sqlite3-wal")) == (
        0o700,
        0o600,
        0o600,
    )


def test_a_generated_secret_is_kept_owner_only_and_read_back(
    tmp_path: Path, loose_umask: None
) -> None:
    file = tmp_path / "var" / "some.key"
    first, generated = read_or_create_secret(file)
    assert generated and len(first) >= 50 and mode(file) == 0o600
    assert mode(file.parent) == 0o700
    assert read_or_create_secret(file) == (first, False)
    assert sorted(p.name for p in file.parent.iterdir()) == ["some.key"]  # no leftovers
    file.write_text("\n")
    with pytest.raises(EmptySecretFile):
        read_or_create_secret(file)


def test_processes_started_at_once_agree_on_one_secret(tmp_path: Path) -> None:
    file = tmp_path / "shared.key"
    code = (
        "import sys; from pathlib import Path; from routing.var_files import read_or_create_secret; "
        f"print(read_or_create_secret(Path({str(file)!r}))[0])"
    )
    processes = [
        subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True)
        for _ in range(6)
    ]
    secrets = {p.communicate(timeout=SUBPROCESS_TIMEOUT_S)[0].strip() for p in processes}
    assert secrets == {file.read_text().strip()}


# ------------------------------------------------------------------- the secret key
def test_djangos_secret_key_is_not_the_public_development_value(settings: Any) -> None:
    assert settings.SECRET_KEY != DEVELOPMENT_SECRET_KEY


@pytest.mark.parametrize(("debug", "expected"), [(False, ["routing.E010"]), (True, [])])
def test_the_development_secret_key_is_refused_unless_debug(
    settings: Any, debug: bool, expected: list[str]
) -> None:
    settings.SECRET_KEY = DEVELOPMENT_SECRET_KEY
    settings.DEBUG = debug
    assert sorted(m.id for m in run_checks() if m.id == "routing.E010") == expected


def test_a_start_with_the_development_secret_key_is_refused(tmp_path: Path) -> None:
    environ = {**os.environ, "SWITCHYARD_VAR_DIR": str(tmp_path)}
    environ.pop("DATABASE_URL", None)
    environ.update(DJANGO_SECRET_KEY=DEVELOPMENT_SECRET_KEY, DJANGO_DEBUG="")
    done = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=SUBPROCESS_TIMEOUT_S,
    )
    assert done.returncode != 0 and "routing.E010" in done.stderr
    assert DEVELOPMENT_SECRET_KEY not in done.stderr + done.stdout


# ------------------------------------------------------------------- SWITCHYARD_HTTPS
HTTPS_SETTINGS = (
    "print(json.dumps([settings.SESSION_COOKIE_SECURE, settings.CSRF_COOKIE_SECURE, "
    "settings.SECURE_HSTS_SECONDS, settings.SECURE_PROXY_SSL_HEADER]))"
)


def test_switchyard_https_turns_on_secure_cookies_hsts_and_the_proxy_header(
    tmp_path: Path,
) -> None:
    assert start(tmp_path, HTTPS_SETTINGS) == [False, False, 0, None]
    assert start(tmp_path, HTTPS_SETTINGS, SWITCHYARD_HTTPS="1") == [
        True,
        True,
        365 * 24 * 3600,
        ["HTTP_X_FORWARDED_PROTO", "https"],
    ]


def test_behind_a_tls_proxy_a_page_gets_hsts_and_a_secure_session_cookie(
    settings: Any, transactional_db: None
) -> None:
    from django.contrib.auth.models import User
    from django.test import Client

    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    settings.SECURE_HSTS_SECONDS = 3600
    settings.SESSION_COOKIE_SECURE = True
    User.objects.create_user("operator", password="pw-for-tests-only", is_staff=True)
    client = Client(HTTP_X_FORWARDED_PROTO="https")
    response = client.post("/login/", {"username": "operator", "password": "pw-for-tests-only"})
    assert response.status_code == 302
    assert response["Strict-Transport-Security"] == "max-age=3600"
    assert response.cookies["sessionid"]["secure"] is True
    assert "Strict-Transport-Security" not in Client().get("/login/")  # plain http: none


# ------------------------------------------------------------------- /v1 pays for none of it
def test_the_v1_path_passes_no_page_middleware(harness: Any) -> None:
    """The policy header and the login lockout are the pages' middleware; /v1 is served by
    the lean handler without any (routing.api.asgi), so neither costs a call anything."""
    import urllib.error
    import urllib.request

    from routing.api.asgi import GATEWAY_MIDDLEWARE

    assert GATEWAY_MIDDLEWARE == []
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(harness.gateway.url + "/v1/models", timeout=30)
    assert refused.value.code == 401
    assert "Content-Security-Policy" not in refused.value.headers
    with urllib.request.urlopen(harness.gateway.url + "/login/", timeout=30) as page:
        assert "script-src 'self'" in page.headers["Content-Security-Policy"]
