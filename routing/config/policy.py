"""Layered policy: the flat field list, built-in defaults, and resolution with sources.

The field list, defaults, nullable fields and ordered pairs are derived from the fields
declared on ``PolicyIn`` (``routing.config.fields``); nothing here lists a field by name.

Effective value of a policy field (SPEC §5)::

    built-in default  ->  config file (defaults:)  ->  global settings  ->  group override
    "default"             "file"                      "global"             "group"

Each layer is stored as a flat dict keyed by dotted field name (``"retry.max_retries"``);
a missing key means "inherit". :func:`resolve` reports, per field, the value, the layer it
came from and whether it is overridden *at the layer being edited* (the group layer for a
group form, the global layer for the global-defaults form), which is what "restore
default" clears.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ValidationError

from routing.config.errors import ConfigError, FieldError
from routing.config.fields import DeclaredField, declared_fields
from routing.config.schema import RENAMED_KEYS, PolicyIn, field_errors, renamed_message
from routing.continuity.window import window_warnings
from routing.engine.failures import FailureCode

# Derived from the one declaration (the annotated fields of PolicyIn); never listed again.
DECLARED: tuple[DeclaredField, ...] = declared_fields(PolicyIn)
POLICY_FIELDS: tuple[str, ...] = tuple(item.name for item in DECLARED)
BUILTIN_DEFAULTS: dict[str, Any] = {item.name: copy.deepcopy(item.default) for item in DECLARED}

Source = Literal["default", "file", "global", "group"]
_RANK: dict[str, int] = {"default": 0, "file": 1, "global": 2, "group": 3}
_DESCRIBED: dict[str, str] = {
    "default": "built-in default",
    "file": "from the config file",
    "global": "from global settings",
    "group": "set on this group",
}
# (lower, upper) pairs that must stay ordered on the effective values (``not_below``).
ORDERED_PAIRS: tuple[tuple[str, str], ...] = tuple(
    (f"{item.block}.{item.policy.not_below}".lstrip("."), item.name)
    for item in DECLARED
    if item.policy.not_below
)


@dataclass(frozen=True, slots=True)
class ResolvedField:
    value: Any
    source: Source
    overridden: bool


def flatten(nested: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"retry": {"max_retries": 3}}`` -> ``{"retry.max_retries": 3}``."""
    flat: dict[str, Any] = {}
    for key, value in nested.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, f"{dotted}."))
        else:
            flat[dotted] = value
    return flat


def unflatten(flat: Mapping[str, Any]) -> dict[str, Any]:
    """Inverse of :func:`flatten`; raises ValueError when a key is both leaf and block."""
    nested: dict[str, Any] = {}
    for dotted, value in flat.items():
        *parents, leaf = dotted.split(".")
        node = nested
        for part in parents:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ValueError(f"{dotted!r} conflicts with the value at {part!r}")
            node = child
        if isinstance(node.get(leaf), dict):
            raise ValueError(f"{dotted!r} conflicts with the block below it")
        node[leaf] = value
    return nested


def ordered_flat(flat: Mapping[str, Any]) -> dict[str, Any]:
    """The known policy keys of ``flat`` in :data:`POLICY_FIELDS` order."""
    return {key: flat[key] for key in POLICY_FIELDS if key in flat}


def policy_flat(model: PolicyIn) -> dict[str, Any]:
    """The policy keys actually written in ``model`` (a PolicyIn or GroupIn), flattened."""
    data = model.model_dump(mode="json", exclude_unset=True, include=set(PolicyIn.model_fields))
    return ordered_flat(flatten(data))


def validate_policy_flat(flat: Any) -> dict[str, Any]:
    """Validate one partial flat layer; returns it normalized (JSON values, field order).

    Errors are keyed by the dotted field name, e.g. ``retry.max_retries``.
    """
    if not isinstance(flat, Mapping):
        raise ConfigError.single("", "policy must be a mapping of dotted field names to values")
    errors: list[FieldError] = []
    known: dict[str, Any] = {}
    for key, value in flat.items():
        if key in POLICY_FIELDS:
            known[key] = value
        elif isinstance(key, str) and key in RENAMED_KEYS:
            errors.append(FieldError(key, renamed_message(key)))
        else:
            errors.append(
                FieldError(str(key), f"unknown policy field; known: {', '.join(POLICY_FIELDS)}")
            )
    model: PolicyIn | None = None
    try:
        model = PolicyIn.model_validate(unflatten(known))
    except ValidationError as exc:
        errors += field_errors(exc, PolicyIn)
    if errors or model is None:
        raise ConfigError(errors)
    return policy_flat(model)


def resolve(
    builtin: Mapping[str, Any],
    file_layer: Mapping[str, Any],
    global_layer: Mapping[str, Any],
    group_layer: Mapping[str, Any] | None = None,
) -> dict[str, ResolvedField]:
    """Every policy field's effective value and source, in :data:`POLICY_FIELDS` order.

    ``overridden`` marks fields set at the top layer given: the group layer when one is
    passed, else the global layer. Values are deep copies (callers may mutate them).
    """
    layers: list[tuple[Source, Mapping[str, Any]]] = [
        ("file", file_layer),
        ("global", global_layer),
    ]
    if group_layer is not None:
        layers.append(("group", group_layer))
    top = layers[-1][0]
    resolved: dict[str, ResolvedField] = {}
    for field in POLICY_FIELDS:
        value, source = builtin.get(field), "default"
        for name, layer in layers:
            if field in layer:
                value, source = layer[field], name
        resolved[field] = ResolvedField(copy.deepcopy(value), source, source == top)  # type: ignore[arg-type]
    return resolved


def effective_values(resolved: Mapping[str, ResolvedField]) -> dict[str, Any]:
    return {field: item.value for field, item in resolved.items()}


def validate_effective(resolved: Mapping[str, ResolvedField]) -> None:
    """Cross-field rules on the layered result; raises ConfigError.

    The error is put on the field that comes from the higher layer (the one the writer
    just changed), and names where the other value comes from.
    """
    errors: list[FieldError] = []
    for low_name, high_name in ORDERED_PAIRS:
        low, high = resolved[low_name], resolved[high_name]
        if not all(isinstance(item.value, int | float) for item in (low, high)):
            continue
        if low.value <= high.value:
            continue
        if _RANK[low.source] > _RANK[high.source]:
            message = f"must be <= {high_name} ({high.value}, {_DESCRIBED[high.source]})"
            errors.append(FieldError(low_name, message))
        else:
            message = f"must be >= {low_name} ({low.value}, {_DESCRIBED[low.source]})"
            errors.append(FieldError(high_name, message))
    if errors:
        raise ConfigError(errors)


def policy_warnings(layer: Mapping[str, Any]) -> list[str]:
    """Accepted values that defeat compaction (SPEC §13), for one flat policy layer:
    printed by ``loadconfig``, returned by the API (``warnings``), shown on the page."""
    context, compact = layer.get("context_window"), layer.get("compact_window")
    return window_warnings(
        context if isinstance(context, int) else None, compact if isinstance(compact, int) else None
    )


def engine_values(policy: Mapping[str, Any], block: str) -> dict[str, Any]:
    """The ``block.*`` fields of a flat policy as keyword arguments of the engine's policy
    dataclass (``RetryPolicy``, ``CircuitPolicy``): leaf names, code lists as frozensets
    of :class:`FailureCode`, numbers as their declared type. Absent fields are left out,
    so the dataclass default (held equal to the declared one by a test) applies."""
    out: dict[str, Any] = {}
    for item in DECLARED:
        if item.block != block or item.name not in policy:
            continue
        value = policy[item.name]
        if item.kind == "codes":
            value = frozenset(FailureCode(code) for code in value)
        elif item.kind == "float":
            value = float(value)
        elif item.kind == "int":
            value = int(value)
        out[item.leaf] = value
    return out
