"""The string enums a call carries (commit point, outcome, switch reason, health event
kind) and the shapes that repeat their values: the ledger's ``TextChoices`` (apart, so
migrations stay stable), the config schema's and the API's ``Literal``s. A value added to
one and not the others would be refused, or stored and never rendered.

The kinds and platforms are declared once, in ``routing.protocols.registry``; every place
that names them derives from it or, where it must stay apart (the ledger's choices, the
migrations), agrees with it here."""

from __future__ import annotations

import json
import logging
from enum import Enum
from typing import Any, get_args

import orjson
import pytest

from routing.api.observability import AttemptOut, CallOut, CallsQuery
from routing.audit import models as ledger
from routing.config.schema import PolicyIn
from routing.config.schema.providers import ProviderIn
from routing.engine.health import EventKind
from routing.engine.plan import CommitPoint, SwitchReason
from routing.gateway.events import CallOutcome
from routing.gateway.table import ProviderSpec
from routing.models import Provider
from routing.observability.span_attributes import PROVIDER_NAMES
from routing.protocols import Protocol
from routing.protocols.registry import DOOR_NAMES, KINDS, PLATFORMS, PROTOCOLS, PlatformName
from routing.upstream.openai import OpenAIClient


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


# ------------------------------------------------------------ kinds and platforms (§12, §19)
def _migrated_choices(app: str, model: str, field: str) -> set[str]:
    """A field's choices as the migrations leave them (what the database was built with)."""
    from django.db import connection
    from django.db.migrations.loader import MigrationLoader

    loader = MigrationLoader(connection, ignore_no_migrations=True)
    state = loader.project_state()
    return {str(value) for value, _ in state.models[app, model].fields[field].choices}


def test_the_protocol_registry_covers_every_kind_once() -> None:
    assert set(PROTOCOLS) == set(Protocol)  # one entry per kind, each under its own kind
    assert all(kind is spec.kind for kind, spec in PROTOCOLS.items())
    assert KINDS == tuple(kind.value for kind in Protocol)
    doors = [spec.door for spec in PROTOCOLS.values() if spec.door is not None]
    assert len(doors) == len(set(doors))  # a door name per protocol a door speaks


@pytest.mark.django_db
def test_every_place_that_names_kinds_agrees_with_the_registry() -> None:
    kinds = set(KINDS)
    assert {value for value, _ in Provider.KIND_CHOICES} == kinds
    assert {str(value) for value, _ in Provider._meta.get_field("kind").choices or ()} == kinds
    assert literal_values(ProviderIn.model_fields["kind"].annotation) == kinds
    assert literal_values(AttemptOut.model_fields["upstream_kind"].annotation) == kinds
    assert values(ledger.UpstreamKind) == kinds  # apart, so the migrations stay stable
    assert _migrated_choices("routing", "provider", "kind") == kinds
    assert _migrated_choices("audit", "attempt", "upstream_kind") == kinds
    assert set(PROVIDER_NAMES) == kinds
    assert set(DOOR_NAMES) == {k.value for k, spec in PROTOCOLS.items() if spec.door is not None}
    assert set(DOOR_NAMES.values()) | {"embeddings"} == values(ledger.FrontDoor)


def test_every_protocol_is_reachable_on_a_platform() -> None:
    assert (
        "direct" in PLATFORMS
        and ProviderSpec.__dataclass_fields__["platform"].default is (PLATFORMS["direct"])
    )
    assert set().union(*(p.kinds for p in PLATFORMS.values())) == set(PROTOCOLS)
    assert all(name == platform.name for name, platform in PLATFORMS.items())
    assert set(get_args(PlatformName)) == set(PLATFORMS)


@pytest.mark.parametrize("kind", KINDS)
def test_a_client_of_each_kind_speaks_its_protocol_at_its_endpoint(kind: str) -> None:
    """The registry alone says where a kind's requests go and what they carry."""
    protocol = PROTOCOLS[Protocol(kind)]
    client = OpenAIClient(base_url="http://127.0.0.1:9/v1/", api_key="sk-x", protocol=protocol)
    assert client.kind == kind
    if protocol.model_path is None:
        assert client.url == "http://127.0.0.1:9/v1" + protocol.path
    else:  # the URL names the model and the stream (Gemini's)
        expected = "http://127.0.0.1:9/v1" + protocol.model_path("m", True)
        assert client.platform.endpoint_url(protocol, client.base_url, "m", True) == expected
    assert client.models_url == "http://127.0.0.1:9/v1/models"
    sent = client._headers
    if protocol.auth_header == "authorization":
        assert sent["authorization"] == "Bearer sk-x"
    else:
        assert sent[protocol.auth_header] == "sk-x" and "authorization" not in sent
    assert all(sent[name] == value for name, value in protocol.headers.items())
