"""``GET /api/v1/spend``: calls, tokens and cost by key, group, target or day (SPEC §17),
aggregated from the ledger (``routing.audit.spend``)."""

from __future__ import annotations

from typing import Any, Literal

from asgiref.sync import sync_to_async
from django.http import HttpRequest
from ninja import Field, Query, Router, Schema

from routing.api.config_api.schemas import FILTERED, SpendOut
from routing.api.observability import DateTimeQuery, aware_utc
from routing.audit.spend import spend_rows

router = Router(tags=["spend"])


class SpendQuery(Schema):
    by: Literal["key", "group", "target", "day"] = "day"
    since: DateTimeQuery = Field(None, description="inclusive; ISO 8601 (UTC if naive)")
    until: DateTimeQuery = Field(None, description="exclusive")


@router.get(
    "/spend",
    response={200: list[SpendOut], **FILTERED},
    summary="Calls, tokens and cost by key, group, target or UTC day",
    description="`tokens` and `cost` count the same attempts: every upstream attempt that "
    "reported usage (a failed attempt that was billed, then retried or switched, too), as "
    "the token and cost budgets are charged; cost at each attempt's own target's price. "
    "`by=target` counts a call under the target that served it. Refused calls are left "
    "out; `cost` is null when no call in the row had a price and usage.",
)
async def spend(request: HttpRequest, filters: Query[SpendQuery]) -> list[dict[str, Any]]:
    return await sync_to_async(spend_rows)(
        by=filters.by,
        since=aware_utc(filters.since, "since"),
        until=aware_utc(filters.until, "until"),
    )
