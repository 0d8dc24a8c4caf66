"""Export (SPEC §11): the configuration as a config file, without secrets.

Decisions:

- Credentials are written as ``${<NAME>_API_KEY}`` placeholders, never plaintext; header
  values (write-only too: they often carry credentials) as ``${<NAME>_HEADER_<HEADER>}``:
  set, the variable gives the value; unset, the stored value is kept (refused, naming
  the header, where none is stored).
- The ``defaults:`` block is the file layer merged with the global settings layer, so
  ``export -> load (empty database) -> export`` reproduces the text byte for byte.
- Literal ``${`` in values is written ``$${`` so interpolation gives it back on load.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import yaml
from django.db.models import Prefetch

from routing.config.policy import ordered_flat, unflatten
from routing.models import GlobalSettings, Group, Provider, Target

TIMEOUT_FIELDS: dict[str, str] = {
    "connect_s": "connect_timeout_s",
    "headers_s": "headers_timeout_s",
    "first_token_s": "first_token_timeout_s",
    "idle_s": "idle_timeout_s",
    "total_s": "total_timeout_s",
}
"""The file's ``timeouts`` keys and the provider columns they are stored in."""
EXPORT_HEADER = (
    "# Switchyard configuration (manage.py exportconfig).\n"
    "# Credentials are ${<PROVIDER>_API_KEY} placeholders: set those variables to load it.\n"
    "# Header values are ${<PROVIDER>_HEADER_<NAME>} placeholders: unset, the stored value\n"
    "# is kept; set them to load it elsewhere.\n"
    "# AWS keys are ${<PROVIDER>_AWS_...} placeholders: unset, the stored key is kept.\n"
)


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


def header_var_for(provider_name: str, header: str) -> str:
    """The placeholder variable for a header value: ``my-llm``, ``x-team`` ->
    ``MY_LLM_HEADER_X_TEAM``."""
    name = re.sub(r"[^A-Za-z0-9]", "_", header).upper()
    return provider_name.upper().replace("-", "_") + "_HEADER_" + name


def secret_var_for(provider_name: str, secret: str) -> str:
    """The placeholder variable for a platform secret: ``claude-bedrock``,
    ``aws_secret_access_key`` -> ``CLAUDE_BEDROCK_AWS_SECRET_ACCESS_KEY``."""
    return provider_name.upper().replace("-", "_") + "_" + secret.upper()


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
    out: dict[str, Any] = {"name": provider.name, "kind": provider.kind}
    if provider.platform != "direct":
        out["platform"] = provider.platform
    if provider.base_url:
        out["base_url"] = _literal(provider.base_url)
    for name in ("region", "project", "credentials_file"):
        if getattr(provider, name):
            out[name] = _literal(getattr(provider, name))
    if provider.entra:
        out["entra"] = True
    if provider.has_api_key:
        out["api_key"] = "${" + env_var_for(provider.name) + "}"
    for secret in provider.platform_secret_names:  # write-only: a placeholder, like api_key
        out[secret] = "${" + secret_var_for(provider.name, secret) + "}"
    if provider.header_names:  # values are write-only: "" keeps the stored one on a load
        out["headers"] = {
            name: "${" + header_var_for(provider.name, name) + "}"
            for name in sorted(provider.header_names)
        }
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
