"""The Gemini front door (SPEC §20): ``POST /v1beta/models/{model}:generateContent``,
``:streamGenerateContent?alt=sse`` and ``:countTokens``, ``GET /v1beta/models[/{model}]``,
and the same under ``/v1/`` (``GOOGLE_GENAI_API_VERSION=v1``).

A :class:`~routing.api.pipeline.Door` like the others, served by the same pipeline: what
is here is what differs. The URL names the model and whether to stream (the body names
neither), so the views hand both to the pipeline as ``url_fields``; the key comes in
``x-goog-api-key`` or ``?key=`` (``pipeline.authenticate``); every error leaves in Google's
shape ``{"error": {"code", "message", "status"}}`` with its status names
(``routing.protocols.gemini.reply``), and a call is recorded under the ``gemini`` door.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from functools import wraps
from typing import Any

import orjson
from django.http import HttpRequest, HttpResponse, HttpResponseBase

from routing.api import openai
from routing.api.openai import gateway_bug, table_unavailable
from routing.api.pipeline import (
    Admitted,
    Door,
    Route,
    authenticate,
    refuse,
    render,
    serve,
    wrong_method,
)
from routing.gateway.count import count_tokens
from routing.gateway.replies import ErrorReply, Reply
from routing.gateway.runtime import TableUnavailable, get_runtime
from routing.gateway.table import RoutingTable
from routing.protocols import Protocol

GEMINI_ROLES = ("user", "model")
ACTIONS = ("generateContent", "streamGenerateContent", "countTokens")
View = Callable[..., Coroutine[Any, Any, HttpResponseBase]]


def contents_errors(body: dict[str, Any]) -> ErrorReply | None:
    """What the door checks to route (SPEC §12: lenient with the rest): ``contents`` is a
    non-empty array of ``user`` / ``model`` turns, each with ``parts``."""
    contents = body.get("contents")
    if not isinstance(contents, list) or not contents:
        return _invalid("contents: must be a non-empty array of Content.")
    for i, content in enumerate(contents):
        if not isinstance(content, dict):
            return _invalid(f"contents[{i}]: must be a Content object.")
        role = content.get("role", "user")
        if role not in GEMINI_ROLES:
            return _invalid(f"contents[{i}].role: please use a valid role: user, model.")
        if not isinstance(content.get("parts"), list):
            return _invalid(f"contents[{i}].parts: must be an array of Part.")
    return None


def _google(status: int, message: str, code: str) -> ErrorReply:
    """An error of the door's own, in Google's shape."""
    return ErrorReply(status, message, code, door=Protocol.GEMINI)


def _invalid(message: str) -> ErrorReply:
    return _google(400, message, "invalid_request")


GEMINI = Door(Protocol.GEMINI, check=contents_errors)


def _counted_errors(body: dict[str, Any]) -> ErrorReply | None:
    """``contents`` as ``generateContent`` takes them, or Google's other form, a whole
    ``generateContentRequest`` (left to a gemini target to judge)."""
    if isinstance(body.get("generateContentRequest"), dict):
        return None
    return contents_errors(body)


def _as_sent(admitted: Admitted) -> Route:
    return Route(admitted.body, stream=False)


async def _count(admitted: Admitted, route: Route) -> Reply:
    """Not a call (nothing is generated, so no ledger row): the group's first target that
    counts the request — a ``gemini`` target's own ``:countTokens``, or an ``anthropic``
    target's ``count_tokens`` with the request translated — in Google's shape
    ``{"totalTokens": n}``; an estimate, marked ``x-switchyard-estimate: true``, only when
    no target of the group can count (``routing.gateway.count``)."""
    return await count_tokens(
        admitted.runtime, admitted.group, admitted.body, {}, door=Protocol.GEMINI
    )


COUNT_TOKENS = Door(Protocol.GEMINI, check=_counted_errors, route=_as_sent, answer=_count)


def in_googles_shape(view: View) -> View:
    """What django-ninja's handlers do for the ``/v1`` doors (``routing.api.openai``), for
    views outside it: no routing table, or a bug of ours, is still Google's JSON error."""

    @wraps(view)
    async def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        try:
            return await view(request, *args, **kwargs)
        except TableUnavailable as exc:
            return table_unavailable(request, exc)
        except Exception as exc:  # noqa: BLE001 - answered like every door's bug
            return gateway_bug(request, exc)

    return wrapped


@in_googles_shape
async def model_action(
    request: HttpRequest, version: str, model: str, action: str
) -> HttpResponseBase:
    """``POST …/models/{model}:{action}``: the door's call, or its token count."""
    if request.method != "POST":
        return wrong_method(request, Protocol.GEMINI)
    model = model.removeprefix("models/")
    if action == "countTokens":
        return await serve(request, COUNT_TOKENS, {"model": model})
    if action not in ACTIONS:
        message = f"Method not found: {action} (use generateContent or streamGenerateContent)."
        return await _refused(request, _google(404, message, "unknown_url"))
    stream = action == "streamGenerateContent"
    if stream and request.GET.get("alt") != "sse":
        message = "streamGenerateContent is served as server-sent events only: add ?alt=sse."
        return await _refused(request, _google(400, message, "invalid_request"))
    return await serve(request, GEMINI, {"model": model, "stream": stream})


async def _refused(request: HttpRequest, reply: ErrorReply) -> HttpResponseBase:
    """A request the door turns away before reading it: on the record with its key (a
    request without a valid key gets the key's 401 instead, as at every door)."""
    table = await get_runtime().current_table()
    key = authenticate(request, table, Protocol.GEMINI)
    if isinstance(key, ErrorReply):
        return refuse(request, key)
    return refuse(request, reply, key=key)


# ------------------------------------------------------------------------------ models
def gemini_model(name: str, table: RoutingTable) -> dict[str, Any]:
    """A group (or alias) as Google's ``Model`` resource."""
    group = table.resolve(name)
    window = group.window.tokens if group is not None else 0
    return {
        "name": f"models/{name}",
        "baseModelId": name,
        "version": "switchyard",
        "displayName": name,
        "description": f"Switchyard group '{group.name if group else name}'",
        "inputTokenLimit": window,
        "outputTokenLimit": 65536,
        "supportedGenerationMethods": ["generateContent", "countTokens"],
        "thinking": True,
    }


def visible_models(table: RoutingTable, groups: frozenset[str] | tuple[str, ...]) -> list[str]:
    """The groups a key may use, each as Gemini clients discover models."""
    return [name for name in table.groups if not groups or name in groups]


@in_googles_shape
async def list_models(request: HttpRequest, version: str = "v1beta") -> HttpResponseBase:
    """``GET /v1beta/models``: every group the key may use, in Google's list shape."""
    table = await get_runtime().current_table()
    key = authenticate(request, table, Protocol.GEMINI)
    if isinstance(key, ErrorReply):
        return render(key)
    models = [gemini_model(name, table) for name in visible_models(table, key.groups)]
    return HttpResponse(orjson.dumps({"models": models}), content_type="application/json")


@in_googles_shape
async def get_model(request: HttpRequest, version: str, model: str) -> HttpResponseBase:
    """``GET /v1beta/models/{model}``: a group or an alias; Google's 404 otherwise (under
    ``/v1``, for a Gemini client only)."""
    if version == "v1" and not wants_gemini(request):
        return await openai.unknown_endpoint(request)
    table = await get_runtime().current_table()
    key = authenticate(request, table, Protocol.GEMINI)
    if isinstance(key, ErrorReply):
        return render(key)
    name = model.removeprefix("models/")
    group = table.resolve(name)
    if group is None or (key.groups and group.name not in key.groups):
        return render(_google(404, f"models/{name} is not found.", "model_not_found"))
    return HttpResponse(orjson.dumps(gemini_model(name, table)), content_type="application/json")


async def unknown_endpoint(request: HttpRequest, rest: str = "") -> HttpResponseBase:
    """Anything else under /v1beta: Google's 404, not Django's HTML page."""
    message = f"Unknown endpoint: {request.method} {request.path}"
    return render(_google(404, message, "unknown_url"))


def wants_gemini(request: HttpRequest) -> bool:
    """A ``/v1/models`` request from a Gemini client (its key header, or ``?key=``)."""
    return "x-goog-api-key" in request.headers or "key" in request.GET


@in_googles_shape
async def v1_models(request: HttpRequest) -> HttpResponseBase:
    """``GET /v1/models``: Google's list for a Gemini client (``GOOGLE_GENAI_API_VERSION=v1``),
    OpenAI's (or Anthropic's) for everyone else (``routing.api.openai.list_models``)."""
    if request.method != "GET":
        door = Protocol.GEMINI if wants_gemini(request) else Protocol.CHAT
        message = f"{request.method} is not supported here; use GET."
        response = render(ErrorReply(405, message, "method_not_allowed", door=door))
        response["allow"] = "GET"
        return response
    if wants_gemini(request):
        return await list_models(request, "v1")
    return await openai.list_models(request)
