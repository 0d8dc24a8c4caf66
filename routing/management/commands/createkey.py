"""``manage.py createkey NAME [--admin] [--groups a,b] [--limit rpm=60 ...]``: create a
gateway key (``--limit`` once per limit, SPEC §17).

The secret is printed once, alone on the last line of stdout (scripts can ``tail -n1``);
only its sha256 is stored. Goes through ``routing.services.key_create`` like the API and
the page (config-change record with path ``cli``); running gateways accept the key
within a second.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from routing.config.errors import ConfigError
from routing.config.schema import LIMIT_NAMES
from routing.services import key_create
from routing.services.api_keys import parse_limit_options
from routing.services.base import default_actor


class Command(BaseCommand):
    help = "Create a client (default) or admin API key and print its secret once."
    # A data command, like Django's createsuperuser: the project's system checks (which
    # import every URL and view) have nothing to say about it and were a fifth of its start.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="a label for the key (who or what uses it)")
        parser.add_argument("--admin", action="store_true", help="an admin (management API) key")
        parser.add_argument(
            "--groups",
            default="",
            help="comma-separated groups a client key may use (default: all)",
        )
        parser.add_argument(
            "--limit",
            action="append",
            default=[],
            metavar="NAME=VALUE",
            help="a limit, e.g. rpm=60 or cost_per_day=5 (repeat for several): "
            + ", ".join(LIMIT_NAMES),
        )

    def handle(self, *args: Any, **options: Any) -> None:
        groups = [g.strip() for g in options["groups"].split(",") if g.strip()]
        kind = "admin" if options["admin"] else "client"
        try:
            key, secret = key_create(
                name=options["name"],
                kind=kind,
                groups=groups,
                limits=parse_limit_options(options["limit"]),
                actor=default_actor(),
                path="cli",
            )
        except ConfigError as exc:
            raise CommandError("; ".join(str(error) for error in exc.errors)) from None
        scope = ", ".join(key.groups) if key.groups else "all groups"
        if kind == "admin":
            scope = "management API"
        if key.limits:
            scope += "; limits " + ", ".join(f"{k}={v}" for k, v in key.limits.items())
        self.stdout.write(
            f"created {kind} key {key.name!r} (id {key.pk}, prefix {key.prefix}; {scope})"
        )
        self.stdout.write("the secret is shown only now; store it:")
        self.stdout.write(secret)
