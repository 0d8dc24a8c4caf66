"""Group writes: create, policy overrides, restore-default, delete."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import F

from routing.config.aliases import conflicts_with_others
from routing.config.errors import ConfigError, FieldError
from routing.config.policy import (
    BUILTIN_DEFAULTS,
    POLICY_FIELDS,
    ordered_flat,
    policy_flat,
    resolve,
    validate_effective,
    validate_policy_flat,
)
from routing.config.schema import GroupIn, parse_group, target_options
from routing.engine.targets import target_key
from routing.models import Group, Provider, Target
from routing.services.base import (
    Clash,
    NameTaken,
    Unchanged,
    as_mapping,
    known_fields,
    policy_changes,
    policy_layers,
    record,
    versioned_write,
)


def policy_snapshot(policy: dict[str, Any]) -> dict[str, Any]:
    """A policy layer for a change record: one ``policy.<field>`` key per override, so the
    diff names each field (and an empty layer is no key at all rather than a ``{}``)."""
    return {f"policy.{key}": value for key, value in ordered_flat(policy or {}).items()}


def group_snapshot(group: Group) -> dict[str, Any]:
    """Policy overrides plus targets keyed ``provider/model``, so a diff reads per target."""
    targets = Target.objects.filter(group=group).select_related("provider").order_by("position")
    return {
        **({"aliases": list(group.aliases)} if group.aliases else {}),
        **policy_snapshot(group.policy),
        "targets": {
            target_key(t.provider.name, t.model): {
                "position": t.position,
                "weight": t.weight,
                "enabled": t.enabled,
                "context_window": t.context_window,
                **({"options": t.options} if t.options else {}),
            }
            for t in targets
        },
    }


def check_listed(pairs: Iterable[tuple[str, str, str]], providers: Mapping[str, Provider]) -> None:
    """Model-list honesty: for each ``(error path, provider, model)``, the model must be in
    the provider's model list when that list is non-empty."""
    errors = []
    for path, provider_name, model in pairs:
        provider = providers.get(provider_name)
        listed = provider.models if provider is not None else []
        if listed and model not in listed:
            errors.append(
                FieldError(
                    path,
                    f"{model!r} is not in provider {provider_name!r}'s model list "
                    "(refresh its models, or fix the name)",
                )
            )
    if errors:
        raise ConfigError(errors)


def group_targets_edited(*, group: Group, changed: bool) -> None:
    """After an editor that saves a group and its targets as rows (the admin's inline):
    positions become 0..n-1 in the order the editor gave, whatever numbers were typed, and
    the group's version moves once when anything changed (a target is part of its group's
    state). The caller records the change (``base.record_writes``)."""
    for index, target in enumerate(group.targets.order_by("position", "pk")):
        if target.position != index:
            Target.objects.filter(pk=target.pk).update(position=index)
    if changed:
        Group.objects.filter(pk=group.pk).update(version=F("version") + 1)


def group_create(*, data: dict[str, Any], actor: str, path: str) -> Group:
    """Create a group from a ``GroupIn``-shaped dict: name, targets in order, policy keys."""
    providers = {p.name: p for p in Provider.objects.all()}
    item = parse_group(as_mapping(data, "a group"), providers=providers)
    check_listed(
        ((f"targets.{i}.model", t.provider, t.model) for i, t in enumerate(item.targets)),
        providers,
    )
    flat = policy_flat(item)
    validate_effective(resolve(BUILTIN_DEFAULTS, *policy_layers(), flat))
    _check_aliases(item.name, item.aliases)
    try:
        with transaction.atomic():
            group = Group.objects.create(name=item.name, policy=flat, aliases=list(item.aliases))
            Target.objects.bulk_create(
                Target(
                    group=group,
                    provider=providers[t.provider],
                    model=t.model,
                    position=index,
                    weight=t.weight,
                    enabled=t.enabled,
                    context_window=t.context_window,
                    options=target_options(t),
                )
                for index, t in enumerate(item.targets)
            )
            record(
                actor=actor,
                path=path,
                object_type="group",
                object_name=group.name,
                before=None,
                after=group_snapshot(group),
            )
    except IntegrityError:
        raise NameTaken("name", f"a group named {item.name!r} already exists") from None
    return group


def _check_aliases(name: str, aliases: list[str]) -> None:
    """Refuse aliases that could match a model name another group's aliases match."""
    others = Group.objects.exclude(name=name).values_list("name", "aliases")
    errors = conflicts_with_others(name, aliases, [(n, list(a or [])) for n, a in others])
    if errors:
        raise Clash(errors)


def group_set_aliases(*, name: str, aliases: Any, based_on: int, actor: str, path: str) -> Group:
    """Replace a group's model-name aliases (globs; ``[]`` removes them)."""
    from pydantic import TypeAdapter, ValidationError

    from routing.config.schema import Aliases, field_errors

    try:
        clean = list(TypeAdapter(Aliases).validate_python(aliases))
    except ValidationError as exc:
        raise ConfigError(field_errors(exc, GroupIn, prefix="aliases")) from None

    def change(group: Group) -> None:
        _check_aliases(group.name, clean)
        if clean == list(group.aliases or []):
            raise Unchanged
        before = group_snapshot(group)
        group.aliases = clean
        group.save()
        record(
            actor=actor,
            path=path,
            object_type="group",
            object_name=group.name,
            before=before,
            after=group_snapshot(group),
        )

    return versioned_write(
        Group, kind="group", name=name, based_on=based_on, change=change, name__exact=name
    )


def _set_policy(group: Group, policy: dict[str, Any], *, actor: str, path: str) -> None:
    """Validate and save a group's new override layer (inside a claimed write)."""
    policy = validate_policy_flat(policy)
    validate_effective(resolve(BUILTIN_DEFAULTS, *policy_layers(), policy))
    if policy == ordered_flat(group.policy or {}):
        raise Unchanged
    before = group_snapshot(group)
    group.policy = policy
    group.save()
    record(
        actor=actor,
        path=path,
        object_type="group",
        object_name=group.name,
        before=before,
        after=group_snapshot(group),
    )


def group_update_policy(
    *, name: str, changes: dict[str, object], based_on: int, actor: str, path: str
) -> Group:
    """Override policy fields on a group. ``changes`` uses flat dotted keys
    (``{"retry.max_retries": 3}``); nested blocks work too. Overrides are removed with
    :func:`group_restore_default`, not by writing ``null``."""

    def change(group: Group) -> None:
        flat = policy_changes(changes)
        _set_policy(group, {**group.policy, **flat}, actor=actor, path=path)

    return versioned_write(
        Group, kind="group", name=name, based_on=based_on, change=change, name__exact=name
    )


def group_restore_default(
    *, name: str, fields: list[str] | None, based_on: int, actor: str, path: str
) -> Group:
    """Drop the group's overrides of ``fields`` (None = all) so the lower layers show. The
    result is validated like any write: a restore that would leave an invalid effective
    policy (e.g. an inherited ``initial_delay_ms`` above the group's ``max_delay_ms``) is
    refused."""

    def change(group: Group) -> None:
        dropped = set(POLICY_FIELDS if fields is None else known_fields(fields))
        kept = {k: v for k, v in (group.policy or {}).items() if k not in dropped}
        _set_policy(group, kept, actor=actor, path=path)

    return versioned_write(
        Group, kind="group", name=name, based_on=based_on, change=change, name__exact=name
    )


def group_delete(*, name: str, based_on: int, actor: str, path: str) -> None:
    def change(group: Group) -> None:
        before = group_snapshot(group)
        group.delete()
        record(
            actor=actor, path=path, object_type="group", object_name=name, before=before, after=None
        )

    versioned_write(
        Group, kind="group", name=name, based_on=based_on, change=change, name__exact=name
    )
