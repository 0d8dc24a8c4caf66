"""The entry points: validate a whole document, a provider, a target or a group, raising
:class:`~routing.config.errors.ConfigError` with every problem at once."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from pydantic import ValidationError

from routing.config.errors import ConfigError, FieldError
from routing.config.schema.groups import ConfigFileIn, GroupIn
from routing.config.schema.messages import field_errors
from routing.config.schema.providers import ProviderIn
from routing.config.schema.references import (
    cross_check,
    unknown_provider_message,
    unknown_providers,
)
from routing.config.schema.targets import TargetIn


def parse_config(raw: Any) -> ConfigFileIn:
    """Validate a whole config document; raises ConfigError listing every problem."""
    try:
        return ConfigFileIn.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(field_errors(exc, ConfigFileIn) + cross_check(raw)) from None


def parse_provider(raw: Any) -> ProviderIn:
    try:
        return ProviderIn.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(field_errors(exc, ProviderIn)) from None


def parse_target(raw: Any, *, providers: Collection[str] | None = None) -> TargetIn:
    """Validate one target; with ``providers``, its provider must be one of them."""
    errors: list[FieldError] = []
    target: TargetIn | None = None
    try:
        target = TargetIn.model_validate(raw)
    except ValidationError as exc:
        errors = field_errors(exc, TargetIn)
    name = raw.get("provider") if isinstance(raw, Mapping) else None
    if providers is not None and isinstance(name, str) and name not in providers:
        errors.append(FieldError("provider", unknown_provider_message(name)))
    if errors or target is None:
        raise ConfigError(errors)
    return target


def parse_group(raw: Any, *, providers: Collection[str]) -> GroupIn:
    """Validate one group as the API/page submit it; ``providers`` = the known names."""
    extra = unknown_providers(raw.get("targets") if isinstance(raw, Mapping) else None, providers)
    try:
        group = GroupIn.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(field_errors(exc, GroupIn) + extra) from None
    if extra:
        raise ConfigError(extra)
    return group
