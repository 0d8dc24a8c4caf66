"""``manage.py serve`` stops everything it started on SIGTERM and on SIGINT sent to it alone
(issue 23 item 5), also when it was started in the background by a non-interactive shell,
which hands it SIGINT *ignored* (then Python never raises ``KeyboardInterrupt``)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 90.0
pytestmark = pytest.mark.multiprocess


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
        return True
    except OSError:
        return False


def children_of(pid: int) -> list[int]:
    text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    return [int(p) for p in text.split()]


def alive(pid: int) -> bool:
    """Running (not a zombie waiting for its parent, which is as good as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def serve_env(tmp_path: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "REDIS_URL", "SWITCHYARD_CONFIG", "DJANGO_SETTINGS_MODULE")
    }
    env.update(SWITCHYARD_VAR_DIR=str(tmp_path / "var"), PYTHONUNBUFFERED="1")
    return env


def ignore_sigint() -> None:  # what `cmd &` in a non-interactive shell does to cmd
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.parametrize(
    ("sent", "inherited", "server"),
    [
        (signal.SIGINT, "default", "daphne"),
        (signal.SIGINT, "ignored", "daphne"),
        (signal.SIGTERM, "default", "daphne"),
        (signal.SIGINT, "ignored", "uvicorn"),
    ],
    ids=["sigint", "sigint-started-in-background", "sigterm", "uvicorn-sigint-in-background"],
)
def test_a_signal_to_serve_alone_stops_the_server_and_the_demo_upstream(
    tmp_path: Path, sent: signal.Signals, inherited: str, server: str
) -> None:
    port, demo_port = free_port(), free_port()
    serve = subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--port", str(port), "--demo-port", str(demo_port)]
        + ["--server", server],
        cwd=ROOT,
        env=serve_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # nothing but the signal we send reaches the children
        preexec_fn=ignore_sigint if inherited == "ignored" else None,  # noqa: PLW1509
    )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not (listening(port) and listening(demo_port)):
            assert serve.poll() is None, serve.communicate()[0]
            assert time.monotonic() < deadline, "serve did not start daphne and the demo"
            time.sleep(0.1)
        started = children_of(serve.pid)
        assert len(started) == 2, started  # the demo upstream and the server
        os.kill(serve.pid, sent)  # to serve alone, not its process group
        output, _ = serve.communicate(timeout=60)
        assert serve.returncode == 0, output
        deadline = time.monotonic() + 30
        while any(alive(pid) for pid in started):
            assert time.monotonic() < deadline, f"still running: {started}\n{output}"
            time.sleep(0.1)
        assert not listening(port) and not listening(demo_port)
        assert "shutdown: closed" in output  # the server stopped cleanly, not killed
    finally:
        if serve.poll() is None:
            os.killpg(serve.pid, signal.SIGKILL)
            serve.wait(10)
