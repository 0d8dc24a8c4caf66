"""Tracing on or off (SPEC §18, docs/tracing.md), from the standard OpenTelemetry
environment and nothing Switchyard-specific.

On when ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set,
unless ``OTEL_SDK_DISABLED=true`` or ``OTEL_TRACES_EXPORTER=none``. Off, nothing of the
SDK is imported and ``Runtime.tracing`` is None: each hook on the call path is one ``is
None`` test. On, ``routing.observability.span_export`` builds the runtime's own tracing
(``routing.observability.spans``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from routing.observability.spans import Tracing

ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")


def tracing_wanted(env: Mapping[str, str]) -> bool:
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if env.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() == "none":
        return False
    return any(env.get(name, "").strip() for name in ENDPOINT_VARIABLES)


def build_tracing(env: Mapping[str, str]) -> Tracing | None:
    """The gateway's tracing from ``env`` (the process environment in production, a
    test's own mapping in the suite); None when off.

    Read from ``env``: the endpoint, ``OTEL_EXPORTER_OTLP[_TRACES]_PROTOCOL``
    (``http/protobuf``, or ``grpc`` with the ``grpc`` extra), ``..._TIMEOUT`` (seconds, as
    the Python SDK reads it), ``..._HEADERS``, ``OTEL_SERVICE_NAME``,
    ``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_TRACES_SAMPLER`` and ``OTEL_TRACES_SAMPLER_ARG``.
    The SDK reads the rest from the process environment (``OTEL_BSP_*``, certificates,
    compression)."""
    if not tracing_wanted(env):
        return None
    from routing.observability.span_export import make_tracing

    return make_tracing(env)
