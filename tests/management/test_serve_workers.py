"""``manage.py serve --workers N`` (issue 27): N gateway processes on one port, supervised,
under daphne and under uvicorn (``--server uvicorn``).

A real two-worker ``serve`` on Redis (a private ``redis-server``) and the embedded SQLite
file — what ``make run SWITCHYARD_WORKERS=2 REDIS_URL=...`` starts: calls land on both
workers (which process holds a connection is read from ``/proc``: the socket's inode in
``/proc/net/tcp`` and in the worker's ``/proc/<pid>/fd``), a killed worker is logged and
started again and serves, and SIGTERM or SIGINT to serve alone stops every process.
Bad input is refused before anything is started or written.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from routing.management.workers import SERVER_ENTRY
from tests.state.servers import RedisServer

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


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def server_children(pid: int, server: str) -> set[int]:
    found = set()
    for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        try:
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
        except FileNotFoundError:
            continue
        if f"-m\0{SERVER_ENTRY[server]}\0".encode() in cmdline:
            found.add(int(child))
    return found


def socket_inode(local_port: int, remote_port: int) -> int | None:
    """The inode of the established TCP socket 127.0.0.1:local_port -> remote_port."""
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote, inode = fields[1], fields[2], int(fields[9])
        if int(local.split(":")[1], 16) == local_port and (
            int(remote.split(":")[1], 16) == remote_port
        ):
            return inode
    return None


def holder(pids: set[int], inode: int) -> int | None:
    target = f"socket:[{inode}]"
    for pid in pids:
        try:
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                try:
                    if os.readlink(fd) == target:
                        return pid
                except OSError:
                    continue
        except OSError:
            continue
    return None


def call_models(port: int, key: str, workers: set[int]) -> int:
    """GET /v1/models on a new keep-alive connection; returns the worker that answered."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("GET", "/v1/models", headers={"Authorization": f"Bearer {key}"})
        response = connection.getresponse()
        body = json.loads(response.read())
        assert response.status == 200, body
        assert body["object"] == "list" and body["data"], body
        assert connection.sock is not None  # kept alive: still open on the worker's side
        inode = socket_inode(port, connection.sock.getsockname()[1])
        assert inode is not None
        pid = holder(workers, inode)
        assert pid is not None, f"no worker of {workers} holds the connection"
        return pid
    finally:
        connection.close()


@dataclass
class Serve:
    process: subprocess.Popen[str]
    lines: list[str] = field(default_factory=list)

    def read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)

    def output(self) -> str:
        return "".join(self.lines)

    def wait_for_line(self, text: str) -> str:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            for line in list(self.lines):
                if text in line:
                    return line
            assert self.process.poll() is None, self.output()
            assert time.monotonic() < deadline, f"no {text!r} in:\n{self.output()}"
            time.sleep(0.1)


def serve_env(tmp_path: Path, redis_url: str | None) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "REDIS_URL", "SWITCHYARD_CONFIG", "DJANGO_SETTINGS_MODULE")
        and not k.startswith("SWITCHYARD_")
    }
    env.update(SWITCHYARD_VAR_DIR=str(tmp_path / "var"), PYTHONUNBUFFERED="1")
    if redis_url:
        env["REDIS_URL"] = redis_url
    return env


@pytest.fixture
def redis_url() -> Iterator[str]:
    server = RedisServer(port=free_port())
    server.start()
    try:
        yield server.url
    finally:
        server.kill()


@pytest.mark.parametrize(
    ("server", "stop_with"),
    [
        ("daphne", signal.SIGTERM),
        ("daphne", signal.SIGINT),
        ("uvicorn", signal.SIGTERM),
        ("uvicorn", signal.SIGINT),
    ],
    ids=["daphne-sigterm", "daphne-sigint", "uvicorn-sigterm", "uvicorn-sigint"],
)
def test_two_workers_serve_one_port_a_dead_one_comes_back_and_a_signal_stops_all(
    tmp_path: Path, redis_url: str, server: str, stop_with: signal.Signals
) -> None:
    port, demo_port = free_port(), free_port()
    command = ["manage.py", "serve", "--port", str(port), "--demo-port", str(demo_port)]
    serve = Serve(
        subprocess.Popen(
            [sys.executable, *command, "--workers", "2", "--server", server],
            cwd=ROOT,
            env=serve_env(tmp_path, redis_url),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
    )
    reader = threading.Thread(target=serve.read, daemon=True)
    reader.start()
    try:
        serve.wait_for_line("Client key 'demo'")
        key = (tmp_path / "var" / "demo-key").read_text().strip()
        serve.wait_for_line(f"serving 2 {server} workers")
        deadline = time.monotonic() + START_TIMEOUT_S
        while len(workers := server_children(serve.process.pid, server)) < 2 or not listening(port):
            assert time.monotonic() < deadline, serve.output()
            time.sleep(0.1)
        assert len(workers) == 2

        def answered_by_both(pids: set[int]) -> None:
            seen: set[int] = set()
            for _ in range(64):  # the kernel hashes each new connection to a worker
                seen.add(call_models(port, key, pids))
                if seen == pids:
                    return
            raise AssertionError(f"only {seen} of {pids} answered 64 connections")

        answered_by_both(workers)

        victim = min(workers)
        os.kill(victim, signal.SIGKILL)
        restarted = serve.wait_for_line("restarted (pid ")
        assert f"(pid {victim}) exited with status -9" in serve.output()
        newcomer = int(restarted.rsplit("(pid ", 1)[1].rstrip(")\n"))
        assert newcomer not in workers
        now = (workers - {victim}) | {newcomer}
        assert server_children(serve.process.pid, server) == now
        answered_by_both(now)  # the new worker listens on the same port and serves

        everything = set(
            map(
                int,
                Path(f"/proc/{serve.process.pid}/task/{serve.process.pid}/children")
                .read_text()
                .split(),
            )
        )
        assert len(everything) == 3  # two workers and the demo upstream
        os.kill(serve.process.pid, stop_with)  # serve alone, not its process group
        assert serve.process.wait(timeout=60) == 0, serve.output()
        reader.join(10)
        deadline = time.monotonic() + 30
        while any(alive(pid) for pid in everything):
            assert time.monotonic() < deadline, f"still running: {everything}"
            time.sleep(0.1)
        assert not listening(port) and not listening(demo_port)
        assert serve.output().count("shutdown: closed") == 2  # both workers stopped cleanly
    finally:
        if serve.process.poll() is None:
            os.killpg(serve.process.pid, signal.SIGKILL)
            serve.process.wait(10)


@pytest.mark.parametrize(
    ("args", "redis", "message"),
    [
        (["--workers", "0"], True, "--workers must be a whole number of at least 1"),
        (["--workers", "-2"], True, "--workers must be a whole number of at least 1"),
        (["--workers", "many"], True, "got 'many'"),
        (["--server", "nope"], True, "--server must be one of daphne, uvicorn; got 'nope'"),
        (["--workers", "2"], False, "--workers 2 needs REDIS_URL"),
    ],
    ids=["zero", "negative", "not-a-number", "unknown-server", "two-without-redis"],
)
def test_bad_workers_or_server_is_refused_before_anything_is_started(
    tmp_path: Path, args: list[str], redis: bool, message: str
) -> None:
    port, demo_port = free_port(), free_port()
    redis_url = "redis://127.0.0.1:1/0" if redis else None  # never connected to
    result = subprocess.run(
        [sys.executable, "manage.py", "serve", "--port", str(port), "--demo-port", str(demo_port)]
        + args,
        cwd=ROOT,
        env=serve_env(tmp_path, redis_url),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    assert message in result.stderr, result.stderr
    assert "Nothing was started" in result.stderr
    assert not (tmp_path / "var" / "switchyard.sqlite3").exists()  # not even migrated
    assert not (tmp_path / "var" / "demo-key").exists()


def test_a_worker_that_keeps_exiting_at_start_stops_the_supervisor_with_its_status(
    tmp_path: Path,
) -> None:
    """Restarted twice, then given up on: the third exit within QUICK_EXIT_S of a start
    ends ``watch`` with the worker's status (serve then stops the others and exits)."""
    from routing.management.workers import QUICK_EXITS, Supervisor

    said: list[str] = []
    supervisor = Supervisor(
        count=1,
        host="127.0.0.1",
        port=free_port(),
        backlog=16,
        server="daphne",
        app="unused",
        cwd=tmp_path,
        say=said.append,
        clock=lambda: 0.0,  # every exit comes "at once" after its start
        command=lambda fd: [sys.executable, "-c", f"import os, sys; os.fstat({fd}); sys.exit(3)"],
    )
    supervisor.start()
    assert supervisor.watch() == 3
    restarts = [line for line in said if "starting it again" in line]
    assert len(restarts) == QUICK_EXITS - 1
    assert "exited with status 3 3 times in a row" in said[-1]
    assert all(p.poll() == 3 for p in supervisor.processes())


def test_workers_counts_auto_as_the_cores_this_process_may_use() -> None:
    from routing.management.workers import WorkersError, parse_workers

    assert parse_workers("auto") == len(os.sched_getaffinity(0)) >= 1
    assert parse_workers(" AUTO ") == parse_workers("auto")
    assert parse_workers("3") == 3
    for bad in ("0", "-1", "1.5", "", "two", "+2"):
        with pytest.raises(WorkersError):
            parse_workers(bad)
