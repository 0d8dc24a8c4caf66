"""Audit write operations other code calls.

``config_change_record`` is how every configuration write path (file, API, page,
admin) leaves a trace. Decisions:

- **Queued, like every record**: the row is written by the audit writer thread, so a
  slow database cannot stretch a config write either.
- **After commit only**: the note is queued from ``transaction.on_commit``, so a write
  that rolls back (validation, conflict) leaves no record of a change that never
  happened. Outside a transaction it is queued at once.
- **Credentials never enter the record.** Any field whose name *is* a credential name
  (``api_key``, ``secret``, ``token``, ``password``, ``authorization``, ``credential``,
  ``cookie``, alone or as the last word: ``access_token``, ``client_secret``), and every
  value under a ``headers`` mapping (extra provider headers often carry keys), is replaced
  by ``[redacted]`` in ``before``, ``after`` and the diff. A name that merely contains such
  a word (``timeouts.first_token_s``, ``max_tokens``) is configuration, shown as is. The diff is computed on the real
  values first, so a changed credential still shows up as changed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db import transaction
from django.utils import timezone

from routing.audit.models import ChangePath
from routing.audit.retention import records_prune
from routing.audit.rows import ConfigChangeNote

REDACTED = "[redacted]"
_SENSITIVE = re.compile(
    r"^(?:.*[_-])?(?:api[_-]?key|secret|token|passw(?:or)?d|authorization|credentials?|cookie)$",
    re.IGNORECASE,
)
_SENSITIVE_CONTAINERS = frozenset({"headers"})

__all__ = ["REDACTED", "config_change_record", "records_prune"]


def _plain(value: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A JSON-safe copy (datetimes, decimals, UUIDs become strings)."""
    if value is None:
        return None
    plain: dict[str, Any] = json.loads(json.dumps(dict(value), cls=DjangoJSONEncoder))
    return plain


def _flatten(value: dict[str, Any] | None, prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, item in (value or {}).items():
        path = f"{prefix}{key}"
        if isinstance(item, dict) and item:
            flat.update(_flatten(item, f"{path}."))
        else:
            flat[path] = item
    return flat


def _is_sensitive(path: str) -> bool:
    parts = path.split(".")
    return any(_SENSITIVE.search(part) for part in parts) or any(
        p in _SENSITIVE_CONTAINERS for p in parts[:-1]
    )


def _redact(value: Any, path: str = "") -> Any:
    if isinstance(value, dict):
        return {k: _redact(v, f"{path}.{k}" if path else str(k)) for k, v in value.items()}
    if path and _is_sensitive(path) and value not in (None, "", [], {}):
        return REDACTED
    if (
        isinstance(value, list)
        and path
        and any(p in _SENSITIVE_CONTAINERS for p in path.split("."))
    ):
        return REDACTED
    return value


def _diff(before: dict[str, Any] | None, after: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    old, new = _flatten(before), _flatten(after)
    changed: dict[str, dict[str, Any]] = {}
    for path in sorted(old.keys() | new.keys()):
        if old.get(path) == new.get(path) and (path in old) == (path in new):
            continue
        changed[path] = {
            "before": _redact(old.get(path), path),
            "after": _redact(new.get(path), path),
        }
    return changed


def config_change_record(
    *,
    actor: str,
    path: str,
    object_type: str,
    object_name: str,
    before: Mapping[str, Any] | None,
    after: Mapping[str, Any] | None,
) -> None:
    """Record that ``actor`` changed ``object_type`` ``object_name`` through ``path``.

    ``path`` is one of ``file``, ``api``, ``page``, ``admin``, ``cli``; ``before`` is None for a
    creation and ``after`` None for a deletion. Returns at once; the row is written by
    the audit writer after the surrounding transaction commits.
    """
    if path not in ChangePath.values:
        raise ValueError(
            f"unknown config change path {path!r}: use one of {', '.join(ChangePath.values)}"
        )
    old, new = _plain(before), _plain(after)
    note = ConfigChangeNote(
        at=timezone.now(),
        actor=actor,
        path=path,
        object_type=object_type,
        object_name=object_name,
        before=_redact(old),
        after=_redact(new),
        diff=_diff(old, new),
    )

    def enqueue() -> None:
        from routing.audit.writer import get_writer

        get_writer().offer(note)

    transaction.on_commit(enqueue)
