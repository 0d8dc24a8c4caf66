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
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from routing.config.policy import POLICY_FIELDS
from routing.config.schema import extra_algorithms
from routing.engine.algorithms import ALGORITHMS
from routing.engine.failures import FailureCode

Kind = Literal["choice", "codes", "int", "float", "optional_int"]

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

_SPECS: tuple[FieldSpec, ...] = (
    FieldSpec(
        "algorithm",
        "Algorithm",
        "choice",
        "Routing",
        "How the next target is chosen among the healthy ones.",
    ),
    FieldSpec(
        "switch_codes",
        "Switch codes",
        "codes",
        "Switch codes",
        "Failures that allow moving on to the next target.",
    ),
    FieldSpec(
        "retry.max_retries",
        "Max retries",
        "int",
        "Retry policy",
        "In-place retries of one target per call.",
    ),
    FieldSpec(
        "retry.retry_codes",
        "Retry codes",
        "codes",
        "Retry policy",
        "Failures that retry the same target in place.",
    ),
    FieldSpec("retry.initial_delay_ms", "Initial delay", "int", "Retry policy", unit="ms"),
    FieldSpec(
        "retry.max_delay_ms",
        "Max delay",
        "int",
        "Retry policy",
        "A Retry-After beyond this switches at once.",
        unit="ms",
    ),
    FieldSpec(
        "retry.jitter_ratio",
        "Jitter",
        "float",
        "Retry policy",
        "± fraction of each delay.",
        step="0.01",
    ),
    FieldSpec(
        "circuit.failure_threshold",
        "Failure threshold",
        "int",
        "Circuit and cooldown",
        "Consecutive failed calls that start cooling a target.",
    ),
    FieldSpec(
        "circuit.cooldown_base_ms",
        "Cooldown",
        "int",
        "Circuit and cooldown",
        "First cooling period; doubles on each new opening.",
        unit="ms",
    ),
    FieldSpec("circuit.cooldown_cap_ms", "Cooldown cap", "int", "Circuit and cooldown", unit="ms"),
    FieldSpec(
        "commit",
        "Commit point",
        "choice",
        "Routing",
        "When the answer starts flowing to the client (failover is invisible before it).",
        choices=("first-content", "complete"),
    ),
    FieldSpec(
        "context_window",
        "Context window",
        "optional_int",
        "Routing",
        "Declared in /v1/models; empty = none declared.",
        unit="tokens",
    ),
    FieldSpec(
        "compact_window",
        "Compaction point",
        "optional_int",
        "Routing",
        "Declares max(ceil(T*1.25), T+65536) so agents compact near T; exclusive with the "
        "context window.",
        unit="tokens",
    ),
    FieldSpec(
        "deadline_s",
        "Call deadline",
        "float",
        "Routing",
        "Bounds retries and switches of one call together.",
        unit="s",
        step="any",
    ),
)
FIELD_SPECS: dict[str, FieldSpec] = {spec.name: spec for spec in _SPECS}
assert tuple(FIELD_SPECS) == POLICY_FIELDS, "every policy field needs a form field, in order"
SECTIONS: tuple[str, ...] = ("Routing", "Switch codes", "Retry policy", "Circuit and cooldown")


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
        elif spec.kind == "optional_int" and not text.strip():
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
    if spec.kind == "float" and isinstance(effective, int | float) and isinstance(submitted, float):
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
