"""A provider: its URL, credential (write-only, printable ASCII), headers, betas, model
list, timeouts and health-check interval."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, ConfigDict, Field, SecretStr, model_validator
from pydantic_core import PydanticCustomError

from routing.config.errors import FieldError
from routing.config.fields import Policy, declared_fields
from routing.config.schema.base import StrictModel, raise_all, short
from routing.config.schema.types import (
    PRINTABLE_ASCII_PATTERN,
    Documented,
    HealthCheckSeconds,
    ModelId,
    OptionalBaseUrl,
    ProviderName,
    TimeoutSeconds,
    printable_ascii,
)
from routing.platforms.base import PlatformSettings
from routing.protocols.registry import PLATFORMS, KindName, PlatformName

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


Credential = Annotated[
    Annotated[SecretStr, Documented({"pattern": PRINTABLE_ASCII_PATTERN})] | None,
    AfterValidator(_credential),
]
# A cloud's region or project id: letters, digits, dashes, underscores, dots.
PLATFORM_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
PlatformField = Annotated[str, Field(min_length=1, max_length=64, pattern=PLATFORM_NAME_PATTERN)]


def _platform_rules(schema: dict[str, Any]) -> None:
    """What :meth:`ProviderIn._reachable` checks, in the document: per platform, the kinds
    it carries, the fields it needs, a base_url where it has no endpoint of its own, and
    no field it does not read."""
    rules: list[dict[str, Any]] = []
    for name, platform in PLATFORMS.items():
        when: dict[str, Any] = {"properties": {"platform": {"const": name}}}
        if name != "direct":  # absent is direct
            when["required"] = ["platform"]
        kinds = sorted(kind.value for kind in platform.kinds)
        needed = [*platform.required]
        if "openai" not in kinds:  # the default kind: a platform without it needs `kind`
            needed.insert(0, "kind")
        if not platform.has_default_endpoint:
            needed.append("base_url")
        given = {"type": "string", "minLength": 1}  # present and not null
        then: dict[str, Any] = {
            "properties": {
                "kind": {"enum": kinds},
                **{
                    field: {"type": "null"} if field != "entra" else {"const": False}
                    for field in PLATFORM_FIELDS
                    if field not in platform.fields
                },
                **{field: given for field in needed if field != "kind"},
            },
            "required": needed,
        }
        if platform.region_pattern:
            region = then["properties"].get("region", {"type": ["string", "null"]})
            then["properties"]["region"] = {**region, "pattern": f"^(?:{platform.region_pattern})$"}
        if platform.schema_rules():
            then["allOf"] = platform.schema_rules()
        rules.append({"if": when, "then": then})
    schema["allOf"] = rules


class ProviderIn(StrictModel):
    """One provider. ``api_key`` absent or ``""`` keeps the stored credential, a string
    replaces it, ``null`` clears it (``routing.services.providers.new_credential``, every path).

    ``models`` absent = keep the list refreshed from the upstream. ``health_check_s``: how
    often a cooling target of this provider gets an active health check (0 = never);
    absent or ``null`` = the gateway's ``SWITCHYARD_HEALTH_CHECK_S`` (default 10 s).
    """

    model_config = ConfigDict(**StrictModel.model_config, json_schema_extra=_platform_rules)

    name: ProviderName
    kind: KindName = "openai"  # the protocol registry's kinds (routing.protocols.registry)
    platform: PlatformName = Field(
        "direct", description="Where and how the kind is reached (SPEC §19)."
    )
    base_url: OptionalBaseUrl = Field(
        "", description="The endpoint; empty: the platform's own (bedrock, vertex)."
    )
    api_key: Credential = None
    region: PlatformField | None = Field(None, description="bedrock, vertex: the region.")
    project: PlatformField | None = Field(None, description="vertex: the project id.")
    credentials_file: Annotated[str, Field(min_length=1, max_length=500)] | None = Field(
        None,
        description="vertex: a service-account JSON file (absent: Application Default "
        "Credentials).",
    )
    aws_access_key_id: Credential = Field(
        None, description="bedrock: write-only like api_key (absent: the AWS credential chain)."
    )
    aws_secret_access_key: Credential = Field(None, description="bedrock: write-only.")
    aws_session_token: Credential = Field(None, description="bedrock: write-only.")
    entra: bool = Field(False, description="azure: Microsoft Entra ID tokens, not api_key.")
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

    @model_validator(mode="after")
    def _reachable(self) -> ProviderIn:
        """The platform's own check (routing.platforms): the kinds it carries and the
        fields it needs, named in its messages."""
        platform = PLATFORMS[self.platform]
        api_key = self.api_key.get_secret_value().strip() if self.api_key else ""
        problems = platform.check(self.kind, self.base_url, api_key, self.settings())
        unread = [
            name
            for name in PLATFORM_FIELDS
            if name not in platform.fields and getattr(self, name) not in (None, False)
        ]
        raise_all(
            [FieldError(name, message) for name, message in problems.items()]
            + [
                FieldError(name, f"platform '{self.platform}' does not use {name}")
                for name in unread
            ]
        )
        return self

    def settings(self) -> PlatformSettings:
        """The platform fields given here (a secret left out reads ``""``)."""

        def secret(value: SecretStr | None) -> str:
            return "" if value is None else value.get_secret_value()

        return PlatformSettings(
            region=self.region or "",
            project=self.project or "",
            credentials_file=self.credentials_file or "",
            entra=self.entra,
            aws_access_key_id=secret(self.aws_access_key_id),
            aws_secret_access_key=secret(self.aws_secret_access_key),
            aws_session_token=secret(self.aws_session_token),
        )


# The platform fields of a provider, in the order the file, the API and the page show them.
PLATFORM_FIELDS: tuple[str, ...] = (
    "region",
    "project",
    "credentials_file",
    "aws_access_key_id",
    "aws_secret_access_key",
    "aws_session_token",
    "entra",
)
PLATFORM_SECRETS: tuple[str, ...] = (
    "aws_access_key_id",
    "aws_secret_access_key",
    "aws_session_token",
)
