"""The call ledger's one query: filters plus keyset pagination, newest first.

Used by the calls page and ``GET /api/v1/calls``. Decisions:

- **Keyset, not OFFSET.** A page is "the ``limit`` newest calls with ``id`` below
  ``before``"; the next page starts below the last id shown. Page 1000 costs what page 1
  costs, and calls written meanwhile do not shift what the operator is reading.
- **Every filter column has a ``(column, id)`` index** (``Call.Meta.indexes``), so a filtered
  page walks one index backwards and stops after ``limit`` rows. ``target`` means "tried
  that target" (served it or failed on it): an ``EXISTS`` over the call's attempts, which
  the attempts' ``call_id`` index answers per call.
- **Filters are a frozen value** that the live page also evaluates against a finished
  call (:func:`CallFilters.matches`), so "append live when the filters match" and the query
  cannot disagree.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from django.db.models import Exists, OuterRef, Prefetch, Q, QuerySet

from routing.audit.models import Attempt, Call, FrontDoor, Outcome

if TYPE_CHECKING:
    from routing.gateway.events import CallRecord

PAGE_SIZE = 50
PAGE_MAX = 500


class FilterError(ValueError):
    """A filter value that cannot be used; ``field`` names the form field."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


@dataclass(frozen=True, slots=True)
class CallFilters:
    group: str | None = None
    target: str | None = None  # provider/model the call tried
    key_id: int | None = None
    outcome: str | None = None  # ok | failed | aborted
    code: str | None = None  # the call's error code, or the code of any failed attempt
    session: str | None = None
    front_door: str | None = None
    since: datetime | None = None  # started at or after
    until: datetime | None = None  # started before
    fallback: bool | None = None  # served by a target other than the first tried

    def __post_init__(self) -> None:
        if self.outcome is not None and self.outcome not in Outcome.values:
            raise FilterError("outcome", f"outcome must be one of {', '.join(Outcome.values)}")
        if self.front_door is not None and self.front_door not in FrontDoor.values:
            raise FilterError(
                "front_door", f"front door must be one of {', '.join(FrontDoor.values)}"
            )
        for name in ("since", "until"):
            value = getattr(self, name)
            if value is None:
                continue
            if value.tzinfo is None:
                raise FilterError(name, "a time needs a time zone")
            # In UTC: a database may refuse an offset it cannot store (PostgreSQL: ±16 h).
            try:
                object.__setattr__(self, name, value.astimezone(UTC))
            except OverflowError:
                raise FilterError(name, "a time out of range") from None
        if self.since and self.until and self.since >= self.until:
            raise FilterError("until", "'until' must be after 'since'")

    @property
    def active(self) -> dict[str, object]:
        """The filters in use, by name."""
        return {
            f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None
        }

    def without(self, name: str) -> CallFilters:
        return replace(self, **{name: None})

    def matches(self, facts: Mapping[str, object]) -> bool:
        """Would a finished call with these facts be in the result? ``facts`` as made by
        :func:`call_facts` (the live page sends them with every pushed call)."""
        started = facts.get("started_at")
        checks: list[bool] = [
            self.group is None or facts.get("group") == self.group,
            self.target is None or self.target in _seq(facts.get("targets")),
            self.key_id is None or facts.get("key_id") == self.key_id,
            self.outcome is None or facts.get("outcome") == self.outcome,
            self.code is None or self.code in _seq(facts.get("codes")),
            self.session is None or facts.get("session") == self.session,
            self.front_door is None or facts.get("front_door") == self.front_door,
            self.fallback is None or bool(facts.get("fallback")) == self.fallback,
            self.since is None
            or (isinstance(started, float) and started >= self.since.timestamp()),
            self.until is None or (isinstance(started, float) and started < self.until.timestamp()),
        ]
        return all(checks)


def _seq(value: object) -> Sequence[object]:
    return value if isinstance(value, list | tuple) else ()


def call_facts(record: CallRecord) -> dict[str, object]:
    """What :meth:`CallFilters.matches` reads, from a live ``routing.gateway.events.CallRecord``."""
    attempts = record.attempts
    codes = {a.code for a in attempts if a.code}
    if record.error_code:
        codes.add(record.error_code)
    return {
        "group": record.group,
        "targets": sorted({a.target for a in attempts}),
        "key_id": record.key_id,
        "outcome": record.outcome,
        "codes": sorted(codes),
        "session": record.session or "",
        "front_door": record.door,
        "fallback": record.served_by_fallback,
        "started_at": float(record.started_at),
    }


def filtered(filters: CallFilters) -> QuerySet[Call]:
    """The filtered ledger, newest first (no attempts loaded)."""
    query = Call.objects.order_by("-id")
    if filters.group is not None:
        query = query.filter(group=filters.group)
    if filters.key_id is not None:
        query = query.filter(key_id=filters.key_id)
    if filters.outcome is not None:
        query = query.filter(outcome=filters.outcome)
    if filters.session is not None:
        query = query.filter(session=filters.session)
    if filters.front_door is not None:
        query = query.filter(front_door=filters.front_door)
    if filters.fallback is not None:
        query = query.filter(served_by_fallback=filters.fallback)
    if filters.since is not None:
        query = query.filter(started_at__gte=filters.since)
    if filters.until is not None:
        query = query.filter(started_at__lt=filters.until)
    if filters.target is not None:
        query = query.filter(
            Exists(Attempt.objects.filter(call_id=OuterRef("call_id"), target=filters.target))
        )
    if filters.code is not None:
        failed_with = Exists(Attempt.objects.filter(call_id=OuterRef("call_id"), code=filters.code))
        query = query.filter(Q(error_code=filters.code) | failed_with)
    return query


@dataclass(frozen=True, slots=True)
class CallPage:
    calls: list[Call]
    next_before: int | None  # pass as ``before`` for the next (older) page; None = last page


def page_query(filters: CallFilters, *, before: int | None, limit: int) -> QuerySet[Call]:
    query = filtered(filters)
    if before is not None:
        query = query.filter(id__lt=before)
    return query[: limit + 1]


async def calls_page(
    filters: CallFilters, *, before: int | None = None, limit: int = PAGE_SIZE
) -> CallPage:
    """One page of calls, each with its attempts in order (``call.attempts.all()``)."""
    limit = max(1, min(limit, PAGE_MAX))
    query = page_query(filters, before=before, limit=limit).prefetch_related(
        Prefetch("attempts", queryset=Attempt.objects.order_by("index"))
    )
    rows = [call async for call in query]
    more = len(rows) > limit
    rows = rows[:limit]
    return CallPage(rows, rows[-1].id if more and rows else None)


async def call_detail(call_id: str) -> Call | None:
    query = Call.objects.filter(call_id=call_id).prefetch_related(
        Prefetch("attempts", queryset=Attempt.objects.order_by("index"))
    )
    return await query.afirst()
