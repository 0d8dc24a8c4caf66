"""Target keys: ``provider/model``, the one name of a target in health state, metrics,
records, the API and the page. Built and split here only.

Provider names are slugs (no ``/``) while model ids may hold one (``meta-llama/Llama-3``),
so the first ``/`` splits a key back into its provider and its model.
"""

from __future__ import annotations

from typing import NamedTuple


class TargetKeyParts(NamedTuple):
    provider: str
    model: str


def target_key(provider: str, model: str) -> str:
    """``provider/model``."""
    return f"{provider}/{model}"


def provider_of(key: str) -> str:
    """The provider part of a key (all of it when there is no ``/``)."""
    return key.partition("/")[0]


def split_target_key(key: str) -> TargetKeyParts | None:
    """``(provider, model)``, or None when ``key`` is not ``provider/model`` (no ``/``, or
    nothing on one side of it): an address a client typed, a form's value."""
    provider, sep, model = key.partition("/")
    if not sep or not provider or not model:
        return None
    return TargetKeyParts(provider, model)
