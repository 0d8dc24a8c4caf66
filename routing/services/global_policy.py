"""Global settings: the policy layer between the config file and the groups."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from routing.config.errors import ConfigError, FieldError
from routing.config.policy import (
    BUILTIN_DEFAULTS,
    ORDERED_PAIRS,
    POLICY_FIELDS,
    ordered_flat,
    resolve,
    validate_effective,
    validate_policy_flat,
)
from routing.models import GlobalSettings, Group
from routing.services.base import (
    Unchanged,
    known_fields,
    policy_changes,
    record,
    versioned_write,
)
from routing.services.groups import policy_snapshot

_PARTNER = {low: high for low, high in ORDERED_PAIRS} | {high: low for low, high in ORDERED_PAIRS}


def _group_conflicts(
    file_layer: dict[str, Any], global_layer: dict[str, Any], changed: set[str]
) -> list[FieldError]:
    """Errors the new global layer would cause in some group's effective policy, each put on
    a global field (the one being written when the pair offers a choice)."""
    errors: list[FieldError] = []
    for name, policy in Group.objects.order_by("name").values_list("name", "policy"):
        try:
            validate_effective(resolve(BUILTIN_DEFAULTS, file_layer, global_layer, policy or {}))
        except ConfigError as exc:
            for error in exc.errors:
                path = error.path if error.path in changed else _PARTNER.get(error.path, error.path)
                errors.append(FieldError(path, f"group {name!r} would break: {error}"))
    return errors


def checked_global_policy(row: GlobalSettings, policy: Any) -> dict[str, Any]:
    """A new global layer (flat dotted keys) validated as every write path validates it:
    the fields, the effective policy over the config file's layer, and every group's
    effective policy over it. Returns it normalized; the admin's form checks with it too."""
    flat = validate_policy_flat(policy)
    validate_effective(resolve(BUILTIN_DEFAULTS, row.file_policy or {}, flat))
    old = ordered_flat(row.policy or {})
    if flat == old:
        return flat
    changed = {key for key in flat.keys() | old.keys() if flat.get(key) != old.get(key)}
    changed |= flat.keys() ^ old.keys()
    errors = _group_conflicts(row.file_policy or {}, flat, changed)
    if errors:
        raise ConfigError(errors)
    return flat


def _set_policy(row: GlobalSettings, policy: dict[str, Any], *, actor: str, path: str) -> None:
    policy = checked_global_policy(row, policy)
    old = ordered_flat(row.policy or {})
    if policy == old:
        raise Unchanged
    row.policy = policy
    row.save()
    record(
        actor=actor,
        path=path,
        object_type="global",
        object_name="global settings",
        before=policy_snapshot(old),
        after=policy_snapshot(policy),
    )


def _write_global(change: Callable[[GlobalSettings], None], *, based_on: int) -> GlobalSettings:
    """Claim the global settings row (created on first use) at ``based_on`` and change it."""
    GlobalSettings.load()
    return versioned_write(
        GlobalSettings,
        kind="global settings",
        name="global",
        based_on=based_on,
        change=change,
        pk=1,
    )


def global_update_policy(
    *, changes: dict[str, object], based_on: int, actor: str, path: str
) -> GlobalSettings:
    """Set global policy fields (flat dotted keys, or nested blocks). Refused when it would
    leave any group with an invalid effective policy."""

    def change(row: GlobalSettings) -> None:
        flat = policy_changes(changes)
        _set_policy(row, {**row.policy, **flat}, actor=actor, path=path)

    return _write_global(change, based_on=based_on)


def global_set_policy(
    *, policy: dict[str, Any], based_on: int, actor: str, path: str
) -> GlobalSettings:
    """Replace the whole global layer with ``policy`` (flat dotted keys): a key left out
    no longer overrides (the admin's form edits the layer as one JSON object)."""

    def change(row: GlobalSettings) -> None:
        _set_policy(row, policy, actor=actor, path=path)

    return _write_global(change, based_on=based_on)


def global_restore_default(
    *, fields: list[str] | None, based_on: int, actor: str, path: str
) -> GlobalSettings:
    """Drop global settings for ``fields`` (None = all) so the config file / built-in
    defaults show through."""

    def change(row: GlobalSettings) -> None:
        dropped = set(POLICY_FIELDS if fields is None else known_fields(fields))
        kept = {k: v for k, v in (row.policy or {}).items() if k not in dropped}
        _set_policy(row, kept, actor=actor, path=path)

    return _write_global(change, based_on=based_on)
