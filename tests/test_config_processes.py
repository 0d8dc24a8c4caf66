"""One configuration truth across real processes (issue 11, SPEC §5 and §10).

A gateway runs as its own daphne process on the embedded default (no Redis), on SQLite and
on PostgreSQL; ``manage.py`` commands run as further processes and change the database;
the running gateway must follow within 1 s. The product's mechanism is a configuration
version read every ``CONFIG_CHECK_S`` (<= 1 s) off the request path: the tests assert that
interval and *measure* how long each change took to show, but poll with a generous cap so
that a loaded machine cannot fail them.

Also here, over processes: a bad group answers an OpenAI-shaped 503 while the others keep
serving, and ``manage.py serve`` (``make run``) keeps the printed key and operator work
across restarts and refuses a busy port before writing anything.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import openai
import psycopg
import pytest
import yaml

from routing.simulator.server import FakeUpstream

# Each test starts several Django processes; on a loaded shared machine that alone can take
# minutes, so the suite-wide 120 s timeout is raised here (the waits inside stay capped).
pytestmark = [pytest.mark.multiprocess, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parent.parent
# the groups `serve` puts in a fresh database: whatever the demo file declares
DEMO_GROUPS = frozenset(
    g["name"]
    for g in yaml.safe_load((ROOT / "routing" / "simulator" / "demo.yaml").read_text())["groups"]
)
PG = "127.0.0.1:5432"
START_TIMEOUT_S = 90.0
POLL_CAP_S = 30.0  # generous: the product's bound is 1 s, measured and reported below
MESSAGES = [{"role": "user", "content": "hi"}]
MEASURED: dict[str, list[float]] = {}  # what each change took to show, per backend

PLUGIN = '''
from routing.engine.algorithms import Priority


class Mine(Priority):
    """A dotted-path algorithm only the writing process can import."""
'''

CONFIG = """
providers:
  - name: p1
    kind: openai
    base_url: {upstream}
    api_key: upstream-key-p1
groups:
  - name: auto
    targets:
      - {{provider: p1, model: a}}
    retry: {{max_retries: {retries}}}
{extra}"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(what: str, condition: Callable[[], bool], *, cap_s: float = POLL_CAP_S) -> float:
    """Poll until ``condition()`` holds; returns the seconds it took (fails after ``cap_s``)."""
    started = time.monotonic()
    while not condition():
        assert time.monotonic() - started < cap_s, f"{what}: not seen within {cap_s} s"
        time.sleep(0.02)
    return time.monotonic() - started


@dataclass
class Installation:
    """One database and the environment every process of it shares."""

    env: dict[str, str]
    tmp: Path
    upstream: FakeUpstream
    backend: str
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def manage(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        if check:
            assert result.returncode == 0, f"manage.py {args}:\n{result.stdout}\n{result.stderr}"
        return result

    def config(self, *, retries: int = 2, extra: str = "") -> str:
        path = self.tmp / f"switchyard-{uuid.uuid4().hex[:6]}.yaml"
        path.write_text(
            CONFIG.format(upstream=self.upstream.base_url, retries=retries, extra=extra)
        )
        return str(path)

    def createkey(self, *args: str) -> str:
        return self.manage("createkey", *args).stdout.strip().splitlines()[-1]

    def start_gateway(self, env: dict[str, str] | None = None) -> str:
        port = free_port()
        log = self.tmp / f"daphne-{port}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
                 "router_project.asgi:application"],
                cwd=ROOT, env=env or self.env, stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip
        self.processes.append(process)
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            assert process.poll() is None, f"daphne exited:\n{log.read_text()}"
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    return f"http://127.0.0.1:{port}"
            except OSError:
                assert time.monotonic() < deadline, f"daphne did not listen:\n{log.read_text()}"
                time.sleep(0.1)

    def stop(self) -> None:
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(15)
        self.processes.clear()


def client(url: str, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0, timeout=30)


def models(url: str, key: str) -> set[str] | int:
    """The model ids a key sees, or the HTTP status when the gateway refuses it."""
    try:
        return {m.id for m in client(url, key).models.list()}
    except openai.APIStatusError as exc:
        return exc.status_code


@pytest.fixture(params=["sqlite", "postgres"])
def installation(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Installation]:
    backend = str(request.param)
    admin: psycopg.Connection[Any] | None = None
    database = f"sw11_{uuid.uuid4().hex[:10]}"
    if backend == "postgres":
        admin = psycopg.connect(f"postgresql://postgres@{PG}/postgres", autocommit=True)
        admin.execute(f'CREATE DATABASE "{database}"')
        url = f"postgres://postgres@{PG}/{database}"
    else:
        url = f"sqlite:///{tmp_path / 'switchyard.sqlite3'}"
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "SWITCHYARD_CONFIG")}
    env.update(
        DJANGO_SETTINGS_MODULE="router_project.settings",
        DATABASE_URL=url,
        SWITCHYARD_SECRET_KEY="config-processes-secret",
        SWITCHYARD_VAR_DIR=str(tmp_path / "var"),
        SWITCHYARD_STATE_STORE="memory",
        PYTHONPATH=str(ROOT),
    )
    upstream = FakeUpstream().start()
    inst = Installation(env=env, tmp=tmp_path, upstream=upstream, backend=backend)
    try:
        inst.manage("migrate", "--noinput")
        inst.manage("loadconfig", inst.config())
        yield inst
    finally:
        inst.stop()
        upstream.stop()
        if admin is not None:
            admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
            admin.close()


def test_the_version_check_interval_is_within_a_second() -> None:
    from routing.sync import MAX_CHECK_S, check_interval

    assert check_interval() <= MAX_CHECK_S == 1.0


def test_commands_in_other_processes_reach_a_running_gateway(installation: Installation) -> None:
    inst = installation
    key = inst.createkey("client")
    admin = inst.createkey("ops", "--admin")
    url = inst.start_gateway()
    assert models(url, key) == {"auto"}
    took = MEASURED.setdefault(inst.backend, [])

    # a new group, written by loadconfig in its own process
    extra = "  - name: tools\n    targets:\n      - {provider: p1, model: b}\n"
    out = inst.manage("loadconfig", inst.config(extra=extra)).stdout
    assert "groups created: tools" in out
    took.append(wait_for("new group", lambda: models(url, key) == {"auto", "tools"}))
    reply = client(url, key).chat.completions.create(model="tools", messages=MESSAGES)
    assert reply.model == "b"

    # a new key, then the same key revoked, by createkey / revokekey
    fresh = inst.createkey("newcomer")
    took.append(wait_for("new key", lambda: models(url, fresh) == {"auto", "tools"}))
    inst.manage("revokekey", fresh)
    took.append(wait_for("revoked key", lambda: models(url, fresh) == 401))
    assert models(url, key) == {"auto", "tools"}  # the others keep working

    # a changed policy
    def max_retries() -> object:
        status = httpx.get(
            f"{url}/api/v1/status", headers={"Authorization": f"Bearer {admin}"}, timeout=30
        )
        assert status.status_code == 200, status.text
        (auto,) = [g for g in status.json()["groups"] if g["name"] == "auto"]
        return auto["policy"]["retry.max_retries"]

    assert max_retries() == 2
    inst.manage("loadconfig", inst.config(retries=4, extra=extra))
    took.append(wait_for("changed policy", lambda: max_retries() == 4))
    print(f"\n{inst.backend}: change visible after {', '.join(f'{t:.2f}' for t in took)} s")


def test_a_group_that_cannot_compile_is_a_503_and_the_others_keep_serving(
    installation: Installation,
) -> None:
    inst = installation
    plugins = inst.tmp / "plugins"
    plugins.mkdir()
    (plugins / "myalgo.py").write_text(textwrap.dedent(PLUGIN))
    key = inst.createkey("client")
    url = inst.start_gateway()  # its PYTHONPATH lacks plugins/: the module "vanished"
    assert models(url, key) == {"auto"}

    writer = {**inst.env, "PYTHONPATH": f"{ROOT}{os.pathsep}{plugins}"}
    extra = "  - name: custom\n    algorithm: myalgo.Mine\n    targets:\n      - {provider: p1, model: b}\n"
    path = inst.config(extra=extra)
    loaded = subprocess.run(
        [sys.executable, "manage.py", "loadconfig", path],
        cwd=ROOT, env=writer, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert loaded.returncode == 0, loaded.stderr
    refused = inst.manage("loadconfig", path, check=False)  # the check on write, here
    assert refused.returncode != 0 and "cannot import module 'myalgo'" in refused.stderr

    def broken() -> bool:
        try:
            client(url, key).chat.completions.create(model="custom", messages=MESSAGES)
        except openai.APIStatusError as exc:
            return exc.status_code == 503
        return False

    wait_for("the broken group's 503", broken)
    with pytest.raises(openai.APIStatusError) as caught:
        client(url, key).chat.completions.create(model="custom", messages=MESSAGES)
    error = caught.value.body
    assert isinstance(error, dict)
    assert error["code"] == "group_unavailable" and error["type"] == "server_error"
    assert "myalgo" in error["message"] and "'custom'" in error["message"]
    reply = client(url, key).chat.completions.create(model="auto", messages=MESSAGES)
    assert reply.model == "a" and reply.choices[0].message.content


# --- manage.py serve (make run) ------------------------------------------------------------


def serve(env: dict[str, str], port: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--port", str(port), "--demo-port", env["DEMO_PORT"]],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )  # fmt: skip


def printed_key(process: subprocess.Popen[str]) -> tuple[str, list[str]]:
    lines: list[str] = []
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        line = process.stdout.readline()  # type: ignore[union-attr]
        if not line:
            break
        lines.append(line)
        if line.startswith("Client key"):
            key = process.stdout.readline().strip()  # type: ignore[union-attr]
            return key, lines
    raise AssertionError("no key printed:\n" + "".join(lines))


def stop(process: subprocess.Popen[str]) -> None:
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=20)


def wait_listening(port: int) -> None:
    def listening() -> bool:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return True
        except OSError:
            return False

    wait_for("daphne listening", listening, cap_s=START_TIMEOUT_S)


def key_count(env: dict[str, str]) -> int:
    script = "from routing.models import ApiKey; print(ApiKey.objects.count())"
    result = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", script],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return int(result.stdout.strip().splitlines()[-1])


def test_a_restart_keeps_the_key_and_the_operators_work_and_a_busy_port_writes_nothing(
    tmp_path: Path,
) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "SWITCHYARD_CONFIG")}
    env.pop("DATABASE_URL", None)  # the embedded default: SQLite under var/
    env.update(
        DJANGO_SETTINGS_MODULE="router_project.settings",
        SWITCHYARD_VAR_DIR=str(tmp_path / "var"),
        DEMO_PORT=str(free_port()),
        PYTHONUNBUFFERED="1",
    )
    first = serve(env, port)
    try:
        key, _ = printed_key(first)
        wait_listening(port)
        url = f"http://127.0.0.1:{port}"
        assert models(url, key) == DEMO_GROUPS
        assert (tmp_path / "var" / "demo-key").stat().st_mode & 0o777 == 0o600

        # operator work through the management API (a key made by another process)
        made = subprocess.run(
            [sys.executable, "manage.py", "createkey", "ops", "--admin"],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=180,
        )  # fmt: skip
        admin = made.stdout.strip().splitlines()[-1]
        api = httpx.Client(
            base_url=f"{url}/api/v1", headers={"Authorization": f"Bearer {admin}"}, timeout=30
        )
        wait_for("the admin key", lambda: api.get("/groups").status_code == 200)
        mine = {"name": "mine", "targets": [{"provider": "sim", "model": "steady-model"}]}
        created = api.post("/groups", json=mine)
        assert created.status_code == 201, created.text

        # a second start on the busy port: refused before anything is written
        keys_before = key_count(env)
        second = serve(env, port)
        out, _ = second.communicate(timeout=120)
        assert second.returncode != 0
        assert f"cannot serve on 127.0.0.1:{port}" in out and "nothing was changed" in out
        assert "sk-sy-" not in out
        assert key_count(env) == keys_before
        assert models(url, key) == DEMO_GROUPS | {"mine"}  # the running key still works
    finally:
        stop(first)

    restarted = serve(env, port)
    try:
        again, lines = printed_key(restarted)
        assert again == key  # the same key, printed again, not a new one
        wait_listening(port)
        assert models(f"http://127.0.0.1:{port}", key) == DEMO_GROUPS | {"mine"}
        assert any("applied only to a fresh database" in line for line in lines)
    finally:
        stop(restarted)
