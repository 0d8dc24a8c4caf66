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

from routing.engine.algorithms import Candidate
from routing.engine.plan import SwitchReason
from routing.gateway.events import AttemptRecord, CallOutcome, CallRecord
from routing.gateway.table import ProviderSpec, TargetSpec
from routing.observability.otlp_wire import (
    CACHE_MAX,
    JOINED_MAX,
    FixedAttributes,
    SpanAttributes,
    SpanEncoder,
)
from routing.observability.span_export import CallExporter
from routing.observability.spans import CallTrace, Tracing
from routing.observability.tracing import build_tracing
from routing.upstream.openai import Timeouts
from tests.observability.otlp_receiver import OTLPReceiver

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
    # never-cached keys with values of every size class (their prefixes are kept by size)
    "gen_ai.usage.input_tokens": 300,
    "gen_ai.usage.output_tokens": 2**40,
    "switchyard.cost": 0.0125,
}
VARYING_VALUES = [
    {"gen_ai.usage.input_tokens": n, "switchyard.request_id": "r" * size, "switchyard.cost": c}
    for n, size, c in [(0, 0, 0.0), (127, 1, 1.5), (128, 127, -2.0), (16384, 128, 1e300)]
] + [{"gen_ai.usage.input_tokens": -1}, {"gen_ai.usage.output_tokens": True}]
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
    "varying attributes of every size, once kept and once new": [
        span(20 + n, attributes=attributes) for n, attributes in enumerate(VARYING_VALUES * 2)
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


def _provider(base_url: str) -> ProviderSpec:
    return ProviderSpec(
        name="p1",
        kind="openai",
        base_url=base_url,
        api_key="k",
        headers={},
        timeouts=Timeouts(),
        version=1,
    )


def _traced_calls(tracing: Tracing) -> list[CallTrace]:
    """A failover call (a switch, a retry, a probe, a rewrite, a first token), a streamed
    one continuing a client's trace, and a refused request, ended as the gateway ends them."""
    provider = _provider("https://user:pw@api.example:8443/v1?key=q")
    first = TargetSpec(Candidate("p1/a", "p1", "a", 0), provider, "a", None)
    second = TargetSpec(Candidate("p1/b", "p1", "b", 1), provider, "b", None)

    def start(headers: dict[str, str] | None, stream: bool) -> CallTrace:
        return tracing.start_call(
            headers=headers,
            started_ns=1_764_000_000_000_000_000,
            door="chat",
            endpoint=None,
            requested_model="auto",
            group="auto",
            key_name="ci",
            request_id="0123456789abcdef0123456789abcdef",
            stream=stream,
            commit="first-content",
        )

    failover = start(None, stream=False)
    failover.attempt_started(first, 1, False, None)
    failover.attempt_ended(
        first, AttemptRecord("p1/a", 1, False, 3.0, code="SERVER", status=503, will_retry=True)
    )
    failover.attempt_started(first, 2, True, None)
    failover.attempt_ended(
        first,
        AttemptRecord(
            "p1/a", 2, False, 3.0, code="SERVER", status=503, probe=True, switched=True,
            reason=SwitchReason.RETRY_EXHAUSTED, switched_to="p1/b",
        ),
    )  # fmt: skip
    failover.attempt_started(second, 1, False, None)
    failover.attempt_ended(second, AttemptRecord("p1/b", 1, True, 2.0, rewrites=("max_tokens",)))
    failover.committed(0.0021)
    attempts = [AttemptRecord("p1/a", 1, False, 1.0)] * 2 + [AttemptRecord("p1/b", 1, True, 1.0)]
    failover.finish(
        CallRecord(
            call_id="0123456789abcdef0123456789abcdef", group="auto", session=None, started_at=1.0,
            stream=False, served_by="p1/b", attempts=attempts, ttft_ms=9.5, key_name="ci",
            usage={"prompt_tokens": 12, "completion_tokens": 9},
        )
    )  # fmt: skip
    parent = {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
    streamed = start({**parent, "tracestate": "vendor=x"}, stream=True)
    streamed.attempt_started(second, 1, False, None)
    streamed.attempt_ended(second, AttemptRecord("p1/b", 1, True, 2.0))
    streamed.committed(None)
    streamed.finish(
        CallRecord(
            call_id="1", group="auto", session=None, started_at=1.0, stream=True, served_by="p1/b",
            attempts=[AttemptRecord("p1/b", 1, True, 1.0)], outcome=CallOutcome.FAILED,
            error_code="STREAM_CUT",
        )
    )  # fmt: skip
    refused = CallTrace(tracing, parent, 1_764_000_000_000_000_000, None, "2")
    refused.refused(
        CallRecord(
            call_id="2", group="", session=None, started_at=1.0, stream=False, outcome=CallOutcome.REFUSED,
            error_code="invalid_api_key", http_status=401,
        )
    )  # fmt: skip
    return [failover, streamed, refused]


def test_a_call_s_written_spans_are_the_bytes_of_its_readable_spans() -> None:
    """The gateway writes its calls' spans straight into the request on the export
    thread; any other exporter gets them as ``ReadableSpan``s. Both are the same spans."""
    with OTLPReceiver() as receiver:
        tracing = build_tracing({"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint})
        assert tracing is not None
        try:
            calls = _traced_calls(tracing)
            encoder = SpanEncoder()
            written = [span for call in calls for span in call.written(encoder)]
            spans = [span for call in calls for span in call.spans()]
            assert len(written) == len(spans) == 4 + 2 + 1
            encoded = encoder.request(tracing.resource, tracing.scope, written)
            assert encoded == encode_spans(spans).SerializeToString()
            tracing.force_flush()  # what the exporter sent: those bytes, one request
            assert receiver.bodies == [encoded]
        finally:
            tracing.shutdown()


def test_another_exporter_gets_the_calls_as_readable_spans() -> None:
    """gRPC keeps the official exporter: it is handed each call's ``ReadableSpan``s."""
    from opentelemetry.sdk.trace.export import SpanExportResult
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    with OTLPReceiver() as receiver:
        tracing = build_tracing({"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint})
        assert tracing is not None
        try:
            calls = _traced_calls(tracing)
            memory = InMemorySpanExporter()
            exporter = CallExporter(memory, "grpc://collector:4317", tracing.resource)
            assert exporter.export(calls) is SpanExportResult.SUCCESS
            got = memory.get_finished_spans()
            assert [s.name for s in got] == ["chat a", "chat a", "chat b", "chat auto"] + [
                "chat b",
                "chat auto",
                "chat",
            ]
            encoder = SpanEncoder()
            written = [span for call in calls for span in call.written(encoder)]
            assert encode_spans(got).SerializeToString() == encoder.request(
                tracing.resource, tracing.scope, written
            )
        finally:
            tracing.shutdown()


def test_joined_attributes_are_built_once_per_key_and_stay_bounded() -> None:
    fixed = FixedAttributes({"switchyard.group": "auto"})
    built: list[int] = []

    def outcome(n: int) -> dict[str, Any]:
        built.append(n)
        return {"switchyard.attempts": n}

    first = fixed.joined(("ok", 1), lambda: outcome(1))
    assert dict(first) == {"switchyard.group": "auto", "switchyard.attempts": 1}
    assert fixed.joined(("ok", 1), lambda: outcome(1)) is first and built == [1]
    assert dict(fixed.joined(("ok", 2), lambda: outcome(2)))["switchyard.attempts"] == 2
    for n in range(JOINED_MAX + 10):
        fixed.joined(("failed", n), lambda n=n: outcome(n))
    assert 0 < len(fixed._joined or {}) <= JOINED_MAX
    assert dict(fixed) == {"switchyard.group": "auto"}  # the fixed set itself unchanged


@pytest.mark.parametrize(
    ("usage", "counts"),
    [
        ({"prompt_tokens": 12, "completion_tokens": 9, "total_tokens": 21}, (12, 9)),
        ({"input_tokens": 7, "output_tokens": 0}, (7, 0)),  # Messages and Responses
        ({"prompt_tokens": True, "input_tokens": 3, "completion_tokens": -1}, (3, None)),
        ({"prompt_tokens": "12", "output_tokens": 4.0}, (None, None)),
        (
            {"prompt_tokens": 2**63, "input_tokens": 2**63 - 1, "output_tokens": 2**70},
            (2**63 - 1, None),
        ),
        ({}, (None, None)),
        (None, (None, None)),
    ],
)
def test_a_call_s_token_counts_are_read_from_any_door_s_usage(
    usage: dict[str, Any] | None, counts: tuple[int | None, int | None]
) -> None:
    """A count is a non-negative int under chat's name or the Messages/Responses one;
    anything else (a bool, a string, a float, a negative, one beyond OTLP's int64, which
    would corrupt the whole batch's bytes) is not sent."""
    from routing.observability.span_attributes import usage_counts

    got = usage_counts(usage)
    assert (got.get("gen_ai.usage.input_tokens"), got.get("gen_ai.usage.output_tokens")) == counts
    assert all(type(value) is int for value in got.values())


def test_an_id_drawn_as_zero_is_drawn_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """0 is the invalid trace and span id (W3C, OTLP): a call's ids are plain
    ``getrandbits`` draws, and a draw of 0 is replaced, as the SDK's generator does."""
    from routing.observability import spans

    # the call's span id: 0, then 0x1234; its trace id: 0, then 0xABCD; the attempt's
    draws = iter([0, 0, 0x1234, 0, 0xABCD, 0, 0x77])
    monkeypatch.setattr(spans, "getrandbits", lambda bits: next(draws))
    call, sent, got = _one_call(cost=None)
    assert call.trace_id == f"{0xABCD:032x}"
    assert sent == {"x-a": "1", "traceparent": f"00-{0xABCD:032x}-{0x77:016x}-01"}
    assert [(span.span_id.hex(), span.parent_span_id.hex()) for span in got] == [
        (f"{0x77:016x}", f"{0x1234:016x}"),
        (f"{0x1234:016x}", ""),
    ]
    assert {span.trace_id.hex() for span in got} == {f"{0xABCD:032x}"}


@pytest.mark.parametrize("cost", [0.0042, 0.0, None])
def test_a_call_s_span_carries_its_cost_when_it_has_one(cost: float | None) -> None:
    """A call with a cost (its targets priced, SPEC §17) says so on its span, 0 included;
    without a price it has none, and the span has no cost attribute rather than 0."""
    _, _, (served_span, call_span) = _one_call(cost=cost)
    values = {kv.key: kv.value for kv in call_span.attributes}
    if cost is None:
        assert "switchyard.cost" not in values
    else:
        assert values["switchyard.cost"].double_value == cost
        assert values["switchyard.cost"].WhichOneof("value") == "double_value"
    assert "switchyard.cost" not in {kv.key for kv in served_span.attributes}


def _one_call(cost: float | None) -> tuple[CallTrace, dict[str, str], list[Any]]:
    """A call answered by its one attempt, exported to a receiver: the call, the headers
    its attempt sent upstream, and the spans the receiver got (decoded protobuf)."""
    target = TargetSpec(Candidate("p1/a", "p1", "a", 0), _provider("http://10.0.0.1/v1"), "a", None)
    with OTLPReceiver() as receiver:
        tracing = build_tracing({"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint})
        assert tracing is not None
        try:
            call = tracing.start_call(
                headers=None, started_ns=1_764_000_000_000_000_000, door="chat",
                endpoint=None, requested_model="auto", group="auto", key_name="ci",
                request_id="r", stream=False, commit="first-content",
            )  # fmt: skip
            sent = call.attempt_started(target, 1, False, {"x-a": "1"})
            answered = AttemptRecord("p1/a", 1, True, 1.0)
            call.attempt_ended(target, answered)
            call.finish(
                CallRecord(
                    call_id="r", group="auto", session=None, started_at=1.0, stream=False,
                    served_by="p1/a", attempts=[answered], cost=cost,
                )
            )  # fmt: skip
            tracing.force_flush()
        finally:
            tracing.shutdown()
    (body,) = receiver.bodies
    exported = ExportTraceServiceRequest.FromString(body)
    spans = [span for rs in exported.resource_spans for ss in rs.scope_spans for span in ss.spans]
    return call, sent, spans


def test_a_call_reaches_the_batch_processor_s_queue_directly_or_through_on_end() -> None:
    """An ended call goes straight to the pinned SDK's batch queue (``emit``: ``on_end``
    less its sampled check, which a handed-over call always passes); a processor without
    that part gets ``on_end``, the public way."""
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from routing.observability.spans import _hand_over

    processor = BatchSpanProcessor(InMemorySpanExporter())
    try:
        hand_over = _hand_over(processor)
        assert hand_over == processor._batch_processor.emit  # the SDK still has it

        class Public:
            def __init__(self) -> None:
                self.ended: list[object] = []

            def on_end(self, span: object) -> None:
                self.ended.append(span)

        public = Public()
        _hand_over(public)("a call")  # type: ignore[arg-type]
        assert public.ended == ["a call"]
    finally:
        processor.shutdown()
