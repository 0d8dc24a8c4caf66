"""``manage.py serve``: everything ``make run`` does, in one command.

A start never undoes operator work (SPEC §10):

1. The ports are checked first: a busy port exits non-zero with a clear message before
   anything is written (no migration, no key, no config).
2. Migrates the database.
3. Configuration: ``SWITCHYARD_CONFIG`` set -> that file is applied as the *file layer*
   (``loadconfig`` without ``--replace``): new objects are created, what came from the
   file is updated, objects made on the page/API/admin are untouched, and file objects
   changed there since are kept and listed. Unset -> the demo configuration (a simulated
   upstream started alongside, one flaky and one healthy route) is applied only to a
   fresh database (no providers, no groups); otherwise the database is served as it is
   (the demo upstream is still started when the demo was what configured it).
4. The demo client key (``routing.management.demo_key``): only when serving the demo, and
   created only once, kept in ``var/demo-key`` (mode 0600). A revoked demo key stays
   revoked; a start with ``SWITCHYARD_CONFIG`` creates no key. The welcome names the file
   and never prints the secret (standard output ends up in logs).
5. Serves through daphne; its exit status is this command's. ``--workers N`` (or
   ``SWITCHYARD_WORKERS``; ``auto`` = the machine's cores) serves N daphne processes on the
   one port instead, and restarts one that exits (``routing.management.workers``; N > 1
   needs ``REDIS_URL``). A bad ``--workers`` or ``--server`` is refused before the port
   check, so nothing is started or written.

SIGTERM and SIGINT stop everything it started (daphne, the demo upstream), at any point of
the start: a ``kill -INT`` of this process alone does what Ctrl-C on ``make run`` does. The
handler is installed explicitly because a process started in the background by a
non-interactive shell (``manage.py serve &``, ``nohup``) inherits SIGINT *ignored*, and then
Python never turns it into ``KeyboardInterrupt``.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from routing.conf import switchyard_settings
from routing.management.demo_key import demo_key, welcome
from routing.management.workers import (
    Supervisor,
    WorkersError,
    check_server,
    parse_workers,
    refusal,
    server_command,
)
from routing.simulator.presets import write_demo_google_account

DEMO_CONFIG = Path(__file__).resolve().parents[2] / "simulator" / "demo.yaml"
APP = "router_project.asgi:application"


# daphne's ``-b/-p`` listen with Twisted's default backlog of 50: at a few hundred new
# connections a second (streams opening while thousands are held) the kernel drops SYNs and
# clients wait 1-3 s for the retransmit. Every server here is given this backlog instead
# (the kernel caps it at ``net.core.somaxconn``).
LISTEN_BACKLOG = 4096


def ensure_free(host: str, port: int, variable: str) -> None:
    """Refuse to start on a port something already listens on (before anything is written)."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise CommandError(
                f"cannot serve on {host}:{port}: {exc.strerror or exc} (is Switchyard already "
                f"running there?). Stop it or choose another port with {variable}=...; "
                "nothing was changed."
            ) from None


def _fresh_database() -> bool:
    from routing.models import Group, Provider

    return not Provider.objects.exists() and not Group.objects.exists()


def _demo_configured() -> bool:
    """No file given: the demo runs on a fresh database or one the demo configured."""
    from django.db import DatabaseError

    from routing.models import GlobalSettings

    try:
        if _fresh_database():
            return True
        row = GlobalSettings.objects.filter(pk=1).first()
    except DatabaseError:  # not migrated yet: a fresh database
        return True
    return row is not None and row.config_source == str(DEMO_CONFIG)


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Stopped(Exception):
    """SIGTERM or SIGINT arrived: unwind to the cleanup that stops every child."""


def _on_stop_signal(signum: int, _frame: object) -> None:
    for number in STOP_SIGNALS:  # a second signal must not interrupt the cleanup
        signal.signal(number, signal.SIG_IGN)
    raise Stopped(signal.Signals(signum).name)


def wait_for_port(host: str, port: int, timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.1)
    return False


class Command(BaseCommand):
    help = (
        "Migrate, apply the configuration (or the demo), issue a demo key and serve through daphne."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--host", default=os.environ.get("SWITCHYARD_HOST", "127.0.0.1"))
        parser.add_argument(
            "--port", type=int, default=int(os.environ.get("SWITCHYARD_PORT", "8000"))
        )
        parser.add_argument(
            "--demo-port", type=int, default=int(os.environ.get("SWITCHYARD_DEMO_PORT", "9100"))
        )
        parser.add_argument(
            "--workers",
            default=os.environ.get("SWITCHYARD_WORKERS") or "1",
            help="gateway processes on the one port: a number, or 'auto' for the machine's "
            "cores (default 1; more than 1 needs REDIS_URL)",
        )
        parser.add_argument(
            "--server",
            default=os.environ.get("SWITCHYARD_SERVER") or "daphne",
            help="the ASGI server of each worker: daphne (default) or uvicorn (the uvicorn "
            "extra: uvloop, httptools)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        host, port = options["host"], options["port"]
        conf = switchyard_settings()
        config_file = conf.CONFIG_FILE
        try:
            workers = parse_workers(options["workers"])
            server_name = check_server(options["server"])
        except WorkersError as exc:
            raise CommandError(str(exc)) from None
        refused = refusal(workers, host, conf.REDIS_URL, conf.STATE_STORE, server_name)
        if refused:
            raise CommandError(refused)
        ensure_free(host, port, "SWITCHYARD_PORT")
        demo = not config_file and _demo_configured()
        if demo:
            ensure_free("127.0.0.1", options["demo_port"], "SWITCHYARD_DEMO_PORT")
        settings.VAR_DIR.mkdir(parents=True, exist_ok=True)
        children: list[subprocess.Popen[bytes]] = []
        for number in STOP_SIGNALS:
            signal.signal(number, _on_stop_signal)
        try:
            call_command("migrate", interactive=False, verbosity=0)
            if config_file:
                self._apply_file(config_file)
            elif demo:
                children.append(self._start_demo_upstream(options["demo_port"]))
                if _fresh_database():
                    call_command("loadconfig", str(DEMO_CONFIG))
                else:
                    self.stdout.write(
                        "Kept the configuration in the database (the demo is applied only "
                        "to a fresh database)."
                    )
            else:
                self.stdout.write(
                    "Serving the configuration in the database (the demo is applied only "
                    "to a fresh database; set SWITCHYARD_CONFIG to apply a file)."
                )
            key = demo_key(settings.VAR_DIR) if demo else None
            self.stdout.write(welcome(host, port, key, demo=demo))
            self.stdout.flush()
            if workers > 1:
                supervisor = Supervisor(
                    count=workers,
                    host=host,
                    port=port,
                    backlog=LISTEN_BACKLOG,
                    server=server_name,
                    app=APP,
                    cwd=settings.BASE_DIR,
                    say=self._say,
                )
                try:
                    supervisor.start()
                    self._say(
                        f"serving {workers} {server_name} workers on {host}:{port} "
                        f"(pids {', '.join(map(str, supervisor.pids()))})"
                    )
                    code = supervisor.watch()
                finally:
                    children.extend(supervisor.processes())
                raise CommandError("a worker keeps exiting at start", returncode=code)
            command = server_command(server_name, APP, host=host, port=port, backlog=LISTEN_BACKLOG)
            server = subprocess.Popen(command, cwd=settings.BASE_DIR)
            children.append(server)
            code = server.wait()
            if code not in (0, -signal.SIGTERM):
                raise CommandError(f"{server_name} exited with status {code}", returncode=code or 1)
        except (KeyboardInterrupt, Stopped):
            pass
        finally:
            for child in reversed(children):  # workers first, then the demo upstream
                if child.poll() is None:
                    child.terminate()
            for child in reversed(children):
                try:
                    child.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    child.kill()
                    child.wait()

    def _say(self, line: str) -> None:
        self.stdout.write(f"serve: {line}")
        self.stdout.flush()

    def _apply_file(self, config_file: str) -> None:
        from routing.config.errors import ConfigError
        from routing.config.yaml import load_file
        from routing.services.config_file import config_apply

        try:
            result = config_apply(
                load_file(config_file), source=config_file, replace=False, keep_operator_work=True
            )
        except ConfigError as exc:
            raise CommandError(f"{config_file}: nothing applied:\n{exc.format()}") from None
        self.stdout.write(f"Applied {config_file} (the file layer):")
        for line in result.summary():
            self.stdout.write(f"  {line}")

    def _start_demo_upstream(self, demo_port: int) -> subprocess.Popen[bytes]:
        os.environ["SWITCHYARD_DEMO_PORT"] = str(demo_port)
        # the demo's Vertex AI provider signs with this key; the simulator trusts it
        account = write_demo_google_account(
            Path(settings.VAR_DIR), f"http://127.0.0.1:{demo_port}/token"
        )
        os.environ["SWITCHYARD_DEMO_GOOGLE_ACCOUNT"] = str(account)
        child = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "routing.simulator",
                "--port",
                str(demo_port),
                "--preset",
                "demo",
                "--google-account",
                str(account),
            ],
            cwd=settings.BASE_DIR,
        )
        if not wait_for_port("127.0.0.1", demo_port):
            child.terminate()
            raise CommandError(f"the demo upstream did not start on port {demo_port}")
        return child
