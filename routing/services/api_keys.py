"""Gateway API keys: generation, hashing, revocation, and the index the gateway caches.

A secret is ``sk-sy-`` + 40 URL-safe random characters (240 bits). Only its sha256 is
stored: with that much entropy a plain hash cannot be brute-forced, and a per-request
password KDF would only add latency. ``prefix`` (the first 12 characters) identifies a key
in lists and logs without revealing it.

Client keys may be limited to some groups (empty = all groups); admin keys authenticate
the management API and carry no group list. The gateway authenticates requests from its
compiled routing table (``routing.gateway.table``: every unrevoked key), which a key's
save rebuilds like any configuration write (``routing.signals``).

This is the one home of keys: the primitives below (:func:`generate_key`, :func:`revoke_key`,
the hash) and the services that the API, the page, the admin and the commands call
(:func:`key_create`, :func:`key_revoke`, :func:`key_update`, :func:`key_delete`:
validated, and each a config-change record).
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Iterable, Mapping
from typing import Any

from django.db import transaction
from django.utils import timezone
from pydantic import ValidationError

from routing.config.errors import ConfigError, FieldError, NotFound
from routing.config.schema import GROUP_NAME_RE, LIMIT_NAMES, LimitsIn, field_errors
from routing.models import ApiKey, Group
from routing.services.base import record

SECRET_PREFIX = "sk-sy-"
DISPLAY_PREFIX_LENGTH = 12
KINDS = ("client", "admin")


class ApiKeyError(ValueError):
    """A key could not be created or revoked (bad name, kind, groups, or unknown id)."""


def hash_secret(secret: str) -> str:
    """sha256 hex of the full secret (what ``ApiKey.hashed`` stores)."""
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def _new_secret() -> str:
    return SECRET_PREFIX + secrets.token_urlsafe(30)  # 30 bytes -> exactly 40 characters


def _checked_groups(kind: str, groups: Iterable[str]) -> list[str]:
    names = sorted(set(groups))
    if not names:
        return []
    if kind == "admin":
        raise ApiKeyError("admin keys cannot be limited to groups")
    bad = [name for name in names if not re.match(GROUP_NAME_RE, name)]
    if bad:
        raise ApiKeyError(f"invalid group name(s): {', '.join(bad)}")
    known = set(Group.objects.filter(name__in=names).values_list("name", flat=True))
    unknown = [name for name in names if name not in known]
    if unknown:
        raise ApiKeyError(f"unknown group(s): {', '.join(unknown)}")
    return names


def key_limits(raw: Any) -> dict[str, int | float]:
    """A key's ``limits`` validated as stored (SPEC §17: the fields of a group's
    ``limits``); ``None`` or ``{}``: no limits. Errors are ``limits.<name>`` field errors:
    unknown names, negative or non-numeric values."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ConfigError.single("limits", "must be a mapping of limit names to numbers")
    errors = [
        FieldError(f"limits.{name}", f"unknown limit; known: {', '.join(LIMIT_NAMES)}")
        for name in raw
        if name not in LIMIT_NAMES
    ]
    known = {name: value for name, value in raw.items() if name in LIMIT_NAMES}
    model: LimitsIn | None = None
    try:
        model = LimitsIn.model_validate(known)
    except ValidationError as exc:
        errors += [error.prefixed("limits") for error in field_errors(exc, LimitsIn)]
    if errors or model is None:
        raise ConfigError(errors)
    return model.model_dump(exclude_none=True)


def parse_limit_options(options: Iterable[str]) -> dict[str, Any]:
    """``["rpm=60", "cost_per_day=5"]`` (``createkey --limit``, the Keys page) as a raw
    mapping for :func:`key_limits`: numbers where they parse, the text otherwise (so the
    error names the field)."""
    out: dict[str, Any] = {}
    for option in options:
        name, sep, text = option.partition("=")
        name = name.strip()
        if not sep or not name:
            raise ConfigError.single("limits", f"{option!r}: write NAME=VALUE, e.g. rpm=60")
        text = text.strip()
        try:
            out[name] = int(text)
        except ValueError:
            try:
                out[name] = float(text)
            except ValueError:
                out[name] = text
    return out


def generate_key(
    *,
    name: str,
    kind: str = "client",
    groups: Iterable[str] = (),
    limits: Mapping[str, int | float] | None = None,
) -> tuple[ApiKey, str]:
    """Create a key; returns the row and the secret, which is never retrievable again."""
    name = name.strip()
    if not name or len(name) > 100:
        raise ApiKeyError("a key needs a name of 1-100 characters")
    if kind not in KINDS:
        raise ApiKeyError(f"kind must be one of {', '.join(KINDS)}")
    with transaction.atomic():
        group_names = _checked_groups(kind, groups)
        secret = _new_secret()
        key = ApiKey.objects.create(
            name=name,
            kind=kind,
            prefix=secret[:DISPLAY_PREFIX_LENGTH],
            hashed=hash_secret(secret),
            groups=group_names,
            limits=dict(limits or {}),
        )
    return key, secret


def revoke_key(*, key_id: int) -> ApiKey:
    """Revoke a key (idempotent: revoking twice keeps the first revocation time)."""
    with transaction.atomic():
        try:
            key = ApiKey.objects.select_for_update().get(pk=key_id)
        except ApiKey.DoesNotExist:
            raise ApiKeyError(f"no API key with id {key_id}") from None
        if key.revoked_at is None:
            key.revoked_at = timezone.now()
            key.save(update_fields=["revoked_at"])
    return key


def _snapshot(key: ApiKey) -> dict[str, Any]:
    return {
        "name": key.name,
        "kind": key.kind,
        "prefix": key.prefix,
        "groups": list(key.groups or []),
        "limits": dict(key.limits or {}),
        "revoked_at": key.revoked_at,
    }


def _label(key: ApiKey) -> str:
    return f"{key.name} ({key.prefix}…)"


NAME_RULE = "a key needs a name of 1-100 printable characters"


def good_key_name(name: object) -> bool:
    return isinstance(name, str) and 0 < len(name.strip()) <= 100 and name.isprintable()


def key_create(
    *,
    name: str,
    kind: str,
    groups: Iterable[str] = (),
    limits: Any = None,
    actor: str,
    path: str = "api",
) -> tuple[ApiKey, str]:
    """Create a client or admin key; returns the row and the secret, which is stored only
    as a hash and never shown again. Client keys may be limited to existing groups, and
    capped by ``limits`` (:func:`key_limits`)."""
    errors: list[FieldError] = []
    try:
        checked = key_limits(limits)
    except ConfigError as exc:
        errors += exc.errors
    if not good_key_name(name):
        errors.append(FieldError("name", NAME_RULE))
    if kind not in KINDS:
        errors.append(FieldError("kind", f"must be one of {', '.join(KINDS)}"))
    if errors:
        raise ConfigError(errors)
    with transaction.atomic():
        try:
            key, secret = generate_key(name=name, kind=kind, groups=groups, limits=checked)
        except ApiKeyError as exc:
            raise ConfigError.single("groups", str(exc)) from None
        record(
            actor=actor,
            path=path,
            object_type="key",
            object_name=_label(key),
            before=None,
            after=_snapshot(key),
        )
    return key, secret


def key_revoke(*, key_id: int, actor: str, path: str = "api") -> ApiKey:
    """Revoke a key: refused from the next request on, in every process. Idempotent."""
    with transaction.atomic():
        current = ApiKey.objects.select_for_update().filter(pk=key_id).first()
        if current is None:
            raise NotFound("API key", key_id)
        before = _snapshot(current)
        key = revoke_key(key_id=key_id)
        if current.revoked_at is None:
            record(
                actor=actor,
                path=path,
                object_type="key",
                object_name=_label(key),
                before=before,
                after=_snapshot(key),
            )
    return key


def key_update(*, key_id: int, limits: Any, actor: str, path: str = "api") -> ApiKey:
    """Replace a key's limits (``{}`` or ``None``: none). Applied from the next request
    on, in every process; nothing changes when a limit is invalid."""
    return _set(key_id, "limits", key_limits(limits), actor=actor, path=path)


def key_rename(*, key_id: int, name: str, actor: str, path: str = "admin") -> ApiKey:
    """Rename a key (the admin's key page): the name is a label, the secret and every
    limit stay."""
    if not good_key_name(name):
        raise ConfigError.single("name", NAME_RULE)
    return _set(key_id, "name", name, actor=actor, path=path)


def _set(key_id: int, column: str, value: Any, *, actor: str, path: str) -> ApiKey:
    """Write one column of a key under its row lock; recorded like every other write,
    and neither written nor recorded when it stays the same."""
    with transaction.atomic():
        key = ApiKey.objects.select_for_update().filter(pk=key_id).first()
        if key is None:
            raise NotFound("API key", key_id)
        before = _snapshot(key)
        setattr(key, column, value)
        after = _snapshot(key)
        if after != before:
            key.save(update_fields=[column])
            record(
                actor=actor,
                path=path,
                object_type="key",
                object_name=_label(key),
                before=before,
                after=after,
            )
    return key


def key_delete(*, key_id: int, actor: str, path: str = "admin") -> None:
    """Delete a key's row (the admin's delete; the API, the page and the commands revoke,
    which keeps the key listed). Refused from the next request on, in every process."""
    with transaction.atomic():
        key = ApiKey.objects.select_for_update().filter(pk=key_id).first()
        if key is None:
            raise NotFound("API key", key_id)
        before, label = _snapshot(key), _label(key)
        key.delete()
        record(
            actor=actor, path=path, object_type="key", object_name=label, before=before, after=None
        )
