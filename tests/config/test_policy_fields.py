"""Each policy field is declared once (on ``PolicyIn``, ``routing.config.fields``); the file
schema, the API schema, the form rows, layer resolution and the engine's values follow."""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any

import pytest
from pydantic import Field, ValidationError

from dashboard.policy_form import FIELD_SPECS, SECTIONS, _spec, build_rows
from dashboard.views.providers import TIMEOUT_FIELDS
from routing.api.config_api.http import inline_schema
from routing.api.config_api.schemas import TimeoutsOut
from routing.api.management import api
from routing.config.errors import ConfigError
from routing.config.fields import Policy, declared_fields
from routing.config.policy import (
    BUILTIN_DEFAULTS,
    DECLARED,
    ORDERED_PAIRS,
    POLICY_FIELDS,
    engine_values,
    resolve,
)
from routing.config.schema import (
    TIMEOUT_DEFAULTS,
    CircuitPolicyIn,
    ConfigFileIn,
    PolicyIn,
    RetryPolicyIn,
    TimeoutsIn,
    field_errors,
    parse_target,
)
from routing.engine.health import CircuitPolicy
from routing.engine.retry import RetryPolicy
from routing.models import Provider
from routing.upstream.openai import Timeouts


def leaves(schema: dict[str, Any], defs: dict[str, Any], prefix: str = "") -> list[str]:
    """Dotted leaf names of a JSON schema object (``$ref``/``anyOf`` followed)."""
    out: list[str] = []
    for name, prop in schema.get("properties", {}).items():
        node = prop
        for option in prop.get("anyOf", [prop]):
            if "$ref" in option:
                node = defs[option["$ref"].rsplit("/", 1)[-1]]
            elif option.get("type") == "object":
                node = option
        if "properties" in node:
            out += leaves(node, defs, f"{prefix}{name}.")
        else:
            out.append(f"{prefix}{name}")
    return out


def openapi_body(path: str, method: str) -> dict[str, Any]:
    operation = api.get_openapi_schema()["paths"][path][method]
    schema: dict[str, Any] = operation["requestBody"]["content"]["application/json"]["schema"]
    return schema


def test_every_shape_lists_the_declared_fields_in_order() -> None:
    declared = [item.name for item in DECLARED]
    file_schema = ConfigFileIn.model_json_schema()
    defaults_block = file_schema["$defs"]["PolicyIn"]
    rows = [row.spec.name for section in build_rows({}) for row in section.rows]

    assert list(POLICY_FIELDS) == declared
    assert list(BUILTIN_DEFAULTS) == declared
    assert leaves(defaults_block, file_schema["$defs"]) == declared  # the file's defaults:
    assert leaves(openapi_body("/api/v1/global", "patch"), {}) == declared
    assert leaves(openapi_body("/api/v1/groups/{name}", "patch"), {}) == declared
    assert list(FIELD_SPECS) == declared
    assert sorted(rows) == sorted(declared)  # grouped by section, each once
    assert list(resolve(BUILTIN_DEFAULTS, {}, {}, {})) == declared


def test_the_engine_defaults_are_the_declared_ones() -> None:
    for block, engine in (("retry", RetryPolicy), ("circuit", CircuitPolicy)):
        declared = {item.leaf for item in DECLARED if item.block == block}
        assert {f.name for f in dataclasses.fields(engine)} == declared, block
        assert engine(**engine_values(BUILTIN_DEFAULTS, block)) == engine(), block


def test_the_declared_defaults_pass_the_schema_and_resolve_as_defaults() -> None:
    resolved = resolve(BUILTIN_DEFAULTS, {}, {})
    assert {name: item.value for name, item in resolved.items()} == BUILTIN_DEFAULTS
    assert {item.source for item in resolved.values()} == {"default"}
    assert ORDERED_PAIRS == (
        ("retry.initial_delay_ms", "retry.max_delay_ms"),
        ("circuit.cooldown_base_ms", "circuit.cooldown_cap_ms"),
    )


def test_form_rows_read_title_help_unit_and_section_from_the_declaration() -> None:
    max_delay = FIELD_SPECS["retry.max_delay_ms"]
    field = RetryPolicyIn.model_fields["max_delay_ms"]
    assert (max_delay.label, max_delay.help, max_delay.unit) == (
        field.title,
        field.description,
        "ms",
    )
    assert max_delay.section == "Retry policy"
    assert FIELD_SPECS["circuit.cooldown_cap_ms"].section == "Circuit and cooldown"
    assert FIELD_SPECS["commit"].choices == ("first-content", "complete")
    assert FIELD_SPECS["context_window"].kind == "optional_int"
    assert FIELD_SPECS["deadline_s"].step == "any"
    assert SECTIONS == (
        "Routing",
        "Switch codes",
        "Retry policy",
        "Circuit and cooldown",
        "Limits and budgets",
    )


# --- adding a field: one declaration -------------------------------------------------


class _Retry(RetryPolicyIn):
    budget_ms: Annotated[int | None, Policy(2_000, unit="ms", not_below="initial_delay_ms")] = (
        Field(None, ge=0, le=60_000, title="Retry budget", description="Time for all retries.")
    )


class _Extended(PolicyIn):
    retry: _Retry | None = None


def test_a_field_declared_once_reaches_every_derived_shape() -> None:
    declared = {item.name: item for item in declared_fields(_Extended)}
    budget = declared["retry.budget_ms"]
    # the flat list and the built-in default
    assert list(declared) == [*POLICY_FIELDS[:8], "retry.budget_ms", *POLICY_FIELDS[8:]]
    assert budget.default == 2_000
    # the form row
    spec = _spec(budget)
    assert (spec.label, spec.help, spec.unit, spec.kind, spec.section) == (
        "Retry budget",
        "Time for all retries.",
        "ms",
        "int",
        "Retry policy",
    )
    # the API schema: range, title, help; no null offered
    doc = inline_schema(_Extended, partial=True)["properties"]["retry"]["properties"]
    assert doc["budget_ms"] == {
        "type": "integer",
        "minimum": 0,
        "maximum": 60_000,
        "title": "Retry budget",
        "description": "Time for all retries.",
    }
    # validation on every path: range, null and the declared ordering rule
    with pytest.raises(ValidationError) as caught:
        _Extended.model_validate({"retry": {"initial_delay_ms": 500, "budget_ms": 100}})
    assert [str(e) for e in field_errors(caught.value, _Extended)] == [
        "retry.budget_ms: must be >= initial_delay_ms (500)"
    ]
    with pytest.raises(ValidationError) as caught:
        _Extended.model_validate({"retry": {"budget_ms": None}})
    assert "must not be null" in str(caught.value)


def test_no_policy_model_documents_a_null_its_validation_rejects() -> None:
    """The per-target circuit (``TargetCircuitIn``) always rejected ``null`` but was
    documented as accepting it; the documented set now comes from the declaration."""
    with pytest.raises(ConfigError) as caught:
        parse_target({"provider": "p", "model": "m", "circuit": {"failure_threshold": None}})
    assert "must not be null" in str(caught.value)
    body = openapi_body("/api/v1/groups/{name}/targets", "post")
    circuit = next(o for o in body["properties"]["circuit"]["anyOf"] if o.get("type") == "object")
    for name in CircuitPolicyIn.model_fields:
        assert "anyOf" not in circuit["properties"][name], name
    group = openapi_body("/api/v1/groups/{name}", "patch")["properties"]
    assert {"type": "null"} in group["context_window"]["anyOf"]  # declared nullable
    assert "anyOf" not in group["deadline_s"]


def test_timeout_defaults_are_declared_once() -> None:
    """Declared on TimeoutsIn; the Provider columns and the provider page derive from it,
    the upstream client's own dataclass is held to it."""
    assert TIMEOUT_DEFAULTS == {
        "connect_s": 5.0,
        "headers_s": 10.0,
        "first_token_s": 240.0,
        "idle_s": 60.0,
        "total_s": 600.0,
    }
    assert dataclasses.asdict(Timeouts()) == TIMEOUT_DEFAULTS
    provider = Provider()
    assert {
        key: getattr(provider, f"{key.removesuffix('_s')}_timeout_s") for key in TIMEOUT_DEFAULTS
    } == TIMEOUT_DEFAULTS
    assert [key for key, _ in TIMEOUT_FIELDS] == list(TimeoutsIn.model_fields)
    assert [label for _, label in TIMEOUT_FIELDS] == [
        "Connect",
        "Response headers",
        "First token",
        "Idle",
        "Total",
    ]
    assert list(TimeoutsOut.model_fields) == list(TimeoutsIn.model_fields)
