"""The one configuration schema (pydantic v2) behind every write path.

The config file, the management API, the settings page and the admin all validate
through these models, so a value rejected on one path is rejected on all of them.

Rules that hold everywhere:

- ``extra="forbid"`` and ``strict=True``: unknown keys are errors, and ``"5"`` is not an
  integer nor ``1`` a boolean. Old or renamed keys (:data:`RENAMED_KEYS`) get a message
  saying what to write instead.
- Policy fields are optional (absent = inherit the lower layer). An explicit ``null`` is
  rejected except for ``context_window``, where it means "no declared window".
- Failure-code lists must be non-empty, without repeats, of known codes.
- Cross-field rules (``initial_delay_ms <= max_delay_ms``, ``cooldown_base_ms <=
  cooldown_cap_ms``) are checked within one block here, and on the *effective*
  (layered) values by ``routing.config.policy.validate_effective``.
- Cross-references (unique names, duplicate targets, targets naming an unknown
  provider) are checked by :func:`cross_check` on the raw document too, so a file with
  both field errors and reference errors reports all of them at once.

Errors come out as :class:`~routing.config.errors.FieldError` with dotted paths via
:func:`field_errors`; inputs are never echoed (``hide_input_in_errors``), so a credential
in a malformed document cannot leak into a message.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal, get_args

from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.validators import URLValidator
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    PrivateAttr,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, PydanticCustomError

from routing.conf import switchyard_settings
from routing.config.errors import ConfigError, FieldError
from routing.config.fields import Policy, declared_fields, policy_of
from routing.engine.algorithms import ALGORITHMS, UnknownAlgorithm, get_algorithm
from routing.engine.failures import DEFAULT_RETRY_CODES, DEFAULT_SWITCH_CODES, FailureCode

GROUP_NAME_RE = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}\Z"  # \Z: "$" would accept a trailing newline
PROVIDER_NAME_RE = r"^[-a-zA-Z0-9_]{1,50}\Z"  # Django's slug, within SlugField's length
MAX_CONTEXT_WINDOW = 10_000_000

# Keys from the seed plugins (SPEC §13) and earlier drafts -> what to write instead.
RENAMED_KEYS: dict[str, str] = {
    # seed-shaped chains: a group's ordered targets, addressed by the group's name
    "fallbacks": "targets",
    "chains": "targets",
    "match": "targets",
    "routes": "targets",
    "activeGroup": "name",
    # windows and continuity
    "compactWindow": "compact_window",
    "contextWindow": "context_window",
    "keepThinking": "keep_thinking",
    "breakToolLoop": "break_tool_loop",
    # retries
    "maxRetries": "retry.max_retries",
    "retryableCodes": "retry.retry_codes",
    "backoff": "retry.initial_delay_ms / retry.max_delay_ms / retry.jitter_ratio",
    "initialDelayMs": "retry.initial_delay_ms",
    "maxDelayMs": "retry.max_delay_ms",
    "jitterRatio": "retry.jitter_ratio",
    "switchAfterMs": "retry.switch_after_ms",
    "retry_codes": "retry.retry_codes",
    "max_retries": "retry.max_retries",
    # switching and cooling
    "switchCodes": "switch_codes",
    "fallback_codes": "switch_codes",
    "failureThreshold": "circuit.failure_threshold",
    "failure_threshold": "circuit.failure_threshold",
    "cooldownMs": "circuit.cooldown_base_ms",
    "cooldown_ms": "circuit.cooldown_base_ms",
    "quarantineBaseMs": "circuit.cooldown_base_ms",
    "quarantineCapMs": "circuit.cooldown_cap_ms",
}

_MULTI = "switchyard_multi"  # custom error type carrying several FieldErrors
_DOTTED_PATH = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)+$")
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
_url_validator = URLValidator(schemes=["http", "https"])


def renamed_message(key: str) -> str:
    return f"`{key}` was renamed: write `{RENAMED_KEYS[key]}` instead"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# --- field types ---------------------------------------------------------------------


@dataclass(frozen=True, eq=False)  # hashed by identity: typing dedupes Union members
class Documented:
    """JSON Schema keywords stating what a validator checks, so the API document (and a
    schema-driven client or fuzzer) knows what a valid value is. Validation stays the
    validator's, with its own messages; ``keywords`` may be a callable, read when the
    schema is generated (for values that come from settings)."""

    keywords: Mapping[str, Any] | Callable[[], Mapping[str, Any]]

    def __get_pydantic_json_schema__(
        self, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        schema = handler(core_schema)
        schema.update(self.keywords() if callable(self.keywords) else self.keywords)
        return schema


# A URL Django's URLValidator accepts: http(s), a host name with a top-level domain, an
# IPv4 address or localhost, an optional port and a plain path (a subset: what the
# document promises is always accepted).
_OCTET = "(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_LABEL = "[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?"
URL_PATTERN = (
    rf"^https?://(localhost|{_OCTET}(\.{_OCTET}){{3}}|({_LABEL}\.){{1,4}}[a-z]{{2,10}})"
    r"(:[0-9]{1,5})?(/[-A-Za-z0-9._~%/]*)?$"
)


def _failure_code(value: Any) -> FailureCode:
    if isinstance(value, FailureCode):
        return value
    if isinstance(value, str) and value in FailureCode.__members__:
        return FailureCode(value)
    hint = ""
    if isinstance(value, str) and value.upper() in FailureCode.__members__:
        hint = f" (codes are upper-case: write {value.upper()})"
    raise PydanticCustomError(
        "failure_code",
        "unknown failure code {code}{hint}; known codes: {known}",
        {"code": _short(value), "hint": hint, "known": ", ".join(FailureCode.__members__)},
    )


def _unique_codes(codes: list[FailureCode]) -> list[FailureCode]:
    if not codes:
        raise PydanticCustomError("codes_empty", "must list at least one failure code")
    seen: set[FailureCode] = set()
    repeated: list[str] = []
    for code in codes:
        if code in seen and code.value not in repeated:
            repeated.append(code.value)
        seen.add(code)
    if repeated:
        raise PydanticCustomError(
            "codes_repeated", "repeats {codes}: list each code once", {"codes": ", ".join(repeated)}
        )
    return codes


def _codes(codes: Collection[FailureCode]) -> list[str]:
    """A code set as the layers store it: sorted values."""
    return sorted(code.value for code in codes)


def extra_algorithms() -> Mapping[str, str]:
    """Operator-registered algorithms: ``settings.SWITCHYARD["ALGORITHMS"]`` (name -> path)."""
    return dict(switchyard_settings().ALGORITHMS)


def _algorithm(name: str) -> str:
    # A registered name or dotted path must import and be a RoutingAlgorithm now, on
    # write: a group that cannot compile is refused instead of breaking the routing table.
    if name in ALGORITHMS:
        return name
    extra = extra_algorithms()
    if name in extra or _DOTTED_PATH.match(name):
        try:
            get_algorithm(name, extra)
        except UnknownAlgorithm as exc:
            raise PydanticCustomError(
                "algorithm_unusable", "{problem}", {"problem": str(exc)}
            ) from None
        return name
    raise PydanticCustomError(
        "unknown_algorithm",
        "unknown algorithm {name}; use one of {choices}, or a dotted path to a class",
        {"name": _short(name), "choices": ", ".join([*ALGORITHMS, *extra_algorithms()])},
    )


def _base_url(value: str) -> str:
    try:
        _url_validator(value)
    except DjangoValidationError:
        raise PydanticCustomError("url", "must be an http:// or https:// URL") from None
    return value


def _not_blank(value: str) -> str:
    if not value.strip() or value != value.strip():
        raise PydanticCustomError("blank", "must be non-empty, without surrounding spaces")
    return value


def printable_ascii(value: str) -> bool:
    """What an HTTP header can carry as-is: printable ASCII (space to ``~``) only."""
    return all(" " <= ch <= "~" for ch in value)


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
                "header", "{name} is not a valid header name", {"name": _short(name)}
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


def _provider_name(value: str) -> str:
    if not re.match(PROVIDER_NAME_RE, value):
        raise PydanticCustomError("name", "use 1-50 letters, digits, dashes or underscores")
    return value


def _group_name(value: str) -> str:
    if not re.match(GROUP_NAME_RE, value):
        raise PydanticCustomError(
            "name",
            "use 1-100 letters, digits, dots, dashes or underscores, "
            "starting with a letter or digit",
        )
    return value


def _unique_models(models: list[str]) -> list[str]:
    repeated = sorted({m for m in models if models.count(m) > 1})
    if repeated:
        raise PydanticCustomError(
            "models_repeated", "repeats {models}", {"models": ", ".join(repeated)}
        )
    return models


FailureCodeIn = Annotated[FailureCode, BeforeValidator(_failure_code)]
CodeList = Annotated[
    list[FailureCodeIn],
    AfterValidator(_unique_codes),
    Documented({"minItems": 1, "uniqueItems": True}),
]
# Documented as the names it takes; a dotted path to a RoutingAlgorithm subclass that
# imports is accepted too (the description says so), but no schema can tell which do.
AlgorithmName = Annotated[
    str,
    AfterValidator(_algorithm),
    Documented(lambda: {"enum": [*ALGORITHMS, *extra_algorithms()]}),
]
ProviderName = Annotated[str, AfterValidator(_provider_name)]
GroupName = Annotated[str, AfterValidator(_group_name)]
PRINTABLE_ASCII_PATTERN = "^[ -~]*$"
_HEADERS_DOCUMENTED = {
    "propertyNames": {
        "pattern": _HEADER_NAME.pattern,
        "not": {"pattern": "^[Aa][Uu][Tt][Hh][Oo][Rr][Ii][Zz][Aa][Tt][Ii][Oo][Nn]$"},
    },
    "additionalProperties": {"type": "string", "pattern": PRINTABLE_ASCII_PATTERN},
}
NOT_BLANK_PATTERN = r"^\S([\s\S]*\S)?$"
ModelId = Annotated[
    str,
    Field(min_length=1, max_length=200),
    AfterValidator(_not_blank),
    Documented({"pattern": NOT_BLANK_PATTERN}),
]
BaseUrl = Annotated[
    str, Field(max_length=500), AfterValidator(_base_url), Documented({"pattern": URL_PATTERN})
]
ContextWindow = Annotated[int, Field(ge=1, le=MAX_CONTEXT_WINDOW)]
TimeoutSeconds = Annotated[float, Field(ge=0.1, le=3600)]
MIN_HEALTH_CHECK_S = 1.0  # the checker's tick: a shorter interval would not check sooner


def _health_check_interval(value: float) -> float:
    if 0 < value < MIN_HEALTH_CHECK_S:
        raise PydanticCustomError(
            "health_check_s",
            f"0 turns active health checks off; otherwise at least {MIN_HEALTH_CHECK_S:g} s",
        )
    return value


HealthCheckSeconds = Annotated[
    float,
    Field(ge=0, le=3600),
    AfterValidator(_health_check_interval),
    Documented(lambda: {"not": {"exclusiveMinimum": 0, "exclusiveMaximum": MIN_HEALTH_CHECK_S}}),
]


# --- models --------------------------------------------------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, hide_input_in_errors=True)


class _PolicyBlock(_Strict):
    """Base of the policy models: renamed keys are reported inside these only.

    The rules below read each field's :class:`~routing.config.fields.Policy`: an explicit
    ``null`` is accepted only where the built-in default is ``None`` ("not declared"), and
    a field with ``not_below`` must not be smaller than that sibling.
    """

    @field_validator("*", mode="after")
    @classmethod
    def _declared_rules(cls, value: Any, info: ValidationInfo) -> Any:
        policy = policy_of(cls.model_fields[info.field_name]) if info.field_name else None
        if value is None and (policy is None or policy.default is not None):
            raise PydanticCustomError(
                "null", "must not be null: leave the key out to inherit the lower layer"
            )
        if policy is not None and policy.not_below:
            _ordered(policy.not_below, value, info)
        return value


def _ordered(low_field: str, value: int | None, info: ValidationInfo) -> int | None:
    low = info.data.get(low_field)
    if value is not None and low is not None and low > value:
        raise PydanticCustomError(
            "order", "must be >= {low_field} ({low})", {"low_field": low_field, "low": low}
        )
    return value


# --- the policy fields: each declared once (routing.config.fields) --------------------


class RetryPolicyIn(_PolicyBlock):
    """In-place retries of one target. All fields optional (layers fill the rest)."""

    SECTION: ClassVar[str] = "Retry policy"

    max_retries: Annotated[int | None, Policy(5)] = Field(
        None,
        ge=0,
        le=20,
        title="Max retries",
        description="In-place retries of one target per call.",
    )
    retry_codes: Annotated[CodeList | None, Policy(_codes(DEFAULT_RETRY_CODES))] = Field(
        None,
        title="Retry codes",
        description="Failures that retry the same target in place.",
    )
    initial_delay_ms: Annotated[int | None, Policy(500, unit="ms")] = Field(
        None, ge=0, le=600_000, title="Initial delay"
    )
    max_delay_ms: Annotated[int | None, Policy(10_000, unit="ms", not_below="initial_delay_ms")] = (
        Field(
            None,
            ge=0,
            le=3_600_000,
            title="Max delay",
            description="A Retry-After beyond this switches at once.",
        )
    )
    jitter_ratio: Annotated[float | None, Policy(0.1, step="0.01")] = Field(
        None, ge=0, le=1, title="Jitter", description="± fraction of each delay."
    )
    switch_after_ms: Annotated[int | None, Policy(2_000, unit="ms")] = Field(
        None,
        ge=0,
        le=3_600_000,
        title="Switch after",
        description=(
            "While another target is eligible, stop retrying in place once the waits "
            "would pass this, and switch. The last eligible target keeps every retry."
        ),
    )


class CircuitPolicyIn(_PolicyBlock):
    """Cooling parameters. All fields optional."""

    SECTION: ClassVar[str] = "Circuit and cooldown"

    failure_threshold: Annotated[int | None, Policy(1)] = Field(
        None,
        ge=1,
        le=1000,
        title="Failure threshold",
        description="Consecutive failed calls that start cooling a target.",
    )
    cooldown_base_ms: Annotated[int | None, Policy(10_000, unit="ms")] = Field(
        None,
        ge=0,
        le=86_400_000,
        title="Cooldown",
        description="First cooling period; doubles on each new opening.",
    )
    cooldown_cap_ms: Annotated[
        int | None, Policy(600_000, unit="ms", not_below="cooldown_base_ms")
    ] = Field(None, ge=0, le=86_400_000, title="Cooldown cap")


class LimitsIn(_PolicyBlock):
    """Rate limits and calendar budgets (SPEC §17) of a group, or of a key (the same
    fields, validated by this model on every path). Absent = no such limit; 0 refuses
    every call (a kill switch). Day and month are UTC calendar windows."""

    SECTION: ClassVar[str] = "Limits and budgets"

    rpm: Annotated[int | None, Policy(None, unit="calls/min")] = Field(
        None, ge=0, le=10_000_000, title="Requests per minute"
    )
    tpm: Annotated[int | None, Policy(None, unit="tokens/min")] = Field(
        None, ge=0, le=10_000_000_000, title="Tokens per minute"
    )
    concurrency: Annotated[int | None, Policy(None, unit="calls")] = Field(
        None, ge=0, le=1_000_000, title="Concurrency", description="Calls in flight at once."
    )
    tokens_per_day: Annotated[int | None, Policy(None, unit="tokens")] = Field(
        None, ge=0, le=10**15, title="Tokens per day", description="UTC calendar day."
    )
    cost_per_day: Annotated[float | None, Policy(None, step="0.01")] = Field(
        None, ge=0, le=1e12, title="Cost per day", description="In the targets' price currency."
    )
    tokens_per_month: Annotated[int | None, Policy(None, unit="tokens")] = Field(
        None, ge=0, le=10**15, title="Tokens per month", description="UTC calendar month."
    )
    cost_per_month: Annotated[float | None, Policy(None, step="0.01")] = Field(
        None, ge=0, le=1e12, title="Cost per month"
    )


LIMIT_NAMES: tuple[str, ...] = tuple(LimitsIn.model_fields)


class SessionLimitsIn(_PolicyBlock):
    """What one session (the affinity key) may use in a group, over its whole life."""

    SECTION: ClassVar[str] = "Limits and budgets"

    tokens: Annotated[int | None, Policy(None, unit="tokens")] = Field(
        None, ge=0, le=10**15, title="Session tokens"
    )
    cost: Annotated[float | None, Policy(None, step="0.01")] = Field(
        None, ge=0, le=1e12, title="Session cost"
    )
    calls: Annotated[int | None, Policy(None, unit="calls")] = Field(
        None, ge=0, le=10**9, title="Session calls"
    )


class PolicyIn(_PolicyBlock):
    """The policy keys a group (or the ``defaults:`` block) may set."""

    SECTION: ClassVar[str] = "Routing"

    algorithm: Annotated[AlgorithmName | None, Policy("priority")] = Field(
        None,
        title="Algorithm",
        description="How the next target is chosen among the healthy ones (or the dotted path "
        "of a RoutingAlgorithm subclass).",
    )
    switch_codes: Annotated[
        CodeList | None, Policy(_codes(DEFAULT_SWITCH_CODES), section="Switch codes")
    ] = Field(
        None,
        title="Switch codes",
        description="Failures that allow moving on to the next target.",
    )
    retry: RetryPolicyIn | None = None
    circuit: CircuitPolicyIn | None = None
    commit: Annotated[Literal["first-content", "complete"] | None, Policy("first-content")] = Field(
        None,
        title="Commit point",
        description="When the answer starts flowing to the client (failover is "
        "invisible before it).",
    )
    resume: Annotated[Literal["off", "continuation"] | None, Policy("off")] = Field(
        None,
        title="Mid-stream rescue",
        description="continuation: a stream cut or stalled after the commit point while "
        "producing text continues on the next eligible target (never spliced).",
    )
    context_window: Annotated[ContextWindow | None, Policy(None, unit="tokens")] = Field(
        None,
        title="Context window",
        description="Declared in /v1/models; empty = none declared.",
    )
    compact_window: Annotated[ContextWindow | None, Policy(None, unit="tokens")] = Field(
        None,
        title="Compaction point",
        description="Declares max(ceil(T*1.25), T+65536) so agents compact near T; "
        "exclusive with the context window.",
    )
    hosted_tools: Annotated[Literal["drop", "skip"] | None, Policy("drop")] = Field(
        None,
        title="Hosted tools",
        description="A target that cannot run the request's hosted tools (web search…): "
        "drop = it gets the request without them (noted), skip = it is skipped.",
    )
    deadline_s: Annotated[float | None, Policy(300.0, unit="s")] = Field(
        None,
        ge=1,
        le=3600,
        title="Call deadline",
        description="Bounds retries and switches of one call together.",
    )
    limits: LimitsIn | None = None
    session_limits: SessionLimitsIn | None = None
    loop_guard: Annotated[int | None, Policy(None, section="Limits and budgets")] = Field(
        None,
        ge=1,
        le=1000,
        title="Loop guard",
        description="A session sending the same request body this many times in a row "
        "is stopped at the next one; empty = off.",
    )

    @model_validator(mode="after")
    def _one_window(self) -> PolicyIn:
        if self.context_window is not None and self.compact_window is not None:
            _raise_all(
                [
                    FieldError(
                        "compact_window",
                        "exclusive with context_window: declare the window, or the "
                        "compaction point it is derived from, not both",
                    )
                ]
            )
        return self


POLICY_KEYS: tuple[str, ...] = tuple(PolicyIn.model_fields)


def policy_models() -> list[type[_PolicyBlock]]:
    """Every model that follows the policy rules (:class:`_PolicyBlock` and below):
    ``PolicyIn``, its blocks, ``GroupIn`` and the per-target circuit."""
    found: list[type[_PolicyBlock]] = []
    todo = list(_PolicyBlock.__subclasses__())
    while todo:
        model = todo.pop(0)
        if model not in found:
            found.append(model)
            todo.extend(model.__subclasses__())
    return found


Effort = Literal["minimal", "low", "medium", "high", "xhigh"]


def _unique_efforts(efforts: list[str]) -> list[str]:
    if not efforts:
        raise PydanticCustomError("efforts_empty", "must list at least one effort")
    if len(set(efforts)) != len(efforts):
        raise PydanticCustomError("efforts_repeated", "list each effort once")
    return efforts


class TargetCircuitIn(CircuitPolicyIn):
    """Per-target circuit overrides (SPEC §4): absent fields follow the group's."""


class CapabilitiesIn(_Strict):
    """What a target's upstream is known to accept (SPEC §16). ``prefill``: an assistant
    message last in the request is continued, not answered (a mid-stream rescue sends the
    partial text that way)."""

    prefill: bool = False


class PriceIn(_Strict):
    """A target's price in currency units per million tokens (operator-entered).
    ``cached_input`` absent: cached input is priced as input."""

    input: float = Field(ge=0, le=1e6)
    output: float = Field(ge=0, le=1e6)
    cached_input: float | None = Field(None, ge=0, le=1e6)


class TargetIn(_Strict):
    """One target. The options after ``context_window`` (SPEC §4, §13) are stored together
    in ``Target.options`` by :func:`target_options`; absent = the default."""

    # ``_max_needs_efforts``, as the document states it
    model_config = ConfigDict(
        json_schema_extra={
            "if": {
                "properties": {"reasoning_effort": {"const": "max"}},
                "required": ["reasoning_effort"],
            },
            "then": {"properties": {"efforts": {"type": "array"}}, "required": ["efforts"]},
        }
    )

    provider: ProviderName
    model: ModelId
    weight: int = Field(1, ge=1, le=1000)
    enabled: bool = True
    context_window: ContextWindow | None = None
    keep_thinking: bool = False
    break_tool_loop: bool = False
    reasoning_effort: Literal["inherit", "max", "drop"] = "inherit"
    efforts: (
        Annotated[
            list[Effort],
            AfterValidator(_unique_efforts),
            Documented({"minItems": 1, "uniqueItems": True}),
        ]
        | None
    ) = None
    circuit: TargetCircuitIn | None = None
    capabilities: CapabilitiesIn | None = None
    price: PriceIn | None = None

    @model_validator(mode="after")
    def _max_needs_efforts(self) -> TargetIn:
        if self.reasoning_effort == "max" and not self.efforts:
            _raise_all(
                [
                    FieldError(
                        "efforts",
                        "reasoning_effort: max needs the efforts this target accepts "
                        "(e.g. [low, medium, high])",
                    )
                ]
            )
        return self


TARGET_OPTIONS: tuple[str, ...] = (
    "keep_thinking",
    "break_tool_loop",
    "reasoning_effort",
    "efforts",
    "circuit",
    "capabilities",
    "price",
)


def target_options(item: TargetIn) -> dict[str, Any]:
    """The options of a validated target as stored in ``Target.options``: only the ones
    that differ from their defaults, so an untouched target stores ``{}``."""
    out: dict[str, Any] = {}
    for name in TARGET_OPTIONS:
        value = getattr(item, name)
        if name in ("circuit", "capabilities", "price"):
            value = value.model_dump(exclude_none=True) if value is not None else None
        if value != TargetIn.model_fields[name].default and value not in (None, {}):
            out[name] = value
    return out


class TimeoutsIn(_Strict):
    """Per-attempt timeouts (seconds); a key left out takes its declared default."""

    connect_s: Annotated[TimeoutSeconds | None, Policy(5.0, unit="s")] = Field(
        None, title="Connect"
    )
    first_token_s: Annotated[TimeoutSeconds | None, Policy(60.0, unit="s")] = Field(
        None, title="First token"
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
            raise ValueError(f"{_short(name)} is not a beta name (printable, no spaces or commas)")
    return list(dict.fromkeys(names))


# printable ASCII without spaces or commas (what ``_beta_names`` checks), for the document
BETA_NAME_PATTERN = r"^[\x21-\x2b\x2d-\x7e]+$"
BetaNames = Annotated[
    list[str],
    AfterValidator(_beta_names),
    Documented({"items": {"type": "string", "minLength": 1, "pattern": BETA_NAME_PATTERN}}),
]


class BetasIn(_Strict):
    """Which ``anthropic-beta`` values a client sent reach this provider (SPEC §15).

    ``allow`` absent: every beta passes except ``strip``; ``allow`` given: only those
    (and never ``strip``). Betas a provider would reject are removed, noted in
    ``x-switchyard-rewrites``."""

    allow: BetaNames | None = Field(None, description="Only these betas pass (absent: all).")
    strip: BetaNames = Field(default_factory=list, description="These betas never pass.")


class ProviderIn(_Strict):
    """One provider. ``api_key`` absent or ``""`` keeps the stored credential, a string
    replaces it, ``null`` clears it (``routing.services.providers.new_credential``, every path).

    ``models`` absent = keep the list refreshed from the upstream. ``health_check_s``: how
    often a cooling target of this provider gets an active health check (0 = never);
    absent or ``null`` = the gateway's ``SWITCHYARD_HEALTH_CHECK_S`` (default 10 s).
    """

    name: ProviderName
    kind: Literal["openai", "anthropic", "openai-responses"] = "openai"
    base_url: BaseUrl
    api_key: Annotated[
        Annotated[SecretStr, Documented({"pattern": PRINTABLE_ASCII_PATTERN})] | None,
        AfterValidator(_credential),
    ] = None
    headers: Annotated[
        dict[str, str], AfterValidator(_headers), Documented(_HEADERS_DOCUMENTED)
    ] = Field(default_factory=dict)
    betas: BetasIn | None = None
    models: (
        Annotated[list[ModelId], AfterValidator(_unique_models), Documented({"uniqueItems": True})]
        | None
    ) = None
    timeouts: TimeoutsIn | None = None
    health_check_s: HealthCheckSeconds | None = None


def _aliases(aliases: list[str]) -> list[str]:
    from routing.config.aliases import MAX_ALIASES

    if len(aliases) > MAX_ALIASES:
        raise ValueError(f"at most {MAX_ALIASES} aliases")
    seen: set[str] = set()
    for alias in aliases:
        if not printable_ascii(alias) or " " in alias:
            raise ValueError(f"alias {_short(alias)} must be printable ASCII without spaces")
        if alias in seen:
            raise ValueError(f"alias {_short(alias)} is listed twice")
        seen.add(alias)
    return aliases


# printable ASCII without spaces, at most MAX_ALIASES, no repeats (what ``_aliases`` checks)
ALIAS_PATTERN = r"^[\x21-\x7e]+$"
Aliases = Annotated[
    list[ModelId],
    AfterValidator(_aliases),
    Documented(
        {
            "items": {"type": "string", "minLength": 1, "maxLength": 200, "pattern": ALIAS_PATTERN},
            "maxItems": 50,
            "uniqueItems": True,
        }
    ),
]


class GroupIn(PolicyIn):
    """A group: its name, targets in order, model-name ``aliases`` (globs, SPEC §15) and
    the policy keys inline (SPEC §11)."""

    name: GroupName
    aliases: Aliases = Field(
        default_factory=list,
        title="Aliases",
        description="Model names (globs such as claude-*) that also reach this group.",
    )
    targets: list[TargetIn] = Field(min_length=1)

    @model_validator(mode="after")
    def _no_duplicate_targets(self) -> GroupIn:
        _raise_all(duplicate_targets([t.model_dump() for t in self.targets]))
        return self


class ConfigFileIn(_Strict):
    """The whole config file: the composition layer.

    ``unset_credentials`` (set by the loader, not part of the document): providers whose
    ``api_key: ${VAR}`` names an unset variable, ``{provider: VAR}``; they keep the stored
    credential.
    """

    defaults: PolicyIn | None = None
    providers: list[ProviderIn] = Field(default_factory=list)
    groups: list[GroupIn] = Field(default_factory=list)
    _unset_credentials: dict[str, str] = PrivateAttr(default_factory=dict)

    @property
    def unset_credentials(self) -> dict[str, str]:
        return self._unset_credentials

    @unset_credentials.setter
    def unset_credentials(self, value: dict[str, str]) -> None:
        self._unset_credentials = dict(value)

    @model_validator(mode="after")
    def _references(self) -> ConfigFileIn:
        _raise_all(cross_check(self.model_dump()))
        return self


# --- cross-references (tolerant of malformed input) ----------------------------------


def duplicate_targets(targets: Any) -> list[FieldError]:
    """``targets.N`` errors for repeated ``(provider, model)`` pairs."""
    errors: list[FieldError] = []
    if not isinstance(targets, list):
        return errors
    first: dict[tuple[str, str], int] = {}
    for index, target in enumerate(targets):
        if not isinstance(target, Mapping):
            continue
        provider, model = target.get("provider"), target.get("model")
        if not (isinstance(provider, str) and isinstance(model, str)):
            continue
        key = (provider, model)
        if key in first:
            errors.append(
                FieldError(
                    f"targets.{index}",
                    f"duplicate target {key[0]}/{key[1]} (already targets.{first[key]})",
                )
            )
        else:
            first[key] = index
    return errors


def unknown_providers(targets: Any, providers: Collection[str]) -> list[FieldError]:
    """``targets.N.provider`` errors for providers that are not defined."""
    errors: list[FieldError] = []
    if not isinstance(targets, list):
        return errors
    for index, target in enumerate(targets):
        if isinstance(target, Mapping):
            name = target.get("provider")
            if isinstance(name, str) and name not in providers:
                errors.append(FieldError(f"targets.{index}.provider", _unknown_provider(name)))
    return errors


def _unknown_provider(name: str) -> str:
    return f"unknown provider {_short(name)} (not defined under providers)"


def _duplicate_names(items: Any, section: str) -> tuple[set[str], list[FieldError]]:
    names: dict[str, int] = {}
    errors: list[FieldError] = []
    if not isinstance(items, list):
        return set(), errors
    for index, item in enumerate(items):
        name = item.get("name") if isinstance(item, Mapping) else None
        if not isinstance(name, str):
            continue
        if name in names:
            errors.append(
                FieldError(
                    f"{section}.{index}.name",
                    f"duplicate name {_short(name)} (already {section}.{names[name]})",
                )
            )
        else:
            names[name] = index
    return set(names), errors


def cross_check(raw: Any) -> list[FieldError]:
    """Unique provider/group names, duplicate targets, targets naming unknown providers."""
    if not isinstance(raw, Mapping):
        return []
    provider_names, errors = _duplicate_names(raw.get("providers"), "providers")
    _, group_errors = _duplicate_names(raw.get("groups"), "groups")
    errors += group_errors
    errors += _alias_conflicts(raw.get("groups"))
    providers_readable = isinstance(raw.get("providers"), list) or raw.get("providers") is None
    groups = raw.get("groups")
    for index, group in enumerate(groups if isinstance(groups, list) else []):
        if not isinstance(group, Mapping):
            continue
        targets = group.get("targets")
        local = duplicate_targets(targets)
        if providers_readable:
            local += unknown_providers(targets, provider_names)
        errors += [e.prefixed(f"groups.{index}") for e in local]
    return errors


def _alias_conflicts(groups: Any) -> list[FieldError]:
    from routing.config.aliases import alias_conflicts

    if not isinstance(groups, list):
        return []
    pairs = []
    for group in groups:
        mapping = group if isinstance(group, Mapping) else {}
        aliases = mapping.get("aliases")
        name = mapping.get("name")
        ok = isinstance(aliases, list) and all(isinstance(a, str) for a in aliases)
        pairs.append((str(name), list(aliases) if ok else []))  # type: ignore[arg-type]
    return alias_conflicts(pairs)


def _raise_all(errors: list[FieldError]) -> None:
    if errors:
        raise PydanticCustomError(
            _MULTI,
            "{summary}",
            {
                "summary": "; ".join(map(str, errors)),
                "errors": [(e.path, e.message) for e in errors],
            },
        )


# --- error translation ---------------------------------------------------------------


def _inner_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        found = _inner_model(arg)
        if found is not None:
            return found
    return None


def _model_at(root: type[BaseModel], loc: tuple[int | str, ...]) -> type[BaseModel] | None:
    current: type[BaseModel] | None = root
    for part in loc:
        if isinstance(part, int):
            continue  # a list index: the element model is already current
        if current is None or part not in current.model_fields:
            return None
        current = _inner_model(current.model_fields[part].annotation)
    return current


def join_path(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(part) for part in loc)


def _renames_apply(parent: type[BaseModel], key: str) -> bool:
    """Renamed keys are reported where the seed put them: policy blocks, targets, the top
    of the file. Inside a block they are named relative to it (``retry.max_retries`` is
    ``max_retries`` in ``retry:``), so a key that is valid there is never "renamed"."""
    if key in parent.model_fields:
        return False
    return issubclass(parent, _PolicyBlock | TargetIn | ConfigFileIn)


def _message(error: Any, root: type[BaseModel]) -> str:
    kind, loc = error["type"], error["loc"]
    if kind == "extra_forbidden":
        key, parent = str(loc[-1]), _model_at(root, loc[:-1])
        if parent is not None and key in RENAMED_KEYS and _renames_apply(parent, key):
            return renamed_message(key)
        allowed = ", ".join(parent.model_fields) if parent is not None else ""
        return f"unknown key; allowed keys: {allowed}" if allowed else "unknown key"
    if kind == "missing":
        return "required"
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return "must be a mapping (key: value pairs)"
    message = str(error["msg"]).removeprefix("Value error, ")
    return message.replace("Input should be", "must be", 1)


def field_errors(
    exc: ValidationError, root: type[BaseModel], *, prefix: str = ""
) -> list[FieldError]:
    """Translate a pydantic error into :class:`FieldError`s with dotted paths."""
    out: list[FieldError] = []
    for error in exc.errors(include_url=False, include_input=False):
        loc: tuple[int | str, ...] = tuple(error["loc"])
        path = join_path(loc)
        if error["type"] == _MULTI:
            for rel, message in error["ctx"]["errors"]:
                out.append(FieldError(rel, message).prefixed(path))
        else:
            out.append(FieldError(path, _message(error, root)))
    return [e.prefixed(prefix) for e in out]


# --- entry points --------------------------------------------------------------------


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
        errors.append(FieldError("provider", _unknown_provider(name)))
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
