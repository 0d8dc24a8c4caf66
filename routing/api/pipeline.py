"""The one pipeline every ``/v1`` front door serves through (SPEC §12).

:func:`serve` walks a request through the same steps whatever the door:

    authenticate -> parse -> the door's check -> resolve the group -> the door's route
    -> the door's answer (one ``Call``) -> render

A :class:`Door` says what differs: the protocol it speaks (which shapes its errors and its
key header), its own body rules (``check``), what its one call is (``route``: the request
translated for the group's kinds, the targets to skip), and, for a door that is not a call
(``count_tokens``), how it answers instead. Every refusal on the way is answered in the
door's shape and recorded like a call (:func:`refuse`); :func:`render` is the only place a
gateway reply becomes an HTTP response.

Thin on purpose: the key index and the routing table are in memory, nothing here touches
the database, and the gateway core (``routing.gateway``) returns plain values.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, HttpResponseBase

from routing.api.asgi import RelayResponse, started_at
from routing.api.django_seam import mark_logged
from routing.gateway.call import Call
from routing.gateway.events import CallOutcome, CallRecord
from routing.gateway.replies import ErrorReply, Reply, StreamReply
from routing.gateway.runtime import Runtime, get_runtime
from routing.gateway.state import CallState
from routing.gateway.table import GroupSpec, KeySpec, RoutingTable
from routing.protocols import Protocol, Unmappable
from routing.protocols.legs import Prepared, skipped_targets, translate_request
from routing.protocols.registry import PROTOCOLS
from routing.protocols.responses.tools import HostedTools


@dataclass(frozen=True, slots=True)
class Admitted:
    """A request past the shared steps: its key, its body and the group it resolved to."""

    request: HttpRequest
    runtime: Runtime
    door: Door
    key: KeySpec
    body: dict[str, Any]
    group: GroupSpec


@dataclass(frozen=True, slots=True)
class Route:
    """What the door's one call gets: the body, whether it streams, the request translated
    for the group's kinds (None: sent as it is) and the targets never to try (key -> why)."""

    body: dict[str, Any]
    stream: bool
    prepared: Prepared | None = None
    skipped: Mapping[str, str] = field(default_factory=dict)


def no_check(body: dict[str, Any]) -> ErrorReply | None:
    return None


def translated(admitted: Admitted) -> Route | ErrorReply:
    """The door's request translated for each kind of the group (a 400 when none can take
    it); a door that streams streams when the body says so."""
    body, group = admitted.body, admitted.group
    prepared = prepare(admitted.door.protocol, body, group)
    if isinstance(prepared, ErrorReply):
        return prepared
    return Route(body, bool(body.get("stream")), prepared, skipped(prepared, group))


async def run_call(admitted: Admitted, route: Route) -> Reply:
    """Run the door's one ``Call`` through the group."""
    request, door = admitted.request, admitted.door
    state = CallState(
        admitted.runtime,
        admitted.group,
        route.body,
        stream=route.stream,
        session=session_key(request, admitted.body),
        started=started_at(request),
        door=door.protocol,
        prepared=route.prepared,
        endpoint=door.endpoint,
        skipped=route.skipped,
        protocol_headers=door.protocol_headers(request) if door.protocol_headers else None,
        key=admitted.key,
        trace_headers=trace_context(request) if admitted.runtime.tracing is not None else None,
    )
    return await Call(state).run()


@dataclass(frozen=True, slots=True)
class Door:
    """A front door: what it speaks and what it does differently from the others.

    ``protocol`` shapes its errors and says which key headers it accepts; ``check`` is its
    own body rules after the shared ones (a JSON object with a string ``model``);
    ``route`` what its call is (or a refusal once the group is known); ``answer`` runs it
    (one ``Call``, unless the door is not a call); ``endpoint`` the upstream endpoint
    (``"embeddings"``…) its calls and refusals are recorded under; ``protocol_headers``
    the request's headers that reach same-protocol targets."""

    protocol: Protocol
    check: Callable[[dict[str, Any]], ErrorReply | None] = no_check
    route: Callable[[Admitted], Route | ErrorReply] = translated
    answer: Callable[[Admitted, Route], Awaitable[Reply]] = run_call
    endpoint: str | None = None
    protocol_headers: Callable[[HttpRequest], dict[str, str]] | None = None


async def serve(
    request: HttpRequest, door: Door, url_fields: Mapping[str, Any] | None = None
) -> HttpResponseBase:
    """Serve one request through ``door``: every refusal before the call is recorded and
    answered in the door's shape; the call's own reply is rendered as it is.
    ``url_fields``: what the URL says of the request (Gemini's model and stream), taken as
    body fields (``ProtocolSpec.url_fields``: never sent on in a body)."""
    runtime = get_runtime()
    table = await runtime.current_table()
    key = authenticate(request, table, door.protocol)
    if isinstance(key, ErrorReply):
        return refuse(request, key, endpoint=door.endpoint)
    body = read_body(request, door, url_fields)
    if isinstance(body, ErrorReply):
        return refuse(request, body, key=key, endpoint=door.endpoint)
    group = resolve_group(table, key, body["model"], door.protocol)
    if isinstance(group, ErrorReply):
        return refuse(request, group, key=key, endpoint=door.endpoint)
    admitted = Admitted(request, runtime, door, key, body, group)
    route = door.route(admitted)
    if isinstance(route, ErrorReply):
        return refuse(request, route, key=key, group=group.name, endpoint=door.endpoint)
    return render(await door.answer(admitted, route))


# --- the shared steps ------------------------------------------------------------------


# A door's own key header, beside ``Authorization: Bearer`` (what its clients send).
KEY_HEADERS = {Protocol.MESSAGES: "x-api-key", Protocol.GEMINI: "x-goog-api-key"}


def authenticate(
    request: HttpRequest, table: RoutingTable, door: Protocol = Protocol.CHAT
) -> KeySpec | ErrorReply:
    """``Authorization: Bearer`` everywhere; ``x-api-key`` too on the Messages door,
    ``x-goog-api-key`` or ``?key=`` (Google documents both) on the Gemini door."""
    header = request.headers.get("authorization", "")
    scheme, _, secret = header.partition(" ")
    own = KEY_HEADERS.get(door)
    if own is not None and not secret.strip():
        scheme, secret = "bearer", request.headers.get(own, "")
        if door is Protocol.GEMINI and not secret.strip():
            secret = request.GET.get("key", "")
    if scheme.lower() != "bearer" or not secret.strip():
        hint = f"'{own}: <key>' or " if own is not None else ""
        return ErrorReply(
            401,
            f"Missing API key: send {hint}'Authorization: Bearer <key>'.",
            "missing_api_key",
            door=door,
        )
    key = table.keys.get(hashlib.sha256(secret.strip().encode()).hexdigest())
    if key is None:
        return ErrorReply(401, "Invalid or revoked API key.", "invalid_api_key", door=door)
    if key.kind == "admin":  # least privilege (SPEC §9): admin keys manage, clients call
        return ErrorReply(
            403,
            "Admin keys manage Switchyard and are refused on /v1: use a client key "
            "(python manage.py createkey NAME).",
            "admin_key_not_allowed",
            "permission_error",
            door=door,
        )
    return key


def parse_json(
    request: HttpRequest,
    door: Protocol = Protocol.CHAT,
    url_fields: Mapping[str, Any] | None = None,
) -> dict[str, Any] | ErrorReply:
    """The body as a JSON object with a string ``model`` (every door's first check);
    ``url_fields`` (what the URL says: Gemini's model and stream) join it first."""
    try:
        raw = request.body
    except RequestDataTooBig:
        return ErrorReply(413, "Request body is too large.", "request_too_large", door=door)
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return ErrorReply(400, "Request body is not valid JSON.", "invalid_json", door=door)
    if not isinstance(body, dict):
        return ErrorReply(400, "Request body must be a JSON object.", "invalid_request", door=door)
    if url_fields:
        body.update(url_fields)
    if len(raw) > 2 * JSON_DEPTH_MAX and too_deep(body):
        return ErrorReply(
            400,
            f"Request body is nested too deeply (more than {JSON_DEPTH_MAX} levels).",
            "invalid_json",
            door=door,
        )
    model = body.get("model")
    if not isinstance(model, str) or not model:
        return ErrorReply(
            400,
            "'model' is required and must be a string.",
            "invalid_request",
            param="model",
            door=door,
        )
    if "stream" in body and not isinstance(body["stream"], bool):
        return ErrorReply(
            400, "'stream' must be a boolean.", "invalid_request", param="stream", door=door
        )
    return body


# How deep a body may nest: what ``orjson.dumps`` writes (it parses 1,024 levels but writes
# 254), so that every body taken can be sent on: a deeper one used to fail as it was sent,
# a 500 and two tracebacks, instead of the client's 400.
JSON_DEPTH_MAX = 254


def too_deep(body: object) -> bool:
    """Whether ``body`` nests deeper than :data:`JSON_DEPTH_MAX`. Asked only of a body long
    enough to (255 levels take 510 bytes); writing it is the fastest full walk there is
    (C, a fifth of parsing it), and it is the very limit that matters."""
    try:
        orjson.dumps(body)
    except orjson.JSONEncodeError:
        return True
    return False


def read_body(
    request: HttpRequest, door: Door, url_fields: Mapping[str, Any] | None = None
) -> dict[str, Any] | ErrorReply:
    """The shared body rules (:func:`parse_json`), then the door's own."""
    body = parse_json(request, door.protocol, url_fields)
    if isinstance(body, ErrorReply):
        return body
    invalid = door.check(body)
    return body if invalid is None else invalid


def resolve_group(
    table: RoutingTable, key: KeySpec, model: str, door: Protocol = Protocol.CHAT
) -> GroupSpec | ErrorReply:
    # A scoped key learns nothing about groups it may not use: the same 404 as for a
    # model that does not exist (SPEC §9).
    group = table.resolve(model)
    name = group.name if group is not None else model
    if group is None and model not in table.broken and table.aliases:
        name = table.alias_of(model) or model  # an alias of a group that cannot serve
    visible = not key.groups or name in key.groups
    if not visible:
        group = None
    if group is None and visible and name in table.broken:
        return ErrorReply(
            503,
            f"The model '{model}' cannot be served: {table.broken[name]}. "
            "Fix the group's configuration; other models are unaffected.",
            "group_unavailable",
            "server_error",
            "model",
            door=door,
        )
    if group is None:
        return ErrorReply(
            404,
            f"The model '{model}' does not exist.",
            "model_not_found",
            param="model",
            door=door,
        )
    return group


def prepare(door: Protocol, body: dict[str, Any], group: GroupSpec) -> Prepared | None | ErrorReply:
    """The request translated for the group's other kinds; None when none is needed (the
    chat door in front of chat targets: the existing pass-through, untouched). A 400 when
    no target of the group can take it (``skipped`` names the targets some can't)."""
    if group.protocols in ((), (door,)) and PROTOCOLS[door].canonical:
        return None
    try:
        hosted = HostedTools(str(group.policy.get("hosted_tools") or HostedTools.DROP))
        return translate_request(door, body, group.protocols, hosted_tools=hosted)
    except Unmappable as exc:
        return ErrorReply(400, str(exc), "unsupported_for_target", param=exc.param, door=door)


def skipped(prepared: Prepared | None, group: GroupSpec) -> dict[str, str]:
    """The group's targets whose kind cannot take the request, and why (never tried)."""
    return skipped_targets(prepared, ((t.key, t.provider.kind) for t in group.targets))


def session_key(request: HttpRequest, body: dict[str, Any]) -> str | None:
    """``x-session-id``; the agents' own session headers (Claude Code's
    ``x-claude-code-session-id``, Codex's ``session-id``); ``user``; ``metadata.session_id``."""
    headers = request.headers
    session = (
        headers.get("x-session-id")
        or headers.get("x-claude-code-session-id")
        or headers.get("session-id")
        or body.get("user")
    )
    if not session:
        metadata = body.get("metadata")
        if isinstance(metadata, dict):
            session = metadata.get("session_id")
    return str(session)[:200] if session else None


def trace_context(request: HttpRequest) -> dict[str, str] | None:
    """The request's W3C trace context (``traceparent`` and ``tracestate``) as tracing
    reads it, straight from ``META``; None without a ``traceparent`` (a new trace)."""
    meta = request.META
    parent = meta.get("HTTP_TRACEPARENT")
    if not parent:
        return None
    state = meta.get("HTTP_TRACESTATE")
    return {"traceparent": parent, "tracestate": state} if state else {"traceparent": parent}


# --- the way out -----------------------------------------------------------------------


def refuse(
    request: HttpRequest,
    reply: ErrorReply,
    *,
    key: KeySpec | None = None,
    group: str = "",
    endpoint: str | None = None,
) -> HttpResponseBase:
    """Answer a request a door turns away before routing, and put it on the record: a
    call with outcome ``refused``, its reason and key (SPEC §12), in the ledger, on the
    Calls page and in ``/metrics``. Publishing only enqueues: no I/O on the request path.
    ``group`` is the group the request resolved to, or ``""`` (never a name the client
    made up: metric labels stay bounded).

    A refusal for want of a valid key (401) is counted, and recorded only as a sample, at
    most one per client address and minute (``routing.engine.refusals``): anyone can send
    those, and each one on the record would push real history out of the capped ledger."""
    runtime = get_runtime()
    now = runtime.clock()
    if key is None and reply.status == 401:
        source = request.META.get("REMOTE_ADDR") or ""
        if not runtime.keyless.record(source, now):
            return render(reply)
    started = started_at(request)
    elapsed_ms = 0.0
    if started is not None:
        elapsed_ms = max(0.0, (asyncio.get_running_loop().time() - started) * 1000)
    record = CallRecord(
        call_id=uuid.uuid4().hex,
        group=group,
        session=None,
        stream=False,
        started_at=now,
        outcome=CallOutcome.REFUSED,
        elapsed_ms=elapsed_ms,
        error_code=reply.code,
        http_status=reply.status,
        front_door=reply.door.value,
        endpoint=endpoint,
        key_id=key.id if key is not None else None,
        key_name=key.name if key is not None else "",
        reason=reply.message,
    )
    if runtime.tracing is not None:  # one span, status error (SPEC §18)
        started_ns = time.time_ns() - int(elapsed_ms * 1e6)
        record.trace_id = runtime.tracing.refused(trace_context(request), started_ns, record)
    runtime.hub.publish(record)
    return render(reply)


def render(reply: Reply) -> HttpResponseBase:
    """Turn a gateway reply into an HTTP response — the only place that does."""
    if isinstance(reply, StreamReply):
        relay = RelayResponse(
            reply.chunks,
            abandon=reply.abandon,
            content_type="text/event-stream",
            headers=reply.headers,
        )
        relay["cache-control"] = "no-cache"
        relay["x-accel-buffering"] = "no"
        return relay
    body = reply.body  # JSON answers and OpenAI-shaped errors alike
    response = HttpResponse(
        body, status=reply.status, content_type="application/json", headers=reply.headers
    )
    response["content-length"] = str(len(body))  # /v1 runs without CommonMiddleware
    if isinstance(reply, ErrorReply):
        # The gateway already retried and switched: a client retry would replay the chain
        # (a limit's refusal says itself whether waiting helps).
        response.setdefault("x-should-retry", "false")
        if reply.logged:
            mark_logged(response)
    return response


def wrong_method(request: HttpRequest, door: Protocol) -> HttpResponseBase:
    """A door asked with a method other than POST: 405, ``Allow: POST``, in its shape."""
    reply = ErrorReply(
        405, f"{request.method} is not supported here; use POST.", "method_not_allowed", door=door
    )
    response = render(reply)
    response["allow"] = "POST"
    return response
