"""Where a call's spans go (SPEC §18, docs/tracing.md): the tracing an environment's
``OTEL_*`` variables ask for (:func:`make_tracing`: sampler, resource, OTLP exporter and
batch processor), and :class:`CallExporter`, through which the batch processor exports the
ended calls it was handed. Imported only when tracing is on
(``routing.observability.tracing.build_tracing``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

from opentelemetry.sdk.resources import Resource
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

from routing.observability.otlp_wire import SpanEncoder, WireSpanExporter
from routing.observability.spans import SCOPE, Tracing

if TYPE_CHECKING:
    from routing.observability.spans import CallTrace

log = logging.getLogger("switchyard.tracing")

SERVICE_NAME = "switchyard"
HTTP_PROTOBUF, GRPC = "http/protobuf", "grpc"


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
