"""``manage.py serve``: everything ``make run`` does, in one command.

Migrates the database, applies the configuration (``SWITCHYARD_CONFIG`` when set, else the
demo: a simulated upstream started alongside, with one flaky and one healthy route),
issues a fresh demo client key, prints copy-paste examples, and serves through daphne.
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

DEMO_CONFIG = Path(__file__).resolve().parents[2] / "simulator" / "demo.yaml"


LISTEN_BACKLOG = 4096


def daphne_endpoint(host: str, port: int, backlog: int = LISTEN_BACKLOG) -> str:
    """daphne's ``-b/-p`` listen with Twisted's default backlog of 50: at a few hundred new
    connections a second (streams opening while thousands are held) the kernel drops
    SYNs and clients wait 1-3 s for the retransmit. The endpoint form sets the backlog
    (the kernel caps it at ``net.core.somaxconn``)."""
    interface = host.replace(":", "\\:")  # an IPv6 address's colons, escaped for Twisted
    return f"tcp:port={port}:interface={interface}:backlog={backlog}"


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

    def handle(self, *args: Any, **options: Any) -> None:
        settings.VAR_DIR.mkdir(parents=True, exist_ok=True)
        call_command("migrate", interactive=False, verbosity=0)
        host, port = options["host"], options["port"]
        children: list[subprocess.Popen[bytes]] = []
        try:
            config_file = settings.SWITCHYARD["CONFIG_FILE"]
            if config_file:
                call_command("loadconfig", config_file)
                self.stdout.write(f"Applied {config_file}.")
                demo = False
            else:
                children.append(self._start_demo_upstream(options["demo_port"]))
                call_command("loadconfig", str(DEMO_CONFIG))
                demo = True
            secret = self._demo_key()
            self._print_welcome(host, port, secret, demo)
            server = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "daphne",
                    "-e",
                    daphne_endpoint(host, port),
                    "router_project.asgi:application",
                ],
                cwd=settings.BASE_DIR,
            )
            children.append(server)
            signal.signal(signal.SIGTERM, lambda *_: server.terminate())
            server.wait()
        except KeyboardInterrupt:
            pass
        finally:
            for child in reversed(children):
                if child.poll() is None:
                    child.terminate()
                    try:
                        child.wait(timeout=5)
                    except subprocess.TimeoutExpired:
                        child.kill()

    def _start_demo_upstream(self, demo_port: int) -> subprocess.Popen[bytes]:
        os.environ["SWITCHYARD_DEMO_PORT"] = str(demo_port)
        child = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "routing.simulator",
                "--port",
                str(demo_port),
                "--preset",
                "demo",
            ],
            cwd=settings.BASE_DIR,
        )
        if not wait_for_port("127.0.0.1", demo_port):
            child.terminate()
            raise CommandError(f"the demo upstream did not start on port {demo_port}")
        return child

    def _demo_key(self) -> str:
        from django.utils import timezone

        from routing.keys import generate_key
        from routing.models import ApiKey

        # A fresh key per start: secrets are stored hashed and cannot be shown twice.
        ApiKey.objects.filter(name="demo", revoked_at__isnull=True).update(
            revoked_at=timezone.now()
        )
        _, secret = generate_key(name="demo", kind="client")
        return secret

    def _print_welcome(self, host: str, port: int, secret: str, demo: bool) -> None:
        base = f"http://{host}:{port}/v1"
        model = "auto"
        lines = [
            "",
            f"Switchyard is starting on http://{host}:{port}  (settings page: http://{host}:{port}/ , admin: /admin/)",
            "Demo client key (shown once):" if demo else "Client key (shown once):",
            f"  {secret}",
            "",
            "Try it:",
            f"  curl -sS {base}/chat/completions -H 'Authorization: Bearer {secret}' "
            f'-H \'Content-Type: application/json\' -d \'{{"model": "{model}", "messages": '
            f'[{{"role": "user", "content": "Hello"}}]}}\' -D -',
            "",
            "  python - <<'PY'",
            "  from openai import OpenAI",
            f"  client = OpenAI(base_url='{base}', api_key='{secret}')",
            f"  reply = client.chat.completions.create(model='{model}', messages=[{{'role': 'user', 'content': 'Hello'}}])",
            "  print(reply.model, reply.choices[0].message.content)",
            "  PY",
            "",
        ]
        if demo:
            lines.insert(
                -1,
                "The demo's 'auto' group starts on a flaky route: watch the x-switchyard-trail header "
                "show retries and failovers. Set SWITCHYARD_CONFIG=your.yaml to serve your own routes.",
            )
        self.stdout.write("\n".join(lines))
        self.stdout.flush()
