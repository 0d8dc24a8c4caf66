"""What every configuration write shares: the errors, the compare-and-set on versions,
change records, and input checks. See ``routing.services`` for the decisions."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from django.db import models, transaction
from django.db.models import F
from pydantic import ValidationError

from routing.audit.services import config_change_record
from routing.config.errors import ConfigError, FieldError, NotFound, ServiceError
from routing.config.policy import POLICY_FIELDS, flatten, policy_flat, unflatten
from routing.config.schema import RENAMED_KEYS, PolicyIn, field_errors, renamed_message
from routing.models import GlobalSettings

M = TypeVar("M", bound=models.Model)


class VersionConflict(ServiceError):
    """The write was based on an old version; the object is now at ``current_version``."""

    def __init__(self, current_version: int) -> None:
        self.current_version = current_version
        super().__init__(
            f"this was changed since you read it (now version {current_version}); "
            "reload it and apply your change again"
        )


class ProviderCallError(ServiceError):
    """An upstream call made for the operator failed; ``message`` names no credential."""

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(message)


class NameTaken(ConfigError):
    """The object to create already exists: a field error like any other on the file and
    the page, answered 409 Conflict by the API (the body is valid; the state refuses it)."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__([FieldError(path, message)])


class Clash(ConfigError):
    """The input is valid, but clashes with another object's (a group's alias another
    group's could match): a field error like any other on the file and the page, answered
    409 Conflict by the API, as ``NameTaken`` is."""


class Unchanged(Exception):
    """Raised inside a write's transaction to roll back a version bump that changed nothing."""


def claim(model: type[M], *, kind: str, name: object, based_on: int, **lookup: Any) -> M:
    """Compare-and-set the row's version ``based_on`` -> ``based_on + 1``; returns the row.

    The conditional UPDATE is the whole concurrency story: of two writers based on the same
    version, the database lets exactly one match. Must run inside ``transaction.atomic()``.
    """
    rows = model._default_manager  # ``objects``, typed for any model
    if rows.filter(version=based_on, **lookup).update(version=F("version") + 1):
        return rows.select_for_update().get(**lookup)
    current = rows.filter(**lookup).values_list("version", flat=True).first()
    if current is None:
        raise NotFound(kind, name)
    raise VersionConflict(current)


def versioned_write(
    model: type[M],
    *,
    kind: str,
    name: object,
    based_on: int,
    change: Callable[[M], None],
    **lookup: Any,
) -> M:
    """Claim the row and run ``change`` on it in one transaction.

    ``change`` raises to refuse (everything rolls back) or :class:`Unchanged` to keep the
    version as it was; either way nothing is written.
    """
    try:
        with transaction.atomic():
            row = claim(model, kind=kind, name=name, based_on=based_on, **lookup)
            change(row)
            return row
    except Unchanged:
        return model._default_manager.get(**lookup)


def record(
    *,
    actor: str,
    path: str,
    object_type: str,
    object_name: str,
    before: Mapping[str, Any] | None,
    after: Mapping[str, Any] | None,
) -> None:
    """Leave a config-change record, after commit. The write's version bump and notice
    are not this function's: the rows it saved or deleted trigger them, once per
    transaction (``routing.signals``)."""
    config_change_record(
        actor=actor,
        path=path,
        object_type=object_type,
        object_name=object_name,
        before=before,
        after=after,
    )


def record_writes(
    *,
    actor: str,
    path: str,
    object_type: str,
    changes: Iterable[tuple[str, Mapping[str, Any] | None, Mapping[str, Any] | None]],
) -> None:
    """One editor action that wrote rows itself (the admin's group page and its inline
    targets): a config-change record per ``(name, before, after)`` that differs. The rows
    it saved bumped the version and announced the change (``routing.signals``)."""
    for name, before, after in changes:
        if before != after:
            config_change_record(
                actor=actor,
                path=path,
                object_type=object_type,
                object_name=name,
                before=before,
                after=after,
            )


def default_actor() -> str:
    """Who runs a command: ``cli:<os user>``."""
    import getpass

    try:
        return f"cli:{getpass.getuser()}"
    except (KeyError, OSError):
        return "cli"


def as_mapping(data: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(data, Mapping):
        raise ConfigError.single("", f"{what} must be an object (key: value pairs)")
    return data


def policy_layers() -> tuple[dict[str, Any], dict[str, Any]]:
    """The config-file and global-settings layers, as stored."""
    row = GlobalSettings.load()
    return dict(row.file_policy or {}), dict(row.policy or {})


def policy_changes(changes: Any) -> dict[str, Any]:
    """Validate policy changes given as flat dotted keys, nested blocks, or a mix; returns
    them flat. Validation is ``PolicyIn`` on the nested form — what the config file's
    ``defaults:`` and group blocks go through — so messages match the file's, renamed keys
    inside blocks included."""
    raw = as_mapping(changes, "policy changes")
    try:
        nested = unflatten(flatten(raw))
    except ValueError as exc:
        raise ConfigError.single("", str(exc)) from None
    try:
        return policy_flat(PolicyIn.model_validate(nested))
    except ValidationError as exc:
        raise ConfigError(field_errors(exc, PolicyIn)) from None


def known_fields(fields: Iterable[Any]) -> list[str]:
    """Validate the policy field names given to a restore-default."""
    errors: list[FieldError] = []
    names: list[str] = []
    for field in fields:
        if field in POLICY_FIELDS:
            names.append(field)
        elif isinstance(field, str) and field in RENAMED_KEYS:
            errors.append(FieldError("fields", renamed_message(field)))
        else:
            known = ", ".join(POLICY_FIELDS)
            errors.append(FieldError("fields", f"unknown policy field {field!r}; known: {known}"))
    if errors:
        raise ConfigError(errors)
    return names
