"""One row of the calls page, built alike from an audit ``Call`` row (first render) and a
live ``routing.gateway.events.CallRecord`` (appended over the websocket as the call finishes)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from dashboard.chain import Step, fold_attempts

if TYPE_CHECKING:
    from routing.audit.models import Call
    from routing.gateway.events import CallRecord


@dataclass(frozen=True, slots=True)
class CallRow:
    call_id: str
    started_at: float  # epoch seconds
    group: str
    outcome: str
    served_by: str
    fallback: bool
    key_id: int | None
    key_name: str
    front_door: str
    session: str
    attempts: int
    elapsed_ms: float
    ttft_ms: float | None
    total_tokens: int | None
    error_code: str
    http_status: int
    steps: tuple[Step, ...]
    reason: str = ""  # a refused call: what the door answered

    @property
    def started(self) -> datetime:
        return datetime.fromtimestamp(self.started_at, tz=UTC)


def row_from_call(call: Call) -> CallRow:
    """From an audit ``Call`` whose attempts were prefetched in order."""
    attempts = list(call.attempts.all())
    return CallRow(
        call_id=call.call_id,
        started_at=call.started_at.timestamp(),
        group=call.group,
        outcome=call.outcome,
        served_by=call.served_by or "",
        fallback=bool(call.served_by_fallback),
        key_id=call.key_id,
        key_name=call.key_name or "",
        front_door=call.front_door,
        session=call.session or "",
        attempts=len(attempts),
        elapsed_ms=float(call.elapsed_ms),
        ttft_ms=call.ttft_ms,
        total_tokens=call.total_tokens,
        error_code=call.error_code or "",
        http_status=int(call.http_status),
        steps=fold_attempts(attempts),
        reason=call.reason or "",
    )


def row_from_record(record: CallRecord) -> CallRow:
    """From a live ``routing.gateway.events.CallRecord``."""
    total = (record.billed or {}).get("total_tokens")  # as the ledger records it
    return CallRow(
        call_id=record.call_id,
        started_at=float(record.started_at),
        group=record.group,
        outcome=record.outcome,
        served_by=record.served_by or "",
        fallback=bool(record.served_by_fallback),
        key_id=record.key_id,
        key_name=record.key_name or "",
        front_door=record.door,
        session=record.session or "",
        attempts=len(record.attempts),
        elapsed_ms=float(record.elapsed_ms),
        ttft_ms=record.ttft_ms,
        total_tokens=total if isinstance(total, int) else None,
        error_code=record.error_code or "",
        http_status=int(record.http_status),
        steps=fold_attempts(record.attempts),
        reason=record.reason,
    )
