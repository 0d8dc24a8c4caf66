"""Gateway keys through the API/page: create (secret shown once) and revoke, recorded."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import transaction

from routing.config.errors import ConfigError, FieldError
from routing.keys import KINDS, ApiKeyError, generate_key, revoke_key
from routing.models import ApiKey
from routing.services.base import NotFound, record


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
