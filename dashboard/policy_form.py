"""The policy settings form (a group's overrides, or the global defaults): its fields,
how a submission is read, and which fields it actually changes.

Decisions:

- **Parsing only, no policy rules here.** The form turns text into the types the schema
  expects (``"30000"`` → ``30000``, checked boxes → a list) and reports text that is no
  number at all. Ranges, empty code lists, ordering rules and the rest are enforced by the
  one configuration schema behind the service call, so the page rejects exactly what the
  API and the config file reject, with the same messages.
- **Only changed fields are written.** The form shows every field's effective value; a
  field the user did not touch must stay inherited, so a save sends only fields whose
  submitted value differs from the effective value rendered (code lists compare as sets:
  their order means nothing).
- An empty ``context_window`` / ``compact_window`` means "not declared" (``null``); any other empty
  number is an error rather than a silent zero.
- **Rows come from the declaration.** Label, help, unit, section, input kind and order
  are read from the policy fields declared on ``PolicyIn`` (``routing.config.fields``);
  nothing here names a field except the algorithm's dynamic choices.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from routing.config.fields import DeclaredField, Kind
from routing.config.policy import DECLARED
from routing.config.schema import extra_algorithms
from routing.engine.algorithms import ALGORITHMS
from routing.engine.failures import FailureCode

SOURCE_LABELS: dict[str, str] = {
    "default": "built-in default",
    "file": "config file",
    "global": "global settings",
    "group": "this group",
}


@dataclass(frozen=True, slots=True)
class FieldSpec:
    name: str  # dotted policy field
    label: str
    kind: Kind
    section: str
    help: str = ""
    unit: str = ""
    choices: tuple[str, ...] = ()
    step: str = "1"

    @property
    def html_id(self) -> str:
        return "f-" + self.name.replace(".", "-").replace("_", "-")


ALL_CODES: tuple[str, ...] = tuple(code.value for code in FailureCode)


def _spec(item: DeclaredField) -> FieldSpec:
    kind = item.kind
    step = (item.policy.step or "any") if kind in ("float", "optional_float") else "1"
    return FieldSpec(
        item.name, item.title, kind, item.section, item.help, item.policy.unit, item.choices, step
    )


# Rows follow the declaration (PolicyIn's annotated fields): label = title, help, unit.
FIELD_SPECS: dict[str, FieldSpec] = {item.name: _spec(item) for item in DECLARED}
# Sections in the order their first field is declared.
SECTIONS: tuple[str, ...] = tuple(dict.fromkeys(spec.section for spec in FIELD_SPECS.values()))


def algorithm_choices(current: Any) -> tuple[str, ...]:
    names = [*ALGORITHMS, *extra_algorithms()]
    if isinstance(current, str) and current not in names:
        names.append(current)  # a dotted path set elsewhere stays selectable
    return tuple(names)


@dataclass(slots=True)
class FieldRow:
    """One field as the template shows it."""

    spec: FieldSpec
    value: Any  # what the input shows: the effective value, or what was submitted
    source: str  # default | file | global | group
    overridden: bool
    errors: list[str] = field(default_factory=list)
    choices: tuple[str, ...] = ()

    @property
    def source_label(self) -> str:
        return SOURCE_LABELS.get(self.source, self.source)

    @property
    def text_value(self) -> str:
        if self.value is None:
            return ""
        return str(self.value)


@dataclass(slots=True)
class Section:
    title: str
    rows: list[FieldRow]


def build_rows(
    fields: Mapping[str, Mapping[str, Any]],
    *,
    submitted: Mapping[str, Any] | None = None,
    errors: Mapping[str, list[str]] | None = None,
) -> list[Section]:
    """Rows grouped in sections.

    ``fields`` is a selector's ``{dotted: {value, source, overridden}}``.
    """
    submitted = submitted or {}
    errors = errors or {}
    by_section: dict[str, list[FieldRow]] = {title: [] for title in SECTIONS}
    for name, spec in FIELD_SPECS.items():
        resolved = fields.get(name, {})
        value = submitted[name] if name in submitted else resolved.get("value")
        choices = spec.choices
        if name == "algorithm":
            choices = algorithm_choices(value)
        elif spec.kind == "codes":
            choices = ALL_CODES
        by_section[spec.section].append(
            FieldRow(
                spec=spec,
                value=value,
                source=str(resolved.get("source", "default")),
                overridden=bool(resolved.get("overridden", False)),
                errors=list(errors.get(name, [])),
                choices=choices,
            )
        )
    return [Section(title, rows) for title, rows in by_section.items()]


def _parse_int(text: str) -> int:
    return int(text.strip(), 10)


def _parse_float(text: str) -> float:
    number = float(text.strip())
    if not math.isfinite(number):
        raise ValueError(text)
    return number


def parse_submission(data: Any) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """``(values, errors)`` read from a POST ``QueryDict``; every field is read."""
    values: dict[str, Any] = {}
    errors: dict[str, list[str]] = {}
    for name, spec in FIELD_SPECS.items():
        if spec.kind == "codes":
            values[name] = list(data.getlist(name))
            continue
        raw = data.get(name)
        text = "" if raw is None else str(raw)
        if spec.kind == "choice":
            values[name] = text
        elif spec.kind in ("optional_int", "optional_float") and not text.strip():
            values[name] = None
        elif spec.kind in ("int", "optional_int"):
            try:
                values[name] = _parse_int(text)
            except ValueError:
                values[name] = text
                errors[name] = ["enter a whole number"]
        else:
            try:
                values[name] = _parse_float(text)
            except ValueError:
                values[name] = text
                errors[name] = ["enter a number"]
    return values, errors


def _same(spec: FieldSpec, submitted: Any, effective: Any) -> bool:
    if spec.kind == "codes":
        return (
            isinstance(effective, list)
            and sorted(submitted) == sorted(effective)
            and len(set(submitted)) == len(submitted)
        )
    if (
        spec.kind in ("float", "optional_float")
        and isinstance(effective, int | float)
        and isinstance(submitted, float)
    ):
        return math.isclose(submitted, float(effective), rel_tol=0, abs_tol=1e-12)
    return bool(submitted == effective)


def changed_fields(
    values: Mapping[str, Any], fields: Mapping[str, Mapping[str, Any]]
) -> dict[str, Any]:
    """The flat ``changes`` to write: submitted values that differ from the effective ones."""
    changes: dict[str, Any] = {}
    for name, spec in FIELD_SPECS.items():
        if name not in values:
            continue
        if not _same(spec, values[name], fields.get(name, {}).get("value")):
            changes[name] = values[name]
    return changes
