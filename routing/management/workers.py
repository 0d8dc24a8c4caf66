"""``manage.py serve --workers N``: N gateway processes on one port, kept running by serve.

Every worker gets its own listening socket on the same address with ``SO_REUSEPORT``,
made here and handed over as an inherited file descriptor: the kernel spreads new
connections over the workers by a hash of the client's address and port, so a keep-alive
client stays on one worker and no worker takes every connection of a burst (with one shared
socket, the first process to wake up accepts all that are queued). The parent never holds
a listening socket of its own once the workers have theirs, so no connection waits on a
socket nobody accepts from.

A worker that exits while serve is not stopping is logged and started again on a fresh
socket (the connections queued on the dead one are lost: their clients see a reset). A
worker that exits within ``QUICK_EXIT_S`` of its start ``QUICK_EXITS`` times in a row is
broken, not unlucky (an import error, a bad setting): serve stops every worker and exits
with its status rather than restarting it forever.

Why N > 1 needs ``REDIS_URL``: cooldowns, probe leases, round-robin tickets, in-flight
counts and session affinity live in the state store, and the live page's events in
the channel layer. Without Redis both are in each process's memory, so N workers would each
learn a dead route's failure on their own (N failed calls instead of one), each run the
active health checker against it (N probes per interval: the store's ``try_begin_check``
is what makes one process's check count for all), and the live page would show one
worker's calls. A second store that needs no service (e.g. shared memory) would be a second
implementation of every atomic transition the Redis store already has and is tested for;
``serve`` refuses instead and says so.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

SERVERS = ("daphne", "uvicorn")
# What each server needs beyond the runtime: daphne is the runtime's own (Channels' server);
# uvicorn comes with the ``uvicorn`` extra (uvicorn, uvloop, httptools, websockets).
SERVER_MODULES = {
    "daphne": ("daphne",),
    "uvicorn": ("uvicorn", "uvloop", "httptools", "websockets"),
}
# The module each server runs as: daphne through Switchyard's edge (a bounded read, a
# request deadline, backpressure, a scrubbed access log: routing.management.daphne_edge).
SERVER_ENTRY = {"daphne": "routing.management.daphne_edge", "uvicorn": "uvicorn"}
QUICK_EXIT_S = 10.0
QUICK_EXITS = 3
POLL_S = 0.2


class WorkersError(ValueError):
    """A bad ``--workers`` or ``--server``: said before anything is started."""


def parse_workers(value: str) -> int:
    """``auto`` -> the cores this process may run on; else a whole number of at least 1."""
    text = str(value).strip().lower()
    if text == "auto":
        if hasattr(os, "sched_getaffinity"):  # Linux: the cores this process may use
            return max(1, len(os.sched_getaffinity(0)))
        return os.cpu_count() or 1
    if text.isdigit() and int(text) >= 1:
        return int(text)
    raise WorkersError(
        f"--workers must be a whole number of at least 1 or 'auto' (the machine's cores); "
        f"got {value!r}. Nothing was started."
    )


def check_server(name: str) -> str:
    if name not in SERVERS:
        raise WorkersError(
            f"--server must be one of {', '.join(SERVERS)}; got {name!r}. Nothing was started."
        )
    missing = [m for m in SERVER_MODULES[name] if importlib.util.find_spec(m) is None]
    if missing:
        raise WorkersError(
            f"--server {name} needs {', '.join(missing)}, which is not installed: "
            f"pip install 'switchyard[{name}]'. Nothing was started."
        )
    return name


def refusal(
    count: int, host: str, redis_url: str, state_store: str, server: str = "daphne"
) -> str | None:
    """Why ``count`` workers cannot run with this configuration, or None when they can."""
    if count == 1:
        return None
    if ":" in host and server == "daphne":
        return (
            f"--workers {count} under daphne serves IPv4 addresses only (daphne adopts an "
            f"inherited socket as IPv4); got {host}. Serve one worker, listen on 0.0.0.0, "
            "or use --server uvicorn. Nothing was started."
        )
    if redis_url and state_store == "redis":
        return None
    return (
        f"--workers {count} needs REDIS_URL (and the redis state store): without it health "
        "(cooldowns, probe leases), session affinity and the live page's channel "
        f"layer live in each process's memory, so {count} workers would each learn a dead "
        f"route on their own, probe it {count} times per health-check interval and show the "
        "live page only their own calls. Set REDIS_URL=redis://HOST:6379/0, or serve one "
        "worker. Nothing was started."
    )


def reuseport_socket(host: str, port: int, backlog: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
        sock.listen(backlog)
        sock.set_inheritable(True)
    except BaseException:
        sock.close()
        raise
    return sock


def server_command(
    server: str, app: str, *, host: str, port: int, backlog: int, fd: int | None = None
) -> list[str]:
    """The command of one server process: listening on ``host:port`` itself, or on the
    inherited listening socket ``fd``. daphne's ``fd:`` endpoint is IPv4 only: its plugin
    passes the address family to Twisted as a string, which Twisted refuses for anything
    but its default."""
    if server == "uvicorn":  # uvloop and httptools: its fast loop and parser
        where = (
            ["--fd", str(fd)]
            if fd is not None
            else ["--host", host, "--port", str(port), "--backlog", str(backlog)]
        )
        fast = ["--loop", "uvloop", "--http", "httptools", "--ws", "websockets"]
        return [sys.executable, "-m", SERVER_ENTRY["uvicorn"], *where, *fast, app]
    if fd is not None:
        endpoint = f"fd:fileno={fd}"
    else:
        interface = host.replace(":", "\\:")  # an IPv6 address's colons, escaped for Twisted
        endpoint = f"tcp:port={port}:interface={interface}:backlog={backlog}"
    return [sys.executable, "-m", SERVER_ENTRY["daphne"], "-e", endpoint, app]


@dataclass
class Worker:
    index: int
    process: subprocess.Popen[bytes]
    started: float


@dataclass
class Supervisor:
    """Starts ``count`` workers and keeps them running; serve stops them. ``command``
    (a listening socket's fd -> the worker's command) defaults to ``server``'s."""

    count: int
    host: str
    port: int
    backlog: int
    server: str
    app: str
    cwd: Path
    say: Callable[[str], None]
    clock: Callable[[], float] = time.monotonic
    command: Callable[[int], list[str]] | None = None
    workers: dict[int, Worker] = field(default_factory=dict)
    quick_exits: int = 0

    def start(self) -> None:
        for index in range(self.count):
            self._start(index)

    def _start(self, index: int) -> None:
        sock = reuseport_socket(self.host, self.port, self.backlog)
        try:
            fd = sock.fileno()
            command = (
                self.command(fd)
                if self.command is not None
                else server_command(
                    self.server,
                    self.app,
                    host=self.host,
                    port=self.port,
                    backlog=self.backlog,
                    fd=fd,
                )
            )
            process = subprocess.Popen(command, cwd=self.cwd, pass_fds=(sock.fileno(),))
        finally:
            sock.close()  # the worker holds its own copy
        self.workers[index] = Worker(index, process, self.clock())

    def pids(self) -> list[int]:
        return [w.process.pid for w in self.workers.values()]

    def watch(self) -> int:
        """Restart every worker that exits; returns an exit status once one keeps failing
        at start (serve then stops the rest)."""
        while True:
            for index, worker in list(self.workers.items()):
                code = worker.process.poll()
                if code is None:
                    continue
                lived = self.clock() - worker.started
                self.quick_exits = self.quick_exits + 1 if lived < QUICK_EXIT_S else 0
                if self.quick_exits >= QUICK_EXITS:
                    self.say(
                        f"worker {index + 1} (pid {worker.process.pid}) exited with status "
                        f"{code} {self.quick_exits} times in a row within {QUICK_EXIT_S:.0f} s "
                        "of its start; stopping every worker (see its output above)"
                    )
                    return code or 1
                self.say(
                    f"worker {index + 1} (pid {worker.process.pid}) exited with status {code} "
                    f"after {lived:.0f} s; starting it again"
                )
                self._start(index)
                self.say(f"worker {index + 1} restarted (pid {self.workers[index].process.pid})")
            time.sleep(POLL_S)

    def processes(self) -> list[subprocess.Popen[bytes]]:
        return [w.process for w in self.workers.values()]
