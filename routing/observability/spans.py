"""The OpenTelemetry side of tracing (SPEC §18, docs/tracing.md): imported only when
tracing is on (``routing.observability.tracing.build_tracing``), so a gateway without it
never loads the SDK. The runtime owns one :class:`Tracing` (a processor, exporter, sampler
and resource of its own, never the SDK's global provider, so a test can build another
from an environment of its own) and each ``Call`` one :class:`CallTrace`.

A call is one trace::

    SERVER  chat <model the client asked>        the call, from the ASGI entry to its end
      ├─ CLIENT  chat <concrete model>           attempt 1 (its own traceparent upstream)
      └─ CLIENT  chat <concrete model>           attempt 2 ...

**Record now, build on the export thread.** On the request path a call only draws ids,
reads the clock and formats each attempt's ``traceparent`` (the attempt's span id, sent
upstream before the span exists); when it finishes, the finished ``CallTrace`` itself is
handed to the ``BatchSpanProcessor`` — one item per call, whatever its attempts. Its spans
are made on the processor's export thread, with those ids and real start and end times,
by one walk over the call (``CallTrace._each``) that hands each span's fields, one
``SpanFields`` value, to a :class:`SpanMaker`: written straight into the OTLP request's
bytes (``routing.observability.otlp_wire.SpanEncoder.call_span``), or made the SDK's
``ReadableSpan`` for any other exporter (gRPC). Building ``ReadableSpan``s at
the call's end cost the request path about as much as the rest of tracing together;
through ``Tracer.start_span``, twice that again (the SDK's generic attribute checks).
Ending the spans at the call's end is needed anyway: a failed attempt learns only later
whether the call retried or switched after it, and a streamed answer's attempt lasts
until the stream ends. ``tests/observability/
test_tracing.py`` decodes what the exporter sent with ``opentelemetry-proto``, and
``test_otlp_wire.py`` holds the written bytes to the SDK's encoding of the same spans.

What the spans say is chosen in ``routing.observability.span_attributes``; where they
go (the exporter, the sampler, the resource, from ``OTEL_*``), in
``routing.observability.span_export``.
"""

from __future__ import annotations

import atexit
import time
from collections.abc import Callable, Mapping
from functools import partial
from random import getrandbits
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.sampling import ALWAYS_ON, DEFAULT_ON, Decision, Sampler
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags, TraceState
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from routing.observability.otlp_wire import (
    FixedAttributes,
    SpanAttributes,
    SpanEncoder,
    SpanFields,
)
from routing.observability.span_attributes import (
    attempt_outcome,
    call_attributes,
    call_fixed,
    error_status,
    refused_attributes,
    target_attributes,
)

if TYPE_CHECKING:
    from routing.gateway.events import AttemptRecord, CallRecord
    from routing.gateway.table import TargetSpec

# A call that did not reach its client whole. ABORTED (the client left) is not an error.
ERROR_OUTCOMES = frozenset({"failed", "refused"})
SAMPLED = TraceFlags(TraceFlags.SAMPLED)
NOT_SAMPLED = TraceFlags(TraceFlags.DEFAULT)
OK_STATUS, UNSET_STATUS = Status(StatusCode.OK), Status(StatusCode.UNSET)
NO_STATE = TraceState()
FIRST_TOKEN = "gen_ai.first_token"  # the answering attempt's event at its first content
T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class SpanMaker(Protocol[T_co]):
    """What a call's spans are made into, one call per span (``CallTrace._each``), from
    its ``SpanFields``: ``SpanEncoder.call_span``'s bytes, or a ``ReadableSpan``."""

    def __call__(self, fields: SpanFields, /) -> T_co: ...


class _Queued:
    """What the batch processor reads of an item handed to it (``on_end`` drops an item
    whose ``context.trace_flags`` is not sampled): a call is handed over only when it is."""

    __slots__ = ()
    trace_flags = SAMPLED


QUEUED = _Queued()
SCOPE = InstrumentationScope("switchyard")

_propagator = TraceContextTextMapPropagator()


class Tracing:
    """One gateway's tracing: the sampler, resource and batch processor every call's
    spans go through."""

    def __init__(self, processor: BatchSpanProcessor, sampler: Sampler, resource: Resource) -> None:
        self.processor = processor
        self.hand_over = _hand_over(processor)
        self.sampler = sampler
        self.resource = resource
        self.scope = SCOPE
        # A new trace is always sampled: no sampler call for a call without a traceparent
        self.roots_sampled = sampler is ALWAYS_ON or sampler is DEFAULT_ON
        # A call's attributes that repeat from call to call, and its span's name
        self._fixed: dict[tuple[Any, ...], tuple[FixedAttributes, str]] = {}
        self._closed = False
        atexit.register(self.shutdown)  # export what is queued when the process ends

    def start_call(
        self,
        *,
        headers: Mapping[str, str] | None,
        started_ns: int,
        door: str,
        endpoint: str | None,
        requested_model: str,
        group: str,
        key_name: str,
        request_id: str,
        stream: bool,
        commit: str,
    ) -> CallTrace:
        operation = "embeddings" if endpoint == "embeddings" else "chat"
        shared = (operation, requested_model, door, group, key_name, commit, stream)
        found = self._fixed.get(shared)
        if found is None:
            if len(self._fixed) >= 4096:  # clients choose the model string: stay bounded
                self._fixed.clear()
            found = self._fixed[shared] = call_fixed(*shared)
        return CallTrace(self, headers, started_ns, found, request_id)

    def refused(
        self, headers: Mapping[str, str] | None, started_ns: int, record: CallRecord
    ) -> str:
        """A request a door turned away before a call existed (bad key, bad body, unknown
        model, nothing can take it): one SERVER span with status error, continuing the
        client's ``traceparent``; the trace id for its ledger row ("" when not sampled).
        Its reason is the refusal's code, never its message (which may quote the
        request)."""
        call = CallTrace(self, headers, started_ns, None, record.call_id)
        call.refused(record)
        return call.trace_id

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Export every span handed over so far (tests; shutdown does it at exit)."""
        return self.processor.force_flush(timeout_millis)

    def shutdown(self) -> None:
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self.shutdown)
        self.processor.shutdown()  # type: ignore[no-untyped-call]


def _hand_over(processor: BatchSpanProcessor) -> Callable[[CallTrace], None]:
    """How an ended, sampled call reaches ``processor``'s queue: its batch processor's
    ``emit`` (what ``on_end`` calls after checking that the span is sampled, which a call
    handed over always is: three Python calls fewer per call), or ``on_end`` itself if
    the SDK has no such part."""
    inner = getattr(processor, "_batch_processor", None)
    emit = getattr(inner, "emit", None)
    return emit if callable(emit) else processor.on_end  # type: ignore[return-value]


class _Attempt:
    """What an upstream attempt's span is built from."""

    __slots__ = ("span_id", "started_ns", "ended_ns", "target", "record", "ttft_s")

    def __init__(self, span_id: int, started_ns: int, target: TargetSpec) -> None:
        self.span_id, self.started_ns, self.target = span_id, started_ns, target
        self.ended_ns = 0
        self.record: AttemptRecord | None = None
        self.ttft_s: float | None = None


class CallTrace:
    """One call's trace. The hooks in ``routing.gateway.call``: ``attempt_started`` (the
    headers to send, with this attempt's ``traceparent``), ``attempt_ended`` (its record),
    ``committed`` (the answering attempt's time to first token) and ``finish``."""

    __slots__ = (
        "_tracing",
        "_started_ns",
        "_fixed",
        "_request_id",
        "_trace_id",
        "_trace",
        "_span_id",
        "_parent",
        "_flags",
        "_state",
        "_sampled",
        "_header",
        "_flag",
        "trace_id",
        "_state_header",
        "_attempts",
        "_open",
        "_record",
        "_ended_ns",
    )

    def __init__(
        self,
        tracing: Tracing,
        headers: Mapping[str, str] | None,
        started_ns: int,
        fixed: tuple[FixedAttributes, str] | None,
        request_id: str,
    ) -> None:
        """``fixed``: the call's attributes that repeat from call to call, and its span's
        name (None: a request refused before it was a call)."""
        self._tracing = tracing
        self._started_ns = started_ns
        self._fixed = fixed
        self._request_id = request_id
        self._attempts: list[_Attempt] = []
        self._open: _Attempt | None = None
        self._record: CallRecord | None = None  # set when the call ended (or was refused)
        self._ended_ns = 0
        self._span_id = getrandbits(64) or _new_id(64)
        # What every attempt's traceparent and tracestate headers carry, made once
        self._state_header: str | None = None
        context = _incoming(headers) if headers else None
        if context is None and tracing.roots_sampled:
            self._parent: SpanContext | None = None
            self._trace_id = getrandbits(128) or _new_id(128)
            self._flags, self._state, self._sampled = SAMPLED, NO_STATE, True
        else:
            parent = trace.get_current_span(context).get_span_context() if context else None
            self._parent = parent
            self._trace_id = parent.trace_id if parent else getrandbits(128) or _new_id(128)
            decision = tracing.sampler.should_sample(
                context, self._trace_id, "", SpanKind.SERVER, None, None, None
            )
            self._sampled = decision.decision is Decision.RECORD_AND_SAMPLE
            self._flags = SAMPLED if self._sampled else NOT_SAMPLED
            self._state = decision.trace_state or NO_STATE
            if self._state:
                self._state_header = self._state.to_header()
        self._trace = self._trace_id.to_bytes(16, "big")
        hex_id = self._trace.hex()
        self._header = f"00-{hex_id}-"
        self._flag = "-01" if self._sampled else "-00"
        # The trace's id (32 hex digits) when it is sampled, else "" (nothing to find)
        self.trace_id = hex_id if self._sampled else ""

    @property
    def sampled(self) -> bool:
        return self._sampled

    def attempt_started(
        self, target: TargetSpec, try_number: int, probe: bool, headers: Mapping[str, str] | None
    ) -> dict[str, str]:
        """Note the attempt's start; ``headers`` plus its ``traceparent`` (and the
        trace's ``tracestate``), for the upstream request."""
        span_id = getrandbits(64) or _new_id(64)
        attempt = _Attempt(span_id, time.time_ns(), target)
        self._open = attempt
        self._attempts.append(attempt)
        out = dict(headers) if headers else {}
        out["traceparent"] = self._header + span_id.to_bytes(8, "big").hex() + self._flag
        if self._state_header:
            out["tracestate"] = self._state_header
        return out

    def attempt_ended(self, target: TargetSpec, record: AttemptRecord) -> None:
        """The attempt's outcome is recorded. An attempt never sent (a target's
        configuration error) gets a span of no length."""
        attempt = self._open
        if attempt is None:
            attempt = _Attempt(getrandbits(64) or _new_id(64), time.time_ns(), target)
            self._attempts.append(attempt)
        attempt.record, attempt.ended_ns = record, time.time_ns()
        self._open = None

    def committed(self, ttft_s: float | None) -> None:
        """The answering attempt reached the commit point after ``ttft_s`` (send → first
        content; for a JSON answer, the whole answer)."""
        if self._attempts:
            self._attempts[-1].ttft_s = ttft_s

    def finish(self, record: CallRecord) -> None:
        """The call ended with ``record``: hand it to the batch processor, whose export
        thread builds its spans (nothing when the trace is not sampled)."""
        if not self._sampled:
            return
        self._record, self._ended_ns = record, time.time_ns()
        self._tracing.hand_over(self)

    def refused(self, record: CallRecord) -> None:
        """A request refused before a call existed (``Tracing.refused``): one span."""
        if not self._sampled:
            return
        self._record, self._ended_ns = record, max(time.time_ns(), self._started_ns)
        self._tracing.hand_over(self)

    @property
    def context(self) -> _Queued:
        """What the batch processor reads of the call it is handed (always sampled)."""
        return QUEUED

    # ------------------------------------------------------------- on the export thread
    def written(self, encoder: SpanEncoder) -> list[bytes]:
        """The ended call's spans as the OTLP request's bytes (each attempt's, then the
        call's, or the one span of a refused request), written by ``encoder``."""
        state = b"" if self._state is NO_STATE else encoder.trace_state(self._state)
        return self._each(partial(encoder.call_span, self._trace, state))

    def spans(self) -> list[ReadableSpan]:
        """The same spans as the SDK's ``ReadableSpan`` (for an exporter of its own)."""
        return self._each(self._readable)

    def _readable(self, fields: SpanFields) -> ReadableSpan:
        span_id, parent_id, remote, name, kind, start, end, fixed, own, marks, status = fields
        context = SpanContext(self._trace_id, span_id, False, self._flags, self._state)
        if parent_id is None:
            parent = None
        elif remote:
            parent = self._parent
        else:
            parent = SpanContext(self._trace_id, parent_id, False, self._flags, self._state)
        return ReadableSpan(
            name=name,
            context=context,
            parent=parent,
            resource=self._tracing.resource,
            attributes=own if fixed is None else SpanAttributes(fixed, own),
            events=[Event(mark, None, at) for mark, at in marks],
            kind=kind,
            status=status,
            start_time=start,
            end_time=end,
            instrumentation_scope=self._tracing.scope,
        )

    def _each(self, span: SpanMaker[T]) -> list[T]:
        """``span(...)`` of each of the ended call's spans (``SpanMaker``): each
        attempt's, then the call's (or the one span of a refused request)."""
        record = self._record
        assert record is not None  # handed over only once ended
        parent = self._parent
        parent_id = None if parent is None else parent.span_id
        if self._fixed is None:
            return [self._refused(span, record, parent_id)]
        fixed, name = self._fixed
        out: list[T] = []
        served: _Attempt | None = None
        call_id, ended = self._span_id, self._ended_ns
        for attempt in self._attempts:
            if attempt.record is not None and attempt.record.ok:
                served = attempt
            stream_end = attempt is served and record.stream
            out.append(_attempt_span(span, call_id, attempt, record, stream_end, ended))
        answered = None if served is None else served.target
        outcome, own = call_attributes(fixed, self._request_id, record, answered)
        error = record.outcome in ERROR_OUTCOMES  # a StrEnum: no .value needed to compare
        out.append(
            span(
                (
                    call_id,
                    parent_id,
                    True,
                    name,
                    SpanKind.SERVER,
                    self._started_ns,
                    ended,
                    outcome,
                    own,
                    (),
                    error_status(record.error_code or str(record.outcome))
                    if error
                    else UNSET_STATUS,
                )
            )
        )
        return out

    def _refused(self, span: SpanMaker[T], record: CallRecord, parent_id: int | None) -> T:
        code = record.error_code or record.outcome.value
        operation = "embeddings" if record.endpoint == "embeddings" else "chat"
        return span(
            (
                self._span_id,
                parent_id,
                True,
                operation,
                SpanKind.SERVER,
                self._started_ns,
                self._ended_ns,
                None,
                refused_attributes(record, operation, code),
                (),
                error_status(code),
            )
        )


def _new_id(bits: int) -> int:
    """A random id of ``bits`` bits that is not 0 (the invalid id), drawn again: what the
    SDK's ``RandomIdGenerator`` does, which a call's ids skip for a plain
    ``getrandbits``; this runs only when that drew 0."""
    while True:
        value = getrandbits(bits)
        if value:
            return value


def _attempt_span(
    span: SpanMaker[T],
    call_id: int,
    attempt: _Attempt,
    record: CallRecord,
    stream_end: bool,
    now: int,
) -> T:
    target, result = attempt.target, attempt.record
    operation = "embeddings" if record.endpoint == "embeddings" else "chat"
    fixed, name = target_attributes(operation, target)
    own: dict[str, Any] = {}
    marks: tuple[tuple[str, int], ...] = ()
    status = UNSET_STATUS
    if result is None:  # cancelled with the call before its record
        result_end = now
    else:
        result_end = now if stream_end else attempt.ended_ns
        outcome = result  # bound for the closure below
        fixed = fixed.joined(
            (
                result.try_number, result.probe, result.rewrites, result.ok, result.code,
                result.status, result.will_retry, result.switched, result.reason,
                result.switched_to,
            ),
            lambda: attempt_outcome(target, outcome),
        )  # fmt: skip
        if result.ok:
            if attempt.ttft_s is not None:
                own["switchyard.ttft_ms"] = round(attempt.ttft_s * 1000, 3)
                marks = ((FIRST_TOKEN, attempt.started_ns + int(attempt.ttft_s * 1e9)),)
        else:
            status = error_status(result.code or "UNKNOWN")
    return span(
        (
            attempt.span_id,
            call_id,
            False,
            name,
            SpanKind.CLIENT,
            attempt.started_ns,
            max(result_end, attempt.started_ns),
            fixed,
            own,
            marks,
            status,
        )
    )


def _incoming(headers: Mapping[str, str] | None) -> Context | None:
    """The client's W3C trace context to continue; None (a new trace) when it sent none
    or one that does not parse: a malformed ``traceparent`` is never the client's error."""
    if headers is None:
        return None
    parent = headers.get("traceparent")
    if not parent:
        return None
    carrier = {"traceparent": parent}
    state = headers.get("tracestate")
    if state:
        carrier["tracestate"] = state
    context = _propagator.extract(carrier)
    if not trace.get_current_span(context).get_span_context().is_valid:
        return None
    return context
