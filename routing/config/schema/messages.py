"""Pydantic errors translated into field errors (:class:`~routing.config.errors.FieldError`)
with dotted paths and messages that say what to write (renamed keys, allowed keys)."""

from __future__ import annotations

from typing import Any, get_args

from pydantic import BaseModel, ValidationError

from routing.config.errors import FieldError
from routing.config.schema.base import MULTI_ERROR, RENAMED_KEYS, PolicyBlock, renamed_message
from routing.config.schema.groups import ConfigFileIn
from routing.config.schema.targets import TargetIn


def _inner_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        found = _inner_model(arg)
        if found is not None:
            return found
    return None


def _model_at(root: type[BaseModel], loc: tuple[int | str, ...]) -> type[BaseModel] | None:
    current: type[BaseModel] | None = root
    for part in loc:
        if isinstance(part, int):
            continue  # a list index: the element model is already current
        if current is None or part not in current.model_fields:
            return None
        current = _inner_model(current.model_fields[part].annotation)
    return current


def join_path(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(part) for part in loc)


def _renames_apply(parent: type[BaseModel], key: str) -> bool:
    """Renamed keys are reported where the seed put them: policy blocks, targets, the top
    of the file. Inside a block they are named relative to it (``retry.max_retries`` is
    ``max_retries`` in ``retry:``), so a key that is valid there is never "renamed"."""
    if key in parent.model_fields:
        return False
    return issubclass(parent, PolicyBlock | TargetIn | ConfigFileIn)


def _message(error: Any, root: type[BaseModel]) -> str:
    kind, loc = error["type"], error["loc"]
    if kind == "extra_forbidden":
        key, parent = str(loc[-1]), _model_at(root, loc[:-1])
        if parent is not None and key in RENAMED_KEYS and _renames_apply(parent, key):
            return renamed_message(key)
        allowed = ", ".join(parent.model_fields) if parent is not None else ""
        return f"unknown key; allowed keys: {allowed}" if allowed else "unknown key"
    if kind == "missing":
        return "required"
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return "must be a mapping (key: value pairs)"
    message = str(error["msg"]).removeprefix("Value error, ")
    return message.replace("Input should be", "must be", 1)


def field_errors(
    exc: ValidationError, root: type[BaseModel], *, prefix: str = ""
) -> list[FieldError]:
    """Translate a pydantic error into :class:`FieldError`s with dotted paths."""
    out: list[FieldError] = []
    for error in exc.errors(include_url=False, include_input=False):
        loc: tuple[int | str, ...] = tuple(error["loc"])
        path = join_path(loc)
        if error["type"] == MULTI_ERROR:
            for rel, message in error["ctx"]["errors"]:
                out.append(FieldError(rel, message).prefixed(path))
        else:
            out.append(FieldError(path, _message(error, root)))
    return [e.prefixed(prefix) for e in out]
