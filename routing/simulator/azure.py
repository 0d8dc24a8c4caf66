"""Azure OpenAI on the simulator (SPEC §19): a resource's v1 API, and the token endpoint a
managed identity gets its Microsoft Entra ID tokens from.

Routes::

    POST /openai/v1/chat/completions  as /v1/chat/completions (the body's ``model`` is the
    POST /openai/v1/responses         deployment); the same scripts and faults
    POST /openai/v1/embeddings
    GET  /msi/token                   App Service's managed-identity endpoint
    GET|POST /_control/azure          read / set the key, deployments and identity header

Authentication, as Azure checks it: an ``api-key`` header (``AzureState.api_key``; None
takes any non-empty key), or ``Authorization: Bearer <token>`` with a token this simulator
issued and that has not expired. Anything else is Azure's 401, which does not echo what
was presented.

The token endpoint is what azure-identity's ``ManagedIdentityCredential`` (and so
``DefaultAzureCredential``) calls on App Service: with ``IDENTITY_ENDPOINT`` set to
``<root>/msi/token`` and ``IDENTITY_HEADER`` to ``AzureState.identity_header``, the real
library fetches real-shaped tokens from here over loopback — no cloud, no TLS, no patching.
It answers ``GET ?api-version=2019-08-01&resource=…`` with the ``X-IDENTITY-HEADER`` checked,
and counts what it issued (``token_requests``), so a test sees one fetch serve many calls.

``deployments``, when set, are the only models the resource serves: another is Azure's 404
``DeploymentNotFound``. :func:`content_filter_fail` is Azure's content-filter 400, body and
all (``innererror.code: ResponsibleAIPolicyViolation``).
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from routing.simulator.script import Fail

COGNITIVE_SERVICES = "https://cognitiveservices.azure.com"
TOKEN_PATH = "/msi/token"
PREFIX = "/openai"  # the v1 API lives under <resource>/openai/v1

Auth = Callable[[web.Request], Fail | None]
# (request, recorded body, model, body, auth): the simulator's one way to answer a model
Serve = Callable[
    [web.Request, dict[str, Any], str, dict[str, Any], Auth], Awaitable[web.StreamResponse]
]


@dataclass
class AzureState:
    """What the Azure routes check and what they issued (thread-safe: tests read it while
    the server's loop writes it)."""

    api_key: str | None = None
    identity_header: str = "sim-identity-header"
    token_lifetime_s: int = 3600
    deployments: set[str] | None = None
    clock: Callable[[], float] = time.time
    token_requests: int = 0
    issued: dict[str, float] = field(default_factory=dict)  # token -> expires_on (epoch s)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def reset(self) -> None:
        with self._lock:
            self.api_key, self.deployments = None, None
            self.identity_header, self.token_lifetime_s = "sim-identity-header", 3600
            self.token_requests = 0
            self.issued.clear()

    def configure(
        self,
        *,
        api_key: str | None = None,
        deployments: list[str] | None = None,
        identity_header: str | None = None,
        token_lifetime_s: int | None = None,
    ) -> None:
        """Set what is given (the control API's POST); TypeError for a value of the
        wrong type."""
        for value in (api_key, identity_header, *(deployments or ())):
            if value is not None and not isinstance(value, str):
                raise TypeError(f"expected a string, not {value!r}")
        with self._lock:
            if api_key is not None:
                self.api_key = api_key
            if deployments is not None:
                self.deployments = set(deployments)
            if identity_header is not None:
                self.identity_header = identity_header
            if token_lifetime_s is not None:
                self.token_lifetime_s = int(token_lifetime_s)

    def issue(self) -> tuple[str, int]:
        token = "sim-entra-" + secrets.token_urlsafe(24)
        expires_on = int(self.clock()) + self.token_lifetime_s
        with self._lock:
            self.token_requests += 1
            self.issued[token] = expires_on
        return token, expires_on

    def token_valid(self, token: str) -> bool:
        with self._lock:
            expires_on = self.issued.get(token)
        return expires_on is not None and self.clock() < expires_on


AZURE = web.AppKey("azure", AzureState)


def add_routes(app: web.Application, state: AzureState, serve: Serve) -> None:
    """Mount Azure's routes on the simulator's app; ``serve`` answers a model's request."""
    app[AZURE] = state

    async def inference(request: web.Request) -> web.StreamResponse:
        return await _inference(request, serve)

    for path in ("/v1/chat/completions", "/v1/responses", "/v1/embeddings"):
        app.router.add_post(PREFIX + path, inference)
    app.router.add_get(TOKEN_PATH, managed_identity_token)
    app.router.add_get("/_control/azure", control_azure)
    app.router.add_post("/_control/azure", control_azure)


async def control_azure(request: web.Request) -> web.Response:
    """Another process's view of :class:`AzureState`: POST ``{"api_key", "deployments",
    "identity_header", "token_lifetime_s"}`` (each optional) sets it; both answer what is
    set and how many tokens were issued (never a token)."""
    state = request.app[AZURE]
    if request.method == "POST":
        try:
            data = json.loads(await request.text())
            if not isinstance(data, dict):
                raise ValueError("expected an object")
            state.configure(**data)
        except (ValueError, TypeError) as exc:
            return web.json_response({"error": str(exc)}, status=400)
    return web.json_response(
        {
            "api_key_set": state.api_key is not None,
            "deployments": None if state.deployments is None else sorted(state.deployments),
            "token_requests": state.token_requests,
        }
    )


def _azure_error(status: int, code: str, message: str) -> Fail:
    return Fail(status, body=json.dumps({"error": {"code": code, "message": message}}))


def _denied(request: web.Request, model: str) -> Fail | None:
    """Azure's check of a request's credential, and of the deployment it names."""
    state = request.app[AZURE]
    failure = _credential_denied(request, state)
    if failure is not None or state.deployments is None:
        return failure
    if model in state.deployments:
        return None
    return _azure_error(
        404,
        "DeploymentNotFound",
        "The API deployment for this resource does not exist. If you created the "
        "deployment within the last 5 minutes, please wait a moment and try again.",
    )


def _credential_denied(request: web.Request, state: AzureState) -> Fail | None:
    key = request.headers.get("api-key")
    if key is not None:
        if key and (state.api_key is None or secrets.compare_digest(key, state.api_key)):
            return None
        return _azure_error(
            401,
            "401",
            "Access denied due to invalid subscription key or wrong API endpoint. Make sure "
            "to provide a valid key for an active subscription and use a correct regional "
            "API endpoint for your resource.",
        )
    bearer = request.headers.get("Authorization", "")
    if bearer.startswith("Bearer ") and state.token_valid(bearer.removeprefix("Bearer ")):
        return None
    return _azure_error(
        401,
        "401",
        "Unauthorized. Access token is missing, invalid, audience is incorrect "
        f"({COGNITIVE_SERVICES}), or have expired.",
    )


async def _inference(request: web.Request, serve: Serve) -> web.StreamResponse:
    try:
        body = json.loads(await request.text())
    except ValueError:
        body = None
    if not isinstance(body, dict):
        error = {"error": {"code": "invalid_request", "message": "The body must be an object."}}
        return web.json_response(error, status=400)
    model = str(body.get("model", ""))
    return await serve(request, body, model, body, lambda request: _denied(request, model))


async def managed_identity_token(request: web.Request) -> web.Response:
    """App Service's managed-identity endpoint (api-version 2019-08-01)."""
    state = request.app[AZURE]
    header = request.headers.get("X-IDENTITY-HEADER", "")
    if not secrets.compare_digest(header, state.identity_header):
        return web.json_response(
            {"statusCode": 401, "message": "The X-IDENTITY-HEADER is missing or invalid."},
            status=401,
        )
    resource = request.query.get("resource", "")
    if request.query.get("api-version") != "2019-08-01" or not resource:
        return web.json_response(
            {"statusCode": 400, "message": "api-version 2019-08-01 and a resource are required"},
            status=400,
        )
    token, expires_on = state.issue()
    return web.json_response(
        {
            "access_token": token,
            "expires_on": str(expires_on),
            "resource": resource,
            "token_type": "Bearer",
            "client_id": "00000000-0000-0000-0000-00000000517a",
        }
    )


def content_filter_fail(param: str = "prompt") -> Fail:
    """Azure's content-filter refusal of a prompt: a 400 whose body names the policy."""
    categories = ("hate", "self_harm", "sexual", "violence")
    body = {
        "error": {
            "message": "The response was filtered due to the prompt triggering Azure OpenAI's "
            "content management policy. Please modify your prompt and retry.",
            "type": None,
            "param": param,
            "code": "content_filter",
            "status": 400,
            "innererror": {
                "code": "ResponsibleAIPolicyViolation",
                "content_filter_result": {
                    name: {"filtered": name == "violence", "severity": "medium"}
                    for name in categories
                },
            },
        }
    }
    return Fail(400, body=json.dumps(body))
