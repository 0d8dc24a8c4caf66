"""``manage.py prune_records [--days N] [--max-rows N]``: apply audit retention now.

Without options it applies the configured bounds (``SWITCHYARD["AUDIT_MAX_AGE_DAYS"]``,
``SWITCHYARD["AUDIT_MAX_ROWS"]``), the same ones the audit writer applies on its own;
``0`` disables a bound.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from routing.audit.retention import retention_from_settings
from routing.audit.services import records_prune


class Command(BaseCommand):
    help = "Delete audit records older than the retention age or beyond the retention count."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--days",
            type=float,
            default=None,
            help="Keep records younger than this many days (0: no age bound).",
        )
        parser.add_argument(
            "--max-rows",
            type=int,
            default=None,
            help="Keep at most this many of each kind of record (0: no count bound).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        bounds = retention_from_settings()
        if options["days"] is not None:
            bounds["max_age"] = timedelta(days=options["days"]) if options["days"] > 0 else None
        if options["max_rows"] is not None:
            bounds["max_rows"] = options["max_rows"] if options["max_rows"] > 0 else None
        deleted = records_prune(**bounds)
        summary = ", ".join(f"{count} {kind.replace('_', ' ')}" for kind, count in deleted.items())
        self.stdout.write(f"Pruned {summary}.")
