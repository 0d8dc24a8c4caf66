"""Applying the config file (SPEC §11): the file's write path, one more service.

``routing.config.yaml`` parses, interpolates and validates the text into a
``ConfigFileIn``; :func:`config_apply` writes it, as every other write path does: updates
are compare-and-set (``versioned_write``) on the version read under the apply's lock, and
every changed object leaves a config-change record.

Decisions:

- **The file is a layer, or (``replace=True``) the full desired state.** As a layer
  (``loadconfig`` and start-up) it creates what is new, updates and deletes what came from
  the file (``file_version == version``: nobody changed it since), and never touches what
  the page/API/admin made; a file object changed there since is *operator work*: the
  apply refuses naming it (:class:`OperatorWork`) or, at start-up, keeps it and lists
  it. ``replace=True`` (``--replace``; the function's default, which tests and the
  benchmark rely on) creates, overwrites and deletes to match the file exactly.
  Two things are kept when the file leaves them out: a provider's credential (the one
  rule of ``new_credential``: absent or ``""`` keeps, ``null`` clears; an unset
  ``${VAR}`` keeps too, and is reported) and its model list (``models`` absent = keep
  the list refreshed from the upstream). Timeouts left out return to the built-in
  defaults.
- **One record per changed object** (path ``file``, actor ``cli:<user>``), through the
  audit's ``config_change_record``, and one version bump and invalidation for the whole
  apply: its rows trigger them, once per transaction (``routing.signals``).
- **Validate everything, then write in one transaction.** Effective-policy conflicts
  (against the global settings layer in the database), unset credential variables with
  nothing stored to keep, and targets whose model is not in their provider's model list
  (the API's and the page's ``check_listed``, against the providers as written) are
  collected and raised together as one ConfigError. Any failure rolls the whole apply
  back.
- **Versions bump only on real change**, so re-applying the same file does not
  invalidate open settings pages: an unchanged row is not saved (adopting it as the
  file's is an ``update()`` of ``file_version``, which triggers nothing).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from routing.audit.services import config_change_record
from routing.config.errors import ConfigError, FieldError
from routing.config.export import TIMEOUT_FIELDS
from routing.config.policy import (
    BUILTIN_DEFAULTS,
    policy_flat,
    policy_warnings,
    resolve,
    validate_effective,
)
from routing.config.schema import ConfigFileIn, GroupIn, ProviderIn, target_options
from routing.models import GlobalSettings, Group, Provider, Target
from routing.services.base import default_actor, versioned_write
from routing.services.groups import check_listed, group_snapshot
from routing.services.providers import (
    copy_provider_fields,
    new_credential,
    new_headers,
    new_platform_secrets,
    provider_snapshot,
)


@dataclass
class ApplyResult:
    """What an apply changed (or, for a dry run, would change)."""

    source: str
    dry_run: bool = False
    providers_created: list[str] = field(default_factory=list)
    providers_updated: list[str] = field(default_factory=list)
    providers_deleted: list[str] = field(default_factory=list)
    groups_created: list[str] = field(default_factory=list)
    groups_updated: list[str] = field(default_factory=list)
    groups_deleted: list[str] = field(default_factory=list)
    defaults_changed: bool = False
    warnings: list[str] = field(default_factory=list)  # accepted, but worth a look
    kept: list[str] = field(default_factory=list)  # operator work the file layer left alone
    credentials_kept: list[str] = field(default_factory=list)  # unset ${VAR}: stored one kept

    @property
    def changed(self) -> bool:
        return self.defaults_changed or any(
            (
                self.providers_created,
                self.providers_updated,
                self.providers_deleted,
                self.groups_created,
                self.groups_updated,
                self.groups_deleted,
            )
        )

    def summary(self) -> list[str]:
        lines = [
            f"{label}: {', '.join(names)}"
            for label, names in (
                ("providers created", self.providers_created),
                ("providers updated", self.providers_updated),
                ("providers deleted", self.providers_deleted),
                ("groups created", self.groups_created),
                ("groups updated", self.groups_updated),
                ("groups deleted", self.groups_deleted),
            )
            if names
        ]
        if self.defaults_changed:
            lines.append("defaults changed")
        lines += [f"kept the stored credential of {note}" for note in self.credentials_kept]
        lines += [f"kept (not overwritten): {note}" for note in self.kept]
        return lines or ["no changes"]


class OperatorWork(ConfigError):
    """Applying the file layer would overwrite or delete what the page, API or admin did;
    ``--replace`` (``replace=True``) does it anyway."""


class _DryRun(Exception):
    def __init__(self, result: ApplyResult) -> None:
        self.result = result


def _check_effective(
    cfg: ConfigFileIn, file_flat: dict[str, Any], global_flat: dict[str, Any]
) -> None:
    errors: list[FieldError] = []
    inherited: set[FieldError] = set()
    try:
        validate_effective(resolve(BUILTIN_DEFAULTS, file_flat, global_flat))
    except ConfigError as exc:
        inherited = set(exc.errors)
        errors += exc.prefixed("defaults").errors
    for index, group in enumerate(cfg.groups):
        try:
            validate_effective(
                resolve(BUILTIN_DEFAULTS, file_flat, global_flat, policy_flat(group))
            )
        except ConfigError as exc:
            own = [e for e in exc.errors if e not in inherited]  # lower-layer conflicts: once
            errors += [e.prefixed(f"groups.{index}") for e in own]
    if errors:
        raise ConfigError(errors)


def _provider_state(provider: Provider) -> tuple[Any, ...]:
    return (
        provider.kind,
        provider.platform,
        provider.base_url,
        provider.region,
        provider.project,
        provider.credentials_file,
        provider.entra,
        provider.platform_secrets_encrypted,  # a secret set anew changes its token
        provider.headers_encrypted,  # an unchanged value keeps its token
        provider.betas,
        provider.models,
        *(getattr(provider, column) for column in TIMEOUT_FIELDS.values()),
        provider.health_check_s,
    )


def _set_api_key(provider: Provider, item: ProviderIn) -> bool:
    """Apply the file's ``api_key`` by :func:`new_credential` and its platform secrets by
    :func:`new_platform_secrets`; True when one changed."""
    value = item.api_key.get_secret_value() if item.api_key is not None else None
    credential = new_credential(provider, given="api_key" in item.model_fields_set, value=value)
    secrets = new_platform_secrets(provider, {n: getattr(item, n) for n in item.model_fields_set})
    for secret, plain in secrets.items():
        provider.set_platform_secret(secret, plain)
    if credential is None:
        return bool(secrets)
    provider.set_api_key(credential)
    return True


def _origin_note(kind: str, name: str, row: Provider | Group) -> str:
    how = "made" if row.file_version is None else "changed"
    return f"{kind} {name} ({how} through the page, API or admin since the file set it)"


class _Plan:
    """One apply's bookkeeping: what it did, and what it would have overwritten."""

    def __init__(self, *, replace: bool, actor: str, origin: str, result: ApplyResult) -> None:
        self.replace, self.actor, self.origin, self.result = replace, actor, origin, result
        self.conflicts: list[str] = []

    def protected(self, kind: str, name: str, row: Provider | Group) -> bool:
        """True when the file layer must not overwrite or delete ``row`` (it is noted)."""
        if self.replace or row.file_version == row.version:
            return False
        self.conflicts.append(_origin_note(kind, name, row))
        return True

    def record(
        self, kind: str, name: str, before: dict[str, Any] | None, after: dict[str, Any] | None
    ) -> None:
        # One record per object; the apply's rows bump the version and announce the change
        # once for the whole transaction (routing.signals).
        config_change_record(
            actor=self.actor,
            path=self.origin,
            object_type=kind,
            object_name=name,
            before=before,
            after=after,
        )


def _snapshot(row: Provider | Group) -> dict[str, Any]:
    return provider_snapshot(row) if isinstance(row, Provider) else group_snapshot(row)


def _mark_from_file(row: Provider | Group) -> None:
    if row.file_version != row.version:
        type(row).objects.filter(pk=row.pk).update(file_version=row.version)
        row.file_version = row.version


def _apply_providers(cfg: ConfigFileIn, plan: _Plan) -> None:
    existing = {p.name: p for p in Provider.objects.select_for_update()}
    for item in cfg.providers:
        provider = existing.get(item.name) or Provider(name=item.name)
        before = _provider_state(provider) if provider.pk else None
        snapshot = _snapshot(provider) if provider.pk else None
        copy_provider_fields(provider, item)
        key_changed = _set_api_key(provider, item)
        if before is None:
            provider.file_version = provider.version
            provider.save()
            plan.result.providers_created.append(item.name)
            plan.record("provider", item.name, None, _snapshot(provider))
        elif key_changed or before != _provider_state(provider):
            if plan.protected("provider", item.name, existing[item.name]):
                continue
            written = _update_provider(existing[item.name], item)
            plan.result.providers_updated.append(item.name)
            plan.record("provider", item.name, snapshot, _snapshot(written))
        else:
            _mark_from_file(provider)  # the same content: the file layer owns it again


def _update_provider(provider: Provider, item: ProviderIn) -> Provider:
    """Write the file's provider over ``provider``: compare-and-set on the version this
    apply read under its lock, then the same field and credential rules as the API's."""

    def change(row: Provider) -> None:
        copy_provider_fields(row, item)
        _set_api_key(row, item)
        row.file_version = row.version
        row.save()

    return versioned_write(
        Provider,
        kind="provider",
        name=item.name,
        based_on=provider.version,
        change=change,
        pk=provider.pk,
    )


def _apply_group(
    group: Group | None, item: GroupIn, providers: dict[str, Provider], plan: _Plan
) -> None:
    """Upsert one group and its targets (unless the file layer must keep it)."""
    flat = policy_flat(item)
    desired = [
        (
            providers[t.provider].pk,
            t.model,
            t.weight,
            t.enabled,
            t.context_window,
            target_options(t),
        )
        for t in item.targets
    ]
    before: dict[str, Any] | None = None
    if group is None:
        group = Group(name=item.name, policy=flat, aliases=list(item.aliases))
        group.file_version = group.version
        group.save()
        plan.result.groups_created.append(item.name)
    else:
        current = list(
            group.targets.order_by("position").values_list(
                "provider_id", "model", "weight", "enabled", "context_window", "options"
            )
        )
        same_aliases = list(group.aliases or []) == list(item.aliases)
        if group.policy == flat and current == desired and same_aliases:
            _mark_from_file(group)
            return
        if plan.protected("group", item.name, group):
            return
        before = _snapshot(group)

        def change(row: Group) -> None:
            row.policy = flat
            row.aliases = list(item.aliases)
            row.file_version = row.version
            row.save()
            row.targets.all().delete()

        group = versioned_write(
            Group, kind="group", name=item.name, based_on=group.version, change=change, pk=group.pk
        )
        plan.result.groups_updated.append(item.name)
    Target.objects.bulk_create(
        Target(
            group=group,
            provider_id=provider_id,
            model=model,
            position=position,
            weight=weight,
            enabled=enabled,
            context_window=context_window,
            options=options,
        )
        for position, (provider_id, model, weight, enabled, context_window, options) in enumerate(
            desired
        )
    )
    plan.record("group", item.name, before, _snapshot(group))


def _prune(cfg: ConfigFileIn, plan: _Plan) -> None:
    """Delete what the file no longer lists: everything (``replace``), or, for the file
    layer, only what came from the file and was not changed elsewhere since."""
    # Groups first: their targets are what PROTECT the providers below.
    for group in Group.objects.exclude(name__in=[g.name for g in cfg.groups]).order_by("name"):
        if not plan.replace and (
            group.file_version is None or plan.protected("group", group.name, group)
        ):
            continue
        before = _snapshot(group)
        group.delete()
        plan.result.groups_deleted.append(group.name)
        plan.record("group", group.name, before, None)
    stale = Provider.objects.exclude(name__in=[p.name for p in cfg.providers]).order_by("name")
    for provider in stale:
        if not plan.replace and (
            provider.file_version is None or plan.protected("provider", provider.name, provider)
        ):
            continue
        users = sorted(set(provider.targets.values_list("group__name", flat=True)))
        if users:  # only a group the file layer kept can still use it
            plan.conflicts.append(
                f"provider {provider.name} (no longer in the file, but group(s) "
                f"{', '.join(users)} made or changed elsewhere use it)"
            )
            continue
        before = _snapshot(provider)
        provider.delete()
        plan.result.providers_deleted.append(provider.name)
        plan.record("provider", provider.name, before, None)


def _check_credentials(cfg: ConfigFileIn, result: ApplyResult) -> None:
    """A ``${VAR}`` credential whose variable is unset keeps the stored credential; a
    provider with none stored cannot be configured that way."""
    kept = cfg.unset_credentials
    if not kept:
        return
    stored = {p.name: p.has_api_key for p in Provider.objects.filter(name__in=list(kept))}
    errors: list[FieldError] = []
    for index, item in enumerate(cfg.providers):
        variable = kept.get(item.name)
        if variable is None:
            continue
        if stored.get(item.name):
            result.credentials_kept.append(f"{item.name} ({variable} is not set)")
        else:
            errors.append(
                FieldError(
                    f"providers.{index}.api_key",
                    f"environment variable {variable} is not set "
                    f"(and provider {item.name} has no stored credential to keep)",
                )
            )
    if errors:
        raise ConfigError(errors)


def _check_headers(cfg: ConfigFileIn) -> None:
    """A header value ``""`` keeps the stored value (an exported file's header values are
    ``""``: they are write-only); a provider with none stored under that name cannot."""
    keeping = [i for i, item in enumerate(cfg.providers) if "" in item.headers.values()]
    if not keeping:
        return
    names = [cfg.providers[i].name for i in keeping]
    stored = {p.name: p for p in Provider.objects.filter(name__in=names)}
    errors: list[FieldError] = []
    for index in keeping:
        item = cfg.providers[index]
        try:
            new_headers(stored.get(item.name) or Provider(name=item.name), item.headers)
        except ConfigError as exc:
            errors += [e.prefixed(f"providers.{index}") for e in exc.errors]
    if errors:
        raise ConfigError(errors)


def _check_listed(cfg: ConfigFileIn, providers: Mapping[str, Provider]) -> None:
    """Every file target against its provider's model list as this apply leaves it (the
    file's ``models``, else the stored list): the rule the API and the page apply."""
    check_listed(
        (
            (f"groups.{g}.targets.{t}.model", target.provider, target.model)
            for g, group in enumerate(cfg.groups)
            for t, target in enumerate(group.targets)
        ),
        providers,
    )


def _collect(*checks: Callable[[], None]) -> list[FieldError]:
    errors: list[FieldError] = []
    for check in checks:
        try:
            check()
        except ConfigError as exc:
            errors += exc.errors
    return errors


def _apply(cfg: ConfigFileIn, *, source: str, plan: _Plan) -> None:
    GlobalSettings.load()
    settings_row = GlobalSettings.objects.select_for_update().get(pk=1)  # serializes applies
    file_flat = policy_flat(cfg.defaults) if cfg.defaults else {}
    errors = _collect(
        lambda: _check_effective(cfg, file_flat, settings_row.policy),
        lambda: _check_credentials(cfg, plan.result),
    )
    unkept = _collect(lambda: _check_headers(cfg))
    if unkept:  # the providers cannot be written: list what is known so far
        raise ConfigError(errors + unkept)

    # The model lists are checked against the providers as written (rolled back with
    # everything else on any error), so a list the file layer kept counts, not the file's.
    _apply_providers(cfg, plan)
    providers = {p.name: p for p in Provider.objects.all()}
    errors += _collect(lambda: _check_listed(cfg, providers))
    if errors:
        raise ConfigError(errors)
    groups = {g.name: g for g in Group.objects.select_for_update()}
    for item in cfg.groups:
        _apply_group(groups.get(item.name), item, providers, plan)
    _prune(cfg, plan)

    if settings_row.file_policy != file_flat:
        before = {"defaults": dict(settings_row.file_policy or {})}
        settings_row.file_policy = file_flat
        settings_row.version += 1
        plan.result.defaults_changed = True
        plan.record("defaults", "file layer", before, {"defaults": file_flat})
    changed_source = settings_row.config_source != source
    settings_row.config_source = source
    if plan.result.defaults_changed or changed_source:
        settings_row.save()  # only on change: every save of a config row triggers a rebuild


def config_warnings(cfg: ConfigFileIn) -> list[str]:
    """Every accepted-with-a-warning value of a config file, with where it is."""
    out = (
        [f"defaults: {w}" for w in policy_warnings(policy_flat(cfg.defaults))]
        if cfg.defaults
        else []
    )
    for group in cfg.groups:
        out += [f"group {group.name}: {w}" for w in policy_warnings(policy_flat(group))]
    return out


def config_apply(
    cfg: ConfigFileIn,
    *,
    source: str,
    replace: bool = True,
    keep_operator_work: bool = False,
    dry_run: bool = False,
    origin: str = "file",
    actor: str = "",
) -> ApplyResult:
    """Apply ``cfg`` atomically; raises ConfigError and changes nothing when it is invalid.

    ``replace=True``: the file is the full desired state (create, overwrite, delete what it
    does not list). ``replace=False``: the file *layer* (SPEC §5): it creates what is new
    and updates or deletes what came from the file, and never touches objects made on the
    page/API/admin; objects it set that were changed elsewhere since are operator work:
    :class:`OperatorWork` is raised naming each of them (nothing applied), or, with
    ``keep_operator_work`` (a start-up), they are left as they are and listed in
    ``result.kept``. ``dry_run`` computes the result and rolls back. Every change leaves a
    config-change record (``origin``, ``actor``); the apply is announced once on commit.
    """
    result = ApplyResult(source=source, dry_run=dry_run)
    result.warnings = config_warnings(cfg)
    plan = _Plan(replace=replace, actor=actor or default_actor(), origin=origin, result=result)
    try:
        with transaction.atomic():
            _apply(cfg, source=source, plan=plan)
            if plan.conflicts and not keep_operator_work:
                raise OperatorWork(
                    [
                        FieldError("", f"would overwrite {note}")
                        for note in sorted(set(plan.conflicts))
                    ]
                )
            result.kept = sorted(set(plan.conflicts))
            if dry_run:
                raise _DryRun(result)
    except _DryRun:
        pass
    return result
