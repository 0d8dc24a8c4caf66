"""Gemini's two schema dialects and the JSON Schema the other protocols speak.

``parameters`` and ``responseSchema`` are Gemini's OpenAPI 3.0 subset: upper-case type
names (``OBJECT``, ``STRING``…), ``nullable``, ``propertyOrdering``. ``parametersJsonSchema``
and ``responseJsonSchema`` are JSON Schema: the first passes unchanged, the second goes
through ``to_json_schema`` too, since Gemini CLI writes it with upper-case types (which
Google accepts). ``to_json_schema`` normalises the subset (lower-case types, ``nullable`` as
a ``"null"`` type, Gemini-only keys left out) so a chat, Messages or Responses target gets
a schema it reads.
"""

from __future__ import annotations

from typing import Any

# Keys of the OpenAPI subset with no JSON Schema meaning (ordering is a generation hint).
_GEMINI_ONLY = frozenset({"nullable", "propertyOrdering", "property_ordering"})
# Google's JSON takes proto field names too: what the google-genai SDK sends in snake case.
_SNAKE = {
    "any_of": "anyOf",
    "max_items": "maxItems",
    "min_items": "minItems",
    "max_length": "maxLength",
    "min_length": "minLength",
    "max_properties": "maxProperties",
    "min_properties": "minProperties",
}
# Keys whose value is one schema, or a map / list of schemas.
_ONE = ("items", "additionalProperties", "not")
_MAP = ("properties", "$defs", "definitions")
_LIST = ("anyOf", "oneOf", "allOf", "prefixItems")


def to_json_schema(schema: Any) -> Any:
    """An OpenAPI-subset schema as JSON Schema (a copy; non-dict values unchanged)."""
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for name, value in schema.items():
        if name in _GEMINI_ONLY:
            continue
        key: str = _SNAKE.get(name) or name
        if key == "type" and isinstance(value, str):
            out["type"] = value.lower()
        elif key in _ONE:
            out[key] = to_json_schema(value)
        elif key in _MAP and isinstance(value, dict):
            out[key] = {name: to_json_schema(sub) for name, sub in value.items()}
        elif key in _LIST and isinstance(value, list):
            out[key] = [to_json_schema(sub) for sub in value]
        else:
            out[key] = value
    if schema.get("nullable") is True and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    return out
