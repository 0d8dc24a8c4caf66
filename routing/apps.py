from pathlib import Path
from typing import Any

from django.apps import AppConfig
from django.db.backends.signals import connection_created

from routing.var_files import owner_only_sqlite


class RoutingConfig(AppConfig):
    name = "routing"
    verbose_name = "Switchyard routing"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from routing import checks, signals  # noqa: F401  (checks register on import)

        signals.connect()
        connection_created.connect(_owner_only_sqlite, dispatch_uid="switchyard.sqlite-mode")


def _owner_only_sqlite(sender: Any, connection: Any, **kwargs: Any) -> None:
    """The SQLite file, its WAL and shared memory narrowed to 0600 as a connection opens
    (inside the 0700 var dir), not at settings import: a command refused before it touches
    the database (``serve --workers 0``) writes no file."""
    name = connection.settings_dict.get("NAME")
    if connection.vendor == "sqlite" and name and str(name) != ":memory:":
        if not str(name).startswith("file:"):
            owner_only_sqlite(Path(name))
