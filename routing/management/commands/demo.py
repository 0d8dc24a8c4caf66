"""``manage.py demo``: run the simulated upstream for the newcomer demo, in the foreground.

It needs neither the database nor a valid configuration (no system checks, no
migrations check): a newcomer runs it first, in its own terminal, before anything else
is set up. See ``routing.simulator.presets.demo`` for what each model does.
"""

from __future__ import annotations

from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand

from routing.simulator.presets import demo, describe, write_demo_google_account


class Command(BaseCommand):
    help = "Run a simulated OpenAI-compatible upstream with flaky, broken and steady models."
    requires_system_checks: list[str] = []
    requires_migrations_checks = False

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument(
            "--port",
            type=int,
            default=9100,
            help="0 picks a free port (the printed line tells which)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        upstream = demo(options["host"], options["port"]).start()
        account = write_demo_google_account(Path(settings.VAR_DIR), upstream.token_uri)
        upstream.google.register_file(str(account))
        self.stdout.write(describe(upstream, "demo"))
        self.stdout.write(
            f"Vertex AI key file for the demo: SWITCHYARD_DEMO_GOOGLE_ACCOUNT={account}"
        )
        self.stdout.flush()
        upstream.serve_forever()
