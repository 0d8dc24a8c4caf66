"""``manage.py exportconfig [-o FILE]``: write the current configuration as a config file.

Credentials are exported as ``${<PROVIDER>_API_KEY}`` placeholders, never in plaintext.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from routing.config.export import export_config


class Command(BaseCommand):
    help = "Export providers, groups and defaults as a Switchyard config file (no secrets)."
    # A data command, like Django's createsuperuser: the project's system checks (which
    # import every URL and view) have nothing to say about it and were a fifth of its start.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("-o", "--output", help="write to this file instead of stdout")

    def handle(self, *args: Any, **options: Any) -> None:
        text = export_config()
        if options["output"]:
            Path(options["output"]).write_text(text, encoding="utf-8")
            self.stderr.write(f"wrote {options['output']}")
        else:
            self.stdout.write(text, ending="")
