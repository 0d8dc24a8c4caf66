"""The config file (SPEC §11): load and validate, apply atomically, export.

Decisions:

- **The file is a layer, or (``replace=True``) the full desired state.** As a layer
  (``loadconfig`` and start-up) it creates what is new, updates and deletes what came from
  the file (``file_version == version``: nobody changed it since), and never touches what
  the page/API/admin made; a file object changed there since is *operator work*: the
  apply refuses naming it (:class:`OperatorWork`) or, at start-up, keeps it and lists
  it. ``replace=True`` (``--replace``; the function's default, which tests and the
  benchmark rely on) creates, overwrites and deletes to match the file exactly.
  Two things are kept when the file leaves them out: a provider's credential (the one
  rule of :func:`new_credential`: absent or ``""`` keeps, ``null`` clears; an unset
  ``${VAR}`` keeps too, and is reported) and its model list (``models`` absent = keep
  the list refreshed from the upstream). Timeouts left out return to the built-in
  defaults.
- **One record per changed object** (path ``file``, actor ``cli:<user>``), through the
  audit's ``config_change_record`` like every other write path, and one
  ``config_changed`` for the whole apply.
- **Validate everything, then write in one transaction.** Schema errors, missing
  environment variables and effective-policy conflicts (against the global settings
  layer in the database) are all collected and raised together as one ConfigError;
  nothing is written. A target whose model is not in its provider's model list (the
  API's and the page's ``check_listed``) is found against the providers as written and
  reported with the other apply errors. Any failure rolls the whole apply back.
- **Versions bump only on real change**, so re-applying the same file does not
  invalidate open settings pages; ``config_changed`` is sent on commit when something
  changed.
- ``${VAR}`` and ``${VAR:-default}`` are interpolated in string values (the default
  applies when the variable is unset or empty); ``$${`` writes a literal ``${``.
  Duplicate mapping keys are errors (YAML would silently keep the last one).
- Export writes credentials as ``${<NAME>_API_KEY}`` placeholders, never plaintext, and
  the ``defaults:`` block as the file layer merged with the global settings layer, so
  ``export -> load (empty database) -> export`` reproduces the text byte for byte.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from django.db import transaction
from django.db.models import Prefetch

from routing.config.errors import ConfigError, FieldError
from routing.config.policy import (
    BUILTIN_DEFAULTS,
    ordered_flat,
    policy_flat,
    policy_warnings,
    resolve,
    unflatten,
    validate_effective,
)
from routing.config.schema import (
    ConfigFileIn,
    GroupIn,
    ProviderIn,
    parse_config,
    target_options,
)
from routing.config.signals import config_changed
from routing.crypto import CredentialDecryptError
from routing.models import GlobalSettings, Group, Provider, Target
from routing.signals import config_written

_ENV_REF = re.compile(r"\$(\$)?\{([^}]*)\}")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
TIMEOUT_FIELDS: dict[str, str] = {
    "connect_s": "connect_timeout_s",
    "first_token_s": "first_token_timeout_s",
    "idle_s": "idle_timeout_s",
    "total_s": "total_timeout_s",
}
EXPORT_HEADER = (
    "# Switchyard configuration (manage.py exportconfig).\n"
    "# Credentials are ${<PROVIDER>_API_KEY} placeholders: set those variables to load it.\n"
)


# --- reading -------------------------------------------------------------------------


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that records duplicate mapping keys instead of keeping the last one."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.duplicates: list[FieldError] = []

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[str] = set()
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode):
                if key_node.value in seen:
                    line = key_node.start_mark.line + 1
                    self.duplicates.append(
                        FieldError("", f"line {line}: duplicate key {key_node.value!r}")
                    )
                seen.add(key_node.value)
        return super().construct_mapping(node, deep=deep)


def parse_yaml(text: str) -> Any:
    """Parse YAML safely; syntax errors name line and column but never quote the text."""
    loader = _StrictLoader(text)
    try:
        data = loader.get_single_data()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        context = f" ({exc.context})" if exc.context else ""
        raise ConfigError.single("", f"YAML syntax error{where}: {exc.problem}{context}") from None
    except yaml.YAMLError as exc:
        raise ConfigError.single("", f"YAML error: {type(exc).__name__}") from None
    finally:
        loader.dispose()
    if loader.duplicates:
        raise ConfigError(loader.duplicates)
    return data


def _interpolate_text(text: str, env: Mapping[str, str], path: str) -> tuple[str, list[FieldError]]:
    errors: list[FieldError] = []

    def substitute(match: re.Match[str]) -> str:
        escaped, body = match.group(1), match.group(2)
        if escaped:
            return "${" + body + "}"
        name, has_default, default = body.partition(":-")
        if not _ENV_NAME.match(name):
            errors.append(
                FieldError(
                    path, f"invalid reference ${{{body}}}: write ${{NAME}} or ${{NAME:-default}}"
                )
            )
            return match.group(0)
        value = env.get(name)
        if not value and has_default:
            return default
        if value is None:
            errors.append(FieldError(path, f"environment variable {name} is not set"))
            return match.group(0)
        return value

    return _ENV_REF.sub(substitute, text), errors


def interpolate(value: Any, env: Mapping[str, str], path: str = "") -> tuple[Any, list[FieldError]]:
    """Replace ``${VAR}`` references in every string value (not keys) of a document."""
    if isinstance(value, str):
        return _interpolate_text(value, env, path)
    errors: list[FieldError] = []
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        for key, item in value.items():
            out[key], found = interpolate(item, env, f"{path}.{key}" if path else str(key))
            errors += found
        return out, errors
    if isinstance(value, list):
        items: list[Any] = []
        for index, item in enumerate(value):
            new, found = interpolate(item, env, f"{path}.{index}" if path else str(index))
            items.append(new)
            errors += found
        return items, errors
    return value, errors


_CREDENTIAL_PATH = re.compile(r"^providers\.(\d+)\.api_key$")
_WHOLE_REF = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$")


def _unset_credentials(
    raw: Any, interpolated: Any, env_errors: list[FieldError], env: Mapping[str, str]
) -> tuple[dict[str, str], list[FieldError]]:
    """Credentials written as one ``${VAR}`` whose variable is unset: dropped from the
    document (absent = keep the stored credential) and returned as ``{provider: VAR}``;
    the apply checks that there is a stored credential to keep."""
    kept: dict[str, str] = {}
    remaining: list[FieldError] = []
    for error in env_errors:
        match = _CREDENTIAL_PATH.match(error.path)
        provider = interpolated["providers"][int(match.group(1))] if match else None
        written = raw["providers"][int(match.group(1))].get("api_key") if match else None
        whole = _WHOLE_REF.match(written) if isinstance(written, str) else None
        name = provider.get("name") if isinstance(provider, dict) else None
        if (
            whole
            and isinstance(provider, dict)
            and isinstance(name, str)
            and whole.group(1) not in env
        ):
            provider.pop("api_key", None)
            kept[name] = whole.group(1)
        else:
            remaining.append(error)
    return kept, remaining


def load_text(text: str, *, env: Mapping[str, str] | None = None) -> ConfigFileIn:
    """Parse, interpolate and validate a config document; ConfigError lists every error."""
    raw = parse_yaml(text)
    if raw is None:
        raise ConfigError.single("", "the config file is empty")
    env = os.environ if env is None else env
    interpolated, env_errors = interpolate(raw, env)
    kept, env_errors = _unset_credentials(raw, interpolated, env_errors, env)
    try:
        config = parse_config(interpolated)
    except ConfigError as exc:
        # A value still holding an unresolved ${VAR} fails the schema too; say it once.
        bad = {error.path for error in env_errors}
        schema_errors = [e for e in exc.errors if e.path not in bad]
        raise ConfigError(env_errors + schema_errors) from None
    if env_errors:
        raise ConfigError(env_errors)
    config.unset_credentials = kept
    return config


def load_file(
    path: str | os.PathLike[str], *, env: Mapping[str, str] | None = None
) -> ConfigFileIn:
    """Read and validate a config file (see :func:`load_text`)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeError) as exc:
        raise ConfigError.single(
            "", f"cannot read {os.fspath(path)}: {exc.__class__.__name__}"
        ) from None
    return load_text(text, env=env)


# --- applying ------------------------------------------------------------------------


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
        provider.base_url,
        provider.headers,
        provider.betas,
        provider.models,
        *(getattr(provider, column) for column in TIMEOUT_FIELDS.values()),
        provider.health_check_s,
    )


def new_credential(provider: Provider, *, given: bool, value: str | None) -> str | None:
    """The one credential rule of every write path (file, API, page, admin, commands).

    ``api_key`` absent or ``""`` keeps the stored credential; a non-empty string replaces
    it; ``null`` clears it. Returns the credential to store (``""`` = clear) or None when
    the stored one stays as it is (including "replaced by the same value").
    """
    if not given:
        return None
    if value is None:
        return "" if provider.has_api_key else None
    plain = value.strip()
    if not plain:
        return None
    try:
        if provider.has_api_key and provider.get_api_key() == plain:
            return None
    except CredentialDecryptError:
        pass  # unreadable under the current secret: the new value wins
    return plain


def _set_api_key(provider: Provider, item: ProviderIn) -> bool:
    """Apply the file's ``api_key`` by :func:`new_credential`; True when it changed."""
    value = item.api_key.get_secret_value() if item.api_key is not None else None
    credential = new_credential(provider, given="api_key" in item.model_fields_set, value=value)
    if credential is None:
        return False
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
        from routing.audit.services import config_change_record

        # The apply announces itself once on commit (config_changed), not once per object.
        config_change_record(
            actor=self.actor,
            path=self.origin,
            object_type=kind,
            object_name=name,
            before=before,
            after=after,
        )


def _snapshot(row: Provider | Group) -> dict[str, Any]:
    from routing.services.groups import group_snapshot
    from routing.services.providers import provider_snapshot

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
            provider.version += 1
            provider.file_version = provider.version
            provider.save()
            plan.result.providers_updated.append(item.name)
            plan.record("provider", item.name, snapshot, _snapshot(provider))
        else:
            _mark_from_file(provider)  # the same content: the file layer owns it again


def copy_provider_fields(provider: Provider, item: ProviderIn) -> None:
    """Copy a validated provider onto its row (all but the credential), the same for every
    write path: a timeout left out goes back to its default, absent ``models`` keeps the
    list refreshed from the upstream; a health check interval left out is the gateway's."""
    provider.kind = item.kind
    provider.base_url = item.base_url
    provider.headers = dict(item.headers)
    provider.betas = item.betas.model_dump(exclude_none=True) if item.betas else {}
    if item.models is not None:
        provider.models = list(item.models)
    timeouts = item.timeouts.model_dump() if item.timeouts else {}
    for key, column in TIMEOUT_FIELDS.items():
        value = timeouts.get(key)
        setattr(provider, column, value if value is not None else _default(Provider, column))
    provider.health_check_s = item.health_check_s


def _default(model: type[Any], column: str) -> Any:
    return model._meta.get_field(column).default


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
        group.policy = flat
        group.aliases = list(item.aliases)
        group.version += 1
        group.file_version = group.version
        group.save()
        group.targets.all().delete()
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


def _check_listed(cfg: ConfigFileIn, providers: Mapping[str, Provider]) -> None:
    """Every file target against its provider's model list as this apply leaves it (the
    file's ``models``, else the stored list): the rule the API and the page apply."""
    from routing.services.groups import check_listed

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


def apply_config(
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
    config-change record (``origin``, ``actor``) and is announced on commit.
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
            if result.changed:
                config_written()  # the apply's one bump and notice, whatever rows it wrote
                transaction.on_commit(lambda: config_changed.send(sender=origin, source=source))
    except _DryRun:
        pass
    return result


def default_actor() -> str:
    """Who runs a command: ``cli:<os user>``."""
    import getpass

    try:
        return f"cli:{getpass.getuser()}"
    except (KeyError, OSError):
        return "cli"


# --- exporting -----------------------------------------------------------------------


class _Flow(dict[str, Any]):
    """A mapping written in flow style: ``{provider: a, model: b}``."""


class _FlowList(list[Any]):
    """A list of scalars written in flow style: ``[A, B]``."""


class _Dumper(yaml.SafeDumper):
    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        # Indent block sequences under their key, as SPEC §11 writes them.
        return super().increase_indent(flow, False)

    def ignore_aliases(self, data: Any) -> bool:
        return True


_Dumper.add_representer(
    _Flow,
    lambda dumper, data: dumper.represent_mapping("tag:yaml.org,2002:map", data, flow_style=True),
)
_Dumper.add_representer(
    _FlowList,
    lambda dumper, data: dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=True),
)


def env_var_for(provider_name: str) -> str:
    """The placeholder variable for a provider's credential: ``my-llm`` -> ``MY_LLM_API_KEY``."""
    return provider_name.upper().replace("-", "_") + "_API_KEY"


def _literal(text: str) -> str:
    """Escape ``${`` so interpolation gives the text back on load."""
    return text.replace("${", "$${")


def _flow_values(value: Any) -> Any:
    if isinstance(value, list):
        return _FlowList(_literal(v) if isinstance(v, str) else v for v in value)
    if isinstance(value, str):
        return _literal(value)
    return value


def _policy_block(flat: Mapping[str, Any]) -> dict[str, Any]:
    nested = unflatten(ordered_flat(flat))
    out: dict[str, Any] = {}
    for key, value in nested.items():
        if isinstance(value, dict):
            out[key] = _Flow({k: _flow_values(v) for k, v in value.items()})
        else:
            out[key] = _flow_values(value)
    return out


def _export_provider(provider: Provider) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": provider.name,
        "kind": provider.kind,
        "base_url": _literal(provider.base_url),
    }
    if provider.has_api_key:
        out["api_key"] = "${" + env_var_for(provider.name) + "}"
    if provider.headers:
        out["headers"] = {k: _literal(v) for k, v in sorted(provider.headers.items())}
    if provider.betas:
        out["betas"] = _Flow({k: _flow_values(v) for k, v in provider.betas.items()})
    if provider.models:
        out["models"] = _flow_values(list(provider.models))
    out["timeouts"] = _Flow(
        {key: float(getattr(provider, column)) for key, column in TIMEOUT_FIELDS.items()}
    )
    if provider.health_check_s is not None:
        out["health_check_s"] = float(provider.health_check_s)
    return out


def _export_target(target: Target) -> _Flow:
    out = _Flow(provider=target.provider.name, model=_literal(target.model))
    if target.weight != 1:
        out["weight"] = target.weight
    if not target.enabled:
        out["enabled"] = False
    if target.context_window is not None:
        out["context_window"] = target.context_window
    out.update(target.options or {})
    return out


def _export_group(group: Group) -> dict[str, Any]:
    policy = _policy_block(group.policy)
    out: dict[str, Any] = {"name": group.name}
    if group.aliases:
        out["aliases"] = _flow_values(list(group.aliases))
    if "algorithm" in policy:
        out["algorithm"] = policy.pop("algorithm")
    out["targets"] = [_export_target(t) for t in group.targets.all()]
    out.update(policy)
    return out


def export_config() -> str:
    """The current configuration as a config file (SPEC §11 shape), without secrets."""
    settings_row = GlobalSettings.objects.filter(pk=1).first()
    defaults = {**settings_row.file_policy, **settings_row.policy} if settings_row else {}
    document: dict[str, Any] = {}
    if ordered_flat(defaults):
        document["defaults"] = _policy_block(defaults)
    document["providers"] = [_export_provider(p) for p in Provider.objects.order_by("name")]
    targets = Target.objects.select_related("provider").order_by("position")
    document["groups"] = [
        _export_group(g)
        for g in Group.objects.order_by("name").prefetch_related(
            Prefetch("targets", queryset=targets)
        )
    ]
    body = yaml.dump(
        document,
        Dumper=_Dumper,
        sort_keys=False,
        allow_unicode=True,
        width=100,
        default_flow_style=False,
    )
    return EXPORT_HEADER + body
