"""The OpenTelemetry side of tracing (SPEC §18, docs/tracing.md): imported only when
tracing is on (``routing.observability.tracing.build_tracing``), so a gateway without it
never loads the SDK. The runtime owns one :class:`Tracing` (its own ``TracerProvider``,
never the SDK's global one, so a test can build another from an environment of its own)
and each ``Call`` one :class:`CallTrace`.

A call is one trace::

    SERVER  chat <model the client asked>        the call, from the ASGI entry to its end
      ├─ CLIENT  chat <concrete model>           attempt 1 (its own traceparent upstream)
      └─ CLIENT  chat <concrete model>           attempt 2 ...

Spans are created when the call and each attempt begin (real start times, and the
attempt's span context is the ``traceparent`` sent upstream), and ended when the call
finishes: a failed attempt learns only later whether the call retried or switched after
it, and a streamed answer's attempt lasts until the stream ends. Ending a span only
queues it: the ``BatchSpanProcessor`` encodes and sends on its own thread.

What becomes an attribute is chosen here and nowhere else: names, models, codes, counts
and times. Never a credential, a prompt, a completion, a tool argument or an upstream's
error text (which may quote the prompt); ``tests/observability/test_tracing.py`` holds it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_OFF,
    ALWAYS_ON,
    DEFAULT_OFF,
    DEFAULT_ON,
    ParentBasedTraceIdRatio,
    Sampler,
    TraceIdRatioBased,
)
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

if TYPE_CHECKING:
    from routing.gateway.events import AttemptRecord, CallRecord
    from routing.gateway.table import TargetSpec

log = logging.getLogger("switchyard.tracing")

SERVICE_NAME = "switchyard"
HTTP_PROTOBUF, GRPC = "http/protobuf", "grpc"
# gen_ai.provider.name by upstream kind (the GenAI conventions' well-known values)
PROVIDER_NAMES = {"openai": "openai", "openai-responses": "openai", "anthropic": "anthropic"}
# A call that did not reach its client whole. ABORTED (the client left) is not an error.
ERROR_OUTCOMES = frozenset({"failed", "refused"})
MODEL_IN_NAME_MAX = 100  # a client's model string in a span name, capped

_propagator = TraceContextTextMapPropagator()


class Tracing:
    """One gateway's tracer: its provider, and the factory of each call's trace."""

    def __init__(self, provider: TracerProvider) -> None:
        self.provider = provider
        self.tracer = provider.get_tracer("switchyard")

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
        return CallTrace(
            self.tracer,
            headers=headers,
            started_ns=started_ns,
            door=door,
            operation="embeddings" if endpoint == "embeddings" else "chat",
            requested_model=requested_model,
            group=group,
            key_name=key_name,
            request_id=request_id,
            stream=stream,
            commit=commit,
        )

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Export everything ended so far (tests; the SDK also flushes at exit)."""
        return self.provider.force_flush(timeout_millis)

    def shutdown(self) -> None:
        self.provider.shutdown()


class _Attempt:
    """An upstream attempt's span, and what its end needs."""

    __slots__ = ("span", "started_ns", "model", "kind", "record", "ended_ns", "ttft_s")

    def __init__(self, span: Span, started_ns: int, model: str, kind: str) -> None:
        self.span, self.started_ns, self.model, self.kind = span, started_ns, model, kind
        self.record: AttemptRecord | None = None
        self.ended_ns = 0
        self.ttft_s: float | None = None


class CallTrace:
    """One call's spans. The hooks in ``routing.gateway.call``: ``attempt_started`` (the
    headers to send, with this attempt's ``traceparent``), ``attempt_ended`` (its record),
    ``committed`` (the answering attempt's time to first token) and ``finish``."""

    __slots__ = ("_tracer", "_span", "_parent", "_attempts", "_open", "_operation", "_stream")

    def __init__(
        self,
        tracer: trace.Tracer,
        *,
        headers: Mapping[str, str] | None,
        started_ns: int,
        door: str,
        operation: str,
        requested_model: str,
        group: str,
        key_name: str,
        request_id: str,
        stream: bool,
        commit: str,
    ) -> None:
        self._tracer = tracer
        self._operation = operation
        self._stream = stream
        self._attempts: list[_Attempt] = []
        self._open: _Attempt | None = None
        self._span = tracer.start_span(
            f"{operation} {requested_model[:MODEL_IN_NAME_MAX]}",
            context=_incoming(headers),
            kind=SpanKind.SERVER,
            start_time=started_ns,
            attributes={
                "gen_ai.operation.name": operation,
                "gen_ai.request.model": requested_model,
                "switchyard.door": door,
                "switchyard.group": group,
                "switchyard.key.name": key_name,
                "switchyard.request_id": request_id,
                "switchyard.stream": stream,
                "switchyard.commit_point": commit,
            },
        )
        self._parent = trace.set_span_in_context(self._span)

    @property
    def trace_id(self) -> str:
        """The trace's id (32 hex digits) when it is sampled, else "" (nothing to find)."""
        context = self._span.get_span_context()
        return format(context.trace_id, "032x") if context.trace_flags.sampled else ""

    def attempt_started(
        self, target: TargetSpec, try_number: int, probe: bool, headers: Mapping[str, str] | None
    ) -> dict[str, str]:
        """Open the attempt's span; ``headers`` plus its ``traceparent`` (and the incoming
        ``tracestate``), for the upstream request."""
        provider = target.provider
        address = urlsplit(provider.base_url)
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": self._operation,
            "gen_ai.provider.name": PROVIDER_NAMES.get(provider.kind, provider.kind),
            "gen_ai.request.model": target.model,
            "switchyard.target": target.key,
            "switchyard.provider": provider.name,
            "switchyard.provider.kind": provider.kind,
            "switchyard.try": try_number,
            "switchyard.probe": probe,
        }
        if address.hostname:  # never the URL itself: it may carry a user or a query key
            attributes["server.address"] = address.hostname
            port = _port(address.port, address.scheme)
            if port:
                attributes["server.port"] = port
        started_ns = time.time_ns()
        span = self._tracer.start_span(
            f"{self._operation} {target.model}",
            context=self._parent,
            kind=SpanKind.CLIENT,
            attributes=attributes,
            start_time=started_ns,
        )
        self._open = attempt = _Attempt(span, started_ns, target.model, provider.kind)
        self._attempts.append(attempt)
        context = span.get_span_context()
        out = dict(headers) if headers else {}
        out["traceparent"] = (
            f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"
        )
        state = context.trace_state.to_header()
        if state:
            out["tracestate"] = state
        return out

    def attempt_ended(self, target: TargetSpec, record: AttemptRecord) -> None:
        """The attempt's outcome is recorded (its span ends with the call: retry and switch
        are decided after it). An attempt never sent (a target's configuration error) gets
        a span of no length."""
        attempt = self._open
        if attempt is None:
            self.attempt_started(target, record.try_number, record.probe, None)
            attempt = self._open
            assert attempt is not None
        attempt.record, attempt.ended_ns = record, time.time_ns()
        self._open = None

    def committed(self, ttft_s: float | None) -> None:
        """The answering attempt reached the commit point after ``ttft_s`` (send → first
        content; for a JSON answer, the whole answer)."""
        if self._attempts:
            self._attempts[-1].ttft_s = ttft_s

    def finish(self, record: CallRecord) -> None:
        """End every attempt's span, then the call's, from the finished record."""
        now = time.time_ns()
        served: _Attempt | None = None
        for attempt in self._attempts:
            if attempt.record is not None and attempt.record.ok:
                served = attempt
            _end_attempt(attempt, record, now if attempt is served and self._stream else None)
        span = self._span
        if span.is_recording():
            span.set_attributes(_call_attributes(record, served))
            if record.outcome.value in ERROR_OUTCOMES:
                span.set_status(Status(StatusCode.ERROR, record.error_code or record.outcome.value))
        span.end(end_time=now)


def _end_attempt(attempt: _Attempt, call: CallRecord, end_ns: int | None) -> None:
    span, record = attempt.span, attempt.record
    end = end_ns or attempt.ended_ns or time.time_ns()
    if not span.is_recording() or record is None:  # None: cancelled with the call
        span.end(end_time=end)
        return
    attributes: dict[str, Any] = {"switchyard.attempt.ok": record.ok}
    if record.ok:
        attributes["gen_ai.response.model"] = attempt.model
        attributes.update(_usage(call.usage))
        if attempt.ttft_s is not None:
            attributes["switchyard.ttft_ms"] = round(attempt.ttft_s * 1000, 3)
            first_token_ns = attempt.started_ns + int(attempt.ttft_s * 1e9)
            span.add_event("gen_ai.first_token", timestamp=first_token_ns)
    else:
        attributes["error.type"] = record.code or "UNKNOWN"
        attributes["switchyard.failure.code"] = record.code or "UNKNOWN"
        if record.status is not None:
            attributes["http.response.status_code"] = record.status
        attributes["switchyard.retry"] = record.will_retry
        if record.switched:
            attributes["switchyard.switched"] = True
            if record.reason:
                attributes["switchyard.switch.reason"] = str(record.reason)
            if record.switched_to:
                attributes["switchyard.switched_to"] = record.switched_to
        span.set_status(Status(StatusCode.ERROR, record.code or "UNKNOWN"))
    if record.rewrites:
        attributes["switchyard.rewrites"] = list(record.rewrites)
    span.set_attributes(attributes)
    span.end(end_time=end)


def _call_attributes(record: CallRecord, served: _Attempt | None) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "switchyard.outcome": record.outcome.value,
        "switchyard.attempts": len(record.attempts),
        "http.response.status_code": record.http_status,
    }
    if record.served_by:
        attributes["switchyard.served_by"] = record.served_by
        attributes["switchyard.served_by_fallback"] = record.served_by_fallback
    if served is not None:
        attributes["gen_ai.response.model"] = served.model
        attributes["gen_ai.provider.name"] = PROVIDER_NAMES.get(served.kind, served.kind)
    if record.error_code:
        attributes["error.type"] = record.error_code
        attributes["switchyard.error_code"] = record.error_code
    if record.ttft_ms is not None:
        attributes["switchyard.ttft_ms"] = round(record.ttft_ms, 3)
    if record.overhead_ms is not None:
        attributes["switchyard.overhead_ms"] = round(record.overhead_ms, 3)
    attributes.update(_usage(record.usage))
    cost = getattr(record, "cost", None)  # issue 25's cost, when it has landed
    if isinstance(cost, int | float) and not isinstance(cost, bool):
        attributes["switchyard.cost"] = float(cost)
    return attributes


def _usage(usage: Mapping[str, Any] | None) -> dict[str, int]:
    """The GenAI token counts of a usage object (chat's names or the Messages and
    Responses ones)."""
    if not usage:
        return {}
    out: dict[str, int] = {}
    for name, keys in (
        ("gen_ai.usage.input_tokens", ("prompt_tokens", "input_tokens")),
        ("gen_ai.usage.output_tokens", ("completion_tokens", "output_tokens")),
    ):
        for key in keys:
            value = usage.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                out[name] = value
                break
    return out


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


class OnceLoggingExporter(SpanExporter):
    """The OTLP exporter, saying once that the collector stopped answering (and once that
    it answers again) instead of a line per failed batch; the exporter's own lines, which
    repeat per batch and retry, are held back (the latest is quoted in ours)."""

    def __init__(self, inner: SpanExporter, endpoint: str) -> None:
        self.inner = inner
        self.endpoint = endpoint
        self.failing = False
        self._lock = threading.Lock()
        self._quiet = _Quiet()
        logging.getLogger(type(inner).__module__).addFilter(self._quiet)

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            result = self.inner.export(spans)
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
        logging.getLogger(type(self.inner).__module__).removeFilter(self._quiet)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


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
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
            OTLPSpanExporter as HttpExporter,
        )

        if protocol != HTTP_PROTOBUF:  # http/json: a collector takes protobuf on the same path
            log.warning("OTEL_EXPORTER_OTLP_PROTOCOL=%s: exporting http/protobuf", protocol)
            protocol = HTTP_PROTOBUF
        endpoint = signal_endpoint or f"{base_endpoint.removesuffix('/')}/v1/traces"
        exporter = HttpExporter(endpoint=endpoint, headers=headers or None, timeout=timeout)
    resource = Resource.create(
        {
            **_pairs(env.get("OTEL_RESOURCE_ATTRIBUTES")),
            "service.name": env.get("OTEL_SERVICE_NAME", "").strip() or SERVICE_NAME,
        }
    )
    provider = TracerProvider(sampler=_sampler(env), resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OnceLoggingExporter(exporter, endpoint)))
    log.info("tracing on: OTLP %s to %s", protocol, _where(endpoint))
    return Tracing(provider)
