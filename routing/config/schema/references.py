"""Cross-references, tolerant of malformed input: unique names, duplicate targets,
targets naming an unknown provider, aliases that overlap. Run on the raw document as well
as inside validation, so a file with field errors and reference errors reports all."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from routing.config.errors import FieldError
from routing.config.schema.base import short


def duplicate_targets(targets: Any) -> list[FieldError]:
    """``targets.N`` errors for repeated ``(provider, model)`` pairs."""
    errors: list[FieldError] = []
    if not isinstance(targets, list):
        return errors
    first: dict[tuple[str, str], int] = {}
    for index, target in enumerate(targets):
        if not isinstance(target, Mapping):
            continue
        provider, model = target.get("provider"), target.get("model")
        if not (isinstance(provider, str) and isinstance(model, str)):
            continue
        key = (provider, model)
        if key in first:
            errors.append(
                FieldError(
                    f"targets.{index}",
                    f"duplicate target {key[0]}/{key[1]} (already targets.{first[key]})",
                )
            )
        else:
            first[key] = index
    return errors


def unknown_providers(targets: Any, providers: Collection[str]) -> list[FieldError]:
    """``targets.N.provider`` errors for providers that are not defined."""
    errors: list[FieldError] = []
    if not isinstance(targets, list):
        return errors
    for index, target in enumerate(targets):
        if isinstance(target, Mapping):
            name = target.get("provider")
            if isinstance(name, str) and name not in providers:
                errors.append(
                    FieldError(f"targets.{index}.provider", unknown_provider_message(name))
                )
    return errors


def unknown_provider_message(name: str) -> str:
    return f"unknown provider {short(name)} (not defined under providers)"


def _duplicate_names(items: Any, section: str) -> tuple[set[str], list[FieldError]]:
    names: dict[str, int] = {}
    errors: list[FieldError] = []
    if not isinstance(items, list):
        return set(), errors
    for index, item in enumerate(items):
        name = item.get("name") if isinstance(item, Mapping) else None
        if not isinstance(name, str):
            continue
        if name in names:
            errors.append(
                FieldError(
                    f"{section}.{index}.name",
                    f"duplicate name {short(name)} (already {section}.{names[name]})",
                )
            )
        else:
            names[name] = index
    return set(names), errors


def cross_check(raw: Any) -> list[FieldError]:
    """Unique provider/group names, duplicate targets, targets naming unknown providers."""
    if not isinstance(raw, Mapping):
        return []
    provider_names, errors = _duplicate_names(raw.get("providers"), "providers")
    _, group_errors = _duplicate_names(raw.get("groups"), "groups")
    errors += group_errors
    errors += _alias_conflicts(raw.get("groups"))
    providers_readable = isinstance(raw.get("providers"), list) or raw.get("providers") is None
    groups = raw.get("groups")
    for index, group in enumerate(groups if isinstance(groups, list) else []):
        if not isinstance(group, Mapping):
            continue
        targets = group.get("targets")
        local = duplicate_targets(targets)
        if providers_readable:
            local += unknown_providers(targets, provider_names)
        errors += [e.prefixed(f"groups.{index}") for e in local]
    return errors


def _alias_conflicts(groups: Any) -> list[FieldError]:
    from routing.config.aliases import alias_conflicts

    if not isinstance(groups, list):
        return []
    pairs = []
    for group in groups:
        mapping = group if isinstance(group, Mapping) else {}
        aliases = mapping.get("aliases")
        name = mapping.get("name")
        ok = isinstance(aliases, list) and all(isinstance(a, str) for a in aliases)
        pairs.append((str(name), list(aliases) if ok else []))  # type: ignore[arg-type]
    return alias_conflicts(pairs)
