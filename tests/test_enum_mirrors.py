"""The string enums a call carries (commit point, outcome, switch reason, health event
kind) and the shapes that repeat their values: the ledger's ``TextChoices`` (apart, so
migrations stay stable), the config schema's and the API's ``Literal``s. A value added to
one and not the others would be refused, or stored and never rendered."""

from __future__ import annotations

import json
import logging
from enum import Enum
from typing import Any, get_args

import orjson
import pytest

from routing.api.observability import CallOut, CallsQuery
from routing.audit import models as ledger
from routing.config.schema import PolicyIn
from routing.engine.health import EventKind
from routing.engine.plan import CommitPoint, SwitchReason
from routing.gateway.events import CallOutcome


def values(enum: type[Enum]) -> set[str]:
    return {str(member.value) for member in enum}


def literal_values(annotation: Any) -> set[str]:
    """The strings of a ``Literal[...]``, also inside ``| None`` and ``Annotated``."""
    args = get_args(annotation)
    if all(isinstance(arg, str) for arg in args):
        return set(args)
    return set().union(*(literal_values(arg) for arg in args))


@pytest.mark.parametrize(
    ("mirror", "enum"),
    [
        (ledger.Outcome, CallOutcome),
        (ledger.SwitchReason, SwitchReason),
        (ledger.HealthKind, EventKind),
    ],
)
def test_ledger_choices_mirror_the_enums(mirror: type[Enum], enum: type[Enum]) -> None:
    assert values(mirror) == values(enum)


def test_the_policy_schema_accepts_exactly_the_commit_points() -> None:
    assert literal_values(PolicyIn.model_fields["commit"].annotation) == values(CommitPoint)


def test_the_api_names_exactly_the_call_outcomes() -> None:
    assert literal_values(CallOut.model_fields["outcome"].annotation) == values(CallOutcome)
    assert literal_values(CallsQuery.model_fields["outcome"].annotation) == values(CallOutcome)


@pytest.mark.parametrize(
    "member", [CommitPoint.COMPLETE, CallOutcome.ABORTED, SwitchReason.RETRY_EXHAUSTED]
)
def test_members_render_and_serialize_as_the_strings_did(member: Enum) -> None:
    text = str(member.value)
    assert str(member) == f"{member}" == text  # templates, headers, metric labels
    line = logging.LogRecord("t", logging.INFO, __file__, 1, "reason=%s", (member,), None)
    assert line.getMessage() == f"reason={text}"
    assert json.dumps(member) == orjson.dumps(member).decode() == f'"{text}"'
