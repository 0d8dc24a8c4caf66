"""``manage.py loadconfig FILE [--check] [--replace]``: validate a config file, then apply it
atomically.

By default the file is the *file layer* (SPEC §5): it creates what is new, updates and
deletes what came from the file, and leaves objects made on the page, API or admin alone.
If applying it would overwrite or delete something changed there since the file set it,
nothing is applied: the command lists each such object and exits non-zero; ``--replace``
makes the file the full desired state (overwrite those, delete everything it does not
list). A bad file exits non-zero listing every error and changes nothing. ``--check``
validates and shows what applying would change (a dry run rolled back), without writing.
Every change leaves a config-change record (path ``file``, actor ``cli:<user>``), and
every running gateway follows it within a second.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from routing.config.errors import ConfigError
from routing.config.yaml import load_file
from routing.services.config_file import OperatorWork, config_apply


class Command(BaseCommand):
    help = (
        "Validate a Switchyard config file and apply it as the file layer "
        "(--replace: as the full desired state)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="path to the YAML config file")
        parser.add_argument(
            "--check", action="store_true", help="only validate and report what would change"
        )
        parser.add_argument(
            "--replace",
            action="store_true",
            help="overwrite page/API/admin changes and delete everything the file does not list",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        path: str = options["file"]
        try:
            config = load_file(path)
            result = config_apply(
                config, source=path, replace=options["replace"], dry_run=options["check"]
            )
        except OperatorWork as exc:
            raise CommandError(
                f"{path}: nothing applied; it would overwrite operator work:\n{exc.format()}\n"
                "Run again with --replace to overwrite it, or change the file to match."
            ) from None
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
