"""Gateway API keys: generation, hashing, revocation, and the index the gateway caches.

A secret is ``sk-sy-`` + 40 URL-safe random characters (240 bits). Only its sha256 is
stored: with that much entropy a plain hash cannot be brute-forced, and a per-request
password KDF would only add latency. ``prefix`` (the first 12 characters) identifies a key
in lists and logs without revealing it.

Client keys may be limited to some groups (empty = all groups); admin keys authenticate
the management API and carry no group list. The gateway authenticates requests from an
in-memory map built by :func:`active_key_index`, rebuilt on ``keys_changed``.

This is the one home of keys: the primitives below (:func:`generate_key`, :func:`revoke_key`,
the hash and the gateway's index) and the services that the API, the page, the admin
and the commands call (:func:`key_create`, :func:`key_revoke`: validated, and each a
config-change record).
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Iterable
from typing import Any

from django.db import transaction
from django.utils import timezone

from routing.config.errors import ConfigError, FieldError
from routing.config.schema import GROUP_NAME_RE
from routing.config.signals import keys_changed
from routing.models import ApiKey, Group
from routing.services.base import NotFound, record

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


def _notify(source: str) -> None:
    transaction.on_commit(lambda: keys_changed.send(sender="keys", source=source))


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


def generate_key(
    *, name: str, kind: str = "client", groups: Iterable[str] = ()
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
        )
        _notify(f"created {key.prefix}")
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
            _notify(f"revoked {key.prefix}")
    return key


def active_key_index() -> dict[str, tuple[str, frozenset[str]]]:
    """``hashed -> (kind, groups)`` for every unrevoked key (empty groups = all groups)."""
    rows = ApiKey.objects.filter(revoked_at__isnull=True).values_list("hashed", "kind", "groups")
    return {hashed: (kind, frozenset(groups or ())) for hashed, kind, groups in rows}


def _snapshot(key: ApiKey) -> dict[str, Any]:
    return {
        "kind": key.kind,
        "prefix": key.prefix,
        "groups": list(key.groups or []),
        "revoked_at": key.revoked_at,
    }


def _label(key: ApiKey) -> str:
    return f"{key.name} ({key.prefix}…)"


def key_create(
    *, name: str, kind: str, groups: Iterable[str] = (), actor: str, path: str = "api"
) -> tuple[ApiKey, str]:
    """Create a client or admin key; returns the row and the secret, which is stored only
    as a hash and never shown again. Client keys may be limited to existing groups."""
    errors: list[FieldError] = []
    if not isinstance(name, str) or not 0 < len(name.strip()) <= 100 or not name.isprintable():
        errors.append(FieldError("name", "a key needs a name of 1-100 printable characters"))
    if kind not in KINDS:
        errors.append(FieldError("kind", f"must be one of {', '.join(KINDS)}"))
    if errors:
        raise ConfigError(errors)
    with transaction.atomic():
        try:
            key, secret = generate_key(name=name, kind=kind, groups=groups)
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
