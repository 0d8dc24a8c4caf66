"""``manage.py loadconfig FILE [--check]``: validate a config file, then apply it atomically.

A bad file exits non-zero listing every error and changes nothing. ``--check`` validates
and shows what applying would change (a dry run rolled back), without writing.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from routing.config.errors import ConfigError
from routing.config.loader import apply_config, load_file


class Command(BaseCommand):
    help = "Validate a Switchyard config file and apply it (the file is the full desired state)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="path to the YAML config file")
        parser.add_argument(
            "--check", action="store_true", help="only validate and report what would change"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        path: str = options["file"]
        try:
            config = load_file(path)
            result = apply_config(config, source=path, dry_run=options["check"])
        except ConfigError as exc:
            count = len(exc.errors)
            plural = "s" if count != 1 else ""
            raise CommandError(
                f"{path}: {count} error{plural}, nothing applied:\n{exc.format()}"
            ) from None
        verb = "is valid; applying it would change" if options["check"] else "applied"
        self.stdout.write(f"{path} {verb}:")
        for line in result.summary():
            self.stdout.write(f"  {line}")
        for warning in result.warnings:
            self.stderr.write(f"warning: {warning}")
