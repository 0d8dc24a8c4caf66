"""The settings form's reading of a submission: parsing only, and only changed fields."""

from __future__ import annotations

from typing import Any

import pytest
from django.http import QueryDict

from dashboard.policy_form import (
    FIELD_SPECS,
    build_rows,
    changed_fields,
    parse_submission,
)
from routing.config.policy import BUILTIN_DEFAULTS, POLICY_FIELDS, resolve


def effective(**group: Any) -> dict[str, dict[str, Any]]:
    resolved = resolve(BUILTIN_DEFAULTS, {"retry.max_retries": 3}, {}, group)
    return {
        name: {"value": item.value, "source": item.source, "overridden": item.overridden}
        for name, item in resolved.items()
    }


def submission(fields: dict[str, dict[str, Any]], **overrides: Any) -> QueryDict:
    """A POST as the rendered form would send it, with ``overrides`` typed in."""
    data = QueryDict(mutable=True)
    values = {name: item["value"] for name, item in fields.items()} | {
        k.replace("__", "."): v for k, v in overrides.items()
    }
    for name, value in values.items():
        if FIELD_SPECS[name].kind == "codes":
            data.setlist(name, list(value))
        else:
            data[name] = "" if value is None else str(value)
    return data


def test_every_policy_field_has_a_form_field_in_order() -> None:
    assert tuple(FIELD_SPECS) == POLICY_FIELDS


def test_an_untouched_form_changes_nothing() -> None:
    fields = effective()
    values, errors = parse_submission(submission(fields))
    assert errors == {}
    assert changed_fields(values, fields) == {}


def test_only_the_edited_field_is_written_with_the_schema_types() -> None:
    fields = effective()
    values, errors = parse_submission(submission(fields, circuit__cooldown_base_ms="30000"))
    assert errors == {}
    assert changed_fields(values, fields) == {"circuit.cooldown_base_ms": 30000}


def test_code_lists_compare_as_sets() -> None:
    fields = effective()
    reordered = list(reversed(fields["switch_codes"]["value"]))
    values, _ = parse_submission(submission(fields, switch_codes=reordered))
    assert changed_fields(values, fields) == {}


def test_empty_code_list_and_negative_numbers_pass_through_to_the_schema() -> None:
    # Range and emptiness rules belong to the shared schema, not to the form.
    fields = effective()
    values, errors = parse_submission(
        submission(fields, switch_codes=[], circuit__cooldown_base_ms="-5")
    )
    assert errors == {}
    assert changed_fields(values, fields) == {
        "switch_codes": [],
        "circuit.cooldown_base_ms": -5,
    }


@pytest.mark.parametrize(
    ("field", "text", "message"),
    [
        ("retry.max_retries", "three", "enter a whole number"),
        ("retry.max_retries", "1.5", "enter a whole number"),
        ("retry.max_retries", "", "enter a whole number"),
        ("retry.jitter_ratio", "lots", "enter a number"),
        ("deadline_s", "inf", "enter a number"),
    ],
)
def test_text_that_is_no_number_is_a_field_error(field: str, text: str, message: str) -> None:
    values, errors = parse_submission(submission(effective(), **{field.replace(".", "__"): text}))
    assert errors == {field: [message]}
    assert values[field] == text  # shown back as typed


def test_an_empty_context_window_means_none_declared() -> None:
    fields = effective(context_window=64000)
    values, errors = parse_submission(submission(fields, context_window=""))
    assert errors == {}
    assert changed_fields(values, fields) == {"context_window": None}


def test_rows_carry_source_override_mark_and_submitted_values() -> None:
    fields = effective(**{"circuit.cooldown_base_ms": 20000})
    sections = build_rows(
        fields,
        submitted={"circuit.cooldown_base_ms": "abc"},
        errors={"circuit.cooldown_base_ms": ["enter a whole number"]},
    )
    rows = {row.spec.name: row for section in sections for row in section.rows}
    assert sorted(rows) == sorted(POLICY_FIELDS)  # grouped by section, each once
    cooldown = rows["circuit.cooldown_base_ms"]
    assert (cooldown.source, cooldown.overridden, cooldown.value) == ("group", True, "abc")
    assert cooldown.errors == ["enter a whole number"]
    retries = rows["retry.max_retries"]
    assert (retries.source, retries.source_label, retries.overridden) == (
        "file",
        "config file",
        False,
    )
    assert rows["algorithm"].choices[0] == "priority"
    assert "RATE_LIMIT" in rows["switch_codes"].choices
