"""Committed configuration writes → ``*.changed`` notices for open dashboard pages.

Every write path (page, API, admin, config file) saves through the models, so receivers
on the models catch them all. Notices are queued with ``transaction.on_commit``: a write
that rolls back (a validation error, a version conflict) tells nobody. A page compares
the version in a notice with the version it rendered and raises its conflict banner when
it is behind (``static/dashboard/dashboard.js``).
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models.signals import post_delete, post_save

from dashboard import channel_names as names
from dashboard.broadcast import notify


def _group_saved(instance: Any, **_: Any) -> None:
    message = {"type": names.GROUP_CHANGED, "name": instance.name, "version": instance.version}
    transaction.on_commit(lambda: notify(message))


def _group_deleted(instance: Any, **_: Any) -> None:
    message = {"type": names.GROUP_CHANGED, "name": instance.name, "version": 0}
    transaction.on_commit(lambda: notify(message))


def _provider_saved(instance: Any, **_: Any) -> None:
    message = {"type": names.PROVIDER_CHANGED, "name": instance.name, "version": instance.version}
    transaction.on_commit(lambda: notify(message))


def _provider_deleted(instance: Any, **_: Any) -> None:
    message = {"type": names.PROVIDER_CHANGED, "name": instance.name, "version": 0}
    transaction.on_commit(lambda: notify(message))


def _global_saved(instance: Any, **_: Any) -> None:
    message = {"type": names.GLOBAL_CHANGED, "version": instance.version}
    transaction.on_commit(lambda: notify(message))


def connect() -> None:
    from routing.models import GlobalSettings, Group, Provider

    post_save.connect(_group_saved, sender=Group, dispatch_uid="dashboard-group-saved")
    post_delete.connect(_group_deleted, sender=Group, dispatch_uid="dashboard-group-deleted")
    post_save.connect(_provider_saved, sender=Provider, dispatch_uid="dashboard-provider-saved")
    post_delete.connect(
        _provider_deleted, sender=Provider, dispatch_uid="dashboard-provider-deleted"
    )
    post_save.connect(_global_saved, sender=GlobalSettings, dispatch_uid="dashboard-global-saved")
