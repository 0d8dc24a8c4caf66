"""Shared fixtures: a real fake upstream on loopback and the gateway served over real
sockets (uvicorn in a thread, so tests can reach the runtime's seams: the sleep recorder,
the health store, the event hub)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import textwrap
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from django.test.utils import override_settings

from routing.simulator.server import FakeUpstream
from tests.state.servers import RedisServer, free_port

# For the gateway processes tests start: a credential secret, and no background health
# checker. Whether this process's own settings see these depends on how it was started:
# plain pytest reads the settings (pytest-django) before this file, an xdist worker after
# (it inherits the environment of the controller, which imported this file). So nothing
# here may rely on either: the in-process gateway turns the checker off through the
# runtime (the fixtures below), and a test that counts on a value of these sets it itself
# (``settings.SWITCHYARD = {...}``, e.g. the check interval in tests/gateway/test_faults.py).
os.environ.setdefault("SWITCHYARD_SECRET_KEY", "test-secret-key-for-switchyard")
os.environ.setdefault("SWITCHYARD_HEALTH_CHECK_S", "0")


_worker_redis: tuple[RedisServer, override_settings] | None = None  # see pytest_configure

# Django's own advice for test runs: a fast password hasher. The default (PBKDF2, a million
# rounds) spends 0.4 s of CPU on every user created and every login, hundreds of times a
# run; no test is about the hash, and the gateway processes tests start keep the default.
_fast_passwords = override_settings(
    PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"]
)


def pytest_configure(config: pytest.Config) -> None:
    _fast_passwords.enable()
    _use_a_redis_of_this_workers_own()


def pytest_unconfigure(config: pytest.Config) -> None:
    _stop_this_workers_redis()
    _fast_passwords.disable()


def _use_a_redis_of_this_workers_own() -> None:
    """The production-shape leg (``REDIS_URL`` set) under pytest-xdist: each worker serves on
    a ``redis-server`` of its own (on a free port) instead of the one ``REDIS_URL`` names.

    Key prefixes or db numbers would keep the workers' keys and channel-layer groups apart,
    but not Redis pub/sub, which is server-wide: a config write in one worker publishes a
    notice (``routing.gateway.sync``) that would invalidate the other worker's routing table
    mid-test (``tests/gateway/test_hot_path.py`` counts the queries a recompile makes). Everything
    that talks to Redis reads these settings when it is first used (the state store, the
    channel layer, the config listener), which is after this hook; the environment is set too,
    for the processes a test starts. A plain (serial) run keeps the given ``REDIS_URL``.
    """
    global _worker_redis
    from django.conf import settings

    if not os.environ.get("PYTEST_XDIST_WORKER") or not getattr(settings, "REDIS_URL", ""):
        return
    server = RedisServer(port=free_port())
    server.start()
    url = server.url
    layers = {
        name: {**layer, "CONFIG": {**layer.get("CONFIG", {}), "hosts": [url]}}
        for name, layer in settings.CHANNEL_LAYERS.items()
    }
    override = override_settings(
        REDIS_URL=url,
        SWITCHYARD={**settings.SWITCHYARD, "REDIS_URL": url},
        CHANNEL_LAYERS=layers,
    )
    override.enable()  # sends setting_changed: cached settings and layers are rebuilt
    os.environ["REDIS_URL"] = url
    _worker_redis = (server, override)


def _stop_this_workers_redis() -> None:
    global _worker_redis
    if _worker_redis is None:
        return
    from routing.gateway import sync

    server, override = _worker_redis
    _worker_redis = None
    sync.stop_listener()  # before its Redis goes: no "unreachable" line at exit
    override.disable()
    server.kill()


def off_loop(fn):  # type: ignore[no-untyped-def]
    """Run sync ORM work from sync or async tests alike (async tests own a running loop)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return fn()
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(fn).result()


@dataclass
class SleepRecorder:
    """Stands in for ``asyncio.sleep`` on the call path: records every backoff delay and
    returns at once, so retry tests check the policy without waiting for it."""

    delays: list[float] = field(default_factory=list)

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)
        await asyncio.sleep(0)


@dataclass
class LiveGateway:
    url: str
    server: object
    thread: threading.Thread
    loop: asyncio.AbstractEventLoop

    @property
    def base_url(self) -> str:
        return self.url + "/v1"


@pytest.fixture(scope="session")
def django_db_modify_db_settings(
    request: pytest.FixtureRequest, django_db_modify_db_settings_parallel_suffix: None
) -> None:
    """A PostgreSQL test database per run, as the SQLite ones are per process
    (router_project/settings.py). pytest-django names them ``test_<name>_gwN`` whichever
    suite runs, so two suites on one server (two checkouts' ``make test`` side by side, CI
    jobs sharing a database service) created, flushed and dropped each other's: hundreds
    of errors in both. The run's xdist id (one for all its workers), or the process id."""
    from django.conf import settings

    database = settings.DATABASES["default"]
    if "postgresql" not in database["ENGINE"]:
        return
    workerinput = getattr(request.config, "workerinput", {})
    run = workerinput.get("testrunuid", "")[:8] or f"p{os.getpid()}"
    test = database.setdefault("TEST", {})
    test["NAME"] = f"{test.get('NAME') or 'test_' + database['NAME']}_{run}"


@pytest.fixture(scope="session")
def upstream() -> Iterator[FakeUpstream]:
    with FakeUpstream() as server:
        yield server


@pytest.fixture(autouse=False)
def fake_upstream(upstream: FakeUpstream) -> Iterator[FakeUpstream]:
    upstream.reset()
    yield upstream
    upstream.reset()


@pytest.fixture(scope="session")
def live_gateway(django_db_setup: None, django_db_blocker: object) -> Iterator[LiveGateway]:
    import uvicorn

    from router_project.asgi import application

    config = uvicorn.Config(
        application, host="127.0.0.1", port=0, log_level="warning", lifespan="off"
    )
    server = uvicorn.Server(config)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(
        target=loop.run_until_complete, args=(server.serve(),), name="live-gateway", daemon=True
    )
    thread.start()
    for _ in range(200):
        if server.started:
            break
        threading.Event().wait(0.05)
    assert server.started, "the gateway did not start"
    port = server.servers[0].sockets[0].getsockname()[1]
    from routing.gateway.runtime import get_runtime as _runtime

    _runtime().background_checks = False  # see the harness fixture
    yield LiveGateway(url=f"http://127.0.0.1:{port}", server=server, thread=thread, loop=loop)
    from routing.gateway.runtime import get_runtime

    with django_db_blocker.unblock():  # type: ignore[attr-defined]
        settle_calls(get_runtime())  # before pytest-django drops the test database
    asyncio.run_coroutine_threadsafe(get_runtime().aclose(), loop).result(timeout=10)
    server.should_exit = True
    thread.join(timeout=10)
    loop.run_until_complete(loop.shutdown_default_executor())
    loop.close()
    _close_other_threads_connections(django_db_blocker)


def settle_calls(runtime: object, timeout: float = 10.0) -> bool:
    """Wait until every call the gateway began has finished, then until its records are
    written (False if the writer did not settle in time). A stream's call record is
    published as its relay closes, just after the client read the last byte: flushing
    before that would read no record yet, or let the writer insert while pytest-django
    truncates the tables (a deadlock on PostgreSQL)."""
    from routing.audit import writer

    deadline = time.monotonic() + timeout
    while runtime.calls_open > 0 and time.monotonic() < deadline:  # type: ignore[attr-defined]
        threading.Event().wait(0.01)
    return writer.flush(timeout)


def _close_other_threads_connections(django_db_blocker) -> None:  # type: ignore[no-untyped-def]
    """The gateway's worker threads keep their own DB connections; PostgreSQL refuses to
    drop the test database while they are open, so end them before pytest-django does."""
    from django.db import connection

    if connection.vendor != "postgresql":
        return
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )


@dataclass
class Harness:
    """One test's view of the running gateway."""

    gateway: LiveGateway
    upstream: FakeUpstream
    sleeps: SleepRecorder
    runtime: object
    tmp_path: Path
    key: str = ""

    def configure(self, yaml_text: str) -> None:
        from routing.config.yaml import load_file
        from routing.services.config_file import config_apply

        path = self.tmp_path / "switchyard.yaml"
        path.write_text(textwrap.dedent(yaml_text).replace("{upstream}", self.upstream.base_url))
        off_loop(lambda: config_apply(load_file(path), source=str(path)))

    def client(self, **kwargs: object):  # type: ignore[no-untyped-def]
        from openai import OpenAI

        return OpenAI(base_url=self.gateway.base_url, api_key=self.key, max_retries=0, **kwargs)

    def async_client(self, **kwargs: object):  # type: ignore[no-untyped-def]
        from openai import AsyncOpenAI

        return AsyncOpenAI(
            base_url=self.gateway.base_url, api_key=self.key, max_retries=0, **kwargs
        )

    def events(self, kind: type, *, at_least: int = 0, timeout: float = 2.0) -> list:  # type: ignore[type-arg]
        """Events of a kind seen so far; with ``at_least``, wait (briefly) for them: a
        stream's call record is published as its relay closes, just after the client read
        the last byte."""
        deadline = time.monotonic() + timeout
        while True:
            found = [e for e in self.runtime.hub.recent if isinstance(e, kind)]  # type: ignore[attr-defined]
            if len(found) >= at_least or time.monotonic() > deadline:
                return found
            time.sleep(0.01)


def fresh_store():  # type: ignore[no-untyped-def]
    """The store this run is configured for, empty: in-process by default; with REDIS_URL
    (the production-shape leg of `make test`) a Redis store under a unique key prefix."""
    import uuid

    from django.conf import settings

    from routing.state.memory import MemoryStore

    if settings.SWITCHYARD["STATE_STORE"] == "redis":
        from routing.state.redis import RedisStore

        return RedisStore(
            settings.SWITCHYARD["REDIS_URL"], prefix=f"switchyard-test-{uuid.uuid4().hex[:8]}:"
        )
    return MemoryStore()


@pytest.fixture
def harness(
    live_gateway: LiveGateway, fake_upstream: FakeUpstream, transactional_db: None, tmp_path: Path
) -> Iterator[Harness]:
    from routing.engine.refusals import KeylessRefusals
    from routing.gateway.events import EventHub
    from routing.gateway.runtime import get_runtime
    from routing.services.api_keys import generate_key

    runtime = get_runtime()
    # No background health checker: its pings would show up in other tests' upstream
    # counts. The checker's own tests drive it pass by pass (routing.gateway.checker).
    runtime.background_checks = False
    runtime.use_store(fresh_store())
    runtime.hub = EventHub()
    runtime.keyless = KeylessRefusals()  # this test's one sample per address and minute
    sleeps = SleepRecorder()
    runtime.sleep = sleeps
    runtime.invalidate()
    h = Harness(
        gateway=live_gateway,
        upstream=fake_upstream,
        sleeps=sleeps,
        runtime=runtime,
        tmp_path=tmp_path,
    )
    _, h.key = generate_key(name="test", kind="client")
    yield h
    settle_calls(runtime)  # this test's records land in this test's database
    runtime.sleep = asyncio.sleep
    runtime.invalidate()


TWO_ROUTES = """
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
      - {provider: p1, model: a}
      - {provider: p2, model: b}
"""
