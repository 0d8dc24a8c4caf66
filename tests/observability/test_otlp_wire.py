"""The gateway's own OTLP encoding (``routing.observability.otlp_wire``) against the SDK's:
for the same spans, the same bytes. The end-to-end tests in ``test_tracing.py`` decode
what a real receiver got; these pin every field and value type the encoder writes,
including the ones the gateway's spans rarely carry."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags, TraceState

from routing.observability.otlp_wire import (
    CACHE_MAX,
    FixedAttributes,
    SpanAttributes,
    SpanEncoder,
)

RESOURCE = Resource.create({"service.name": "switchyard", "deployment": "eu-1"})
SCOPE = InstrumentationScope("switchyard")
TRACE = 0x0AF7651916CD43DD8448EB211C80319C
SAMPLED = TraceFlags(TraceFlags.SAMPLED)


def span(
    span_id: int,
    *,
    attributes: dict[str, Any] | SpanAttributes | None = None,
    parent: SpanContext | None = None,
    state: TraceState | None = None,
    status: Status | None = None,
    events: tuple[Event, ...] = (),
    kind: SpanKind = SpanKind.CLIENT,
    resource: Resource = RESOURCE,
    scope: InstrumentationScope | None = SCOPE,
) -> ReadableSpan:
    return ReadableSpan(
        name=f"chat m-{span_id}",
        context=SpanContext(TRACE, span_id, False, SAMPLED, state or TraceState()),
        parent=parent,
        resource=resource,
        attributes=attributes or {},
        events=events,
        kind=kind,
        status=status or Status(StatusCode.UNSET),
        start_time=1_764_000_000_000_000_000 + span_id,
        end_time=1_764_000_000_123_000_000 + span_id,
        instrumentation_scope=scope,
    )


EVERY_TYPE = {
    "switchyard.group": "auto",
    "switchyard.request_id": "0123456789abcdef",  # one of the never-cached keys
    "empty": "",
    "unicode": "modèle-ß-✓",
    "switchyard.probe": True,
    "switchyard.stream": False,
    "switchyard.attempts": 3,
    "zero": 0,
    "negative": -7,
    "large": 2**62 + 5,
    "switchyard.ttft_ms": 12.345,
    "float_zero": 0.0,
    "switchyard.rewrites": ["effort:low", "betas:-x"],
    "ints": (1, 2, 300),
    "nested": {"a": 1, "b": "two"},
    "bytes": b"\x00\xff",
    "long": "x" * 300,  # a length that takes two bytes
}
REMOTE_PARENT = SpanContext(TRACE, 0xB7AD6B7169203331, True, SAMPLED)
LOCAL_PARENT = SpanContext(TRACE, 0x00F067AA0BA902B7, False, SAMPLED)

FIXED = FixedAttributes(
    {"gen_ai.provider.name": "openai", "server.address": "10.0.0.1", "server.port": 443}
)

CASES = {
    "every attribute type": [span(1, attributes=EVERY_TYPE)],
    "a server span continuing a client's trace, with its tracestate": [
        span(
            2,
            kind=SpanKind.SERVER,
            parent=REMOTE_PARENT,
            state=TraceState([("vendor", "x:1"), ("other", "y")]),
            status=Status(StatusCode.ERROR, "ROUTES_EXHAUSTED"),
        )
    ],
    "an attempt with a first-token event and a status without message": [
        span(
            3,
            parent=LOCAL_PARENT,
            events=(Event("gen_ai.first_token", None, 1_764_000_000_050_000_000),),
            status=Status(StatusCode.ERROR),
        ),
        span(4, events=(Event("with.attrs", {"n": 1, "s": "v"}, 1_764_000_000_060_000_000),)),
    ],
    "an OK status, every kind, no scope": [
        span(5, status=Status(StatusCode.OK), kind=SpanKind.INTERNAL, scope=None),
        span(6, kind=SpanKind.PRODUCER),
        span(7, kind=SpanKind.CONSUMER),
    ],
    "a target's fixed attributes beside an attempt's own, twice (once from the bytes kept)": [
        span(12, attributes=SpanAttributes(FIXED, {"switchyard.try": 2, "error.type": "RATE"})),
        span(13, attributes=SpanAttributes(FIXED, {"switchyard.ttft_ms": 1.5})),
        span(14, attributes=SpanAttributes(FIXED, {})),
    ],
    "own attributes that override fixed ones": [
        span(15, attributes=SpanAttributes(FIXED, {"server.port": 8443, "extra": True})),
    ],
    "two resources and two scopes, grouped as the SDK groups them": [
        span(8, attributes={"a": 1}),
        span(9, resource=Resource.create({"service.name": "other"})),
        span(10, scope=InstrumentationScope("lib", "1.2", "https://schema", {"k": "v"})),
        span(11, attributes={"a": 1}),
    ],
}


@pytest.mark.parametrize("spans", CASES.values(), ids=CASES.keys())
def test_the_bytes_are_the_sdk_encoder_s(spans: list[ReadableSpan]) -> None:
    expected = encode_spans(spans).SerializeToString()
    encoder = SpanEncoder()
    assert encoder.encode(spans) == expected
    assert encoder.encode(spans) == expected  # again, from the encoded-attribute cache


def test_a_cached_attribute_never_stands_for_another_of_equal_value() -> None:
    """``True == 1 == 1.0`` in Python: each keeps its own protobuf type."""
    spans = [span(n, attributes={"v": value}) for n, value in enumerate((1, True, 1.0, "1"), 1)]
    encoder = SpanEncoder()
    for one in spans:
        encoder.encode([one])
    decoded = ExportTraceServiceRequest.FromString(encoder.encode(spans))
    values = [s.attributes[0].value for s in decoded.resource_spans[0].scope_spans[0].spans]
    assert [v.WhichOneof("value") for v in values] == [
        "int_value",
        "bool_value",
        "double_value",
        "string_value",
    ]


def test_the_cache_stays_bounded() -> None:
    encoder = SpanEncoder()
    for n in range(CACHE_MAX + 10):
        encoder.encode([span(1, attributes={"switchyard.group": f"g{n}"})])
    assert 0 < len(encoder._attributes) <= CACHE_MAX
    one = span(2, attributes={"switchyard.group": "g0"})
    assert encoder.encode([one]) == encode_spans([one]).SerializeToString()


def test_span_attributes_read_as_one_mapping_own_values_winning() -> None:
    attributes = SpanAttributes(FIXED, {"server.port": 8443, "extra": True})
    assert dict(attributes) == {
        "gen_ai.provider.name": "openai",
        "server.address": "10.0.0.1",
        "server.port": 8443,
        "extra": True,
    }
    assert len(attributes) == 4 and attributes["server.address"] == "10.0.0.1"
