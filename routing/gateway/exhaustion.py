"""What a call that found nothing left to try tells its client (SPEC §3.10).

Pure: the group's targets, the store's verdicts on them and what the call learned of
each (how its tries ended, the door's skips, a context window it exceeded) in; one
line per target and the revivals for ``Retry-After`` out. The call reads the store,
picks the status (502 when anything was tried, else 503) and sends the reply
(``routing.gateway.call``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from routing.engine.failures import FailureCode
from routing.engine.plan import ContextLimit
from routing.engine.select import Verdict

if TYPE_CHECKING:
    from routing.gateway.state import TargetOutcome
    from routing.gateway.table import TargetSpec


@dataclass(frozen=True, slots=True)
class Exhaustion:
    """A call's targets as it ran out of them."""

    targets: tuple[TargetSpec, ...]
    judged: Mapping[str, Verdict]  # the store's verdict on each target now
    outcomes: Mapping[str, TargetOutcome]  # the targets this call gave up on
    skipped: Mapping[str, str]  # never tried, and why
    context_limit: ContextLimit | None  # set when a context window overflowed

    def message(self, group: str, *, detail: bool = False) -> str:
        """The client's summary; with ``detail``, the operator's (``Failure.public``)."""
        lines = [f"{t.key} → {self.line(t, detail=detail)}" for t in self.targets]
        return f"All routes for '{group}' failed:\n" + "\n".join(lines)

    def line(self, target: TargetSpec, *, detail: bool = False) -> str:
        """A target's failure in this call, or why it was not tried."""
        outcome = self.outcomes.get(target.key)
        if outcome is not None:
            f, attempts = outcome.failure, outcome.attempts
            status = f" (HTTP {f.status})" if f.status is not None else ""
            said = f.message if detail else f.client_message
            # the last attempt's own time, then the total spent on the target
            cooled = "" if outcome.cooldown_s is None else f"; cooling {outcome.cooldown_s:.0f} s"
            return (
                f"{f.code.value}{status}: {said} ({outcome.last_ms:.0f} ms; "
                f"{attempts} attempt{'s' if attempts != 1 else ''} "
                f"in {outcome.elapsed_ms / 1000:.1f} s{cooled})"
            )
        if target.key in self.skipped:
            return f"skipped: {self.skipped[target.key]}"
        line = self.judged[target.key].exhaustion_line()
        if line is not None:
            return line
        if self.context_limit is not None and not self.context_limit.allows(target.context_window):
            return "skipped: its context window is not larger than the one exceeded"
        return "not tried"

    def revivals(self, now: float, *, all_waiting: bool) -> list[float]:
        """When targets may serve again, for ``Retry-After``. Untried (503): every cooling
        or probing target's revival. Tried (502): only when every target is cooling or
        rate limited; a target that failed some other way has no known revival."""
        waits: list[float] = []
        for target in self.targets:
            if target.key in self.skipped:
                continue  # it can never serve this call
            verdict, outcome = self.judged[target.key], self.outcomes.get(target.key)
            if verdict.earliest_revival is not None:
                waits.append(verdict.earliest_revival)
            elif (
                all_waiting
                and outcome is not None
                and outcome.failure.code is FailureCode.RATE_LIMIT
                and outcome.failure.retry_after_s is not None
            ):
                waits.append(now + outcome.failure.retry_after_s)
            elif all_waiting:
                return []
        return waits
