"""A provider: its URL, credential (write-only, printable ASCII), headers, betas, model
list, timeouts and health-check interval."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, Field, SecretStr
from pydantic_core import PydanticCustomError

from routing.config.fields import Policy, declared_fields
from routing.config.schema.base import StrictModel, short
from routing.config.schema.types import (
    PRINTABLE_ASCII_PATTERN,
    BaseUrl,
    Documented,
    HealthCheckSeconds,
    ModelId,
    ProviderName,
    TimeoutSeconds,
    printable_ascii,
)
from routing.protocols.registry import KindName

_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")


def _credential(value: SecretStr | None) -> SecretStr | None:
    if value is not None and not printable_ascii(value.get_secret_value()):
        raise PydanticCustomError(
            "credential",
            "the credential must be printable ASCII (no line breaks, tabs or non-ASCII "
            "characters): no HTTP request could carry it",
        )
    return value


def _headers(headers: dict[str, str]) -> dict[str, str]:
    for name, value in headers.items():
        if not _HEADER_NAME.match(name):
            raise PydanticCustomError(
                "header", "{name} is not a valid header name", {"name": short(name)}
            )
        if "\r" in value or "\n" in value:
            raise PydanticCustomError(
                "header", "header {name} contains a line break", {"name": name}
            )
        if not printable_ascii(value):
            raise PydanticCustomError(
                "header",
                "header {name} must be printable ASCII: no HTTP request could carry it",
                {"name": name},
            )
        if name.lower() == "authorization":
            raise PydanticCustomError(
                "header",
                "put the credential in api_key (encrypted at rest), not in an Authorization header",
            )
    return headers


def _unique_models(models: list[str]) -> list[str]:
    repeated = sorted({m for m in models if models.count(m) > 1})
    if repeated:
        raise PydanticCustomError(
            "models_repeated", "repeats {models}", {"models": ", ".join(repeated)}
        )
    return models


_HEADERS_DOCUMENTED = {
    "propertyNames": {
        "pattern": _HEADER_NAME.pattern,
        "not": {"pattern": "^[Aa][Uu][Tt][Hh][Oo][Rr][Ii][Zz][Aa][Tt][Ii][Oo][Nn]$"},
    },
    "additionalProperties": {"type": "string", "pattern": PRINTABLE_ASCII_PATTERN},
}


class TimeoutsIn(StrictModel):
    """Per-attempt timeouts (seconds); a key left out takes its declared default."""

    connect_s: Annotated[TimeoutSeconds | None, Policy(5.0, unit="s")] = Field(
        None, title="Connect"
    )
    headers_s: Annotated[TimeoutSeconds | None, Policy(10.0, unit="s")] = Field(
        None,
        title="Response headers",
        description="A stream's send → response headers (a JSON call's headers carry its "
        "whole answer: first_token_s bounds them).",
    )
    first_token_s: Annotated[TimeoutSeconds | None, Policy(240.0, unit="s")] = Field(
        None,
        title="First token",
        description="Send → first content, reasoning or tool-call delta (a JSON call: send "
        "→ its answer); the idle timeout does not apply before it.",
    )
    idle_s: Annotated[TimeoutSeconds | None, Policy(60.0, unit="s")] = Field(None, title="Idle")
    total_s: Annotated[TimeoutSeconds | None, Policy(600.0, unit="s")] = Field(None, title="Total")


# The built-in timeouts: the Provider columns' defaults (what a left-out key returns to).
TIMEOUT_DEFAULTS: dict[str, float] = {
    item.name: item.default for item in declared_fields(TimeoutsIn)
}


def _beta_names(names: list[str]) -> list[str]:
    for name in names:
        if not name or not printable_ascii(name) or " " in name or "," in name:
            raise ValueError(f"{short(name)} is not a beta name (printable, no spaces or commas)")
    return list(dict.fromkeys(names))


# printable ASCII without spaces or commas (what ``_beta_names`` checks), for the document
BETA_NAME_PATTERN = r"^[\x21-\x2b\x2d-\x7e]+$"
BetaNames = Annotated[
    list[str],
    AfterValidator(_beta_names),
    Documented({"items": {"type": "string", "minLength": 1, "pattern": BETA_NAME_PATTERN}}),
]


class BetasIn(StrictModel):
    """Which ``anthropic-beta`` values a client sent reach this provider (SPEC §15).

    ``allow`` absent: every beta passes except ``strip``; ``allow`` given: only those
    (and never ``strip``). Betas a provider would reject are removed, noted in
    ``x-switchyard-rewrites``."""

    allow: BetaNames | None = Field(None, description="Only these betas pass (absent: all).")
    strip: BetaNames = Field(default_factory=list, description="These betas never pass.")


class ProviderIn(StrictModel):
    """One provider. ``api_key`` absent or ``""`` keeps the stored credential, a string
    replaces it, ``null`` clears it (``routing.services.providers.new_credential``, every path).

    ``models`` absent = keep the list refreshed from the upstream. ``health_check_s``: how
    often a cooling target of this provider gets an active health check (0 = never);
    absent or ``null`` = the gateway's ``SWITCHYARD_HEALTH_CHECK_S`` (default 10 s).
    """

    name: ProviderName
    kind: KindName = "openai"  # the protocol registry's kinds (routing.protocols.registry)
    base_url: BaseUrl
    api_key: Annotated[
        Annotated[SecretStr, Documented({"pattern": PRINTABLE_ASCII_PATTERN})] | None,
        AfterValidator(_credential),
    ] = None
    headers: Annotated[
        dict[str, str], AfterValidator(_headers), Documented(_HEADERS_DOCUMENTED)
    ] = Field(
        default_factory=dict,
        description='Extra request headers. Values are write-only, like api_key: "" keeps '
        "the value stored under that name; a name left out is removed.",
    )
    betas: BetasIn | None = None
    models: (
        Annotated[list[ModelId], AfterValidator(_unique_models), Documented({"uniqueItems": True})]
        | None
    ) = None
    timeouts: TimeoutsIn | None = None
    health_check_s: HealthCheckSeconds | None = None
