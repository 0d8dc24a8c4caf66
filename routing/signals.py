"""Keep every process's compiled routing table in step with the database.

Any committed write to the configuration models marks the table stale; the next call
compiles a fresh one. The same write bumps ``ConfigVersion`` inside its transaction, so
every other gateway process notices it on its next version check (``routing.gateway.sync``,
at most ``CONFIG_CHECK_S`` later) whatever process wrote it; with ``REDIS_URL`` set the
change is also broadcast at once over pub/sub.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models.signals import post_delete, post_save

from routing.config.signals import config_changed

CONFIG_MODELS = ("Provider", "Group", "Target", "GlobalSettings", "ApiKey")


def configuration_changed(**_: Any) -> None:
    bump_config_version()  # inside the writer's transaction: rolls back with it
    transaction.on_commit(_invalidate_everywhere)


def config_change_announced(**_: Any) -> None:
    """``config_changed`` is sent after commit; writes made with ``update()`` or
    ``bulk_create()`` fire no model signal, so the announcement bumps the version too."""
    bump_config_version()
    transaction.on_commit(_invalidate_everywhere)  # at once when sent after commit


def bump_config_version() -> None:
    from django.db.models import F

    from routing.models import ConfigVersion

    if not ConfigVersion.objects.filter(pk=1).update(version=F("version") + 1):
        ConfigVersion.objects.get_or_create(pk=1, defaults={"version": 1})


def _invalidate_everywhere() -> None:
    from routing.gateway import runtime, sync

    current = runtime.installed_runtime()
    if current is not None:
        current.invalidate()
    sync.broadcast_change()


def connect() -> None:
    from django.apps import apps

    for name in CONFIG_MODELS:
        model = apps.get_model("routing", name)
        post_save.connect(
            configuration_changed, sender=model, dispatch_uid=f"switchyard-{name}-save"
        )
        post_delete.connect(
            configuration_changed, sender=model, dispatch_uid=f"switchyard-{name}-delete"
        )
    config_changed.connect(config_change_announced, dispatch_uid="switchyard-config-changed")
