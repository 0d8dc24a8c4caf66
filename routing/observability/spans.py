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
by one walk over the call (``CallTrace._each``) that hands each span's fields to a
:class:`SpanMaker`: written straight into the OTLP request's bytes
(``routing.observability.otlp_wire.SpanEncoder.call_span``, no object per span), or made
the SDK's ``ReadableSpan`` for any other exporter (gRPC). Building ``ReadableSpan``s at
the call's end cost the request path about as much as the rest of tracing together;
through ``Tracer.start_span``, twice that again (the SDK's generic attribute checks).
Ending the spans at the call's end is needed anyway: a failed attempt learns only later
whether the call retried or switched after it, and a streamed answer's attempt lasts
until the stream ends. ``tests/observability/
test_tracing.py`` decodes what the exporter sent with ``opentelemetry-proto``, and
``test_otlp_wire.py`` holds the written bytes to the SDK's encoding of the same spans.

What becomes an attribute is chosen here and nowhere else: names, models, codes, counts
and times, all of types OTLP carries as they are. Never a credential, a prompt, a
completion, a tool argument or an upstream's error text (which may quote the prompt).
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from random import getrandbits
from typing import TYPE_CHECKING, Any, Protocol, TypeVar
from urllib.parse import urlsplit

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_OFF,
    ALWAYS_ON,
    DEFAULT_OFF,
    DEFAULT_ON,
    Decision,
    ParentBasedTraceIdRatio,
    Sampler,
    TraceIdRatioBased,
)
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags, TraceState
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from routing.observability.otlp_wire import (
    FixedAttributes,
    SpanAttributes,
    SpanEncoder,
    WireSpanExporter,
)
from routing.protocols.registry import VENDORS

if TYPE_CHECKING:
    from routing.gateway.events import AttemptRecord, CallRecord
    from routing.gateway.table import TargetSpec

log = logging.getLogger("switchyard.tracing")

SERVICE_NAME = "switchyard"
HTTP_PROTOBUF, GRPC = "http/protobuf", "grpc"
# gen_ai.provider.name by upstream kind (the GenAI conventions' well-known values)
PROVIDER_NAMES = VENDORS  # routing.protocols.registry
# A call that did not reach its client whole. ABORTED (the client left) is not an error.
ERROR_OUTCOMES = frozenset({"failed", "refused"})
MODEL_MAX = 256  # a client's model string, capped (in the span name and its attribute)
SAMPLED = TraceFlags(TraceFlags.SAMPLED)
NOT_SAMPLED = TraceFlags(TraceFlags.DEFAULT)
OK_STATUS, UNSET_STATUS = Status(StatusCode.OK), Status(StatusCode.UNSET)
NO_STATE = TraceState()
FIRST_TOKEN = "gen_ai.first_token"  # the answering attempt's event at its first content
T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class SpanMaker(Protocol[T_co]):
    """What a call's spans are made into, one call per span (``CallTrace._each``):
    ``SpanEncoder.call_span``'s bytes, or a ``ReadableSpan``. ``parent_id`` is None for
    a root span; ``remote``, that a parent is the client's (from its ``traceparent``);
    ``fixed`` the attributes shared with other spans (or None) and ``own`` the span's
    own; ``marks`` its events, each a name and a time, without attributes."""

    def __call__(
        self,
        span_id: int,
        parent_id: int | None,
        remote: bool,
        name: str,
        kind: SpanKind,
        start: int,
        end: int,
        fixed: FixedAttributes | None,
        own: dict[str, Any],
        marks: Sequence[tuple[str, int]],
        status: Status,
    ) -> T_co: ...


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
            fixed = FixedAttributes(
                {
                    "gen_ai.operation.name": operation,
                    "gen_ai.request.model": requested_model[:MODEL_MAX],
                    "switchyard.door": door,
                    "switchyard.group": group,
                    "switchyard.key.name": key_name,
                    "switchyard.commit_point": commit,
                    **({"switchyard.stream": True} if stream else {}),
                }
            )
            if len(self._fixed) >= 4096:  # clients choose the model string: stay bounded
                self._fixed.clear()
            name = f"{operation} {fixed['gen_ai.request.model']}"
            found = self._fixed[shared] = (fixed, name)
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


class HashedResource(Resource):
    """A ``Resource`` that hashes once: the OTLP encoder groups spans by resource, hashing
    each span's (a JSON dump of every attribute) — a fifth of the encoding of a call's
    spans, for a value that never changes. Immutable like its base."""

    def __init__(self, resource: Resource) -> None:
        super().__init__(resource.attributes, resource.schema_url)
        self._hash = super().__hash__()

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return super().__eq__(other)


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

    def _readable(
        self,
        span_id: int,
        parent_id: int | None,
        remote: bool,
        name: str,
        kind: SpanKind,
        start: int,
        end: int,
        fixed: FixedAttributes | None,
        own: dict[str, Any],
        marks: Sequence[tuple[str, int]],
        status: Status,
    ) -> ReadableSpan:
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
        outcome, own = _call_attributes(fixed, self._request_id, record, served)
        error = record.outcome in ERROR_OUTCOMES  # a StrEnum: no .value needed to compare
        out.append(
            span(
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
                _error(record.error_code or str(record.outcome)) if error else UNSET_STATUS,
            )
        )
        return out

    def _refused(self, span: SpanMaker[T], record: CallRecord, parent_id: int | None) -> T:
        code = record.error_code or record.outcome.value
        operation = "embeddings" if record.endpoint == "embeddings" else "chat"
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": operation,
            "switchyard.door": record.door,
            "switchyard.request_id": record.call_id,
            "switchyard.outcome": record.outcome.value,
            "error.type": code,
            "http.response.status_code": record.http_status,
        }
        if record.key_name:
            attributes["switchyard.key.name"] = record.key_name
        if record.group:
            attributes["switchyard.group"] = record.group
        return span(
            self._span_id,
            parent_id,
            True,
            operation,
            SpanKind.SERVER,
            self._started_ns,
            self._ended_ns,
            None,
            attributes,
            (),
            _error(code),
        )


def _new_id(bits: int) -> int:
    """A random id of ``bits`` bits that is not 0 (the invalid id), drawn again: what the
    SDK's ``RandomIdGenerator`` does, which a call's ids skip for a plain
    ``getrandbits``; this runs only when that drew 0."""
    while True:
        value = getrandbits(bits)
        if value:
            return value


_errors: dict[str, Status] = {}


def _error(code: str) -> Status:
    """An error status described by ``code`` (a failure or error code: a few dozen)."""
    status = _errors.get(code)
    if status is None:
        if len(_errors) >= 1024:
            _errors.clear()
        status = _errors[code] = Status(StatusCode.ERROR, code)
    return status


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
    fixed, name = _target_attributes(operation, target)
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
            lambda: _attempt_outcome(target, outcome),
        )  # fmt: skip
        if result.ok:
            if attempt.ttft_s is not None:
                own["switchyard.ttft_ms"] = round(attempt.ttft_s * 1000, 3)
                marks = ((FIRST_TOKEN, attempt.started_ns + int(attempt.ttft_s * 1e9)),)
        else:
            status = _error(result.code or "UNKNOWN")
    return span(
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


def _attempt_outcome(target: TargetSpec, result: AttemptRecord) -> dict[str, Any]:
    """What an attempt's span says of how it went, beyond its time to first token: only
    what is not the usual (each attribute costs encoding time)."""
    attributes: dict[str, Any] = {}
    if result.try_number > 1:
        attributes["switchyard.try"] = result.try_number
    if result.probe:
        attributes["switchyard.probe"] = True
    if result.rewrites:
        attributes["switchyard.rewrites"] = list(result.rewrites)
    if result.ok:
        attributes["gen_ai.response.model"] = target.model
        return attributes
    attributes["error.type"] = result.code or "UNKNOWN"  # the failure code (SPEC §2)
    if result.status is not None:
        attributes["http.response.status_code"] = result.status
    if result.will_retry:
        attributes["switchyard.retry"] = True
    if result.switched:
        if result.reason:
            attributes["switchyard.switch.reason"] = str(result.reason)
        if result.switched_to:
            attributes["switchyard.switched_to"] = result.switched_to
    return attributes


_static: dict[tuple[str, str, str, str], tuple[FixedAttributes, str]] = {}


def _target_attributes(operation: str, target: TargetSpec) -> tuple[FixedAttributes, str]:
    """The attributes an attempt on ``target`` always has, and its span's name (computed
    once per target)."""
    provider = target.provider
    key = (operation, target.key, provider.kind, provider.base_url)
    found = _static.get(key)
    if found is not None:
        return found
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": operation,
        "gen_ai.provider.name": PROVIDER_NAMES.get(provider.kind, provider.kind),
        "gen_ai.request.model": target.model,
        "switchyard.target": target.key,
        "switchyard.provider.kind": provider.kind,
    }
    address = urlsplit(provider.base_url)
    if address.hostname:  # never the URL itself: it may carry a user or a query key
        attributes["server.address"] = address.hostname
        port = _port(address.port, address.scheme)
        if port:
            attributes["server.port"] = port
    if len(_static) >= 4096:  # clients may address provider/<any model>: stay bounded
        _static.clear()
    found = _static[key] = (FixedAttributes(attributes), f"{operation} {target.model}")
    return found


def _call_attributes(
    fixed: FixedAttributes, request_id: str, record: CallRecord, served: _Attempt | None
) -> tuple[FixedAttributes, dict[str, Any]]:
    """The call's span's attributes: ``fixed`` (door, group, key…) joined with how the
    call went (which repeats from call to call), then what is the call's own."""
    answered = served.target if served is not None else None
    outcome = fixed.joined(
        (
            record.outcome, len(record.attempts), record.http_status, record.served_by,
            record.served_by_fallback, record.error_code,
            None if answered is None else (answered.model, answered.provider.kind),
        ),
        lambda: _call_outcome(record, answered),
    )  # fmt: skip
    own: dict[str, Any] = {"switchyard.request_id": request_id}
    if record.ttft_ms is not None:
        own["switchyard.ttft_ms"] = round(record.ttft_ms, 3)
    if record.usage:
        own.update(_usage(record.usage))
    if record.cost is not None:
        own["switchyard.cost"] = float(record.cost)
    return outcome, own


def _call_outcome(record: CallRecord, answered: TargetSpec | None) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "switchyard.outcome": record.outcome.value,
        "switchyard.attempts": len(record.attempts),
        "http.response.status_code": record.http_status,
    }
    if record.served_by:
        attributes["switchyard.served_by"] = record.served_by
        if record.served_by_fallback:
            attributes["switchyard.served_by_fallback"] = True
    if answered is not None:
        attributes["gen_ai.response.model"] = answered.model
        kind = answered.provider.kind
        attributes["gen_ai.provider.name"] = PROVIDER_NAMES.get(kind, kind)
    if record.error_code:
        attributes["error.type"] = record.error_code
    return attributes


def _usage(usage: Mapping[str, Any] | None) -> dict[str, int]:
    """The GenAI token counts of a usage object (chat's names or the Messages and
    Responses ones)."""
    if not usage:
        return {}
    out: dict[str, int] = {}
    get = usage.get
    for name, chat, other in _USAGE_KEYS:
        value = get(chat)
        if type(value) is not int or not 0 <= value < INT64:  # a bool is not a count
            value = get(other)
            if type(value) is not int or not 0 <= value < INT64:
                continue
        out[name] = value
    return out


INT64 = 1 << 63  # an OTLP int attribute is an int64: a count beyond it is not sent
# Each GenAI count, chat's key for it, then the Messages and Responses one
_USAGE_KEYS = (
    ("gen_ai.usage.input_tokens", "prompt_tokens", "input_tokens"),
    ("gen_ai.usage.output_tokens", "completion_tokens", "output_tokens"),
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


class CallExporter(SpanExporter):
    """What the batch processor exports through: the ended calls it was handed, their
    spans made here on its thread (written straight into the request by the OTLP/HTTP
    exporter, as ``ReadableSpan``s for any other), through the OTLP exporter ``inner``.
    It says once that the collector stopped answering (and once that it answers again)
    instead of a line per failed batch; the exporter's own lines, which repeat per batch
    and retry, are held back (the latest is quoted in ours)."""

    def __init__(self, inner: SpanExporter, endpoint: str, resource: Resource) -> None:
        self.inner = inner
        self.endpoint = endpoint
        self.resource = resource
        self.failing = False
        self._lock = threading.Lock()
        self._quiet = _Quiet()
        self._logger = logging.getLogger(_official_module(inner))
        self._logger.addFilter(self._quiet)

    def export(self, calls: Sequence[CallTrace]) -> SpanExportResult:  # type: ignore[override]
        inner = self.inner
        try:
            if isinstance(inner, WireSpanExporter):
                result = inner.export_written(
                    self.resource, SCOPE, lambda encoder: _written(calls, encoder)
                )
            else:
                result = inner.export([span for call in calls for span in call.spans()])
        except Exception as exc:  # noqa: BLE001 - an exporter must not kill the worker
            self._quiet.last = repr(exc)
            result = SpanExportResult.FAILURE
        with self._lock:
            if result is SpanExportResult.SUCCESS:
                if self.failing:
                    self.failing = False
                    log.warning("trace export to %s works again", _where(self.endpoint))
            elif not self.failing:
                self.failing = True
                log.warning(
                    "trace export to %s failed (%s); spans are dropped until the collector "
                    "answers (said once, not per call; calls are not affected)",
                    _where(self.endpoint),
                    self._quiet.last or "no detail",
                )
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()
        self._logger.removeFilter(self._quiet)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


def _written(calls: Sequence[CallTrace], encoder: SpanEncoder) -> list[bytes]:
    out: list[bytes] = []
    for call in calls:
        out += call.written(encoder)
    return out


def _official_module(exporter: SpanExporter) -> str:
    """The module of the official exporter class ``exporter`` is or extends (its logger
    is where the per-batch lines come from)."""
    for cls in type(exporter).__mro__:
        if cls.__module__.startswith("opentelemetry.exporter."):
            return cls.__module__
    return type(exporter).__module__


class _Quiet(logging.Filter):
    """Drops the OTLP exporter's per-batch lines, keeping the latest for our one line."""

    def __init__(self) -> None:
        super().__init__()
        self.last = ""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.WARNING:
            self.last = record.getMessage()[:300]
            return False
        return True


def _sampler(env: Mapping[str, str]) -> Sampler:
    name = env.get("OTEL_TRACES_SAMPLER", "").strip().lower() or "parentbased_always_on"
    fixed: dict[str, Sampler] = {
        "always_on": ALWAYS_ON,
        "always_off": ALWAYS_OFF,
        "parentbased_always_on": DEFAULT_ON,
        "parentbased_always_off": DEFAULT_OFF,
    }
    if name in fixed:
        return fixed[name]
    if name in ("traceidratio", "parentbased_traceidratio"):
        try:
            rate = float(env.get("OTEL_TRACES_SAMPLER_ARG", "1.0"))
        except ValueError:
            rate = 1.0
        rate = min(max(rate, 0.0), 1.0)
        return TraceIdRatioBased(rate) if name == "traceidratio" else ParentBasedTraceIdRatio(rate)
    log.warning("OTEL_TRACES_SAMPLER=%s is not known: using parentbased_always_on", name)
    return DEFAULT_ON


def _pairs(text: str | None) -> dict[str, str]:
    """``k=v,k2=v2`` (``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_EXPORTER_OTLP_HEADERS``),
    percent-decoded; malformed members skipped."""
    from urllib.parse import unquote

    out: dict[str, str] = {}
    for member in (text or "").split(","):
        name, sep, value = member.partition("=")
        if sep and name.strip():
            out[unquote(name.strip())] = unquote(value.strip())
    return out


def _seconds(text: str | None) -> float | None:
    try:
        return float(text) if text else None
    except ValueError:
        return None


def _port(port: int | None, scheme: str) -> int | None:
    return port or {"http": 80, "https": 443}.get(scheme)


def _where(endpoint: str) -> str:
    """An endpoint for a log line: scheme, host and path, never a user or a query."""
    parts = urlsplit(endpoint)
    host = parts.hostname or ""
    return f"{parts.scheme}://{host}{f':{parts.port}' if parts.port else ''}{parts.path}"


def make_tracing(env: Mapping[str, str]) -> Tracing | None:
    """The tracing ``env`` asks for (``routing.observability.tracing.build_tracing`` has
    checked that it asks for any); None when it cannot be had (gRPC without its extra)."""
    signal_endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
    base_endpoint = env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
    protocol = (
        env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or ""
    ).strip().lower() or HTTP_PROTOBUF
    timeout = _seconds(
        env.get("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT") or env.get("OTEL_EXPORTER_OTLP_TIMEOUT")
    )
    headers = _pairs(
        env.get("OTEL_EXPORTER_OTLP_TRACES_HEADERS") or env.get("OTEL_EXPORTER_OTLP_HEADERS")
    )
    exporter: SpanExporter
    if protocol == GRPC:
        try:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (  # type: ignore[import-not-found,unused-ignore]
                OTLPSpanExporter as GrpcExporter,
            )
        except ImportError:
            log.error(
                "tracing is off: OTEL_EXPORTER_OTLP_PROTOCOL=grpc needs the grpc extra "
                "(pip install 'switchyard[grpc]'); http/protobuf needs nothing more"
            )
            return None
        endpoint = signal_endpoint or base_endpoint
        exporter = GrpcExporter(endpoint=endpoint, headers=headers or None, timeout=timeout)
    else:
        if protocol != HTTP_PROTOBUF:  # http/json: a collector takes protobuf on the same path
            log.warning("OTEL_EXPORTER_OTLP_PROTOCOL=%s: exporting http/protobuf", protocol)
            protocol = HTTP_PROTOBUF
        endpoint = signal_endpoint or f"{base_endpoint.removesuffix('/')}/v1/traces"
        exporter = WireSpanExporter(endpoint=endpoint, headers=headers or None, timeout=timeout)
    resource = Resource.create(
        {
            **_pairs(env.get("OTEL_RESOURCE_ATTRIBUTES")),
            "service.name": env.get("OTEL_SERVICE_NAME", "").strip() or SERVICE_NAME,
        }
    )
    resource = HashedResource(resource)
    processor = BatchSpanProcessor(CallExporter(exporter, endpoint, resource))
    log.info("tracing on: OTLP %s to %s", protocol, _where(endpoint))
    return Tracing(processor, _sampler(env), resource)
