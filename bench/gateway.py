"""Setting up and running the gateway under test (and Redis for ``--scale-out``).

The gateway is driven only through its documented contract: a fresh
``SWITCHYARD_VAR_DIR``, ``manage.py migrate`` / ``loadconfig`` / ``createkey bench``
(whose last stdout line is the client secret), then ``daphne -e
tcp:port=PORT:interface=127.0.0.1:backlog=4096 router_project.asgi:application`` from the
repository root (``manage.py serve``'s listen backlog; ``-b/-p`` would leave Twisted's 50). ``DATABASE_URL``,
``REDIS_URL`` and ``SWITCHYARD_CONFIG`` are removed from the inherited environment so a
run never touches an operator's real database or Redis.

Several processes "behind one port" (scale-out) each get their own SO_REUSEPORT
listening socket on the same port, passed as ``--fd``; the kernel spreads new
connections across them by hash, so no proxy hop is added to the measurement.
"""

from __future__ import annotations

import http.client
import os
import shutil
import socket
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from bench import procs

SWITCHYARD_APP = "router_project.asgi:application"
STUB_APP = "bench.stub_gateway:application"
LAGGED_APP = "bench.lagged:application"  # the same app with a loop-lag sampler beside it
UPSTREAM_KEY = "bench-upstream-key"

CONFIG = """\
providers:
  - name: up
    kind: openai
    base_url: http://127.0.0.1:{port}/v1
    api_key: {key}
  - name: down
    kind: openai
    base_url: http://127.0.0.1:{port}/v1
    api_key: {key}
  - name: claude
    kind: anthropic
    base_url: http://127.0.0.1:{port}/v1
    api_key: {key}
  - name: resp
    kind: openai-responses
    base_url: http://127.0.0.1:{port}/v1
    api_key: {key}
groups:
  - name: bench
    algorithm: priority
    targets: [{{provider: up, model: fast}}]
  - name: bench-claude
    algorithm: priority
    targets: [{{provider: claude, model: fast}}]
  - name: bench-resp
    algorithm: priority
    targets: [{{provider: resp, model: fast}}]
  - name: bench-failover
    algorithm: priority
    retry: {{max_retries: 0}}
    targets: [{{provider: down, model: fail503}}, {{provider: up, model: fast}}]
  # Scenario s: bench with every group limit configured, far above what a run uses (the
  # check and the settle run on every call; nothing is ever refused), and a price.
  - name: bench-limits
    algorithm: priority
    limits:
      rpm: 10000000
      tpm: 10000000000
      concurrency: 100000
      tokens_per_day: 1000000000000
      cost_per_day: 1000000000
      tokens_per_month: 1000000000000
      cost_per_month: 1000000000
    targets: [{{provider: up, model: fast, price: {{input: 2.0, output: 8.0}}}}]
"""

# Scenario e prices a real failover on every call, so its failing target must never stay
# cooling: a zero cooldown makes it probe-eligible again at once (one probe at a time,
# which at c=1 is every call). If the gateway rejects this group the run falls back to
# the contract's config and e uses bench-failover instead (the report says so).
HOT_GROUP = """\
  - name: bench-failover-hot
    algorithm: priority
    retry: {{max_retries: 0}}
    circuit: {{cooldown_base_ms: 0, cooldown_cap_ms: 0}}
    targets: [{{provider: down, model: fail503}}, {{provider: up, model: fast}}]
  - name: bench-rescue
    algorithm: priority
    resume: continuation
    circuit: {{cooldown_base_ms: 0, cooldown_cap_ms: 0}}
    targets: [{{provider: down, model: cut40}}, {{provider: up, model: fast}}]
"""


class GatewayUnavailable(Exception):
    """A setup step or a start failed; the message names the step and shows its output."""


def venv_tool(repo: Path, name: str) -> str:
    candidate = repo / ".venv" / "bin" / name
    if candidate.exists():
        return str(candidate)
    sibling = Path(sys.executable).parent / name
    return str(sibling) if sibling.exists() else shutil.which(name) or name


@dataclass
class Prepared:
    """Everything the gateway processes need: environment, client secret, app path."""

    repo: Path
    env: dict[str, str]
    secret: str
    app: str
    log_dir: Path
    aliases: dict[str, str] = field(default_factory=dict)  # group -> stand-in when rejected
    notes: list[str] = field(default_factory=list)

    def group(self, name: str) -> str:
        return self.aliases.get(name, name)


def prepare(*, repo: Path, work: Path, upstream_port: int, stub: bool) -> Prepared:
    """Fresh var dir + config + key. Raises GatewayUnavailable naming the failed step."""
    var_dir = work / "var"
    var_dir.mkdir(parents=True, exist_ok=True)
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "REDIS_URL", "SWITCHYARD_CONFIG")
    }
    env.update(SWITCHYARD_VAR_DIR=str(var_dir), PYTHONUNBUFFERED="1")
    if stub:
        env.update(
            BENCH_STUB_UPSTREAM=f"http://127.0.0.1:{upstream_port}/v1",
            PYTHONPATH=str(Path(__file__).resolve().parent.parent),
        )
        return Prepared(repo, env, "stub-key", STUB_APP, work)
    base = CONFIG.format(port=upstream_port, key=UPSTREAM_KEY)
    config = work / "bench-config.yaml"
    config.write_text(base + HOT_GROUP.format())
    python = venv_tool(repo, "python")
    prepared = Prepared(repo, env, "", SWITCHYARD_APP, work)
    _manage(python, repo, env, "migrate", "--noinput")
    try:
        _manage(python, repo, env, "loadconfig", str(config))
    except GatewayUnavailable as exc:
        config.write_text(base)
        _manage(python, repo, env, "loadconfig", str(config))
        prepared.aliases["bench-failover-hot"] = "bench-failover"
        prepared.aliases["bench-rescue"] = "bench"
        prepared.notes.append(
            f"the gateway rejected group bench-failover-hot or bench-rescue ({exc}); "
            "scenario e used bench-failover, whose failing target cools, and r plain bench"
        )
    lines = _manage(python, repo, env, "createkey", "bench").strip().splitlines()
    prepared.secret = lines[-1].strip() if lines else ""
    if not prepared.secret or " " in prepared.secret:
        raise GatewayUnavailable(
            f"createkey printed no secret on its last line: {prepared.secret!r}"
        )
    return prepared


def _manage(python: str, repo: Path, env: dict[str, str], *args: str) -> str:
    """Run one management command; its stdout, or GatewayUnavailable with its output."""
    try:
        done = procs.run_checked([python, "manage.py", *args], cwd=repo, env=env)
    except subprocess.TimeoutExpired as exc:
        raise GatewayUnavailable(f"manage.py {args[0]} timed out") from exc
    if done.returncode != 0:
        output = (done.stdout + done.stderr).strip().splitlines()[-12:]
        raise GatewayUnavailable(
            f"manage.py {args[0]} exited {done.returncode}:\n    " + "\n    ".join(output)
        )
    return done.stdout


@dataclass
class Gateway:
    """One logical gateway: ``count`` server processes behind one port."""

    name: str
    prepared: Prepared
    server: str = "daphne"
    count: int = 1
    redis_url: str | None = None
    cpus: set[int] | None = None
    quiet: bool = False
    lag_file: Path | None = None  # serve through bench.lagged, which samples loop lag here
    extra_env: dict[str, str] = field(default_factory=dict)  # e.g. OTEL_* for --otlp
    port: int = 0
    processes: list[subprocess.Popen[str]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def pids(self) -> list[int]:
        """The server processes and whatever they forked (granian's worker)."""
        mine = [p.pid for p in self.processes]
        return [*mine, *(child for pid in mine for child in procs.descendants(pid))]

    def _command(self, *, port: int | None, fd: int | None) -> list[str]:
        repo, app = self.prepared.repo, self.prepared.app
        if self.lag_file is not None:
            app = LAGGED_APP
        fd_args = ["--fd", str(fd)] if fd is not None else None
        if self.server == "uvicorn":  # uvloop and httptools when installed (its "auto")
            where = fd_args or ["--host", "127.0.0.1", "--port", str(port)]
            quiet = ["--no-access-log", "--log-level", "warning"] if self.quiet else []
            return [venv_tool(repo, "python"), "-m", "uvicorn", app, *where, *quiet]
        if self.server == "granian":  # one process, one runtime thread: one core's worth
            if fd is not None:
                raise GatewayUnavailable("granian takes no inherited socket (--fd)")
            where = ["--host", "127.0.0.1", "--port", str(port), "--backlog", "4096"]
            log = [] if self.quiet else ["--access-log"]
            return [
                venv_tool(repo, "python"), "-m", "granian", "--interface", "asgi",
                "--workers", "1", "--runtime-threads", "1", "--loop", "uvloop",
                *where, *log, app,
            ]  # fmt: skip
        # the endpoint form of -b/-p, with a listen backlog of 4096 instead of Twisted's 50
        where = fd_args or ["-e", f"tcp:port={port}:interface=127.0.0.1:backlog=4096"]
        quiet = ["-v", "0"] if self.quiet else []
        return [venv_tool(repo, "daphne"), *where, *quiet, app]

    def start(self, timeout: float = 60.0) -> None:
        if self.server in ("uvicorn", "granian"):
            python = venv_tool(self.prepared.repo, "python")
            check = procs.run_checked(
                [python, "-c", f"import {self.server}"],
                cwd=self.prepared.repo,
                env=self.prepared.env,
            )
            if check.returncode != 0:
                raise GatewayUnavailable(f"{self.server} is not installed in the venv")
        env = {**self.prepared.env, **self.extra_env}
        if self.redis_url:
            env["REDIS_URL"] = self.redis_url
        if self.lag_file is not None:
            path = [str(self.prepared.repo), *filter(None, [env.get("PYTHONPATH")])]
            env.update(
                BENCH_LAG_FILE=str(self.lag_file),
                BENCH_LAGGED_APP=self.prepared.app,
                PYTHONPATH=os.pathsep.join(path),
            )
        sockets: list[socket.socket] = []
        commands: list[tuple[list[str], tuple[int, ...]]]
        if self.count == 1:
            self.port = procs.free_port()
            commands = [(self._command(port=self.port, fd=None), ())]
        else:
            self.port, sockets = procs.reuseport_sockets(self.count)
            commands = [(self._command(port=None, fd=s.fileno()), (s.fileno(),)) for s in sockets]
        try:
            for index, (cmd, fds) in enumerate(commands):
                log = self.prepared.log_dir / f"gateway-{self.name}-{index}.log"
                self.processes.append(
                    procs.spawn(
                        cmd, log=log, cpus=self.cpus, cwd=self.prepared.repo, env=env, pass_fds=fds
                    )
                )
        finally:
            for sock in sockets:  # the children hold their own copies now
                sock.close()
        self._wait_ready(timeout)
        for pid in self.pids:  # threads started during boot inherit, but be sure
            procs.pin(pid, self.cpus)

    def _wait_ready(self, timeout: float) -> None:
        """Ready when parallel probes all get an HTTP answer (any status).

        With SO_REUSEPORT a probe that lands on a process still booting waits in that
        socket's backlog, so 16 answered probes mean every process is serving.
        """

        def dead() -> str | None:
            for index, proc in enumerate(self.processes):
                if proc.poll() is not None:
                    log = self.prepared.log_dir / f"gateway-{self.name}-{index}.log"
                    return f"exited {proc.returncode}:\n{procs.tail(log)}"
            return None

        def probe() -> bool:
            return http_status("127.0.0.1", self.port, "GET", "/v1/models", timeout=2.0) is not None

        def ready() -> bool:
            if dead():
                return True
            with ThreadPoolExecutor(16) as pool:
                return all(pool.map(lambda _: probe(), range(16 if self.count > 1 else 1)))

        ok = procs.wait_for(ready, timeout, interval=0.2)
        problem = dead()
        if problem or not ok:
            self.stop()
            raise GatewayUnavailable(
                f"{self.server} ({self.name}) {problem or f'not answering after {timeout:.0f} s'}"
            )

    def log_tail(self) -> str:
        return "\n".join(
            procs.tail(self.prepared.log_dir / f"gateway-{self.name}-{i}.log", 8)
            for i in range(len(self.processes))
        )

    def alive(self) -> bool:
        return bool(self.processes) and all(p.poll() is None for p in self.processes)

    def cpu_seconds(self) -> float:
        return sum(self.cpu_by_process())

    def cpu_by_process(self) -> list[float]:
        return [procs.cpu_seconds(pid) for pid in self.pids]

    def memory_mb(self) -> dict[str, float]:
        """Peak RSS of the largest process and current RSS summed, in MB."""
        values = [procs.memory_kb(pid) for pid in self.pids]
        return {
            "peak": max(v.get("VmHWM", 0) for v in values) / 1024,
            "rss": sum(v.get("VmRSS", 0) for v in values) / 1024,
        }

    def stop(self) -> None:
        for proc in self.processes:
            procs.stop(proc)


def http_status(
    host: str,
    port: int,
    method: str,
    path: str,
    *,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
    timeout: float = 5.0,
) -> tuple[int, dict[str, str], bytes] | None:
    """One request with http.client; None when the connection fails."""
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    except (OSError, http.client.HTTPException):
        return None
    finally:
        conn.close()


@dataclass
class RedisServer:
    """A throwaway redis-server (no persistence) for the scale-out rows."""

    log_dir: Path
    cpus: set[int] | None
    port: int = 0
    process: subprocess.Popen[str] | None = None

    def start(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise GatewayUnavailable("redis-server not found on PATH (needed for --scale-out)")
        self.port = procs.free_port()
        self.process = procs.spawn(
            [
                binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--protected-mode",
                "no",
            ],
            log=self.log_dir / "redis.log",
            cpus=self.cpus,
        )

        def pong() -> bool:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                    sock.sendall(b"PING\r\n")
                    return sock.recv(16).startswith(b"+PONG")
            except OSError:
                return False

        if not procs.wait_for(pong, 10.0):
            self.stop()
            log = procs.tail(self.log_dir / "redis.log")
            raise GatewayUnavailable(f"redis-server did not answer:\n{log}")

    def url(self, db: int) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def cpu_seconds(self) -> float:
        return procs.cpu_seconds(self.process.pid) if self.process else 0.0

    def stop(self) -> None:
        if self.process is not None:
            procs.stop(self.process)
