"""Keep every process's compiled routing table in step with the database.

Any committed write to the configuration models marks the table stale; the next call
compiles a fresh one. (With ``REDIS_URL`` set, ``routing.sync`` also broadcasts the change
to the other gateway processes.)
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models.signals import post_delete, post_save

from routing.config.signals import config_changed

CONFIG_MODELS = ("Provider", "Group", "Target", "GlobalSettings", "ApiKey")


def configuration_changed(**_: Any) -> None:
    transaction.on_commit(_invalidate_everywhere)


def _invalidate_everywhere() -> None:
    from routing import runtime, sync

    if runtime._runtime is not None:
        runtime._runtime.invalidate()
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
    config_changed.connect(configuration_changed, dispatch_uid="switchyard-config-changed")
