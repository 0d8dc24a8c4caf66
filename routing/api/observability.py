"""Read-only observability endpoints of the management API (mounted under ``/api/v1/``).

``GET /status`` — groups, their chains and effective policy, per-target health with
remaining cooldown, and the state store's own health. ``GET /calls`` — calls, newest
first, each with its attempts, filtered like the calls page and paged by keyset
(``before``: the ``x-switchyard-next-before`` header of the previous page). ``GET /events`` — fallback, health and config-change
records, newest first. Authentication is the management API's (admin key or staff
session). Empty text fields are rendered as ``null``.
"""

from __future__ import annotations

import re
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from django.http import HttpRequest, HttpResponse
from ninja import Field, Query, Router, Schema
from ninja.errors import ValidationError
from pydantic import BeforeValidator, GetCoreSchemaHandler, GetJsonSchemaHandler, PlainSerializer
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import PydanticCustomError, core_schema

from routing.api.config_api.schemas import AUTH, FILTERED
from routing.audit.call_query import CallFilters, FilterError, calls_page
from routing.audit.models import Call, ConfigChange, Fallback, HealthTransition
from routing.audit.selectors import EventKindName, EventRow, events_recent
from routing.gateway.runtime import get_runtime
from routing.observability.status import Status, status_read
from routing.protocols.registry import KindName

router = Router(tags=["observability"])


def _iso(value: datetime) -> str:
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


# Full microseconds (the default JSON encoder keeps milliseconds), so that a client can
# pass the newest ``at`` it saw back as ``since`` and get only what came after it.
Timestamp = Annotated[datetime, PlainSerializer(_iso, return_type=str)]


# ---------------------------------------------------------------------- schemas
class PriceTierOut(Schema):
    above: int = Field(description="a prompt of more tokens than this pays this tier's price")
    input: float
    output: float


class PriceOut(Schema):
    """A target's price per million tokens and where it came from (SPEC §17, §19)."""

    input: float
    output: float
    cached_input: float | None = Field(description="cache reads; null: priced as input")
    cache_write: float | None = Field(description="cache writes; null: priced as input")
    tiers: list[PriceTierOut] = Field(description="long-context prices, ascending")
    source: Literal["configured", "catalogue"] = Field(
        description="`configured`: the target's `price`; `catalogue`: genai-prices, looked "
        "up when the configuration compiled"
    )
    origin: str | None = Field(
        description="a catalogue price: the catalogue, its version and the entry used, "
        "e.g. `genai-prices 0.2.3: anthropic/claude-sonnet-4-5`"
    )


class TargetStatusOut(Schema):
    key: str
    provider: str
    model: str
    position: int
    weight: int
    context_window: int | None
    state: Literal["healthy", "cooling", "probing", "disabled"]
    availability: Literal["available", "cooling", "probe-eligible", "probing", "disabled"]
    remaining_cooldown_s: float
    last_code: str | None
    consecutive_failures: int
    price: PriceOut | None = Field(
        None, description="null: no configured price and none in the catalogue (cost null)"
    )


class GroupStatusOut(Schema):
    name: str
    algorithm: str
    version: int
    policy: dict[str, Any]
    targets: list[TargetStatusOut]
    context_window: int
    window_source: Literal["context_window", "compact_window", "targets", "fallback"]
    rotation: int | None


class StatusOut(Schema):
    at: Timestamp
    groups: list[GroupStatusOut]
    store: dict[str, Any]
    unauthenticated_refusals: int = Field(
        description="Requests to /v1 refused for want of a valid key by this process since it "
        "started: counted, and on the record only as a sample (one per client address and "
        "minute)."
    )


class UsageOut(Schema):
    prompt_tokens: int | None
    completion_tokens: int | None
    total_tokens: int | None


class AttemptOut(Schema):
    index: int
    target: str
    try_number: int
    ok: bool
    code: str | None
    status: int | None
    message: str | None
    reason: str | None
    elapsed_ms: float
    will_retry: bool
    switched: bool
    switched_to: str | None
    probe: bool
    rewrites: list[str]  # what this attempt's outbound copy changed (SPEC §13)
    upstream_kind: KindName  # the protocol spoken (§12; routing.protocols.registry)
    continuation: bool  # a mid-stream rescue of a cut stream (§16)
    cooldown_s: float | None = None  # the cooling its failure earned the target (issue 41)


class CallOut(Schema):
    call_id: str
    group: str
    session: str | None
    stream: bool
    outcome: Literal["ok", "failed", "aborted", "refused"]
    reason: str | None = None  # a refused call: what the door answered
    served_by: str | None
    error_code: str | None
    http_status: int
    started_at: Timestamp
    elapsed_ms: float
    ttft_ms: float | None
    overhead_ms: float | None
    usage: UsageOut | None
    cost: float | None  # from usage and the target's price; null without either (SPEC §17)
    key_id: int | None
    key_name: str | None
    front_door: Literal["chat", "messages", "responses", "embeddings"]
    served_by_fallback: bool
    trace_id: str | None  # its OpenTelemetry trace, when tracing is on (docs/tracing.md)
    attempts: list[AttemptOut]


class FallbackOut(Schema):
    kind: Literal["fallback"]
    id: int
    at: Timestamp
    call_id: str
    group: str
    from_target: str
    to_target: str | None
    reason: str
    code: str
    status: int | None
    message: str | None
    cooldown_s: float | None


class HealthOut(Schema):
    kind: Literal["health"]
    id: int
    at: Timestamp
    transition: str
    target: str | None
    provider: str | None
    until: Timestamp | None
    code: str | None
    ok: bool | None
    cooldown_s: float | None
    actor: str | None
    message: str | None
    call_id: str | None = None  # the call whose failure or probe caused it


class ConfigChangeOut(Schema):
    kind: Literal["config"]
    id: int
    at: Timestamp
    actor: str
    path: str
    object_type: str
    object_name: str
    diff: dict[str, Any]


EventOut = Annotated[FallbackOut | HealthOut | ConfigChangeOut, Field(discriminator="kind")]


def _blank_is_none(value: object) -> object:
    return None if value == "" else value


class _Blankable:
    """``?group=&kind=`` (a filter left empty in a form or script) means "no filter"; the
    document says so, offering the empty string beside the filter's own type."""

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_before_validator_function(_blank_is_none, handler(source))

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        documented = handler(schema)
        if "anyOf" in documented:
            options = documented.pop("anyOf")
        else:
            options, documented = [documented], {}
        return {**documented, "anyOf": [*options, {"type": "string", "maxLength": 0}]}


Blankable = _Blankable()

_NUMBER = re.compile(r"\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*")


def _date_time_only(value: object) -> object:
    """The document says ``format: date-time``; pydantic would also read a number as Unix
    time, which the document does not offer, so a number is refused."""
    if isinstance(value, str) and _NUMBER.fullmatch(value):
        raise PydanticCustomError(
            "datetime_type", "must be a date and time (ISO 8601), not a number"
        )
    return value


DateTimeQuery = Annotated[datetime | None, Blankable, BeforeValidator(_date_time_only)]


# A text filter: no recorded value holds a NUL (names, codes and header values cannot),
# and PostgreSQL refuses one in a query, so it is a field error rather than a 500.
FilterText = Annotated[str, Field(max_length=500, pattern=r"^[^\x00]*$")]


class CallsQuery(Schema):
    group: Annotated[FilterText | None, Blankable] = None
    target: Annotated[FilterText | None, Blankable] = None
    key_id: Annotated[int | None, Blankable] = None
    outcome: Annotated[Literal["ok", "failed", "aborted", "refused"] | None, Blankable] = None
    code: Annotated[FilterText | None, Blankable] = None
    session: Annotated[FilterText | None, Blankable] = None
    front_door: Annotated[
        Literal["chat", "messages", "responses", "embeddings"] | None, Blankable
    ] = None
    since: DateTimeQuery = None
    until: DateTimeQuery = None
    served_by_fallback: Annotated[bool | None, Blankable] = None
    before: Annotated[int | None, Blankable] = Field(None, ge=1)
    limit: int = Field(50, ge=1, le=500)


class EventsQuery(Schema):
    kind: Annotated[EventKindName | None, Blankable] = None
    since: DateTimeQuery = None
    limit: int = Field(100, ge=1, le=1000)


# ---------------------------------------------------------------------- rendering
def _status_out(status: Status) -> dict[str, Any]:
    out = asdict(status)
    out["at"] = datetime.fromtimestamp(out.pop("now"), tz=UTC)
    return out


def _call_out(call: Call) -> dict[str, Any]:
    tokens = (call.prompt_tokens, call.completion_tokens, call.total_tokens)
    return {
        "call_id": call.call_id,
        "group": call.group,
        "session": call.session or None,
        "stream": call.stream,
        "outcome": call.outcome,
        "reason": call.reason or None,
        "served_by": call.served_by or None,
        "error_code": call.error_code or None,
        "http_status": call.http_status,
        "started_at": call.started_at,
        "elapsed_ms": call.elapsed_ms,
        "ttft_ms": call.ttft_ms,
        "overhead_ms": call.overhead_ms,
        "usage": None
        if tokens == (None, None, None)
        else dict(zip(("prompt_tokens", "completion_tokens", "total_tokens"), tokens, strict=True)),
        "cost": call.cost,
        "key_id": call.key_id,
        "key_name": call.key_name or None,
        "front_door": call.front_door,
        "served_by_fallback": call.served_by_fallback,
        "trace_id": call.trace_id or None,
        "attempts": [
            {
                "index": a.index,
                "target": a.target,
                "try_number": a.try_number,
                "ok": a.ok,
                "code": a.code or None,
                "status": a.status,
                "message": a.message or None,
                "reason": a.reason or None,
                "elapsed_ms": a.elapsed_ms,
                "will_retry": a.will_retry,
                "switched": a.switched,
                "switched_to": a.switched_to or None,
                "probe": a.probe,
                "rewrites": [r for r in a.rewrites.split(",") if r],
                "upstream_kind": a.upstream_kind,
                "continuation": a.continuation,
                "cooldown_s": a.cooldown_s,
            }
            for a in call.attempts.all()
        ],
    }


def _event_out(row: EventRow) -> dict[str, Any]:
    if isinstance(row, Fallback):
        return {
            "kind": "fallback",
            "id": row.id,
            "at": row.at,
            "call_id": row.call_id,
            "group": row.group,
            "from_target": row.from_target,
            "to_target": row.to_target or None,
            "reason": row.reason,
            "code": row.code,
            "status": row.status,
            "message": row.message or None,
            "cooldown_s": row.cooldown_s,
        }
    if isinstance(row, HealthTransition):
        return {
            "kind": "health",
            "id": row.id,
            "at": row.at,
            "transition": row.kind,
            "target": row.target or None,
            "provider": row.provider or None,
            "until": row.until,
            "code": row.code or None,
            "ok": row.ok,
            "cooldown_s": row.cooldown_s,
            "actor": row.actor or None,
            "message": row.message or None,
            "call_id": row.call_id or None,
        }
    assert isinstance(row, ConfigChange)
    return {
        "kind": "config",
        "id": row.id,
        "at": row.at,
        "actor": row.actor,
        "path": row.path,
        "object_type": row.object_type,
        "object_name": row.object_name,
        "diff": row.diff,
    }


# ---------------------------------------------------------------------- endpoints
@router.get(
    "/status",
    response={200: StatusOut, **AUTH},
    summary="Groups, chains, policy and live health",
)
async def status(request: HttpRequest) -> dict[str, Any]:
    return _status_out(await status_read(get_runtime()))


def aware_utc(value: datetime | None, field: str = "since") -> datetime | None:
    """A naive timestamp is read as UTC, like every ``at`` we return; an aware one is
    turned into UTC (a database may refuse an offset it cannot store, PostgreSQL's ±16 h)."""
    if value is None:
        return None
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise ValidationError(
            [{"loc": ["query", field], "msg": "a time out of range", "type": "value_error"}]
        ) from None


@router.get(
    "/calls",
    response={200: list[CallOut], **FILTERED},
    summary="Calls with their attempts, newest first, filtered, paged by keyset",
    description="Every filter is optional and they combine. `target` matches calls that "
    "tried the target (served or failed); `code` matches the call's error code or any "
    "attempt's failure code. The next (older) page: pass the `x-switchyard-next-before` "
    "response header as `before` (absent on the last page).",
)
async def calls(
    request: HttpRequest, response: HttpResponse, filters: Query[CallsQuery]
) -> list[dict[str, Any]]:
    try:
        query = CallFilters(
            group=filters.group,
            target=filters.target,
            key_id=filters.key_id,
            outcome=filters.outcome,
            code=filters.code,
            session=filters.session,
            front_door=filters.front_door,
            since=aware_utc(filters.since),
            until=aware_utc(filters.until, "until"),
            fallback=filters.served_by_fallback,
        )
    except FilterError as exc:
        raise ValidationError(
            [{"loc": ["query", exc.field], "msg": exc.message, "type": "value_error"}]
        ) from None
    page = await calls_page(query, before=filters.before, limit=filters.limit)
    if page.next_before is not None:
        response["x-switchyard-next-before"] = str(page.next_before)
    return [_call_out(call) for call in page.calls]


@router.get(
    "/events",
    response={200: list[EventOut], **FILTERED},
    summary="Fallback, health and config-change records, newest first",
)
async def events(request: HttpRequest, filters: Query[EventsQuery]) -> list[dict[str, Any]]:
    rows = await events_recent(
        kind=filters.kind, since=aware_utc(filters.since), limit=filters.limit
    )
    return [_event_out(row) for row in rows]
