"""Two real gateway processes (daphne) sharing one PostgreSQL database and one Redis.

SPEC §10: several processes behind a load balancer share cooldowns (RedisStore) and see a
configuration change on their next call (``routing.gateway.sync`` pub/sub), and nothing on the
call path needs the database beyond the compiled table. The gateway's core behaviour is
smoke-tested once more here, over PostgreSQL instead of SQLite.

Needs: PostgreSQL on 127.0.0.1:5432 (trust auth; a fresh database is created and dropped)
and ``redis-server`` (a private one per cluster, on a free port: keys could be kept apart on
a shared Redis, but its pub/sub channels are server-wide, so two clusters on one Redis, e.g.
on two xdist workers, would take each other's config notices for their own).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
import redis

from routing.simulator.script import Fail
from routing.simulator.server import FakeUpstream
from tests.state.servers import RedisServer

pytestmark = pytest.mark.multiprocess

ROOT = Path(__file__).resolve().parents[2]
PG = "127.0.0.1:5432"
CHANNEL = "switchyard:config"  # routing.gateway.sync.CHANNEL (not imported: see the helper below)
START_TIMEOUT_S = 60.0

CONFIG = """
providers:
  - name: p1
    kind: openai
    base_url: {upstream}
    api_key: upstream-key-p1
  - name: p2
    kind: openai
    base_url: {upstream}
    api_key: upstream-key-p2
groups:
  - name: auto
    targets:
{targets}
"""
CAPPED = """
  - name: capped
    limits: {rpm: 10}
    targets:
      - {provider: p1, model: a}
"""
FIRST = ["{provider: p1, model: a}", "{provider: p2, model: b}"]
REORDERED = list(reversed(FIRST))


# --- the lead's hook, until it is in router_project/asgi.py -------------------------------
# Each gateway process must run ``routing.gateway.sync.start_listener()`` once Django is set up,
# i.e. router_project/asgi.py needs, after ``django_asgi_app = get_asgi_application()``:
#
#     from routing.gateway.sync import start_listener  # noqa: E402
#     start_listener()
#
# Until that line is there, the daphne processes of this test serve
# ``tests.management.test_multiprocess:application_with_listener``, which does exactly that. Resolved
# lazily (PEP 562) so importing this module in pytest never sets up the gateway app.
def __getattr__(name: str) -> Any:
    if name != "application_with_listener":
        raise AttributeError(name)
    from router_project.asgi import application
    from routing.gateway.sync import start_listener

    start_listener()
    return application


def asgi_app_path() -> str:
    if "start_listener" in (ROOT / "router_project" / "asgi.py").read_text():
        return "router_project.asgi:application"
    return "tests.management.test_multiprocess:application_with_listener"


# --- fixtures -----------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def admin_connection() -> tuple[psycopg.Connection[Any], str]:
    """A superuser connection for CREATE/DROP DATABASE: ``postgres``, else ``root``."""
    errors = []
    for user in ("postgres", "root"):
        for database in ("test", "postgres"):
            try:
                conn = psycopg.connect(f"postgresql://{user}@{PG}/{database}", autocommit=True)
                return conn, user
            except psycopg.OperationalError as exc:
                errors.append(f"{user}@{database}: {exc}")
    raise AssertionError("no PostgreSQL superuser connection: " + "; ".join(errors))


def delete_switchyard_keys(client: redis.Redis) -> None:
    names = list(client.scan_iter(match="switchyard:*", count=1000))
    if names:
        client.delete(*names)


@dataclass
class Cluster:
    upstream: FakeUpstream
    gateways: list[str]
    key: str
    env: dict[str, str]
    tmp: Path
    redis: redis.Redis

    def manage(self, *args: str) -> str:
        result = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        command = " ".join(args)
        assert result.returncode == 0, f"manage.py {command}:\n{result.stdout}\n{result.stderr}"
        return result.stdout

    def write_config(self, name: str, targets: list[str], more_groups: str = "") -> Path:
        path = self.tmp / name
        lines = "\n".join(f"      - {t}" for t in targets)
        text = textwrap.dedent(CONFIG).format(upstream=self.upstream.base_url, targets=lines)
        path.write_text(text + more_groups)
        return path

    def apply_config(self, targets: list[str], more_groups: str = "") -> None:
        """``manage.py loadconfig`` (its own process), then wait until its change notice
        went out, so every gateway's listener has it before the test's next call."""
        path = self.write_config(f"switchyard-{uuid.uuid4().hex[:6]}.yaml", targets, more_groups)
        pubsub = self.redis.pubsub(ignore_subscribe_messages=True)
        pubsub.subscribe(CHANNEL)
        try:
            deadline = time.monotonic() + 10
            while self.redis.pubsub_numsub(CHANNEL)[0][1] < 3:  # both gateways and us
                assert time.monotonic() < deadline, "the gateways are not subscribed"
                time.sleep(0.05)
            self.manage("loadconfig", str(path))
            deadline = time.monotonic() + 10  # from its exit: a loaded machine starts it slowly
            while pubsub.get_message(timeout=0.5) is None:
                assert time.monotonic() < deadline, "loadconfig published no change notice"
        finally:
            pubsub.close()

    def chat(self, gateway: int, *, stream: bool = False, model: str = "auto") -> httpx.Response:
        return httpx.post(
            f"{self.gateways[gateway]}/v1/chat/completions",
            headers={"Authorization": f"Bearer {self.key}"},
            json={
                "model": model,
                "stream": stream,
                "messages": [{"role": "user", "content": "hi"}],
            },
            timeout=30,
        )


def start_gateway(env: dict[str, str], log: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), asgi_app_path()],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        assert process.poll() is None, f"daphne exited:\n{log.read_text()}"
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return process, f"http://127.0.0.1:{port}"
        except OSError:
            assert time.monotonic() < deadline, f"daphne did not listen:\n{log.read_text()}"
            time.sleep(0.1)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    tmp = tmp_path_factory.mktemp("multiprocess")
    redis_server = RedisServer(port=free_port())
    shared_redis = redis.Redis.from_url(redis_server.url)  # connects on first use
    admin, user = admin_connection()
    database = f"switchyard_mp_{uuid.uuid4().hex[:10]}"
    admin.execute(f'CREATE DATABASE "{database}"')
    processes: list[subprocess.Popen[bytes]] = []
    upstream = FakeUpstream().start()
    try:
        redis_server.start()
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "router_project.settings",
            "DATABASE_URL": f"postgres://{user}@{PG}/{database}",
            "REDIS_URL": redis_server.url,
            "SWITCHYARD_STATE_STORE": "redis",
            "SWITCHYARD_SECRET_KEY": "multiprocess-test-secret",
            "SWITCHYARD_VAR_DIR": str(tmp / "var"),
            "SWITCHYARD_CONFIG": "",
        }
        c = Cluster(upstream=upstream, gateways=[], key="", env=env, tmp=tmp, redis=shared_redis)
        c.manage("migrate", "--noinput")
        c.manage("loadconfig", str(c.write_config("switchyard.yaml", FIRST)))
        c.key = c.manage("createkey", "test").strip().splitlines()[-1]
        for n in (1, 2):
            process, url = start_gateway(env, tmp / f"daphne-{n}.log")
            processes.append(process)
            c.gateways.append(url)
        yield c
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
        upstream.stop()
        admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        admin.close()
        shared_redis.close()
        redis_server.kill()


@pytest.fixture
def mp(cluster: Cluster) -> Iterator[Cluster]:
    """Each test starts with no health state and a quiet upstream."""
    cluster.upstream.reset()
    delete_switchyard_keys(cluster.redis)
    yield cluster
    cluster.upstream.reset()


def served_by(response: httpx.Response) -> str:
    assert response.status_code == 200, response.text
    return response.headers["x-switchyard-target"]


# --- tests --------------------------------------------------------------------------------
def test_a_cooldown_taken_in_one_process_steers_the_other(mp: Cluster) -> None:
    mp.upstream.script("a", Fail(429, message="slow down", headers={"Retry-After": "120"}))
    assert served_by(mp.chat(0)) == "p2/b"  # 429 beyond max_delay: cool 120 s, switch now
    assert mp.upstream.count("a") == 1
    second = mp.chat(1)
    assert served_by(second) == "p2/b"
    assert second.headers["x-switchyard-attempts"] == "1"
    assert mp.upstream.count("a") == 1  # process 2 never tried the cooling target
    assert mp.upstream.count("b") == 2


def test_a_config_change_reaches_the_other_process_on_its_next_call(mp: Cluster) -> None:
    assert served_by(mp.chat(1)) == "p1/a"  # process 2 has compiled the first order
    try:
        mp.apply_config(REORDERED)  # a third process writes the database
        assert served_by(mp.chat(1)) == "p2/b"
        assert served_by(mp.chat(0)) == "p2/b"
    finally:
        mp.apply_config(FIRST)
    assert served_by(mp.chat(1)) == "p1/a"


@pytest.mark.parametrize("gateway", [0, 1], ids=["process-1", "process-2"])
def test_gateway_core_over_postgres(mp: Cluster, gateway: int) -> None:
    plain = mp.chat(gateway)
    assert served_by(plain) == "p1/a"
    assert plain.json()["choices"][0]["message"]["content"] == "Hello from a."
    assert plain.json()["model"] == "auto"  # the name asked for; the header names p1/a

    streamed = mp.chat(gateway, stream=True)
    assert served_by(streamed) == "p1/a"
    assert "Hello" in streamed.text and streamed.text.rstrip().endswith("data: [DONE]")

    mp.upstream.script("a", Fail(404, message="The model a does not exist", code="model_not_found"))
    failover = mp.chat(gateway)
    assert served_by(failover) == "p2/b"
    assert failover.headers["x-switchyard-attempts"] == "2"
    assert failover.json()["model"] == "auto"
    # The other process skips the cooling route without trying it.
    assert served_by(mp.chat(1 - gateway)) == "p2/b"
    assert mp.upstream.count("a") == 3


def test_a_turn_served_by_one_process_is_rewritten_by_the_other(mp: Cluster) -> None:
    """SPEC §13: provenance lives in the shared store, so a session may move processes."""
    from routing.simulator.script import Reply

    session = {"Authorization": f"Bearer {mp.key}", "x-session-id": f"mp-{uuid.uuid4().hex}"}
    question = {"role": "user", "content": "first"}
    mp.upstream.script("a", Reply(content="answer-a", reasoning="think-a"))
    first = httpx.post(
        f"{mp.gateways[0]}/v1/chat/completions",
        headers=session,
        json={"model": "auto", "messages": [question]},
        timeout=30,
    )
    assert served_by(first) == "p1/a"
    turn = first.json()["choices"][0]["message"]
    assert turn["reasoning_content"] == "think-a"
    mp.upstream.script("a", Fail(404, message="gone", code="model_not_found"))
    second = httpx.post(
        f"{mp.gateways[1]}/v1/chat/completions",
        headers=session,
        json={"model": "auto", "messages": [question, turn, {"role": "user", "content": "next"}]},
        timeout=30,
    )
    assert served_by(second) == "p2/b"
    assert second.headers["x-switchyard-rewrites"] == "strip-reasoning:1,model-changed-notice"
    sent = [r for r in mp.upstream.requests if r.model == "b"][-1].body["messages"]
    assert sent[1] == {"role": "assistant", "content": "answer-a"}
    assert sent[-1]["content"].startswith("[model changed: ")


def test_a_group_rpm_lets_exactly_its_limit_through_across_both_processes(mp: Cluster) -> None:
    """SPEC §17: limit counters live in Redis, taken by one script per check, so two
    processes together let through exactly ``rpm`` calls a minute, not twice as many."""
    from concurrent.futures import ThreadPoolExecutor

    mp.apply_config(FIRST, CAPPED)  # stays: the other tests route "auto" only
    for _ in range(3):  # a burst that straddles a minute boundary proves nothing: redo
        delete_switchyard_keys(mp.redis)
        mp.upstream.reset()
        minute = int(time.time() // 60)
        with ThreadPoolExecutor(max_workers=8) as pool:
            answers = list(pool.map(lambda n: mp.chat(n % 2, model="capped"), range(20)))
        if int(time.time() // 60) == minute:
            break
    statuses = sorted(a.status_code for a in answers)
    assert statuses == [200] * 10 + [429] * 10
    refused = next(a for a in answers if a.status_code == 429)
    assert refused.json()["error"]["code"] == "rpm_limit"
    assert 1 <= int(refused.headers["retry-after"]) <= 60
    assert mp.upstream.count("a") == 10  # the refused ten never reached it
