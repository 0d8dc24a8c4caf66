"""The aiohttp application: OpenAI routes plus a small control API.

Routes::

    POST /v1/chat/completions   next scripted behaviour for the body's "model"
    POST /v1/messages           the same, in Anthropic Messages shapes (x-api-key auth)
    POST /v1/messages/count_tokens  ``{"input_tokens": n}`` (recorded; consumes no script;
                                    400 with no messages)
    POST /v1/responses          the same, in OpenAI Responses shapes
    POST /v1beta/models/{model}:generateContent  the same, in Gemini's shapes (the model
                                and, with ``:streamGenerateContent?alt=sse``, the stream
                                named by the path; ``x-goog-api-key`` auth); also under /v1
    POST /model/{modelId}/invoke | /invoke-with-response-stream | /converse |
         /converse-stream       Amazon Bedrock (``bedrock``): the model is the path's,
                                streams are event-stream frames, SigV4 checked against
                                ``aws_keys`` (or a Bedrock API key as Bearer)
    POST /model/{modelId}/count-tokens  ``{"inputTokens": n}`` for an InvokeModel body
    POST /v1/embeddings         one vector per input (a scripted Fail/Delay/Reset applies)
    GET  /v1/models             OpenAI list of the configured (or scripted) models
    POST /openai/v1/chat/completions, /openai/v1/responses, /openai/v1/embeddings
                                Azure OpenAI's v1 API (``api-key`` or an issued Entra
                                token), and GET /msi/token, the managed identity's token
                                endpoint (``routing.simulator.azure``)
    POST /v1/projects/{project}/locations/{region}/publishers/{anthropic|google}/models/…
                                Vertex AI (``routing.simulator.vertex``): Bearer tokens that
                                ``POST /token`` issued to a registered service account
    POST /token                 the OAuth token endpoint a service-account file points at
    POST /_control/script       {"model", "behaviours": [...], "then": {...} | null}
    POST /_control/default      {"behaviour": {...}}
    POST /_control/reset        forget scripts, counters, records; restore the default
    GET  /_control/stats        {"total", "by_model", "open", "disconnected"}
    GET  /_control/requests     the recorded chat-completions requests

The control API is unauthenticated: the simulator only ever listens on loopback.
When an ``api_key`` is configured the ``/v1`` routes require ``Bearer <api_key>`` and
answer 401 ``invalid_api_key`` with a message that echoes the presented key, as real
providers do (the gateway must scrub it before logging or surfacing it).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from routing.simulator import azure, bedrock
from routing.simulator.gemini import model_and_stream
from routing.simulator.payloads import error_body, usage_for
from routing.simulator.play import ClientGone, CutByScript, Exchange, perform
from routing.simulator.script import Behaviour, Fail, behaviour_from_dict
from routing.simulator.state import Ledger
from routing.simulator.vertex import (
    GoogleAuthority,
    bearer_failure,
    body_problem,
    google_error,
    vertex_path,
)


@dataclass
class Upstream:
    """What the routes share: the ledger, auth and model list, in-flight handlers."""

    ledger: Ledger
    api_key: str | None = None
    models: list[str] | None = None
    aws_keys: dict[str, str] | None = None  # Bedrock: access key id -> secret (SigV4)
    handlers: set[asyncio.Task[Any]] = field(default_factory=set)
    google: GoogleAuthority = field(default_factory=GoogleAuthority)  # Vertex AI's tokens
    stopping: bool = False
    azure: azure.AzureState = field(default_factory=azure.AzureState)


UPSTREAM = web.AppKey("upstream", Upstream)


def build_app(upstream: Upstream) -> web.Application:
    app = web.Application()
    app[UPSTREAM] = upstream
    app.router.add_post("/v1/chat/completions", chat_completions)
    app.router.add_post("/v1/messages", chat_completions)
    app.router.add_post("/v1/messages/count_tokens", count_tokens)
    app.router.add_post("/v1/responses", chat_completions)
    app.router.add_post("/v1/responses/compact", chat_completions)
    app.router.add_post("/v1/embeddings", chat_completions)
    app.router.add_get("/v1/models", list_models)
    app.router.add_get("/v1beta/models", list_gemini_models)
    app.router.add_post("/v1beta/models/{target}", generate_content)
    app.router.add_post("/v1/models/{target}", generate_content)
    app.router.add_post("/model/{tail:.+}", invoke_model)
    azure.add_routes(app, upstream.azure, _serve)
    app.router.add_post("/v1/projects/{tail:.+}", vertex_predict)
    app.router.add_post("/token", google_token)
    app.router.add_post("/_control/script", control_script)
    app.router.add_post("/_control/default", control_default)
    app.router.add_post("/_control/reset", control_reset)
    app.router.add_get("/_control/stats", control_stats)
    app.router.add_get("/_control/requests", control_requests)
    return app


def _error(status: int, message: str, code: str | None = None) -> web.Response:
    body = error_body(message, "invalid_request_error", code)
    return web.json_response(body, status=status)


def _auth_failure(request: web.Request, api_key: str | None) -> Fail | None:
    if api_key is None:
        return None
    if model_and_stream(request.path) is not None:
        return _google_auth_failure(request, api_key)
    header = request.headers.get("Authorization", "")
    presented = header.removeprefix("Bearer ").strip()
    if request.path == "/v1/messages" and "x-api-key" in request.headers:
        header, presented = "Bearer ", request.headers["x-api-key"].strip()
    if header.startswith("Bearer ") and presented == api_key:
        return None
    if request.path == "/v1/messages":
        return Fail(401, f"invalid x-api-key: {presented}", type="authentication_error")
    if not presented:
        message = "You didn't provide an API key. Send it as 'Authorization: Bearer <key>'."
    else:  # echoed in full on purpose: the gateway under test must scrub it
        message = f"Incorrect API key provided: {presented}. Check your key and try again."
    return Fail(401, message, code="invalid_api_key", type="invalid_request_error")


def _google_auth_failure(request: web.Request, api_key: str) -> Fail | None:
    """Google's answers: a bearer token is taken for an OAuth token; a wrong key is a 400
    (echoed here on purpose, like the others: the gateway under test must scrub it)."""
    if "Authorization" in request.headers:
        return Fail(
            401,
            "Request had invalid authentication credentials. Expected OAuth 2 access token.",
        )
    presented = request.headers.get("x-goog-api-key", "")
    if presented == api_key:
        return None
    return Fail(400, f"API key not valid. Please pass a valid API key. ({presented})")


async def _json_object(request: web.Request) -> dict[str, Any] | None:
    try:
        data = json.loads(await request.text())
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


async def chat_completions(request: web.Request) -> web.StreamResponse:
    body = await _json_object(request)
    if body is None:
        return _error(400, "The request body must be a JSON object.")
    return await _serve(request, body, str(body.get("model", "")), body)


async def generate_content(request: web.Request) -> web.StreamResponse:
    """Gemini's routes: the model and whether to stream are the path's; the body (recorded
    as it came) has neither."""
    named = model_and_stream(request.path)
    body = await _json_object(request)
    if body is not None and request.path.endswith(":countTokens"):
        return await count_gemini_tokens(request, body)
    if named is None or body is None:
        error = {"code": 400, "message": "Invalid JSON payload.", "status": "INVALID_ARGUMENT"}
        return web.json_response({"error": error}, status=400 if body is None else 404)
    model, stream = named
    if stream and request.query.get("alt") != "sse":
        error = {
            "code": 400,
            "message": "the simulator streams alt=sse only",
            "status": "INVALID_ARGUMENT",
        }
        return web.json_response({"error": error}, status=400)
    return await _serve(request, body, model, {**body, "model": model, "stream": stream})


async def invoke_model(request: web.Request) -> web.StreamResponse:
    """Bedrock's runtime routes: the model and the action are the (raw) path's; the
    credentials are checked before anything else, as AWS does."""
    upstream = request.app[UPSTREAM]
    raw = await request.read()
    named = bedrock.model_and_action(request.raw_path)
    denied = bedrock.auth_failure(
        request.method,
        request.raw_path,
        request.headers,
        raw,
        aws_keys=upstream.aws_keys,
        api_key=upstream.api_key,
    )
    if named is None or denied is not None:
        status, kind, message = denied or (404, "UnknownOperationException", "not found")
        return web.json_response(
            {"message": message}, status=status, headers={"x-amzn-ErrorType": kind}
        )
    model, action = named
    body = await _json_object(request)
    problem = bedrock.invalid_body("invoke" if action == "count-tokens" else action, body)
    if problem is not None:
        return web.json_response(
            {"message": problem}, status=400, headers={"x-amzn-ErrorType": "ValidationException"}
        )
    assert body is not None
    if action == "count-tokens":
        return web.json_response({"inputTokens": bedrock.count_tokens(body)})
    stream = action in bedrock.STREAMS
    served = {**body, "model": model, "stream": stream}
    return await _serve(request, body, model, served, auth=_checked)


def _checked(request: web.Request) -> None:
    """A route that checked the request's credential itself (Bedrock's SigV4 or key)."""
    return None


async def vertex_predict(request: web.Request) -> web.StreamResponse:
    """Vertex AI's model paths: Claude's Messages (rawPredict, count-tokens) and Gemini's
    generateContent, the model and the stream named by the path, a Bearer token required."""
    named = vertex_path(request.path)
    body = await _json_object(request)
    if named is None or body is None:
        status, message = (404, "Not found.") if named is None else (400, "Invalid JSON payload.")
        name = "NOT_FOUND" if named is None else "INVALID_ARGUMENT"
        return web.json_response(google_error(status, message, name), status=status)
    upstream = request.app[UPSTREAM]
    denied = bearer_failure(upstream.google, request.headers.get("Authorization", ""))
    problem = body_problem(named, body)
    if denied is None and problem is not None:
        denied = Fail(400, body=json.dumps(google_error(400, problem, "INVALID_ARGUMENT")))
    if named.count_tokens:
        return await _vertex_count_tokens(request, body, denied)
    stream = named.stream if named.publisher == "google" else bool(body.get("stream"))
    if denied is None and named.publisher == "google" and stream:
        if request.query.get("alt") != "sse":
            message = "the simulator streams alt=sse only"
            denied = Fail(400, body=json.dumps(google_error(400, message, "INVALID_ARGUMENT")))
    view = {**body, "model": named.model, "stream": stream}
    return await _serve(request, body, named.model, view, auth=lambda _: denied)


async def _vertex_count_tokens(
    request: web.Request, body: dict[str, Any], denied: Fail | None
) -> web.Response:
    headers = {k.lower(): v for k, v in request.headers.items()}
    ledger = request.app[UPSTREAM].ledger
    record = ledger.begin(str(body.get("model", "")), body, headers, request.path, b"")
    ledger.finish(record, disconnected=False)
    if denied is not None:
        return web.Response(
            status=denied.status, text=denied.body or "", content_type="application/json"
        )
    return web.json_response({"input_tokens": usage_for(body, "")["prompt_tokens"]})


async def google_token(request: web.Request) -> web.Response:
    """The OAuth 2.0 token endpoint (a JWT-bearer grant, form-encoded, as google-auth sends)."""
    form = {key: str(value) for key, value in (await request.post()).items()}
    status, answer = request.app[UPSTREAM].google.grant(form)
    return web.json_response(answer, status=status)


async def _serve(
    request: web.Request,
    recorded: dict[str, Any],
    model: str,
    body: dict[str, Any],
    auth: Callable[[web.Request], Fail | None] | None = None,
) -> web.StreamResponse:
    """Answer with the model's next scripted behaviour; ``recorded`` is the body the
    ledger keeps, ``body`` what the behaviours read; ``auth`` a platform's own check of
    the request's credential (Azure's), else the configured ``api_key``'s."""
    upstream = request.app[UPSTREAM]
    headers = {k.lower(): v for k, v in request.headers.items()}
    record = upstream.ledger.begin(model, recorded, headers, request.path, await request.read())
    task = asyncio.current_task()
    if task is not None:
        upstream.handlers.add(task)
    try:
        behaviour: Behaviour | None = (
            _auth_failure(request, upstream.api_key) if auth is None else auth(request)
        )
        if behaviour is None:
            behaviour = upstream.ledger.next_behaviour(model)
        exchange = Exchange(
            request,
            body,
            model,
            upstream.ledger,
            settle=lambda: upstream.ledger.finish(record, disconnected=False),
            raw=record.raw,
        )
        response = await perform(behaviour, exchange)
    except ClientGone as gone:
        upstream.ledger.finish(record, disconnected=True)
        return gone.response or web.Response()  # aiohttp's own write now fails quietly
    except CutByScript as cut:
        upstream.ledger.finish(record, disconnected=False)
        return cut.response or web.Response()
    except asyncio.CancelledError:
        # aiohttp cancels the handler when the client goes away; stop() does too.
        upstream.ledger.finish(record, disconnected=not upstream.stopping)
        raise
    finally:
        upstream.handlers.discard(task)
    upstream.ledger.finish(record, disconnected=False)  # no-op when settle() already ran
    return response


async def count_tokens(request: web.Request) -> web.Response:
    upstream = request.app[UPSTREAM]
    body = await _json_object(request)
    if body is None:
        return _error(400, "The request body must be a JSON object.")
    headers = {k.lower(): v for k, v in request.headers.items()}
    record = upstream.ledger.begin(
        str(body.get("model", "")), body, headers, request.path, await request.read()
    )
    upstream.ledger.finish(record, disconnected=False)
    denied = _auth_failure(request, upstream.api_key)
    if denied is not None:
        return web.json_response(
            {"type": "error", "error": {"type": "authentication_error", "message": denied.message}},
            status=401,
        )
    if not body.get("messages"):  # as Anthropic answers a request with nothing to count
        error = {
            "type": "invalid_request_error",
            "message": "messages: at least one message is required",
        }
        return web.json_response({"type": "error", "error": error}, status=400)
    return web.json_response({"input_tokens": usage_for(body, "")["prompt_tokens"]})


async def count_gemini_tokens(request: web.Request, body: dict[str, Any]) -> web.Response:
    """Gemini's ``:countTokens``: ``{"totalTokens": n}`` (recorded under the path's model;
    consumes no script), Google's 400 when there is nothing to count."""
    upstream = request.app[UPSTREAM]
    model = request.path.rpartition("/models/")[2].partition(":")[0]
    headers = {k.lower(): v for k, v in request.headers.items()}
    record = upstream.ledger.begin(model, body, headers, request.path, await request.read())
    upstream.ledger.finish(record, disconnected=False)
    key = upstream.api_key
    denied = None if key is None else _google_auth_failure(request, key)
    if denied is None and not isinstance(body.get("contents"), list):
        denied = Fail(400, "contents must not be empty")
    if denied is not None:
        name = "INVALID_ARGUMENT" if denied.status == 400 else "UNAUTHENTICATED"
        error = {"code": denied.status, "message": denied.message, "status": name}
        return web.json_response({"error": error}, status=denied.status)
    return web.json_response({"totalTokens": usage_for(body, "")["prompt_tokens"]})


async def list_models(request: web.Request) -> web.Response:
    upstream = request.app[UPSTREAM]
    denied = _auth_failure(request, upstream.api_key)
    if denied is not None:
        return _error(denied.status, denied.message, denied.code)
    names = upstream.models if upstream.models is not None else upstream.ledger.scripted_models()
    data = [
        {"id": name, "object": "model", "created": 0, "owned_by": "switchyard-simulator"}
        for name in names
    ]
    return web.json_response({"object": "list", "data": data})


async def list_gemini_models(request: web.Request) -> web.Response:
    """Google's model list: ``models/``-prefixed names and what each can do (an embedding
    model among them, as Gemini lists one)."""
    upstream = request.app[UPSTREAM]
    if upstream.api_key is not None and request.headers.get("x-goog-api-key") != upstream.api_key:
        error = {"code": 400, "message": "API key not valid.", "status": "INVALID_ARGUMENT"}
        return web.json_response({"error": error}, status=400)
    names = upstream.models if upstream.models is not None else upstream.ledger.scripted_models()
    models = [
        {"name": f"models/{name}", "supportedGenerationMethods": ["generateContent"]}
        for name in names
    ]
    models.append({"name": "models/sim-embedding", "supportedGenerationMethods": ["embedContent"]})
    return web.json_response({"models": models})


async def control_script(request: web.Request) -> web.Response:
    data = await _json_object(request)
    if data is None or not isinstance(data.get("model"), str):
        return _error(400, "expected {'model': str, 'behaviours': [...], 'then': {...}}")
    try:
        behaviours = [behaviour_from_dict(b) for b in data.get("behaviours") or []]
        then = behaviour_from_dict(data["then"]) if data.get("then") is not None else None
    except (ValueError, TypeError) as exc:
        return _error(400, str(exc))
    request.app[UPSTREAM].ledger.script(data["model"], behaviours, then)
    return web.json_response({"ok": True, "model": data["model"], "queued": len(behaviours)})


async def control_default(request: web.Request) -> web.Response:
    data = await _json_object(request)
    try:
        behaviour = behaviour_from_dict((data or {}).get("behaviour"))  # type: ignore[arg-type]
    except (ValueError, TypeError) as exc:
        return _error(400, str(exc))
    request.app[UPSTREAM].ledger.set_default(behaviour)
    return web.json_response({"ok": True})


async def control_reset(request: web.Request) -> web.Response:
    request.app[UPSTREAM].ledger.reset()
    request.app[UPSTREAM].azure.reset()
    request.app[UPSTREAM].google.reset()
    return web.json_response({"ok": True})


async def control_stats(request: web.Request) -> web.Response:
    return web.json_response(request.app[UPSTREAM].ledger.stats())


async def control_requests(request: web.Request) -> web.Response:
    records = [
        {k: v for k, v in dataclasses.asdict(r).items() if k != "raw"}
        for r in request.app[UPSTREAM].ledger.records()
    ]
    return web.json_response({"requests": records})
