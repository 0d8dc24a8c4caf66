"""Request bodies that are not configuration documents, and every response schema.

Configuration bodies (providers, groups, targets, policy) are the shared
``routing.config.schema`` models; the ones here are small envelopes around them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from ninja import Path, Schema
from pydantic import BaseModel, ConfigDict, Field

from routing.config.policy import POLICY_FIELDS
from routing.config.schema import LIMIT_NAMES, Aliases, LimitsIn
from routing.engine.failures import FailureCode

MAX_ID = 2**63 - 1  # a 64-bit primary key; larger ids are a 422, not a database error

TargetId = Annotated[int, Path(ge=1, le=MAX_ID)]
KeyId = Annotated[int, Path(ge=1, le=MAX_ID)]
GroupPath = Annotated[str, Path(description="group name")]
ProviderPath = Annotated[str, Path(description="provider name")]


# --- bodies ----------------------------------------------------------------------------


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, hide_input_in_errors=True)


class RestoreIn(_Body):
    fields: list[str] | None = Field(
        None,
        description="dotted policy fields to restore; null or absent = every field. Known: "
        + ", ".join(POLICY_FIELDS),
        json_schema_extra={
            "anyOf": [
                {"type": "array", "items": {"type": "string", "enum": list(POLICY_FIELDS)}},
                {"type": "null"},
            ]
        },
    )


class OrderIn(_Body):
    order: list[Annotated[int, Field(ge=1, le=MAX_ID)]] = Field(
        description="every target id of the group, once, in the new order"
    )


class SwitchCodesIn(_Body):
    codes: list[FailureCode]


TARGET_PATCH_DOC: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "weight": {"type": "integer", "minimum": 1, "maximum": 1000},
        "enabled": {"type": "boolean"},
        "context_window": {
            "anyOf": [{"type": "integer", "minimum": 1, "maximum": 10_000_000}, {"type": "null"}]
        },
    },
}


KEY_NAME_PATTERN = r"^[^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x1f\x7f-\x9f]*$"


def LIMITS_DOCUMENTED(schema: dict[str, Any]) -> None:  # noqa: N802 (a json_schema_extra)
    """A key's ``limits`` in the document as ``key_limits`` checks them: the fields of a
    group's ``limits`` (``LimitsIn``), nothing else."""
    limits = LimitsIn.model_json_schema()
    schema["properties"] = limits["properties"]
    schema["additionalProperties"] = False


class KeyIn(_Body):
    # Documented for what ``key_create`` checks: group names (the installation's groups,
    # filled in when the document is served) only on client keys.
    model_config = ConfigDict(
        json_schema_extra={
            "if": {"properties": {"kind": {"const": "admin"}}, "required": ["kind"]},
            "then": {"properties": {"groups": {"maxItems": 0}}},
        }
    )

    name: str = Field(
        min_length=1,
        max_length=100,
        # ``key_create`` wants printable characters, one of them not a space: the pattern
        # says "no control characters" (JSON Schema cannot name Unicode categories)
        json_schema_extra={"pattern": KEY_NAME_PATTERN},
    )
    kind: Literal["client", "admin"] = "client"
    groups: list[str] = Field(
        default_factory=list,
        description="client keys only: the groups it may use (empty = all)",
    )
    limits: dict[str, Any] | None = Field(
        None,
        description=f"{', '.join(LIMIT_NAMES)} (SPEC §17); absent = none",
        json_schema_extra=LIMITS_DOCUMENTED,
    )


class KeyPatchIn(_Body):
    limits: dict[str, Any] | None = Field(
        description="the key's limits, replacing the current ones ({} or null: none)",
        json_schema_extra=LIMITS_DOCUMENTED,
    )


class ExplainIn(_Body):
    model: str = Field(min_length=1, max_length=300, description="group or provider/model")
    session: str | None = Field(None, max_length=200, description="as x-session-id would send it")


# --- responses -------------------------------------------------------------------------


class ErrorOut(Schema):
    detail: str


class VersionErrorOut(Schema):
    detail: str
    current_version: int


class FieldErrorOut(Schema):
    loc: list[str | int]
    msg: str
    type: str


class InvalidOut(Schema):
    detail: list[FieldErrorOut]


class FieldOut(Schema):
    value: Any
    source: Literal["default", "file", "global", "group"]
    overridden: bool


class TargetOut(Schema):
    id: int
    provider: str
    model: str
    position: int
    weight: int
    enabled: bool
    context_window: int | None
    options: dict[
        str, Any
    ] = {}  # keep_thinking, break_tool_loop, reasoning_effort, efforts, circuit


class GroupOut(Schema):
    name: str
    version: int
    aliases: list[str] = []  # model-name globs that also reach the group (SPEC §15)
    targets: list[TargetOut]
    fields: dict[str, FieldOut]
    warnings: list[str] = []  # accepted values that defeat compaction (SPEC §13)
    updated_at: datetime


class AliasesIn(Schema):
    model_config = ConfigDict(extra="forbid")

    aliases: Aliases = Field(
        description="Model-name globs (claude-*, gpt-5*); [] removes them. An alias that "
        "could match another group's is refused, naming both."
    )


class GlobalOut(Schema):
    version: int
    fields: dict[str, FieldOut]
    config_source: str


class TimeoutsOut(Schema):
    connect_s: float
    headers_s: float
    first_token_s: float
    idle_s: float
    total_s: float


class ProviderOut(Schema):
    name: str
    kind: str
    platform: str = Field(description="where and how the kind is reached (SPEC §19)")
    base_url: str = Field(description='the endpoint; "" = the platform\'s own')
    region: str
    project: str
    credentials_file: str
    entra: bool
    aws_keys_set: list[str] = Field(
        description="which AWS keys are stored (their values are write-only)"
    )
    api_key_set: bool
    api_key_hint: str
    headers: dict[str, Literal[""]] = Field(
        description='the extra headers\' names; values are write-only (shown as "", and "" '
        "in a write keeps the stored value)"
    )
    betas: dict[str, list[str]] = Field(
        default_factory=dict,
        description="anthropic-beta filter: {allow?: [...], strip: [...]}; {} = all pass",
    )
    models: list[str]
    models_loaded_at: datetime | None
    timeouts: TimeoutsOut
    health_check_s: float | None = Field(
        description="seconds between active health checks of its cooling targets; "
        "0 = off, null = the gateway's SWITCHYARD_HEALTH_CHECK_S"
    )
    used_by: list[str]
    version: int
    updated_at: datetime


class ProviderTestOut(Schema):
    ok: bool
    latency_ms: float
    status: int | None
    message: str


class ActionOut(Schema):
    detail: str


class KeyOut(Schema):
    id: int
    name: str
    kind: str
    prefix: str
    groups: list[str]
    limits: dict[str, float]
    created_at: datetime
    revoked_at: datetime | None
    active: bool


class LimitUseOut(Schema):
    limit: float
    used: float
    window: str
    resets_at: datetime | None


class SpendTotalOut(Schema):
    calls: int
    tokens: int
    cost: float | None


class SpendOut(SpendTotalOut):
    key: str | None = None
    group: str | None = None
    target: str | None = None
    day: str | None = None


class KeyDetailOut(KeyOut):
    use: dict[str, LimitUseOut] = Field(description="each limit's use in its current window")
    spend: dict[str, SpendTotalOut] = Field(
        description="today and this month (UTC), from the ledger"
    )


class KeyCreatedOut(KeyOut):
    secret: str = Field(description="shown in this response only; store it now")


class KeysQuery(Schema):
    prefix: str | None = Field(None, max_length=16, pattern=r"^[A-Za-z0-9_-]*$")


class CandidateOut(Schema):
    target: str
    provider: str
    model: str
    eligible: bool
    state: str
    reason: str
    remaining_s: float | None


class ExplainOut(Schema):
    model: str
    group: str
    algorithm: str
    rotates: bool
    session: str | None
    sticky: str | None
    next_target: str | None
    force_revive: bool
    candidates: list[CandidateOut]


# Every status an operation can answer (issue 10): authentication (401 no/unknown key,
# 403 a client key or no staff session), 404 unknown object, 422 a body, path or query
# parameter of the wrong type, and for writes the version preconditions. Every operation
# lists at least AUTH (tests/api/test_documented_statuses.py holds them to it).
AUTH: dict[int, Any] = {401: ErrorOut, 403: ErrorOut}
FILTERED: dict[int, Any] = {**AUTH, 422: InvalidOut}  # reads with query parameters
READ: dict[int, Any] = {**AUTH, 404: ErrorOut, 422: InvalidOut}
WRITE: dict[int, Any] = {
    **AUTH,
    404: ErrorOut,
    412: VersionErrorOut,
    422: InvalidOut,
    428: VersionErrorOut,
}
# 409: the name (a target: provider/model in its group) is taken; the body was valid.
CREATE: dict[int, Any] = {**AUTH, 409: InvalidOut, 422: InvalidOut}
