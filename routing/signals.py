"""Keep every process's compiled routing table in step with the database.

One configuration write — one transaction, however many rows it saves — bumps
``ConfigVersion`` once, inside that transaction, and after it commits marks this process's
table stale and broadcasts one notice (with ``REDIS_URL``, over pub/sub). Every other
gateway process notices the bump on its next version check (``routing.gateway.sync``, at
most ``CONFIG_CHECK_S`` later) whatever process wrote it, or the notice at once.

:func:`config_written` is that one step, and the model hooks are its one trigger: every
save or delete of a configuration row (``post_save``, ``post_delete`` on ``CONFIG_MODELS``)
calls it, and only its first call in a transaction acts.

Decision: the hooks, not the services' ``record()``. A hook cannot be bypassed by an edge:
the admin's inline formsets on the group page save target rows themselves, the key
primitives (``generate_key``) save keys, and a shell or migration saves rows too — each
triggers it without remembering to. What the hooks do not see (``update()``,
``bulk_create()``) is used only where it must not trigger (``models_loaded_at``, a
re-encrypted credential, the loader adopting an unchanged row) or beside a saved row of
the same write (a claimed version, reordered positions, the loader's targets after their
group's save). ``record()`` only leaves the change record.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models.signals import post_delete, post_save

CONFIG_MODELS = ("Provider", "Group", "Target", "GlobalSettings", "ApiKey")


def config_written(**_: Any) -> None:
    """This transaction writes configuration: bump the version (rolls back with it) and,
    once it commits, invalidate here and everywhere — once per transaction.

    Decision: "already done in this transaction" is read from Django's own list of the
    transaction's on-commit callbacks, not kept in a flag of ours, so a savepoint rolled
    back takes its bump's callback with it and the next write in the transaction bumps
    again. Outside a transaction (autocommit) every call is its own write.
    """
    connection = transaction.get_connection()
    if connection.in_atomic_block and any(
        func is _invalidate_everywhere for _, func, _ in connection.run_on_commit
    ):
        return
    bump_config_version()
    transaction.on_commit(_invalidate_everywhere)


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
        post_save.connect(config_written, sender=model, dispatch_uid=f"switchyard-{name}-save")
        post_delete.connect(config_written, sender=model, dispatch_uid=f"switchyard-{name}-delete")
