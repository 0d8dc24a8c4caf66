"""Django system checks for Switchyard's settings (``manage.py check``; also run by
``migrate`` and at server start).

=============  ===================================================================
routing.E001   ``STATE_STORE`` does not import or is not a ``HealthStore``
routing.E002   ``STATE_STORE`` is ``redis`` but ``REDIS_URL`` is empty
routing.E003   an entry of ``ALGORITHMS`` does not import or is not a ``RoutingAlgorithm``
routing.E004   an entry of ``EVENT_SUBSCRIBERS`` does not import or is not callable
routing.E005   ``SECRET_KEY`` (``SWITCHYARD_SECRET_KEY``) is set but blank, or not a string
routing.E006   ``CONFIG_CHECK_S`` is not a number in (0, 1]
=============  ===================================================================

Model: ``django/core/checks/caches.py``. Each check reads settings only; none touches the
database or the network.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.core.checks import Error, Tags, register
from django.utils.module_loading import import_string


def _conf() -> Mapping[str, Any]:
    return getattr(settings, "SWITCHYARD", {}) or {}


@register(Tags.compatibility)
def check_state_store(**_: Any) -> list[Error]:
    from routing.state import BUILTIN_STORES, HealthStore

    conf = _conf()
    name = str(conf.get("STATE_STORE") or "memory")
    if name == "redis" and not conf.get("REDIS_URL"):
        return [
            Error(
                "SWITCHYARD_STATE_STORE is 'redis' but REDIS_URL is not set.",
                hint="Set REDIS_URL=redis://host:6379/0, or use the 'memory' store.",
                id="routing.E002",
            )
        ]
    try:
        found = import_string(BUILTIN_STORES.get(name, name))
    except ImportError as exc:
        return [_error(f"STATE_STORE {name!r} does not import ({exc}).", "routing.E001")]
    if not (isinstance(found, type) and issubclass(found, HealthStore)):
        return [_error(f"STATE_STORE {name!r} is not a HealthStore subclass.", "routing.E001")]
    return []


@register(Tags.compatibility)
def check_algorithms(**_: Any) -> list[Error]:
    from routing.engine.algorithms import UnknownAlgorithm, get_algorithm

    extra = _conf().get("ALGORITHMS") or {}
    errors = []
    for name in sorted(extra):
        try:
            get_algorithm(name, extra)
        except UnknownAlgorithm as exc:
            errors.append(
                Error(
                    f"ALGORITHMS[{name!r}]: {exc}",
                    hint="SWITCHYARD_ALGORITHMS=name=package.module.Class,...",
                    id="routing.E003",
                )
            )
    return errors


@register(Tags.compatibility)
def check_event_subscribers(**_: Any) -> list[Error]:
    errors = []
    for path in _conf().get("EVENT_SUBSCRIBERS") or ():
        try:
            found = import_string(str(path))
        except ImportError as exc:
            errors.append(
                _error(f"EVENT_SUBSCRIBERS: {path!r} does not import ({exc}).", "routing.E004")
            )
            continue
        if not callable(found):
            errors.append(_error(f"EVENT_SUBSCRIBERS: {path!r} is not callable.", "routing.E004"))
    return errors


@register(Tags.security)
def check_secret_key(**_: Any) -> list[Error]:
    # Unset is the embedded default (a generated var/secret.key, logged when created).
    secret = _conf().get("SECRET_KEY")
    if secret is None or secret == "":
        return []
    if not isinstance(secret, str) or not secret.strip():
        return [
            Error(
                "SWITCHYARD_SECRET_KEY is blank: it must be a non-empty string.",
                hint="Unset it to use the generated var/secret.key, or set a real secret.",
                id="routing.E005",
            )
        ]
    return []


@register(Tags.compatibility)
def check_config_interval(**_: Any) -> list[Error]:
    value = _conf().get("CONFIG_CHECK_S", 0.5)
    try:
        ok = 0 < float(value) <= 1
    except (TypeError, ValueError):
        ok = False
    if ok:
        return []
    return [
        Error(
            f"SWITCHYARD_CONFIG_CHECK_S={value!r}: must be a number of seconds in (0, 1].",
            hint="Changes must reach every process within 1 s (SPEC §10); the default is 0.5.",
            id="routing.E006",
        )
    ]


def _error(message: str, check_id: str) -> Error:
    return Error(message, id=check_id)
