"""The fallback chain panel folds a call's attempts into numbered steps."""

from __future__ import annotations

from dashboard.chain import call_from_record, fold_attempts
from routing.gateway.events import AttemptRecord, CallRecord


def attempt(
    target: str,
    ok: bool,
    code: str | None = None,
    status: int | None = None,
    elapsed_ms: float = 10.0,
    try_number: int = 1,
) -> AttemptRecord:
    return AttemptRecord(
        target=target, try_number=try_number, ok=ok, elapsed_ms=elapsed_ms, code=code, status=status
    )


def test_retries_on_one_target_fold_into_one_step_that_points_at_the_next() -> None:
    steps = fold_attempts(
        [
            attempt("p1/a", False, "RATE_LIMIT", 429, try_number=1),
            attempt("p1/a", False, "RATE_LIMIT", 429, try_number=2),
            attempt("p1/a", False, "RATE_LIMIT", 429, try_number=3),
            attempt("p2/b", True, elapsed_ms=840.0),
        ]
    )
    assert [(s.index, s.target, s.ok, s.code, s.tries, s.next_index) for s in steps] == [
        (1, "p1/a", False, "RATE_LIMIT", 3, 2),
        (2, "p2/b", True, None, 1, None),
    ]
    assert steps[1].elapsed_ms == 840.0


def test_a_call_with_no_attempt_has_no_steps() -> None:
    assert fold_attempts([]) == ()


def test_live_record_becomes_a_call_view() -> None:
    record = CallRecord(
        call_id="c1",
        group="auto",
        session=None,
        stream=False,
        started_at=1_700_000_000.0,
        outcome="failed",
        elapsed_ms=12.5,
        error_code="ROUTES_EXHAUSTED",
        http_status=502,
        attempts=[attempt("p1/a", False, "SERVER", 503)],
    )
    view = call_from_record(record)
    assert (view.call_id, view.outcome, view.http_status, view.served_by) == (
        "c1",
        "failed",
        502,
        "",
    )
    assert [s.next_index for s in view.steps] == [None]
    assert view.started.year == 2023
