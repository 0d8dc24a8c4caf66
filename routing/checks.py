"""Django system checks for Switchyard's settings (``manage.py check``; also run by
``migrate`` and at server start).

=============  ===================================================================
routing.E001   ``STATE_STORE`` does not import or is not a ``HealthStore``
routing.E002   ``STATE_STORE`` is ``redis`` but ``REDIS_URL`` is empty
routing.E003   an entry of ``ALGORITHMS`` does not import or is not a ``RoutingAlgorithm``
routing.E004   an entry of ``EVENT_SUBSCRIBERS`` does not import or is not callable
routing.E005   ``SECRET_KEY`` (``SWITCHYARD_SECRET_KEY``) is set but blank, or not a string
routing.E006   ``CONFIG_CHECK_S`` is not a number in (0, 1]
routing.E007   another key of ``SWITCHYARD`` has a value of the wrong type
routing.E008   the secret key cannot decrypt a stored provider credential
routing.E010   Django's ``SECRET_KEY`` is the old development value and ``DEBUG`` is off
=============  ===================================================================

Model: ``django/core/checks/caches.py``. Each check reads settings only (through
``routing.conf``, whose unreadable keys it reports), except E008: it reads the providers'
stored credentials, so it is tagged ``database`` and runs only when a database is named
(``manage.py check --database default``, ``migrate``), as Django's own database checks do.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.conf import settings
from django.core.checks import Error, Tags, register
from django.db import DEFAULT_DB_ALIAS, DatabaseError
from django.utils.module_loading import import_string

from routing.conf import settings_problems, switchyard_settings

# Unreadable keys reported by a check of their own; the rest are routing.E007.
_OWN_CHECK = frozenset({"SECRET_KEY", "CONFIG_CHECK_S"})


@register(Tags.compatibility)
def check_state_store(**_: Any) -> list[Error]:
    from routing.state import BUILTIN_STORES, HealthStore

    conf = switchyard_settings()
    name = conf.STATE_STORE or "memory"
    if name == "redis" and not conf.REDIS_URL:
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

    extra = switchyard_settings().ALGORITHMS
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
    for path in switchyard_settings().EVENT_SUBSCRIBERS:
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
    secret = switchyard_settings().SECRET_KEY
    if "SECRET_KEY" not in settings_problems() and (secret == "" or secret.strip()):
        return []
    return [
        Error(
            "SWITCHYARD_SECRET_KEY is blank: it must be a non-empty string.",
            hint="Unset it to use the generated var/secret.key, or set a real secret.",
            id="routing.E005",
        )
    ]


# What settings.py fell back to before it generated var/django-secret.key: it is public, so
# anyone could sign a session cookie with it (log in as any user).
DEVELOPMENT_SECRET_KEY = "switchyard-dev-only-change-me"


@register(Tags.security)
def check_django_secret_key(**_: Any) -> list[Error]:
    if settings.DEBUG or settings.SECRET_KEY != DEVELOPMENT_SECRET_KEY:
        return []
    return [
        Error(
            "DJANGO_SECRET_KEY is the public development value: anyone could forge a "
            "staff session. It is refused unless DJANGO_DEBUG=1.",
            hint="Unset DJANGO_SECRET_KEY to use the generated var/django-secret.key, or set "
            "a long random secret of your own.",
            id="routing.E010",
        )
    ]


@register(Tags.compatibility)
def check_config_interval(**_: Any) -> list[Error]:
    problem = settings_problems().get("CONFIG_CHECK_S")
    value = problem.value if problem else switchyard_settings().CONFIG_CHECK_S
    if problem is None and 0 < value <= 1:
        return []
    return [
        Error(
            f"SWITCHYARD_CONFIG_CHECK_S={value!r}: must be a number of seconds in (0, 1].",
            hint="Changes must reach every process within 1 s (SPEC §10); the default is 0.5.",
            id="routing.E006",
        )
    ]


@register(Tags.compatibility)
def check_value_types(**_: Any) -> list[Error]:
    """Keys whose values ``routing.conf`` could not read (their defaults apply)."""
    return [
        _error(
            f"{f'SWITCHYARD[{key!r}]' if key else 'SWITCHYARD'}={_shown(key, problem.value)}: "
            f"{problem.message}.",
            "routing.E007",
        )
        for key, problem in sorted(settings_problems().items())
        if key not in _OWN_CHECK
    ]


# Values a check may not print: secrets, and URLs that may carry a password.
_SECRET_KEYS = frozenset({"SECRET_KEY", "SECRET_KEY_FALLBACKS", "REDIS_URL"})


def _shown(key: str, value: object) -> str:
    """The value for the message, unless it may hold a secret: then only its type (and
    the whole ``SWITCHYARD`` setting, which holds them, is never printed)."""
    if not key or key in _SECRET_KEYS:
        return f"<a {type(value).__name__}, not shown>"
    return repr(value)


@register(Tags.database)
def check_credentials_decrypt(databases: Sequence[str] | None = None, **_: Any) -> list[Error]:
    """A changed ``SWITCHYARD_SECRET_KEY`` leaves stored credentials unreadable: the gateway
    keeps serving, but those providers' targets fail over as ``MISSING_CREDENTIAL``."""
    if not databases or DEFAULT_DB_ALIAS not in databases:
        return []
    from routing.crypto import CredentialDecryptError
    from routing.models import Provider

    try:
        stored = list(Provider.objects.order_by("name"))
    except DatabaseError:  # not migrated yet: nothing stored to decrypt
        return []
    unreadable = []
    for provider in stored:
        try:
            provider.get_api_key()
            provider.get_headers()  # header values are encrypted the same way
        except CredentialDecryptError:
            unreadable.append(provider.name)
    if not unreadable:
        return []
    return [
        Error(
            "SWITCHYARD_SECRET_KEY cannot decrypt the stored credential of provider(s) "
            f"{', '.join(unreadable)}: their targets fail over as MISSING_CREDENTIAL.",
            hint="Set SWITCHYARD_SECRET_KEY back to the secret that encrypted them, or run "
            "`manage.py rotate_secret --old OLD --new NEW`, or set those credentials again.",
            id="routing.E008",
        )
    ]


def _error(message: str, check_id: str) -> Error:
    return Error(message, id=check_id)
