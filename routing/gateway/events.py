"""Events and records a call produces, and the hub that fans them out.

The call path only *publishes*: ``EventHub.publish`` appends to a bounded in-memory ring
(for status pages and tests) and hands the event to each subscriber, which must do no
I/O inline (the audit writer enqueues, the live page schedules a channel-layer send).
Logging happens here so that there is one line per retry, per switch and per health
transition, and none for a normal success.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from routing.engine.health import HealthEvent
from routing.engine.plan import SwitchReason
from routing.protocols.registry import DOOR_NAMES

log = logging.getLogger("switchyard.events")


@dataclass(frozen=True, slots=True)
class RetryEvent:
    call_id: str
    group: str
    target: str
    try_number: int
    code: str
    status: int | None
    delay_s: float
    message: str
    at: float  # the runtime's clock: no event reads the wall clock on its own
    retries_left: int = 0  # in-place retries the policy still allows after this one


@dataclass(frozen=True, slots=True)
class FallbackEvent:
    call_id: str
    group: str
    from_target: str
    to_target: str | None
    reason: SwitchReason
    code: str
    status: int | None
    message: str
    cooldown_s: float | None
    at: float  # the runtime's clock: no event reads the wall clock on its own
    attempts: int = 1  # the call's attempts on ``from_target`` before it moved on


@dataclass(slots=True)
class AttemptRecord:
    target: str
    try_number: int  # 1-based within its target
    ok: bool
    elapsed_ms: float
    code: str | None = None
    status: int | None = None
    message: str = ""
    reason: SwitchReason | None = None  # why this attempt made the call move on
    will_retry: bool = False
    switched: bool = False
    switched_to: str | None = None
    probe: bool = False
    rewrites: tuple[str, ...] = ()  # what the outbound copy of the request changed (SPEC §13)
    kind: str = "openai"  # the target's upstream kind (the protocol this attempt spoke)
    continuation: bool = False  # a mid-stream rescue of a cut stream (SPEC §16)
    usage: dict[str, Any] | None = None  # what the upstream reported for it (priced, §17)
    cost: float | None = None  # its usage at its own target's price (None: either missing)
    cooldown_s: float | None = None  # the cooling its failure earned the target (the last try)


class CallOutcome(StrEnum):
    """How a call ended. OK: the answer reached the client. FAILED: an error was surfaced,
    every route was exhausted, a stream broke after its commit point, or a bug. ABORTED:
    the client went away. REFUSED: a door turned the request away before routing (bad
    shape, unknown model, key not allowed, no target could take it) or a limit did (429,
    SPEC §17): no upstream called."""

    OK = "ok"
    FAILED = "failed"
    ABORTED = "aborted"
    REFUSED = "refused"


@dataclass(slots=True)
class CallRecord:
    call_id: str
    group: str
    session: str | None
    stream: bool
    started_at: float
    outcome: CallOutcome = CallOutcome.OK
    served_by: str | None = None
    elapsed_ms: float = 0.0
    ttft_ms: float | None = None
    overhead_ms: float | None = None
    usage: dict[str, Any] | None = None
    error_code: str | None = None
    http_status: int = 200
    attempts: list[AttemptRecord] = field(default_factory=list)
    front_door: str = "openai"  # the protocol the client spoke (a routing.protocols value)
    endpoint: str | None = None  # "embeddings" for the embeddings door
    key_id: int | None = None  # the gateway key that made the call (never its secret)
    key_name: str = ""
    reason: str = ""  # a refused call's error message (what the client was told)
    trace_id: str = ""  # the call's sampled OpenTelemetry trace (routing.observability.tracing)
    cost: float | None = None  # each attempt's usage at its target's price, summed (SPEC §17)
    # The tokens of every attempt that reported usage, summed: what the upstreams billed,
    # so the same attempts as ``cost`` and the token budgets (``usage`` is the answer's own,
    # as the client was told). The ledger's token columns and Spend count these.
    billed: dict[str, int] | None = None

    @property
    def door(self) -> str:
        """The ledger's name of the front door: chat | messages | responses | embeddings."""
        if self.endpoint == "embeddings":
            return "embeddings"
        return DOOR_NAMES.get(self.front_door, "chat")

    @property
    def served_by_fallback(self) -> bool:
        """Served by a target other than the first one this call tried."""
        return bool(self.served_by and self.attempts and self.attempts[0].target != self.served_by)

    def trail(self) -> str:
        """Compact per-attempt trail for the ``x-switchyard-trail`` header."""
        return ",".join(
            (f"{a.target}:continuation" if a.continuation else f"{a.target}:ok")
            if a.ok
            else f"{a.target}:{a.code}:{a.status if a.status is not None else '-'}"
            for a in self.attempts
        )


Event = HealthEvent | FallbackEvent | RetryEvent | CallRecord
Subscriber = Callable[[Event], None]


class EventHub:
    """Fan-out of events to cheap, non-blocking subscribers, plus a recent-events ring."""

    def __init__(self, *, keep: int = 2000) -> None:
        self.recent: deque[Event] = deque(maxlen=keep)
        self._subscribers: list[Subscriber] = []

    def subscribe(self, subscriber: Subscriber) -> Callable[[], None]:
        self._subscribers.append(subscriber)
        return lambda: self._subscribers.remove(subscriber)

    def publish(self, event: Event) -> None:
        self.recent.append(event)
        _log(event)
        for subscriber in tuple(self._subscribers):
            try:
                subscriber(event)
            except Exception:  # a broken subscriber must never fail a call
                log.exception("event subscriber %r failed", subscriber)

    def publish_all(self, events: list[HealthEvent]) -> None:
        for event in events:
            self.publish(event)


def _log(event: Event) -> None:
    # Messages are the upstream's words, already scrubbed of every credential (SPEC §9).
    if isinstance(event, RetryEvent):
        log.warning(
            "retry call=%s group=%s target=%s try=%d code=%s status=%s in %.3fs "
            "(%d retr%s left): %s",
            event.call_id,
            event.group,
            event.target,
            event.try_number,
            event.code,
            event.status if event.status is not None else "-",
            event.delay_s,
            event.retries_left,
            "y" if event.retries_left == 1 else "ies",
            event.message,
        )
    elif isinstance(event, FallbackEvent):
        log.warning(
            "switch call=%s group=%s from=%s to=%s reason=%s after %d attempt%s "
            "code=%s status=%s: %s",
            event.call_id,
            event.group,
            event.from_target,
            event.to_target or "-",
            event.reason,
            event.attempts,
            "" if event.attempts == 1 else "s",
            event.code,
            event.status if event.status is not None else "-",
            event.message,
        )
    elif isinstance(event, HealthEvent):
        log.warning(
            "health %s target=%s provider=%s code=%s until=%s call=%s",
            event.kind,
            event.target or "-",
            event.provider or "-",
            event.code or "-",
            f"{event.until:.0f}" if event.until else "-",
            event.call_id or "-",
        )
