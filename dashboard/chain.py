"""The fallback chain panel's view of one call: its attempts folded into steps.

A call's attempts are listed per try (``p1/a`` try 1, try 2, try 3, ``p2/b`` try 1). The
panel shows one *step* per target visited, numbered in order, the way an operator reads
it::

    1. p1/a ✕ RATE_LIMIT (429) tried 3× → 2
    2. p2/b ✓ 840 ms

Consecutive attempts on the same target fold into one step whose outcome is its last
attempt's. The same view is built from a live ``routing.gateway.events.CallRecord`` (pushed over
the websocket as the call finishes) and from an audit ``Call`` row with its attempts
(the page's first render), so both look alike.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from routing.audit.models import Call
    from routing.gateway.events import CallRecord


class AttemptLike(Protocol):
    """What both ``routing.gateway.events.AttemptRecord`` and ``routing.audit.models.Attempt`` have.
    Read-only, so a row whose ``code`` is never None fits as well as a record's optional one."""

    @property
    def target(self) -> str: ...
    @property
    def ok(self) -> bool: ...
    @property
    def code(self) -> str | None: ...
    @property
    def status(self) -> int | None: ...
    @property
    def elapsed_ms(self) -> float: ...
    @property
    def probe(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class Step:
    index: int  # 1-based position in the call
    target: str
    ok: bool
    code: str | None
    status: int | None
    tries: int
    elapsed_ms: float  # of the step's last attempt
    next_index: int | None  # the step the call moved on to, if any
    probe: bool
    rewrites: tuple[str, ...] = ()  # of the step's last attempt (SPEC §13)
    kind: str = "openai"  # the target's upstream kind: the protocol the step spoke (§12)
    continuation: bool = False  # a mid-stream rescue of a cut stream (§16)


@dataclass(frozen=True, slots=True)
class CallView:
    call_id: str
    group: str
    outcome: str  # ok | failed | aborted
    served_by: str
    started_at: float  # epoch seconds
    elapsed_ms: float
    http_status: int
    error_code: str
    steps: tuple[Step, ...]
    front_door: str = "chat"  # the ledger's door name: chat | messages | responses | embeddings

    @property
    def started(self) -> datetime:
        from datetime import UTC

        return datetime.fromtimestamp(self.started_at, tz=UTC)


def fold_attempts(attempts: Iterable[AttemptLike]) -> tuple[Step, ...]:
    """Consecutive attempts on one target become one numbered step."""
    runs: list[list[AttemptLike]] = []
    for attempt in attempts:
        if runs and runs[-1][0].target == attempt.target:
            runs[-1].append(attempt)
        else:
            runs.append([attempt])
    steps: list[Step] = []
    for number, run in enumerate(runs, start=1):
        last = run[-1]
        steps.append(
            Step(
                index=number,
                target=last.target,
                ok=last.ok,
                code=last.code or None,
                status=last.status,
                tries=len(run),
                elapsed_ms=last.elapsed_ms,
                next_index=number + 1 if number < len(runs) else None,
                probe=any(a.probe for a in run),
                rewrites=_rewrites(last),
                kind=_kind(last),
                continuation=bool(getattr(last, "continuation", False)),
            )
        )
    return tuple(steps)


def _rewrites(attempt: object) -> tuple[str, ...]:
    """A live record keeps a tuple, an audit row a comma-separated string."""
    value = getattr(attempt, "rewrites", ())
    if isinstance(value, str):
        return tuple(r for r in value.split(",") if r)
    return tuple(value)


def _kind(attempt: object) -> str:
    """A live record names it ``kind``, an audit row ``upstream_kind``."""
    value = getattr(attempt, "upstream_kind", None) or getattr(attempt, "kind", None)
    return value if isinstance(value, str) and value else "openai"


def call_from_record(record: CallRecord) -> CallView:
    """From a live ``routing.gateway.events.CallRecord``."""
    return CallView(
        call_id=record.call_id,
        group=record.group,
        outcome=record.outcome,
        served_by=record.served_by or "",
        started_at=float(record.started_at),
        elapsed_ms=float(record.elapsed_ms),
        http_status=int(record.http_status),
        error_code=record.error_code or "",
        steps=fold_attempts(record.attempts),
        front_door=record.door,
    )


def call_from_row(row: Call) -> CallView:
    """From an audit ``Call`` whose attempts were prefetched in order."""
    return CallView(
        call_id=row.call_id,
        group=row.group,
        outcome=row.outcome,
        served_by=row.served_by or "",
        started_at=row.started_at.timestamp(),
        elapsed_ms=float(row.elapsed_ms),
        http_status=int(row.http_status),
        error_code=row.error_code or "",
        steps=fold_attempts(row.attempts.all()),
        front_door=row.front_door,
    )
