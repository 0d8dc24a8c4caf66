"""The demo key (issue 37 item 4): made only for the demo configuration and only once — a
revoked demo key stays revoked, also across a start with ``SWITCHYARD_CONFIG`` — and its
secret is kept in ``var/demo-key`` (0600), never printed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from routing.management.demo_key import DemoKey, demo_key, welcome
from routing.models import ApiKey
from routing.services import key_revoke
from tests.management.test_serve_signals import ROOT, START_TIMEOUT_S, free_port, serve_env


@pytest.mark.django_db
def test_the_demo_key_is_made_once_and_a_revoked_one_stays_revoked(tmp_path: Path) -> None:
    first = demo_key(tmp_path)
    assert first.created and first.usable
    assert first.path.stat().st_mode & 0o777 == 0o600
    secret = first.path.read_text().strip()
    assert secret.startswith("sk-")
    assert demo_key(tmp_path) == DemoKey(path=first.path, usable=True)  # kept, not new
    [row] = ApiKey.objects.filter(name="demo")
    key_revoke(key_id=row.pk, actor="test", path="cli")
    again = demo_key(tmp_path)
    assert not again.created and not again.usable
    assert ApiKey.objects.filter(name="demo").count() == 1  # no second demo key
    assert ApiKey.objects.filter(revoked_at__isnull=True).count() == 0
    assert "was revoked; a start never re-creates it" in welcome("h", 1, again, demo=True)


@pytest.mark.django_db
def test_the_welcome_names_the_file_and_never_prints_the_secret(tmp_path: Path) -> None:
    key = demo_key(tmp_path)
    secret = key.path.read_text().strip()
    text = welcome("127.0.0.1", 8000, key, demo=True)
    assert secret not in text and secret[-6:] not in text
    assert f"Client key 'demo': in {key.path}" in text
    curl = next(line for line in text.splitlines() if line.strip().startswith("curl "))
    assert f'"Authorization: Bearer $(cat {key.path})"' in curl
    shell = subprocess.run(
        ["bash", "-c", f"echo {curl.split('Bearer ', 1)[1].split(chr(34))[0]}"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert shell.stdout.strip() == secret  # the printed command reads the kept key
    without = welcome("127.0.0.1", 8000, None, demo=False)
    assert "createkey NAME" in without and "Bearer $KEY" in without


def _start(env: dict[str, str], port: int, demo_port: int) -> str:
    """Start ``manage.py serve``, read its output up to the examples, stop it."""
    serve = subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--port", str(port), "--demo-port", str(demo_port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    lines: list[str] = []
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            line = serve.stdout.readline()  # type: ignore[union-attr]
            if not line:
                break
            lines.append(line)
            if line.strip() == "PY":  # the end of the welcome
                break
        assert lines and lines[-1].strip() == "PY", "".join(lines)
    finally:
        os.killpg(serve.pid, signal.SIGTERM)
        try:
            rest, _ = serve.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(serve.pid, signal.SIGKILL)
            rest, _ = serve.communicate(timeout=30)
    return "".join(lines) + rest


def _manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


ACTIVE_KEYS = (
    "from routing.models import ApiKey; "
    "print(sorted(k.name for k in ApiKey.objects.filter(revoked_at__isnull=True)))"
)


@pytest.mark.multiprocess
def test_a_revoked_demo_key_stays_revoked_when_a_config_file_is_served(tmp_path: Path) -> None:
    env = serve_env(tmp_path)
    port, demo_port = free_port(), free_port()
    first = _start(env, port, demo_port)
    secret = (tmp_path / "var" / "demo-key").read_text().strip()
    assert secret.startswith("sk-") and secret not in first and secret[:12] not in first
    assert "var/demo-key" in first
    assert "revoked key 'demo'" in _manage(env, "revokekey", secret)

    config = tmp_path / "switchyard.yaml"
    config.write_text(
        "providers:\n  - {name: p1, kind: openai, base_url: 'http://127.0.0.1:9/v1'}\n"
        "groups:\n  - {name: auto, targets: [{provider: p1, model: a}]}\n"
    )
    second = _start({**env, "SWITCHYARD_CONFIG": str(config)}, port, demo_port)
    assert "sk-" not in second and "createkey NAME" in second
    assert _manage(env, "shell", "-c", ACTIVE_KEYS).strip().endswith("[]")
    assert (tmp_path / "var" / "demo-key").read_text().strip() == secret  # not replaced
