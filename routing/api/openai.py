"""The OpenAI-compatible edge: ``POST /v1/chat/completions`` and ``GET /v1/models``.

Thin on purpose: authenticate against the in-memory key index, parse, resolve the model,
run one ``Call``, render its reply. Every error leaves here in OpenAI's shape
``{"error": {"message", "type", "code", "param"}}`` — never a Django HTML page.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
import uuid
from typing import Any

import orjson
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, HttpResponseBase
from ninja import NinjaAPI

from routing.api.asgi import RelayResponse
from routing.gateway.call import Call
from routing.gateway.events import CallOutcome, CallRecord
from routing.gateway.replies import ErrorReply, Reply, StreamReply
from routing.gateway.runtime import TableUnavailable, get_runtime
from routing.gateway.table import GroupSpec, KeySpec, RoutingTable
from routing.protocols import Protocol, Unmappable
from routing.protocols.legs import Prepared, skipped_targets, translate_request
from routing.protocols.responses.tools import HostedTools

log = logging.getLogger("switchyard.gateway")
CHAT_ONLY = frozenset({Protocol.CHAT.value})

api = NinjaAPI(
    title="Switchyard OpenAI-compatible API",
    urls_namespace="openai",
    docs_url=None,
    openapi_url=None,
)


@api.exception_handler(TableUnavailable)
def table_unavailable(request: HttpRequest, exc: TableUnavailable) -> HttpResponseBase:
    """No table at all (not even a last good one): every door says so in its own shape."""
    return render(
        ErrorReply(503, str(exc), "configuration_unavailable", "server_error", door=_door(request))
    )


@api.exception_handler(Exception)
def gateway_bug(request: HttpRequest, exc: Exception) -> HttpResponseBase:
    """A bug of ours is still an answer in the door's own shape, never Django's HTML page
    (the call was recorded as failed on the way out)."""
    log.exception("unhandled error on %s", request.path)
    return render(
        ErrorReply(
            500, "internal gateway error", "internal_error", "server_error", door=_door(request)
        )
    )


def _door(request: HttpRequest) -> Protocol:
    return Protocol.MESSAGES if request.path.rstrip("/").endswith("/messages") else Protocol.CHAT


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
    return response


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
    made up: metric labels stay bounded)."""
    runtime = get_runtime()
    now = runtime.clock()
    started = getattr(request, "scope", {}).get("switchyard.started")
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
        record.trace_id = runtime.tracing.refused(request.headers, started_ns, record)
    runtime.hub.publish(record)
    return render(reply)


def authenticate(
    request: HttpRequest, table: RoutingTable, door: Protocol = Protocol.CHAT
) -> KeySpec | ErrorReply:
    """``Authorization: Bearer`` everywhere; ``x-api-key`` too on the Messages door."""
    header = request.headers.get("authorization", "")
    scheme, _, secret = header.partition(" ")
    if door is Protocol.MESSAGES and not secret.strip():
        scheme, secret = "bearer", request.headers.get("x-api-key", "")
    if scheme.lower() != "bearer" or not secret.strip():
        hint = "'x-api-key: <key>' or " if door is Protocol.MESSAGES else ""
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


def parse_json(request: HttpRequest, door: Protocol = Protocol.CHAT) -> dict[str, Any] | ErrorReply:
    """The body as a JSON object with a string ``model`` (every door's first check)."""
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
    if door is Protocol.CHAT and group.kinds <= CHAT_ONLY:
        return None
    try:
        kinds = (Protocol(target.provider.kind) for target in group.targets)
        hosted = HostedTools(str(group.policy.get("hosted_tools") or HostedTools.DROP))
        return translate_request(door, body, kinds, hosted_tools=hosted)
    except Unmappable as exc:
        return ErrorReply(400, str(exc), "unsupported_for_target", param=exc.param, door=door)


def skipped(prepared: Prepared | None, group: GroupSpec) -> dict[str, str]:
    """The group's targets whose kind cannot take the request, and why (never tried)."""
    return skipped_targets(prepared, ((t.key, t.provider.kind) for t in group.targets))


def parse_body(request: HttpRequest) -> dict[str, Any] | ErrorReply:
    body = parse_json(request)
    if isinstance(body, ErrorReply):
        return body
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return ErrorReply(
            400, "'messages' must be a non-empty array.", "invalid_request", param="messages"
        )
    return body


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


@api.post("/chat/completions", auth=None, include_in_schema=False)
async def chat_completions(request: HttpRequest) -> HttpResponseBase:
    runtime = get_runtime()
    table = await runtime.current_table()
    key = authenticate(request, table)
    if isinstance(key, ErrorReply):
        return refuse(request, key)
    body = parse_body(request)
    if isinstance(body, ErrorReply):
        return refuse(request, body, key=key)
    group = resolve_group(table, key, body["model"])
    if isinstance(group, ErrorReply):
        return refuse(request, group, key=key)
    prepared = prepare(Protocol.CHAT, body, group)
    if isinstance(prepared, ErrorReply):
        return refuse(request, prepared, key=key, group=group.name)
    call = Call(
        runtime,
        group,
        body,
        stream=bool(body.get("stream")),
        session=session_key(request, body),
        started=getattr(request, "scope", {}).get("switchyard.started"),
        prepared=prepared,
        skipped=skipped(prepared, group),
        key=key,
        trace_headers=request.headers,
    )
    return render(await call.run())


@api.api_operation(
    ["GET", "PUT", "PATCH", "DELETE", "OPTIONS"],
    "/chat/completions",
    auth=None,
    include_in_schema=False,
)
async def chat_completions_wrong_method(request: HttpRequest) -> HttpResponseBase:
    reply = ErrorReply(
        405, f"{request.method} is not supported here; use POST.", "method_not_allowed"
    )
    response = render(reply)
    response["allow"] = "POST"
    return response


async def unknown_endpoint(request: HttpRequest, rest: str = "") -> HttpResponseBase:
    """Anything else under /v1: an OpenAI-shaped 404, not Django's HTML page."""
    return render(
        ErrorReply(404, f"Unknown endpoint: {request.method} {request.path}", "unknown_url")
    )


@api.get("/models", auth=None, include_in_schema=False)
async def list_models(request: HttpRequest) -> HttpResponseBase:
    runtime = get_runtime()
    table = await runtime.current_table()
    anthropic = "anthropic-version" in request.headers
    key = authenticate(request, table, Protocol.MESSAGES if anthropic else Protocol.CHAT)
    if isinstance(key, ErrorReply):
        return render(key)
    if anthropic:  # what Anthropic clients discover models with (SPEC §12)
        models = [
            {
                "type": "model",
                "id": name,
                "display_name": name,
                "created_at": "1970-01-01T00:00:00Z",
            }
            for name in table.groups
            if not key.groups or name in key.groups
        ]
        listing = {
            "data": models,
            "has_more": False,
            "first_id": models[0]["id"] if models else None,
            "last_id": models[-1]["id"] if models else None,
        }
        return HttpResponse(orjson.dumps(listing), content_type="application/json")
    data = [
        {
            "id": name,
            "object": "model",
            "created": 0,
            "owned_by": "switchyard",
            "context_window": group.window.tokens,  # declared (SPEC §13)
        }
        for name, group in table.groups.items()
        if not key.groups or name in key.groups
    ]
    return HttpResponse(
        orjson.dumps({"object": "list", "data": data}), content_type="application/json"
    )
