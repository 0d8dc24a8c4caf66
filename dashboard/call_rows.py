"""One row of the calls page, built alike from an audit ``Call`` row (first render) and a
live ``routing.gateway.events.CallRecord`` (appended over the websocket as the call finishes)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from dashboard.chain import Step, fold_attempts


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

    @property
    def started(self) -> datetime:
        return datetime.fromtimestamp(self.started_at, tz=UTC)


def row_from_call(call: object) -> CallRow:
    """From an audit ``Call`` whose attempts were prefetched in order."""
    attempts = list(call.attempts.all())  # type: ignore[attr-defined]
    return CallRow(
        call_id=call.call_id,  # type: ignore[attr-defined]
        started_at=call.started_at.timestamp(),  # type: ignore[attr-defined]
        group=call.group,  # type: ignore[attr-defined]
        outcome=call.outcome,  # type: ignore[attr-defined]
        served_by=call.served_by or "",  # type: ignore[attr-defined]
        fallback=bool(call.served_by_fallback),  # type: ignore[attr-defined]
        key_id=call.key_id,  # type: ignore[attr-defined]
        key_name=call.key_name or "",  # type: ignore[attr-defined]
        front_door=call.front_door,  # type: ignore[attr-defined]
        session=call.session or "",  # type: ignore[attr-defined]
        attempts=len(attempts),
        elapsed_ms=float(call.elapsed_ms),  # type: ignore[attr-defined]
        ttft_ms=call.ttft_ms,  # type: ignore[attr-defined]
        total_tokens=call.total_tokens,  # type: ignore[attr-defined]
        error_code=call.error_code or "",  # type: ignore[attr-defined]
        http_status=int(call.http_status),  # type: ignore[attr-defined]
        steps=fold_attempts(attempts),
    )


def row_from_record(record: object) -> CallRow:
    """From a live ``routing.gateway.events.CallRecord``."""
    usage = record.usage or {}  # type: ignore[attr-defined]
    total = usage.get("total_tokens") if isinstance(usage, dict) else None
    return CallRow(
        call_id=record.call_id,  # type: ignore[attr-defined]
        started_at=float(record.started_at),  # type: ignore[attr-defined]
        group=record.group,  # type: ignore[attr-defined]
        outcome=record.outcome,  # type: ignore[attr-defined]
        served_by=record.served_by or "",  # type: ignore[attr-defined]
        fallback=bool(record.served_by_fallback),  # type: ignore[attr-defined]
        key_id=record.key_id,  # type: ignore[attr-defined]
        key_name=record.key_name or "",  # type: ignore[attr-defined]
        front_door=record.door,  # type: ignore[attr-defined]
        session=record.session or "",  # type: ignore[attr-defined]
        attempts=len(record.attempts),  # type: ignore[attr-defined]
        elapsed_ms=float(record.elapsed_ms),  # type: ignore[attr-defined]
        ttft_ms=record.ttft_ms,  # type: ignore[attr-defined]
        total_tokens=total if isinstance(total, int) else None,
        error_code=record.error_code or "",  # type: ignore[attr-defined]
        http_status=int(record.http_status),  # type: ignore[attr-defined]
        steps=fold_attempts(record.attempts),  # type: ignore[attr-defined]
    )
