"""Switchyard's settings: ``settings.SWITCHYARD`` read through one validated object.

Every key, its type, default and meaning is declared once on :class:`SwitchyardSettings`
(model: django-ninja ``ninja/conf.py``); code reads ``switchyard_settings().KEY`` and
never the raw dict. ``router_project/settings.py`` maps the environment onto these keys.

Decisions:

- **Built once, rebuilt on change.** The object is built on first use and dropped when
  ``SWITCHYARD`` changes (Django's ``setting_changed``, sent by ``override_settings`` and
  pytest-django's ``settings`` fixture), as ninja and DRF do; the next read rebuilds it.
  Mutating the dict in place is not a change: assign a new dict.
- **Types here, rules in the checks.** The model validates types (lax: ``"0.5"`` reads as
  0.5) and holds the defaults for keys left out. Ranges and imports (a state store that
  imports, ``CONFIG_CHECK_S`` in (0, 1]) are ``routing.checks`` errors reported at start.
- **Tolerant per key.** Each key is judged on its own: a value of the wrong type falls
  back to its default and is listed by :func:`settings_problems` (``routing.E005``–
  ``E007``), so one bad key neither hides the others from the checks nor stops a process
  that was started without running them.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings as django_settings
from django.core.signals import setting_changed
from django.dispatch import receiver
from pydantic import BaseModel, ConfigDict, Field, ValidationError

log = logging.getLogger("switchyard.conf")


class SwitchyardSettings(BaseModel):
    """The keys of ``settings.SWITCHYARD``; defaults apply to keys left out."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    STATE_STORE: str = Field(
        default="memory", description='"memory", "redis", or a dotted path to a HealthStore class'
    )
    REDIS_URL: str = Field(default="", description="shared state and config notices; empty: none")
    ALGORITHMS: dict[str, str] = Field(
        default_factory=dict, description="extra routing algorithms: name -> dotted path"
    )
    SECRET_KEY: str = Field(
        default="", description="encrypts credentials at rest; empty: the generated var/secret.key"
    )
    SECRET_KEY_FALLBACKS: tuple[str, ...] = Field(
        default=(), description="older secrets, tried when decrypting (rotate_secret)"
    )
    CONFIG_FILE: str = Field(default="", description="a config file applied at start-up")
    CONFIG_CHECK_S: float = Field(
        default=0.5, description="seconds between configuration-version reads, in (0, 1]"
    )
    METRICS_PUBLIC: bool = Field(default=False, description="/metrics without an admin key")
    HEALTH_CHECK_S: float = Field(
        default=10.0, description="seconds between active checks of a cooling target; 0: off"
    )
    EVENT_SUBSCRIBERS: tuple[str, ...] = Field(
        default=(), description="dotted paths of attach(hub) functions"
    )
    DEGRADED_FAILURE_RATE: float = Field(
        default=0.5,
        description="share of failed attempts over 5 minutes that marks a target degraded",
    )
    DEGRADED_MIN_ATTEMPTS: int = Field(
        default=5, description="attempts needed before that share counts"
    )
    AUDIT_MAX_AGE_DAYS: float = Field(
        default=30, description="audit retention by age; 0: unbounded"
    )
    AUDIT_MAX_ROWS: int = Field(
        default=200_000, description="audit retention by calls; 0: unbounded"
    )
    UPSTREAM_MAX_CONNECTIONS: int = Field(
        default=0, description="connections per provider; 0: from the open-file limit"
    )
    REQUEST_READ_TIMEOUT_S: float = Field(
        default=30,
        description="seconds a request's line, headers and body have to arrive (daphne); "
        "0: no deadline",
    )


@dataclass(frozen=True, slots=True)
class Problem:
    """A key whose value could not be read: the raw value and why (its default applies)."""

    value: Any
    message: str


def validate(raw: Any) -> tuple[SwitchyardSettings, dict[str, Problem]]:
    """The settings read from ``raw``, and the keys that were unreadable (at defaults)."""
    if not isinstance(raw, Mapping):
        return SwitchyardSettings(), {"": Problem(raw, "SWITCHYARD must be a dict")}
    try:
        return SwitchyardSettings.model_validate(raw), {}
    except ValidationError as exc:
        problems: dict[str, Problem] = {}
        for error in exc.errors(include_url=False, include_input=False):
            key = str(error["loc"][0])
            problems.setdefault(key, Problem(raw.get(key), str(error["msg"])))
        readable = {key: value for key, value in raw.items() if key not in problems}
        return SwitchyardSettings.model_validate(readable), problems


_current: tuple[SwitchyardSettings, dict[str, Problem]] | None = None


def _load() -> tuple[SwitchyardSettings, dict[str, Problem]]:
    global _current
    current = _current
    if current is None:
        raw = getattr(django_settings, "SWITCHYARD", {}) if django_settings.configured else {}
        current = validate(raw)
        for key, problem in current[1].items():
            log.warning("SWITCHYARD[%r] ignored, default used: %s", key, problem.message)
        _current = current
    return current


def switchyard_settings() -> SwitchyardSettings:
    """The current settings (built on first use; rebuilt after ``SWITCHYARD`` changes)."""
    return _load()[0]


def settings_problems() -> dict[str, Problem]:
    """Keys of ``SWITCHYARD`` whose values were unreadable, for the system checks."""
    return _load()[1]


@receiver(setting_changed)
def _reload(*, setting: str, **_: Any) -> None:
    global _current
    if setting == "SWITCHYARD":
        _current = None
