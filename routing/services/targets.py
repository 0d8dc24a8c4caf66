"""Target writes. A target is part of its group's state: every write here is based on,
and bumps, the *group's* version."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db.models import Max

from routing.config.errors import ConfigError, FieldError, NotFound
from routing.config.schema import TARGET_OPTIONS, parse_target, target_options
from routing.models import Group, Provider, Target
from routing.services.base import (
    NameTaken,
    Unchanged,
    as_mapping,
    record,
    versioned_write,
)
from routing.services.groups import check_listed, group_snapshot

TUNING = ("weight", "enabled", "context_window")


def _group_write(
    group: str, based_on: int, actor: str, path: str, change: Callable[[Group], None]
) -> Group:
    def wrapped(row: Group) -> None:
        before = group_snapshot(row)
        change(row)
        row.save()  # the claim bumped the version; post_save rebuilds the routing table
        record(
            actor=actor,
            path=path,
            object_type="group",
            object_name=group,
            before=before,
            after=group_snapshot(row),
        )

    return versioned_write(
        Group, kind="group", name=group, based_on=based_on, change=wrapped, name__exact=group
    )


def _target_of(group: Group, target_id: int) -> Target:
    target = group.targets.select_related("provider").filter(pk=target_id).first()
    if target is None:
        raise NotFound("target", f"{target_id} in group {group.name!r}")
    return target


def target_add(
    *,
    group: str,
    provider: str,
    model: str,
    weight: int = 1,
    context_window: int | None = None,
    enabled: bool = True,
    options: dict[str, Any] | None = None,
    based_on: int,
    actor: str,
    path: str,
) -> Target:
    """Append a target (last position). Refuses duplicates, unknown providers, and a model
    missing from the provider's model list when it has one."""
    created: list[Target] = []

    def change(row: Group) -> None:
        providers = {p.name: p for p in Provider.objects.all()}
        raw = {
            "provider": provider,
            "model": model,
            "weight": weight,
            "enabled": enabled,
            "context_window": context_window,
            **(options or {}),
        }
        item = parse_target(raw, providers=providers)
        check_listed([("model", item.provider, item.model)], providers)
        if row.targets.filter(provider__name=item.provider, model=item.model).exists():
            raise NameTaken(
                "model", f"{item.provider}/{item.model} is already a target of {row.name!r}"
            )
        last = row.targets.aggregate(last=Max("position"))["last"]
        created.append(
            Target.objects.create(
                group=row,
                provider=providers[item.provider],
                model=item.model,
                position=0 if last is None else last + 1,
                weight=item.weight,
                enabled=item.enabled,
                context_window=item.context_window,
                options=target_options(item),
            )
        )

    _group_write(group, based_on, actor, path, change)
    return created[0]


def target_remove(*, group: str, target_id: int, based_on: int, actor: str, path: str) -> None:
    """Remove a target; a group keeps at least one (delete the group instead), as the
    config schema requires."""

    def change(row: Group) -> None:
        target = _target_of(row, target_id)
        if row.targets.count() == 1:
            raise ConfigError.single(
                "targets", "a group needs at least one target: delete the group instead"
            )
        target.delete()
        ordered = row.targets.order_by("position", "pk").values_list("pk", flat=True)
        for position, pk in enumerate(list(ordered)):
            Target.objects.filter(pk=pk).update(position=position)

    _group_write(group, based_on, actor, path, change)


def target_update(
    *, group: str, target_id: int, changes: dict[str, Any], based_on: int, actor: str, path: str
) -> Target:
    """Change a target's ``weight``, ``enabled``, ``context_window`` or options
    (:data:`~routing.config.schema.TARGET_OPTIONS`; ``null`` restores one's default).
    Provider and model are its identity (health is keyed by them): replace the target to change those."""

    def change(row: Group) -> None:
        target = _target_of(row, target_id)
        wanted = as_mapping(changes, "target changes")
        fixed = [key for key in ("provider", "model") if key in wanted]
        if fixed:
            message = "a target's provider and model cannot change: add a new target instead"
            raise ConfigError([FieldError(key, message) for key in fixed])
        current = {"provider": target.provider.name, "model": target.model}
        current |= {key: getattr(target, key) for key in TUNING}
        current |= dict(target.options or {})
        merged = {**current, **wanted}
        for name in TARGET_OPTIONS:  # null: back to the default
            if name in wanted and wanted[name] is None:
                merged.pop(name)
        item = parse_target(merged)
        options = target_options(item)
        if all(getattr(item, key) == current[key] for key in TUNING) and options == (
            target.options or {}
        ):
            raise Unchanged
        for key in TUNING:
            setattr(target, key, getattr(item, key))
        target.options = options
        target.save(update_fields=[*TUNING, "options"])

    _group_write(group, based_on, actor, path, change)
    return Target.objects.get(pk=target_id)


def target_set_enabled(
    *, group: str, target_id: int, enabled: bool, based_on: int, actor: str, path: str
) -> Target:
    return target_update(
        group=group,
        target_id=target_id,
        changes={"enabled": enabled},
        based_on=based_on,
        actor=actor,
        path=path,
    )


def targets_reorder(*, group: str, order: list[int], based_on: int, actor: str, path: str) -> Group:
    """Set the whole order in one write: ``order`` lists every target id of the group once."""

    def change(row: Group) -> None:
        ids = list(row.targets.order_by("position").values_list("pk", flat=True))
        valid = isinstance(order, list) and all(type(pk) is int for pk in order)
        if not valid or sorted(order) != sorted(ids):
            raise ConfigError.single(
                "order", f"must list each of the group's target ids exactly once: {sorted(ids)}"
            )
        if order == ids:
            raise Unchanged
        for position, pk in enumerate(order):
            Target.objects.filter(pk=pk).update(position=position)

    return _group_write(group, based_on, actor, path, change)
