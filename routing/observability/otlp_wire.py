"""The OTLP export request's protobuf bytes for the gateway's spans, written directly
(SPEC §18, docs/tracing.md). Imported only when tracing is on.

The official OTLP/HTTP exporter builds a protobuf message object per span, per attribute
and per value (``opentelemetry.exporter.otlp.proto.common``) and then serialises them:
about three quarters of what a traced call cost. Most of a call's attributes repeat from
call to call (the door, the group, the key's name, a target's provider, model and
address), so :class:`SpanEncoder` writes the wire format itself and keeps each repeating
attribute's bytes, encoded once. :class:`WireSpanExporter` is the official exporter with
this encoder in front of its HTTP client (endpoint, headers, timeout, compression, retries
and its TLS settings are the exporter's own). gRPC keeps the official encoder.

The bytes are those of ``opentelemetry-proto``'s ``ExportTraceServiceRequest`` with the
fields the SDK's encoder sets, in field order: ``tests/observability/test_otlp_wire.py``
compares them with the SDK's encoding of the same spans, byte for byte.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from typing import Any

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanKind, Status, TraceState

log = logging.getLogger("switchyard.tracing")

_fixed64 = struct.Struct("<Q").pack
_double = struct.Struct("<d").pack
# A span's ids (trace id and span id fields), its parent's span id, its start and end times
_IDS = struct.Struct(">2s16s2sQ").pack
_PARENT = struct.Struct(">BBQ").pack
_TIMES = struct.Struct("<BQBQ").pack
_SMALL = [bytes((n,)) for n in range(128)]
# Span.SpanKind's numbers (opentelemetry/proto/trace/v1/trace.proto)
_KIND = {
    SpanKind.INTERNAL: 1,
    SpanKind.SERVER: 2,
    SpanKind.CLIENT: 3,
    SpanKind.PRODUCER: 4,
    SpanKind.CONSUMER: 5,
}
# Span.flags (fixed32, field 16): what the SDK's encoder sets — the "has is_remote" bit,
# and the "is remote" bit for a span whose parent came from another process.
_FLAGS_LOCAL = b"\x85\x01" + struct.pack("<I", 0x100)
_FLAGS_REMOTE = b"\x85\x01" + struct.pack("<I", 0x300)
# Attributes whose values differ on every call: encoding them once would only fill the cache.
VARYING = frozenset(
    {
        "switchyard.request_id",
        "switchyard.ttft_ms",
        "switchyard.cost",
        "gen_ai.usage.input_tokens",
        "gen_ai.usage.output_tokens",
    }
)
CACHE_MAX = 4096  # repeating attributes kept encoded; cleared whole when full
JOINED_MAX = 256  # joined sets kept per fixed set (FixedAttributes.joined)


class FixedAttributes(dict[str, Any]):
    """Attributes shared by many spans (a target's, a call's door, group and key): the
    encoder writes them once and keeps the bytes on the object. Not changed once built."""

    __slots__ = ("encoded", "_joined")

    def __init__(self, attributes: Mapping[str, Any]) -> None:
        super().__init__(attributes)
        self.encoded: bytes | None = None
        self._joined: dict[Hashable, FixedAttributes] | None = None

    def joined(self, key: Hashable, more: Callable[[], Mapping[str, Any]]) -> FixedAttributes:
        """These attributes followed by ``more()``'s (none of the same name), as one set
        kept per ``key``, which stands for what ``more()`` returns: a span's attributes
        that repeat from call to call (a call's outcome, attempts, status, served-by) are
        then encoded once, with the ones that never change. ``more`` is called only for a
        key not seen yet. One thread joins (the export thread); readers only read."""
        joined = self._joined
        if joined is None:
            joined = self._joined = {}
        found = joined.get(key)
        if found is None:
            if len(joined) >= JOINED_MAX:
                joined.clear()
            found = joined[key] = FixedAttributes({**self, **more()})
        return found


class SpanAttributes(Mapping[str, Any]):
    """A span's attributes: its ``fixed`` ones, then its ``own`` (which win on a shared
    key). A read-only mapping, as ``ReadableSpan.attributes`` is for every exporter."""

    __slots__ = ("fixed", "own")

    def __init__(self, fixed: FixedAttributes, own: dict[str, Any]) -> None:
        self.fixed, self.own = fixed, own

    def __getitem__(self, key: str) -> Any:
        own = self.own
        return own[key] if key in own else self.fixed[key]

    def __iter__(self) -> Iterator[str]:
        own = self.own
        yield from (key for key in self.fixed if key not in own)
        yield from own

    def __len__(self) -> int:
        return len(self.fixed) + sum(1 for key in self.own if key not in self.fixed)


# One span of a gateway call, as the walk over the call gives it to be made
# (``routing.observability.spans.SpanMaker``): written by :meth:`SpanEncoder.call_span`, or
# made a ``ReadableSpan``. A plain tuple, unpacked by each maker in this order: span id,
# parent's span id (None for a root span), whether the parent is the client's (from its
# ``traceparent``), name, kind, start and end (ns), the attributes shared with other spans
# (or None), the span's own (no name in both), its events (a name and a time each, no
# attributes), status. A tuple costs a span nothing to build; a class or a NamedTuple
# costs a Python call per span on the export thread.
SpanFields = tuple[
    int,
    int | None,
    bool,
    str,
    SpanKind,
    int,
    int,
    FixedAttributes | None,
    dict[str, Any],
    Sequence[tuple[str, int]],
    Status,
]


def _varint(n: int) -> bytes:
    if n < 0x80:
        return _SMALL[n] if n >= 0 else _varint(n + (1 << 64))  # int64: two's complement
    if n < 0x4000:  # a span's or an attribute's length: two bytes
        return bytes(((n & 0x7F) | 0x80, n >> 7))
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _field(tag: bytes, payload: bytes) -> bytes:
    """A length-delimited field: its tag, the payload's length, the payload."""
    return tag + _varint(len(payload)) + payload


def _text(tag: bytes, value: str) -> bytes:
    return _field(tag, value.encode()) if value else b""


def _any_value(value: Any) -> bytes:
    """An ``AnyValue``'s fields, as the SDK's ``_encode_value`` chooses them."""
    if value is None:
        return b""
    if isinstance(value, bool):
        return b"\x10\x01" if value else b"\x10\x00"
    if isinstance(value, str):
        return _field(b"\x0a", value.encode())
    if isinstance(value, int):
        return b"\x18" + _varint(value)
    if isinstance(value, float):
        return b"\x21" + _double(value)
    if isinstance(value, bytes):
        return _field(b"\x3a", value)
    if isinstance(value, Sequence):
        return _field(b"\x2a", b"".join(_field(b"\x0a", _any_value(v)) for v in value))
    if isinstance(value, Mapping):
        return _field(b"\x32", b"".join(_key_value(b"\x0a", k, v) for k, v in value.items()))
    raise TypeError(f"an attribute of type {type(value).__name__} cannot be exported")


_KEYS: dict[str, bytes] = {}  # an attribute name → its encoded ``key`` field


def _key_value(tag: bytes, key: str, value: Any) -> bytes:
    """A ``KeyValue`` as the field ``tag`` of its message."""
    name = _KEYS.get(key)
    if name is None:
        if len(_KEYS) >= CACHE_MAX:
            _KEYS.clear()
        name = _KEYS[key] = _field(b"\x0a", key.encode())
    value_field = _any_value(value)
    inner = name + b"\x12" + _varint(len(value_field)) + value_field
    return tag + _varint(len(inner)) + inner


# A KeyValue's bytes before its value's own bytes, by its field's tag, its key, the
# value's type and the size of the value's own bytes (a string's UTF-8, an int's varint)
_PREFIXES: dict[tuple[bytes, str, type, int], bytes] = {}


def _own_value(tag: bytes, key: str, value: Any) -> bytes:
    """A ``KeyValue`` whose value differs from span to span (``VARYING``): a string's,
    a non-negative int's or a float's own bytes after the bytes that come before them
    (the field's tag and length, the key, the ``AnyValue``'s length, the value's tag and
    length), which depend only on the key, the type and the size, and are kept."""
    kind = type(value)
    payload: bytes
    if kind is str:
        payload = value.encode()
    elif kind is int and value >= 0:
        payload = _SMALL[value] if value < 0x80 else _varint(value)
    elif kind is float:
        payload = _double(value)
    else:
        return _key_value(tag, key, value)
    prefix = _PREFIXES.get((tag, key, kind, len(payload)))
    if prefix is None:
        prefix = _prefix(tag, key, kind, len(payload))
    return prefix + payload


def _prefix(tag: bytes, key: str, kind: type, size: int) -> bytes:
    """``_own_value``'s bytes before a value of ``kind`` whose own bytes are ``size``
    long, made once."""
    if kind is str:
        value = b"\x0a" + _varint(size)  # AnyValue.string_value: tag, length
    else:
        value = b"\x18" if kind is int else b"\x21"  # int_value (varint), double (fixed64)
    name = _field(b"\x0a", key.encode())
    any_value = b"\x12" + _varint(len(value) + size) + value
    prefix = tag + _varint(len(name) + len(any_value) + size) + name + any_value
    if len(_PREFIXES) >= CACHE_MAX:
        _PREFIXES.clear()
    _PREFIXES[(tag, key, kind, size)] = prefix
    return prefix


class SpanEncoder:
    """``ExportTraceServiceRequest`` bytes, a span at a time: :meth:`span` writes one
    from its fields, already as the bytes that repeat (attributes, events, trace state)
    where the caller has them (the gateway's calls, ``routing.observability.spans``), and
    :meth:`encode` a batch of the SDK's ``ReadableSpan``s. Used from the batch processor's
    one export thread (not thread-safe)."""

    def __init__(self) -> None:
        self._attributes: dict[tuple[str, type, Any], bytes] = {}
        # Keyed by the enums' values: an Enum member hashes in Python, not in C
        self._heads: dict[tuple[str, int], bytes] = {}  # name and kind fields
        self._tails: dict[tuple[int, str | None, bool], bytes] = {}  # status and flags
        self._events: dict[str, tuple[bytes, bytes]] = {}  # an event's bytes around its time

    def encode(self, spans: Sequence[ReadableSpan]) -> bytes:
        """The request for ``spans``, grouped as the SDK's encoder groups them: by
        resource, then by scope, each in the order first seen."""
        groups: dict[tuple[Any, Any], list[bytes]] = {}
        for span in spans:
            key = (span._resource, span._instrumentation_scope or None)
            group = groups.get(key)
            if group is None:
                group = groups[key] = []
            group.append(self.readable(span))
        return self._grouped(groups)

    def request(
        self, resource: Resource, scope: InstrumentationScope | None, spans: list[bytes]
    ) -> bytes:
        """The request for spans of one resource and scope, each written by :meth:`span`."""
        return self._grouped({(resource, scope or None): spans}) if spans else b""

    def readable(self, span: ReadableSpan) -> bytes:
        """One ``ReadableSpan``, as :meth:`span` writes it. Its own fields are read as
        given (``attributes``, ``events`` and the other properties copy or wrap them on
        every read); the byte-for-byte test holds this to the pinned SDK."""
        context = span._context
        assert context is not None  # every span the gateway exports has its context
        parent = span._parent
        return self.span(
            context.trace_id.to_bytes(16, "big"),
            context.span_id,
            self.trace_state(context.trace_state),
            None if parent is None else parent.span_id,
            parent is not None and parent.is_remote,
            span._name,
            span._kind,
            span._start_time,
            span._end_time,
            self._attrs(span._attributes),
            self._event_objects(span._events),
            span._status,
        )

    def _grouped(self, groups: dict[tuple[Any, Any], list[bytes]]) -> bytes:
        """The request for spans grouped by resource and scope, each span framed."""
        by_resource: dict[Any, list[bytes]] = {}
        for (resource, scope), encoded_spans in groups.items():
            scope_spans = self._scope(scope) + b"".join(encoded_spans) + self._schema(scope)
            by_resource.setdefault(resource, []).append(_field(b"\x12", scope_spans))
        out = []
        for resource, scope_spans_list in by_resource.items():
            body = _field(b"\x0a", self._pairs(b"\x0a", resource.attributes))
            body += b"".join(scope_spans_list) + _text(b"\x1a", resource.schema_url)
            out.append(_field(b"\x0a", body))
        return b"".join(out)

    def _scope(self, scope: Any) -> bytes:
        if scope is None:
            return b"\x0a\x00"  # the SDK's encoder sends an empty scope
        encoded = _text(b"\x0a", scope.name) + _text(b"\x12", scope.version or "")
        return _field(b"\x0a", encoded + self._pairs(b"\x1a", scope.attributes))

    @staticmethod
    def _schema(scope: Any) -> bytes:
        return _text(b"\x1a", scope.schema_url) if scope is not None else b""

    @staticmethod
    def trace_state(state: TraceState | None) -> bytes:
        """A span's ``trace_state`` field (nothing for an empty state)."""
        return _text(b"\x1a", ",".join(f"{k}={v}" for k, v in state.items())) if state else b""

    def attributes(self, fixed: FixedAttributes | None, own: Mapping[str, Any]) -> bytes:
        """A span's attributes field: ``fixed``'s bytes, written once and kept on it, then
        ``own``'s (no name in both)."""
        if fixed is None:
            return self._pairs(b"\x4a", own) if own else b""
        encoded = fixed.encoded
        if encoded is None:
            encoded = fixed.encoded = self._pairs(b"\x4a", fixed)
        return encoded + self._pairs(b"\x4a", own) if own else encoded

    def _attrs(self, attributes: Mapping[str, Any] | None) -> bytes:
        """A ``ReadableSpan``'s attributes field."""
        if type(attributes) is SpanAttributes:
            fixed, own = attributes.fixed, attributes.own
            if own.keys().isdisjoint(fixed):  # always, as the gateway builds them
                return self.attributes(fixed, own)
            attributes = dict(attributes)
        return self._pairs(b"\x4a", attributes) if attributes else b""

    def _pairs(self, tag: bytes, attributes: Mapping[str, Any] | None) -> bytes:
        """``KeyValue`` fields ``tag``; a repeating one's bytes come from the cache."""
        if not attributes:
            return b""
        cache = self._attributes
        parts = []
        for key, value in attributes.items():
            if key in VARYING:
                parts.append(_own_value(tag, key, value))
                continue
            if isinstance(value, list | tuple | dict):
                parts.append(_key_value(tag, key, value))
                continue
            found = cache.get((key, type(value), value))
            if found is None:
                if len(cache) >= CACHE_MAX:
                    cache.clear()
                found = cache[(key, type(value), value)] = _key_value(tag, key, value)
            parts.append(found)
        return b"".join(parts)

    def event(self, name: str, time_ns: int) -> bytes:
        """An event field of ``name`` alone (no attributes) at ``time_ns``: the bytes
        around its time (a fixed64, so the length is known) are kept per name."""
        around = self._events.get(name)
        if around is None:
            text = _text(b"\x12", name)
            around = (b"\x5a" + _varint(9 + len(text)) + b"\x09", text)
            if len(self._events) >= CACHE_MAX:
                self._events.clear()
            self._events[name] = around
        return around[0] + _fixed64(time_ns) + around[1]

    def _event_objects(self, events: Sequence[Event]) -> bytes:
        out = []
        for event in events:
            attributes = event.attributes
            if attributes:
                encoded = b"\x09" + _fixed64(event.timestamp) + _text(b"\x12", event.name)
                out.append(_field(b"\x5a", encoded + self._pairs(b"\x1a", attributes)))
            else:
                out.append(self.event(event.name, event.timestamp))
        return b"".join(out)

    def call_span(self, trace: bytes, state: bytes, fields: SpanFields) -> bytes:
        """A gateway call's span (``routing.observability.spans.SpanMaker``) in trace
        ``trace`` (16 bytes) with trace state field ``state``: its attributes as
        ``fixed``'s kept bytes and ``own``'s, its ``marks`` as attribute-less events."""
        span_id, parent_id, remote, name, kind, start, end, fixed, own, marks, status = fields
        event = self.event
        return self.span(
            trace,
            span_id,
            state,
            parent_id,
            remote,
            name,
            kind,
            start,
            end,
            self.attributes(fixed, own),
            b"".join([event(mark, at) for mark, at in marks]) if marks else b"",
            status,
        )

    def span(
        self,
        trace: bytes,
        span_id: int,
        state: bytes,
        parent_id: int | None,
        remote: bool,
        name: str,
        kind: SpanKind,
        start: int | None,
        end: int | None,
        attributes: bytes,
        events: bytes,
        status: Status,
    ) -> bytes:
        """One span, framed as a ``ScopeSpans.spans`` field: its fields in field order,
        joined once. ``trace`` is the trace id's 16 bytes; ``state``, ``attributes`` and
        ``events`` the fields' bytes (:meth:`trace_state`, :meth:`attributes`,
        :meth:`event`); ``remote`` says the parent came from another process."""
        head = self._heads.get((name, kind._value_))
        if head is None:
            if len(self._heads) >= CACHE_MAX:
                self._heads.clear()
            head = _text(b"\x2a", name) + b"\x30" + _SMALL[_KIND[kind]]
            self._heads[(name, kind._value_)] = head
        if start and end:
            times = _TIMES(0x39, start, 0x41, end)
        else:
            times = (b"\x39" + _fixed64(start) if start else b"") + (
                b"\x41" + _fixed64(end) if end else b""
            )
        remote = remote and parent_id is not None
        key = (status.status_code._value_, status.description, remote)
        tail = self._tails.get(key)
        if tail is None:
            code = status.status_code.value
            if code or status.description:
                encoded = _text(b"\x12", status.description or "")
                tail = _field(b"\x7a", encoded + (b"\x18" + _SMALL[code] if code else b""))
            else:
                tail = b"\x7a\x00"  # always sent, as the SDK's encoder does (empty when unset)
            tail += _FLAGS_REMOTE if remote else _FLAGS_LOCAL
            if len(self._tails) >= CACHE_MAX:
                self._tails.clear()
            self._tails[key] = tail
        span = b"".join(
            (
                _IDS(b"\x0a\x10", trace, b"\x12\x08", span_id),
                state,
                b"" if parent_id is None else _PARENT(0x22, 0x08, parent_id),
                head,
                times,
                attributes,
                events,
                tail,
            )
        )
        return b"\x12" + _varint(len(span)) + span


class WireSpanExporter(OTLPSpanExporter):
    """The official OTLP/HTTP span exporter, its request body written by
    :class:`SpanEncoder` instead of through protobuf message objects. What it sends
    (endpoint, headers, compression, timeout, retries) is the exporter's own HTTP
    client's doing, as configured by the exporter's constructor and the environment."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._encoder = SpanEncoder()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._shutdown:
            return SpanExportResult.FAILURE
        try:
            data = self._encoder.encode(spans)
        except Exception as exc:  # noqa: BLE001 - a batch that cannot be encoded is dropped
            log.error("could not encode %d spans for export: %r", len(spans), exc)
            return SpanExportResult.FAILURE
        return self._send(data)

    def export_written(
        self,
        resource: Resource,
        scope: InstrumentationScope | None,
        write: Callable[[SpanEncoder], list[bytes]],
    ) -> SpanExportResult:
        """Export the spans ``write`` writes with this exporter's encoder
        (:meth:`SpanEncoder.call_span`), all of ``resource`` and ``scope``."""
        if self._shutdown:
            return SpanExportResult.FAILURE
        try:
            data = self._encoder.request(resource, scope, write(self._encoder))
        except Exception as exc:  # noqa: BLE001 - a batch that cannot be encoded is dropped
            log.error("could not encode spans for export: %r", exc)
            return SpanExportResult.FAILURE
        return self._send(data)

    def _send(self, data: bytes) -> SpanExportResult:
        result = self._client.export(data)
        return SpanExportResult.SUCCESS if result.success else SpanExportResult.FAILURE
