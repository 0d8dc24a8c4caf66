"""Configuration reads for the management API and the settings page (plain dicts).

- Policy fields come out per field as ``{"value", "source", "overridden"}``, keyed by the
  dotted field name, in ``POLICY_FIELDS`` order. ``source`` is the layer the effective value
  comes from (``default`` / ``file`` / ``global`` / ``group``); ``overridden`` means it is
  set at the layer being read (the group for a group, global settings for the global read),
  which is what "restore default" clears.
- Providers never show their credential: ``api_key_set`` and the masked ``api_key_hint``.
- ``version`` is the optimistic-concurrency token writes must name (the API's ETag).
"""

from __future__ import annotations

from typing import Any

from django.db.models import Prefetch, QuerySet

from routing.config.errors import NotFound
from routing.config.export import TIMEOUT_FIELDS
from routing.config.policy import BUILTIN_DEFAULTS, ResolvedField, policy_warnings, resolve
from routing.models import ApiKey, GlobalSettings, Group, Provider, Target


def _fields(resolved: dict[str, ResolvedField]) -> dict[str, dict[str, Any]]:
    return {
        name: {"value": item.value, "source": item.source, "overridden": item.overridden}
        for name, item in resolved.items()
    }


def _layers() -> tuple[dict[str, Any], dict[str, Any], GlobalSettings | None]:
    row = GlobalSettings.objects.filter(pk=1).first()
    if row is None:
        return {}, {}, None
    return dict(row.file_policy or {}), dict(row.policy or {}), row


# --- providers -------------------------------------------------------------------------


def _provider_out(provider: Provider, used_by: list[str]) -> dict[str, Any]:
    return {
        "name": provider.name,
        "kind": provider.kind,
        "platform": provider.platform,
        "base_url": provider.base_url,
        "region": provider.region,
        "project": provider.project,
        "credentials_file": provider.credentials_file,
        "entra": provider.entra,
        "aws_keys_set": provider.platform_secret_names,  # their names; values are write-only
        "api_key_set": provider.has_api_key,
        "api_key_hint": provider.api_key_hint,
        "headers": {name: "" for name in provider.header_names},  # values are write-only
        "betas": dict(provider.betas or {}),
        "models": list(provider.models or []),
        "models_loaded_at": provider.models_loaded_at,
        "timeouts": {key: getattr(provider, column) for key, column in TIMEOUT_FIELDS.items()},
        "health_check_s": provider.health_check_s,
        "used_by": used_by,
        "version": provider.version,
        "updated_at": provider.updated_at,
    }


def _used_by() -> dict[int, list[str]]:
    usage: dict[int, set[str]] = {}
    for provider_id, group in Target.objects.values_list("provider_id", "group__name"):
        usage.setdefault(provider_id, set()).add(group)
    return {pk: sorted(groups) for pk, groups in usage.items()}


def provider_list() -> list[dict[str, Any]]:
    used = _used_by()
    return [_provider_out(p, used.get(p.pk, [])) for p in Provider.objects.order_by("name")]


def provider_detail(*, name: str) -> dict[str, Any]:
    provider = Provider.objects.filter(name=name).first()
    if provider is None:
        raise NotFound("provider", name)
    groups = provider.targets.values_list("group__name", flat=True).distinct()
    return _provider_out(provider, sorted(groups))


# --- groups ----------------------------------------------------------------------------


def _targets_prefetch() -> Prefetch[str, QuerySet[Target], str]:
    return Prefetch(
        "targets", queryset=Target.objects.select_related("provider").order_by("position")
    )


def _group_out(
    group: Group, file_layer: dict[str, Any], global_layer: dict[str, Any]
) -> dict[str, Any]:
    return {
        "name": group.name,
        "version": group.version,
        "aliases": list(group.aliases or []),
        "targets": [
            {
                "id": t.pk,
                "provider": t.provider.name,
                "model": t.model,
                "position": t.position,
                "weight": t.weight,
                "enabled": t.enabled,
                "context_window": t.context_window,
                "options": dict(t.options or {}),
            }
            for t in group.targets.all()
        ],
        "fields": _fields(resolve(BUILTIN_DEFAULTS, file_layer, global_layer, group.policy or {})),
        "warnings": policy_warnings(group.policy or {}),
        "updated_at": group.updated_at,
    }


def group_detail(*, name: str) -> dict[str, Any]:
    group = Group.objects.prefetch_related(_targets_prefetch()).filter(name=name).first()
    if group is None:
        raise NotFound("group", name)
    file_layer, global_layer, _ = _layers()
    return _group_out(group, file_layer, global_layer)


def group_list() -> list[dict[str, Any]]:
    file_layer, global_layer, _ = _layers()
    groups = Group.objects.prefetch_related(_targets_prefetch()).order_by("name")
    return [_group_out(group, file_layer, global_layer) for group in groups]


# --- global settings -------------------------------------------------------------------


def global_detail() -> dict[str, Any]:
    file_layer, global_layer, row = _layers()
    return {
        "version": row.version if row is not None else GlobalSettings().version,
        "fields": _fields(resolve(BUILTIN_DEFAULTS, file_layer, global_layer)),
        "config_source": row.config_source if row is not None else "",
    }


# --- keys ------------------------------------------------------------------------------


def key_out(key: ApiKey) -> dict[str, Any]:
    return {
        "id": key.pk,
        "name": key.name,
        "kind": key.kind,
        "prefix": key.prefix,
        "groups": list(key.groups or []),
        "limits": dict(key.limits or {}),
        "created_at": key.created_at,
        "revoked_at": key.revoked_at,
        "active": key.is_active,
    }


def key_list(*, prefix: str | None = None) -> list[dict[str, Any]]:
    """Every key, newest first, by its display prefix; ``prefix`` filters by its start."""
    keys = ApiKey.objects.all()
    if prefix:
        keys = keys.filter(prefix__startswith=prefix)
    return [key_out(key) for key in keys]


# --- versions (for a write that named none) ----------------------------------------------


def version_of(kind: str, name: str | None = None) -> int:
    """The current version of a provider, group or the global settings; NotFound if none."""
    if kind == "global":
        row = GlobalSettings.objects.filter(pk=1).first()
        return row.version if row is not None else GlobalSettings().version
    rows = Provider.objects.all() if kind == "provider" else Group.objects.all()
    version = rows.filter(name=name).values_list("version", flat=True).first()
    if version is None:
        raise NotFound(kind, name)
    return int(version)


__all__ = [
    "global_detail",
    "group_detail",
    "group_list",
    "key_list",
    "key_out",
    "provider_detail",
    "provider_list",
    "version_of",
]
