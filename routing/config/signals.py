"""Signals sent after configuration commits (always via ``transaction.on_commit``).

``config_changed.send(sender=<path kind>, source=<detail>)`` — providers, groups,
targets or global policy changed. ``sender`` names the write path: ``"file"``,
``"admin"``, ``"api"``, ``"page"``; ``source`` is the file path or ``"admin:<user>"``.
An announcement for whoever wants one: the version bump and the routing table's
invalidation are ``routing.signals.config_written``'s, once per write, inside it.

``keys_changed.send(sender="keys", source=<detail>)`` — an API key was created or
revoked; the in-memory key index is rebuilt from ``routing.services.api_keys.active_key_index()``.

Both are process-local Django signals: other gateway processes learn of the change
through whatever fan-out the receiver performs.
"""

from __future__ import annotations

from django.dispatch import Signal

config_changed = Signal()
keys_changed = Signal()
