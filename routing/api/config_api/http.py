"""HTTP plumbing shared by the configuration endpoints: versions as ETags, preconditions,
JSON bodies, path names, and request-body documentation from the pydantic schemas."""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from typing import Annotated, Any

import orjson
from django.http import HttpRequest, HttpResponse
from ninja import Header
from pydantic import BaseModel, ValidationError

from routing import selectors, services
from routing.api.pipeline import JSON_DEPTH_MAX
from routing.config.errors import ConfigError
from routing.config.fields import nullable_fields
from routing.config.schema import GROUP_NAME_RE, PROVIDER_NAME_RE, field_errors, policy_models

_TAG = re.compile(r'^(?:W/)?"?(\d{1,18})"?$')
# Names are checked by validators, which JSON Schema cannot see; documenting them as
# patterns tells clients (and schema-driven fuzzers) what a valid name looks like.
_NAME_PATTERNS: dict[str, dict[str, str]] = {
    "ProviderIn": {"name": PROVIDER_NAME_RE},
    "GroupIn": {"name": GROUP_NAME_RE},
    "TargetIn": {"provider": PROVIDER_NAME_RE},
}


class PreconditionRequired(Exception):
    """A write named no usable version (428)."""

    def __init__(self, detail: str, current_version: int) -> None:
        self.detail, self.current_version = detail, current_version
        super().__init__(detail)


IfMatch = Annotated[
    str | None,
    Header(
        None,
        alias="If-Match",
        description='Required on writes: the ETag you read, e.g. W/"3". 428 without it, '
        "412 when it is stale.",
    ),
]


IF_MATCH_PATTERN = r'^(W/)?"?[0-9]{1,18}"?$'  # what ``based_on`` reads; "*" is refused


def document_preconditions(schema: dict[str, Any]) -> dict[str, Any]:
    """State in the OpenAPI document that every write taking ``If-Match`` requires it (a
    428 without it). The view's parameter stays optional, so the 428 — which carries the
    current version — is the answer, not a generic 422."""
    for operations in schema.get("paths", {}).values():
        for operation in operations.values():
            for parameter in operation.get("parameters", []):
                if parameter.get("in") == "header" and parameter.get("name") == "If-Match":
                    parameter["required"] = True
                    parameter["schema"] = {
                        "type": "string",
                        "pattern": IF_MATCH_PATTERN,
                        "description": parameter.get("description", ""),
                    }
    return schema


def etag(version: int) -> str:
    return f'W/"{version}"'


def tagged(response: HttpResponse, detail: dict[str, Any]) -> dict[str, Any]:
    """Put the object's version on the response as its ETag; returns the body."""
    response["ETag"] = etag(detail["version"])
    return detail


def based_on(if_match: str | None, current: Callable[[], int]) -> int:
    """The version a write names; 428 (carrying the current version) when it names none.
    ``current`` raises NotFound for a missing object, so an unknown name stays a 404."""
    match = _TAG.match(if_match.strip()) if if_match else None
    if match is None:
        version = current()
        if not if_match:
            detail = f"this write needs If-Match: {etag(version)} (the ETag you read)"
        else:
            detail = f'If-Match must name one version, like {etag(version)}; "*" is not accepted'
        raise PreconditionRequired(detail, version)
    return int(match.group(1))


def group_version(name: str) -> Callable[[], int]:
    return lambda: selectors.version_of("group", name)


def provider_version(name: str) -> Callable[[], int]:
    return lambda: selectors.version_of("provider", name)


def error_loc(path: str) -> list[str | int]:
    """A FieldError's dotted path as a ninja ``loc``: ``targets.0.model`` ->
    ``["body", "targets", 0, "model"]``."""
    return ["body", *(int(p) if p.isascii() and p.isdigit() else p for p in path.split(".") if p)]


def json_body(request: HttpRequest, *, default: Any = None) -> Any:
    if not request.body:
        if default is not None:
            return default
        raise ConfigError.single("", "a JSON body is required")
    try:
        return _integral(orjson.loads(request.body))
    except orjson.JSONDecodeError:
        raise ConfigError.single("", "the body is not valid JSON (UTF-8)") from None
    except _TooDeep:
        raise ConfigError.single(
            "", f"the body is nested too deeply (more than {JSON_DEPTH_MAX} levels)"
        ) from None


class _TooDeep(Exception):
    pass


def _integral(value: Any, depth: int = 1) -> Any:
    """JSON has one number type, and JSON Schema's ``integer`` is any number without a
    fraction: ``5.0`` is the integer 5 to a client (and to the documented schema), so it is
    read as one. Fractions stay floats; the schema's strictness about strings and booleans
    is untouched. Deeper than ``/v1`` takes (what can be written back): :class:`_TooDeep`."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**63:
        return int(value)
    if isinstance(value, dict | list) and depth > JSON_DEPTH_MAX:
        raise _TooDeep
    if isinstance(value, dict):
        return {key: _integral(item, depth + 1) for key, item in value.items()}
    if isinstance(value, list):
        return [_integral(item, depth + 1) for item in value]
    return value


def parse(model: type[BaseModel], raw: Any) -> Any:
    """Validate with a pydantic model, reporting errors like the config schema does."""
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(field_errors(exc, model)) from None


def who(request: HttpRequest) -> str:
    """Who made this request, for config-change records: what the management API's
    authentication noted on it (``routing.api.management``: ``key:<admin key's name>`` or
    ``user:<staff user>``)."""
    return getattr(request, "switchyard_actor", "unknown")


def group_name(name: str) -> str:
    """A path name that cannot be a group is simply not found (never reaches the DB)."""
    if not re.match(GROUP_NAME_RE, name):
        raise services.NotFound("group", name)
    return name


def provider_name(name: str) -> str:
    if not re.match(PROVIDER_NAME_RE, name):
        raise services.NotFound("provider", name)
    return name


# --- OpenAPI request bodies ------------------------------------------------------------


def body_doc(
    schema: dict[str, Any], description: str = "", *, required: bool = True
) -> dict[str, Any]:
    """``openapi_extra`` documenting a JSON request body the view reads itself."""
    content = {"application/json": {"schema": schema}}
    body: dict[str, Any] = {"required": required, "content": content}
    if description:
        body["description"] = description
    return {"requestBody": body}


def _without_null(node: dict[str, Any], keep: Collection[str]) -> dict[str, Any]:
    properties = node.get("properties", {})
    for name, prop in list(properties.items()):
        options = prop.get("anyOf")
        if name in keep or not options:
            continue
        concrete = [o for o in options if o.get("type") != "null"]
        if len(concrete) == 1:
            rest = {k: v for k, v in prop.items() if k not in ("anyOf", "default")}
            properties[name] = {**concrete[0], **rest}
    return node


def inline_schema(model: type[BaseModel], *, partial: bool = False) -> dict[str, Any]:
    """The model's JSON schema with ``$defs`` inlined (OpenAPI has no local ``$defs``);
    ``partial`` drops ``required`` (for merge-style PATCH bodies)."""
    schema = model.model_json_schema()
    defs = schema.pop("$defs", {})
    # Policy models reject an explicit null (leave the key out to inherit), so their
    # documented schema should not offer one, except on the fields declared nullable.
    nullable = {policy.__name__: nullable_fields(policy) for policy in policy_models()}

    def resolve(node: Any) -> Any:
        if isinstance(node, list):
            return [resolve(item) for item in node]
        if not isinstance(node, dict):
            return node
        if "$ref" in node:
            rest = {k: v for k, v in node.items() if k != "$ref"}
            return resolve({**defs[node["$ref"].rsplit("/", 1)[-1]], **rest})
        out = {key: resolve(value) for key, value in node.items()}
        if out.get("title") in nullable:
            out = _without_null(out, nullable[out["title"]])
        for prop, pattern in _NAME_PATTERNS.get(out.get("title", ""), {}).items():
            out["properties"][prop]["pattern"] = pattern.replace("\\Z", "$")
        return out

    result: dict[str, Any] = resolve(schema)
    if partial:
        result.pop("required", None)
    return result
