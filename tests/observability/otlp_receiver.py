"""A real OTLP/HTTP trace receiver on loopback: decodes each ``ExportTraceServiceRequest``
with ``opentelemetry-proto`` (as a collector does) and keeps the spans and raw bodies."""

from __future__ import annotations

import gzip
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


@dataclass
class ReceivedSpan:
    name: str
    kind: int  # opentelemetry.proto Span.SpanKind: 2 SERVER, 3 CLIENT
    trace_id: str
    span_id: str
    parent_span_id: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    status_code: int  # 0 unset, 1 ok, 2 error
    events: list[tuple[str, int]]
    status_message: str = ""
    resource: dict[str, Any] = field(default_factory=dict)
    flags: int = 0  # Span.flags: 0x100 "has is_remote", 0x200 "the parent is remote"
    keys: tuple[str, ...] = ()  # the attributes' keys as sent, a repeat included


def _value(value: AnyValue) -> Any:
    which = value.WhichOneof("value")
    if which == "array_value":
        return [_value(v) for v in value.array_value.values]
    return getattr(value, which) if which else None


class OTLPReceiver:
    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.spans: list[ReceivedSpan] = []
        self.paths: list[str] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                raw = self.rfile.read(int(self.headers.get("content-length", "0")))
                if self.headers.get("content-encoding") == "gzip":
                    raw = gzip.decompress(raw)
                receiver._accept(self.path, raw)
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        """The base URL for ``OTEL_EXPORTER_OTLP_ENDPOINT`` (the exporter adds /v1/traces)."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def _accept(self, path: str, raw: bytes) -> None:
        request = ExportTraceServiceRequest()
        request.ParseFromString(raw)
        spans: list[ReceivedSpan] = []
        for resource_spans in request.resource_spans:
            resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    spans.append(
                        ReceivedSpan(
                            name=span.name,
                            kind=span.kind,
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_span_id=span.parent_span_id.hex(),
                            start_ns=span.start_time_unix_nano,
                            end_ns=span.end_time_unix_nano,
                            attributes={a.key: _value(a.value) for a in span.attributes},
                            status_code=span.status.code,
                            status_message=span.status.message,
                            events=[(e.name, e.time_unix_nano) for e in span.events],
                            resource=resource,
                            flags=span.flags,
                            keys=tuple(a.key for a in span.attributes),
                        )
                    )
        with self._lock:
            self.paths.append(path)
            self.bodies.append(raw)
            self.spans.extend(spans)

    def __enter__(self) -> OTLPReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
