"""OpenAPI description of the OpenAI-compatible ``/v1`` endpoints, for ``/api/docs``.

The ``/v1`` views parse their bodies by hand (they are on the hot path and must answer
every error in OpenAI's shape), so ninja cannot derive their schema. This module describes
them with pydantic models and :func:`v1_openapi` merges the result into the management
API's document (``NinjaAPI(openapi_extra=...)``): one page documents both. The bodies are
the OpenAI shapes the official SDKs send; fields the gateway passes through untouched are
allowed (``extra``), only ``model`` is rewritten per target.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

REF = "#/components/schemas/{model}"


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]] | None = None


class ChatCompletionRequest(BaseModel):
    """Sent upstream as it is, with ``model`` replaced by the chosen target's model."""

    model_config = ConfigDict(extra="allow")
    model: str = Field(description="a group name (e.g. `auto`) or a `provider/model` address")
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool = Field(False, description="server-sent events, `data: [DONE]` at the end")
    user: str | None = Field(None, description="session for affinity (or `x-session-id`)")
    metadata: dict[str, Any] | None = Field(None, description="`session_id` also sets affinity")


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class ChatCompletion(BaseModel):
    """The upstream's answer as it is, except ``model``: the name the request asked for (the
    concrete model that answered is the ``x-switchyard-target`` header)."""

    model_config = ConfigDict(extra="allow")
    id: str
    object: Literal["chat.completion"]
    model: str
    choices: list[dict[str, Any]]
    usage: Usage | None = None


class ModelEntry(BaseModel):
    id: str = Field(description="a group name clients can put in `model`")
    object: Literal["model"]
    created: int
    owned_by: str
    context_window: int | None = Field(description="the group's declared context window")


class ModelList(BaseModel):
    object: Literal["list"]
    data: list[ModelEntry]


class ErrorDetail(BaseModel):
    message: str = Field(description="for ROUTES_EXHAUSTED: one line per target")
    type: str
    code: str | None = Field(description="e.g. ROUTES_EXHAUSTED, invalid_api_key, model_not_found")
    param: str | None


class ErrorBody(BaseModel):
    error: ErrorDetail


class AnthropicErrorDetail(BaseModel):
    type: str = Field(description="e.g. authentication_error, api_error, overloaded_error")
    message: str


class AnthropicErrorBody(BaseModel):
    """The Messages door answers errors in Anthropic's shape."""

    type: Literal["error"]
    error: AnthropicErrorDetail


HEADERS = {
    name: {"description": text, "schema": {"type": "string"}}
    for name, text in {
        "x-switchyard-target": "provider/model that answered",
        "x-switchyard-attempts": "upstream attempts this call made",
        "x-switchyard-trail": "every attempt, e.g. `p1/a:SERVER:503,p1/a:ok`",
        "x-switchyard-request-id": "the call id (the calls page and /api/v1/calls)",
        "x-switchyard-overhead-ms": "time spent in the gateway itself",
    }.items()
}


def _json(model: type[BaseModel]) -> dict[str, Any]:
    return {"application/json": {"schema": {"$ref": REF.format(model=model.__name__)}}}


def _errors(*codes: int, body: type[BaseModel] = ErrorBody) -> dict[str, Any]:
    meaning = {
        400: "malformed JSON or a missing field",
        401: "missing, wrong or revoked key",
        403: "an admin key, or a key that may not use this group",
        404: "unknown model (group)",
        413: "body too large",
        502: "every target failed (`ROUTES_EXHAUSTED`)",
        503: "no target could be tried (`Retry-After`)",
    }
    return {str(code): {"description": meaning[code], "content": _json(body)} for code in codes}


TAG = "v1 (OpenAI-compatible)"
# The other doors: (path, operationId, summary, error body) — the chat door has its own.
DOORS: tuple[tuple[str, str, str, type[BaseModel]], ...] = (
    (
        "/v1/messages",
        "v1_messages",
        "Anthropic Messages door to the same groups (`x-api-key` accepted)",
        AnthropicErrorBody,
    ),
    ("/v1/responses", "v1_responses", "OpenAI Responses door to the same groups", ErrorBody),
    ("/v1/embeddings", "v1_embeddings", "Embeddings routed through a group", ErrorBody),
)


def v1_openapi() -> dict[str, Any]:
    """``paths``, ``components`` and ``tags`` to merge into the management API's schema."""
    return {
        "tags": [{"name": TAG, "description": "For clients: a client key."}],
        "components": {
            "schemas": _schemas(),
            "securitySchemes": {
                "ClientKey": {"type": "http", "scheme": "bearer", "description": "a client key"}
            },
        },
        "paths": {
            "/v1/chat/completions": {"post": _chat_completions()},
            **{
                path: {"post": _door(operation, summary, error_body)}
                for path, operation, summary, error_body in DOORS
            },
            "/v1/models": {"get": _models()},
        },
    }


def _operation(operation_id: str, summary: str, rest: dict[str, Any]) -> dict[str, Any]:
    """One ``/v1`` operation: for clients, with a client key."""
    head = {"tags": [TAG], "operationId": operation_id, "summary": summary}
    return {**head, "security": [{"ClientKey": []}], **rest}


def _schemas() -> dict[str, Any]:
    schemas: dict[str, Any] = {}
    for model in (ChatCompletionRequest, ChatCompletion, ModelList, ErrorBody, AnthropicErrorBody):
        schema = model.model_json_schema(ref_template=REF)
        schemas.update(schema.pop("$defs", {}))
        schemas[model.__name__] = schema
    return schemas


def _chat_completions() -> dict[str, Any]:
    summary = "Chat completion routed through a group (streaming or not)"
    rest = {
        "parameters": [
            {
                "name": "x-session-id",
                "in": "header",
                "required": False,
                "schema": {"type": "string"},
                "description": "keep a conversation on one target while healthy",
            }
        ],
        "requestBody": {"required": True, "content": _json(ChatCompletionRequest)},
        "responses": {
            "200": {
                "description": "the answer (JSON), or an SSE stream when `stream`",
                "headers": HEADERS,
                "content": {
                    **_json(ChatCompletion),
                    "text/event-stream": {"schema": {"type": "string"}},
                },
            },
            **_errors(400, 401, 403, 404, 413, 502, 503),
        },
    }
    return _operation("v1_chat_completions", summary, rest)


def _door(operation: str, summary: str, error_body: type[BaseModel]) -> dict[str, Any]:
    """A door whose body is the provider's own shape: only ``model`` is the gateway's."""
    any_body = {
        "type": "object",
        "required": ["model"],
        "properties": {"model": {"type": "string"}},
        "additionalProperties": True,
    }
    rest = {
        "requestBody": {"required": True, "content": {"application/json": {"schema": any_body}}},
        "responses": {
            "200": {"description": "the door's own answer shape (JSON or SSE)", "headers": HEADERS},
            **_errors(400, 401, 403, 404, 502, 503, body=error_body),
        },
    }
    return _operation(operation, summary, rest)


def _models() -> dict[str, Any]:
    responses = {
        "200": {"description": "OpenAI's list shape", "content": _json(ModelList)},
        **_errors(401, 403),
    }
    summary = "The groups this key may use, with their context windows"
    return _operation("v1_models", summary, {"responses": responses})
