"""Prometheus metrics for ``/metrics``, in a registry of their own.

Counters and histograms move in :func:`observe`, a hub subscriber that only increments
(no I/O, no awaits), subscribed to every hub the runtime installs by :func:`attach`
(listed in ``settings.SWITCHYARD["EVENT_SUBSCRIBERS"]``, beside the audit writer). Health is a gauge computed at scrape time from the state store, so
it is right in every process of a Redis deployment, not just the one that saw the change.

Labels are only ``group``, ``target``, ``code`` and ``outcome``: aggregate facts, never a
credential, session key or message. Clients can address ``provider/<any model>`` directly,
so group and target values are capped (:data:`LABEL_VALUES_MAX` distinct values per
label, then ``other``) to keep a client from growing the series without bound.

``switchyard_target_health`` encodes the state as a number so it can be alerted on
(``> 0``) and graphed: 0 healthy, 1 probing, 2 cooling, 3 disabled.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from routing.engine.health import HealthEvent, HealthState
from routing.engine.refusals import KeylessRefusals
from routing.gateway.events import (
    CallOutcome,
    CallRecord,
    Event,
    EventHub,
    FallbackEvent,
    RetryEvent,
)
from routing.gateway.runtime import Runtime

LABEL_VALUES_MAX = 1000
OVERFLOW_LABEL = "other"
STATE_VALUE = {
    HealthState.HEALTHY: 0,
    HealthState.PROBING: 1,
    HealthState.COOLING: 2,
    HealthState.DISABLED: 3,
}

REGISTRY = CollectorRegistry(auto_describe=True)

CALLS = Counter(
    "switchyard_calls",
    "Calls by group and outcome (ok, failed, aborted).",
    ["group", "outcome"],
    registry=REGISTRY,
)
ATTEMPTS = Counter(
    "switchyard_attempts",
    "Upstream attempts by target and failure code (OK on success).",
    ["target", "code"],
    registry=REGISTRY,
)
SWITCHES = Counter(
    "switchyard_switches",
    "Calls that moved off a target, by group, target left and code.",
    ["group", "target", "code"],
    registry=REGISTRY,
)
RESCUES = Counter(
    "switchyard_rescues",
    "Mid-stream rescues (SPEC §16) by group and outcome: ok, or failed (the error event).",
    ["group", "outcome"],
    registry=REGISTRY,
)
RETRIES = Counter(
    "switchyard_retries",
    "In-place retries by group, target and code.",
    ["group", "target", "code"],
    registry=REGISTRY,
)
HEALTH_TRANSITIONS = Counter(
    "switchyard_health_transitions",
    "Health events by target ('<provider>/*' for credential events) and code.",
    ["target", "code"],
    registry=REGISTRY,
)
INPUT_TOKENS = Counter(
    "switchyard_input_tokens",
    "Input (prompt) tokens billed, by group and the target of each attempt that reported "
    "usage (a failed attempt's too: what cost and the token budgets count).",
    ["group", "target"],
    registry=REGISTRY,
)
OUTPUT_TOKENS = Counter(
    "switchyard_output_tokens",
    "Output (completion) tokens billed, by group and the target of each attempt that "
    "reported usage.",
    ["group", "target"],
    registry=REGISTRY,
)
COST = Counter(
    "switchyard_cost",
    "Cost of calls (the targets' price currency), by group and the target of each attempt "
    "that reported usage, at that target's price; attempts without usage or price add "
    "nothing.",
    ["group", "target"],
    registry=REGISTRY,
)
REFUSALS = Counter(
    "switchyard_refusals",
    "Calls refused over a limit, by group and code (rpm_limit, budget_exceeded...).",
    ["group", "code"],
    registry=REGISTRY,
)
TIME_TO_FIRST_TOKEN = Histogram(
    "switchyard_time_to_first_token_seconds",
    "From the call's arrival to its commit point (first content), retries and switches included.",
    ["group"],
    registry=REGISTRY,
    buckets=(0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0),
)
GATEWAY_OVERHEAD = Histogram(
    "switchyard_gateway_overhead_seconds",
    "Time to the commit point not spent waiting on upstreams or backoff.",
    ["group"],
    registry=REGISTRY,
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0),
)


class _LabelGuard:
    """Caps the distinct values one label may take; later newcomers become ``other``."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, value: str) -> str:
        if value in self._seen:
            return value
        with self._lock:
            if len(self._seen) >= self.limit:
                return OVERFLOW_LABEL
            self._seen.add(value)
        return value


_group = _LabelGuard(LABEL_VALUES_MAX)
_target = _LabelGuard(LABEL_VALUES_MAX)


class _Children:
    """A metric's labelled children by their label values. ``labels()`` checks and
    converts its arguments and takes the metric's lock on every call, six times per call
    here; a child, once made, stays the metric's (nothing here removes one), so it is
    looked up by the same values next time. Two threads making the same child at once
    both get it from ``labels()``, which is locked."""

    __slots__ = ("_metric", "_made")

    def __init__(self, metric: Counter | Histogram) -> None:
        self._metric = metric
        self._made: dict[tuple[str, ...], Any] = {}

    def __call__(self, *values: str) -> Any:
        child = self._made.get(values)
        if child is None:
            child = self._made[values] = self._metric.labels(*values)
        return child


_calls, _attempts, _rescues = _Children(CALLS), _Children(ATTEMPTS), _Children(RESCUES)
_refusals, _cost = _Children(REFUSALS), _Children(COST)
_input, _output = _Children(INPUT_TOKENS), _Children(OUTPUT_TOKENS)
_ttft, _overhead = _Children(TIME_TO_FIRST_TOKEN), _Children(GATEWAY_OVERHEAD)
_retries, _switches = _Children(RETRIES), _Children(SWITCHES)
_transitions = _Children(HEALTH_TRANSITIONS)


def observe(event: Event) -> None:
    """Hub subscriber: count one event. Cheap increments only."""
    if isinstance(event, CallRecord):
        group = _group(event.group)
        _calls(group, event.outcome).inc()
        for attempt in event.attempts:
            _attempts(
                _target(attempt.target), "OK" if attempt.ok else attempt.code or "UNKNOWN"
            ).inc()
        if any(a.continuation for a in event.attempts):
            _rescues(group, "ok" if event.outcome == CallOutcome.OK else "failed").inc()
        if event.outcome == CallOutcome.REFUSED:
            _refusals(group, event.error_code or "").inc()
        else:  # every billed attempt at its own target: the same attempts as the budgets
            for attempt in event.attempts:
                if attempt.usage:
                    _usage(group, _target(attempt.target), attempt.usage, attempt.cost)
        if event.outcome == CallOutcome.OK and event.ttft_ms is not None:
            _ttft(group).observe(event.ttft_ms / 1000)
        if event.overhead_ms is not None:
            _overhead(group).observe(event.overhead_ms / 1000)
    elif isinstance(event, RetryEvent):
        _retries(_group(event.group), _target(event.target), event.code).inc()
    elif isinstance(event, FallbackEvent):
        _switches(_group(event.group), _target(event.from_target), event.code).inc()
    elif isinstance(event, HealthEvent):
        target = event.target or f"{event.provider}/*"
        _transitions(_target(target), event.code or "").inc()


_attached: list[tuple[EventHub, Callable[[], None]]] = []  # the hub counted, and how to stop
_attach_lock = threading.Lock()


def attach(hub: EventHub) -> None:
    """``EVENT_SUBSCRIBERS`` hook: count ``hub``'s events (:func:`observe`), detaching
    from the previously attached hub, so the counters follow the hub the runtime installs."""
    with _attach_lock:
        if _attached and _attached[0][0] is hub:
            return
        for _, unsubscribe in _attached:
            try:
                unsubscribe()
            except ValueError:  # that hub was cleared or replaced already
                pass
        _attached[:] = [(hub, hub.subscribe(observe))]


def _usage(group: str, target: str, usage: dict[str, object], cost: float | None) -> None:
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if isinstance(prompt, int) and prompt > 0:
        _input(group, target).inc(prompt)
    if isinstance(completion, int) and completion > 0:
        _output(group, target).inc(completion)
    if cost:
        _cost(group, target).inc(cost)


class _ScrapeCollector(Collector):
    """Values read at scrape time: per-target health and the audit writer's counters."""

    def __init__(
        self,
        health: dict[str, tuple[HealthState, float]],
        calls_open: int,
        keyless: KeylessRefusals | None = None,
    ) -> None:
        self.health = health  # target -> (state, remaining cooldown in seconds)
        self.calls_open = calls_open
        self.keyless = keyless or KeylessRefusals()

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        state = GaugeMetricFamily(
            "switchyard_target_health",
            "Health of each routed target: 0 healthy, 1 probing, 2 cooling, 3 disabled.",
            labels=["target"],
        )
        cooldown = GaugeMetricFamily(
            "switchyard_target_cooldown_remaining_seconds",
            "Seconds until a cooling target may be probed again (0 when not cooling).",
            labels=["target"],
        )
        for key, (health_state, remaining) in sorted(self.health.items()):
            state.add_metric([key], STATE_VALUE[health_state])
            cooldown.add_metric([key], remaining)
        yield state
        yield cooldown
        yield GaugeMetricFamily(
            "switchyard_calls_in_progress",
            "Calls begun and not yet finished in this process (a stream until its last byte).",
            value=self.calls_open,
        )
        refused = CounterMetricFamily(
            "switchyard_unauthenticated_refusals",
            "Requests to /v1 refused for want of a valid key (401) in this process: recorded "
            "(the ledger's sample, at most one per client address and minute) or only "
            "counted.",
            labels=["outcome"],
        )
        refused.add_metric(["recorded"], self.keyless.sampled)
        refused.add_metric(["counted"], self.keyless.count - self.keyless.sampled)
        yield refused
        yield from _writer_families()
        yield from _continuity_families()


def _continuity_families() -> Iterator[CounterMetricFamily]:
    from routing.gateway.continuity import STATS

    histories = CounterMetricFamily(
        "switchyard_history_rewrites",
        "Attempts whose outbound history was rewritten across a switch (rewritten), and "
        "histories passed through untouched because their shape is unknown (unrewritable).",
        labels=["outcome"],
    )
    histories.add_metric(["rewritten"], STATS.rewritten)
    histories.add_metric(["unrewritable"], STATS.unrewritable)
    yield histories


def _writer_families() -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
    from routing.audit import writer

    stats = writer.get_writer().stats()
    records = CounterMetricFamily(
        "switchyard_audit_records",
        "Audit records by outcome: written, failed (the database refused the record or was down), "
        "dropped (the queue was full).",
        labels=["outcome"],
    )
    records.add_metric(["written"], stats.written)
    records.add_metric(["failed"], stats.failed)
    records.add_metric(["dropped"], stats.dropped)
    yield records
    yield GaugeMetricFamily(
        "switchyard_audit_queue_pending",
        "Audit records waiting to be written.",
        value=stats.pending,
    )


async def exposition(runtime: Runtime) -> bytes:
    """The whole ``/metrics`` text: the process counters, then the scrape-time values."""
    from routing.observability.status import status_read

    status = await status_read(runtime)
    health = {
        t.key: (HealthState(t.state), t.remaining_cooldown_s)
        for g in status.groups
        for t in g.targets
    }
    scraped = CollectorRegistry(auto_describe=False)
    scraped.register(_ScrapeCollector(health, runtime.calls_open, runtime.keyless))
    return generate_latest(REGISTRY) + generate_latest(scraped)
