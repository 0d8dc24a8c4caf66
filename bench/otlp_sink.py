"""A loopback OTLP/HTTP collector that accepts every export and discards it, so
``make bench BENCH_ARGS=--otlp`` measures what tracing costs the gateway (its spans,
batching, encoding and sending), not what a real collector costs its own host."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class OTLPSink:
    def __init__(self) -> None:
        self.exports = 0
        self.bytes = 0
        self._lock = threading.Lock()
        sink = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as the exporter's session expects

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                size = int(self.headers.get("content-length", "0"))
                self.rfile.read(size)
                with sink._lock:
                    sink.exports += 1
                    sink.bytes += size
                # An empty ExportTraceServiceResponse is zero bytes of protobuf.
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def endpoint(self) -> str:
        """For ``OTEL_EXPORTER_OTLP_ENDPOINT`` (the exporter appends ``/v1/traces``)."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
