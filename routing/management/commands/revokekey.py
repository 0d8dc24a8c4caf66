"""``manage.py revokekey ID|PREFIX``: revoke a gateway key.

Goes through ``routing.services.key_revoke`` like the API and the page (config-change
record with path ``cli``); running gateways refuse the key within a second.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db.models import Q

from routing.models import ApiKey
from routing.services import NotFound, key_revoke
from routing.services.api_keys import DISPLAY_PREFIX_LENGTH, hash_secret
from routing.services.base import default_actor


class Command(BaseCommand):
    help = "Revoke a client or admin API key by id, by its printed prefix, or by the secret."
    # A data command, like Django's createsuperuser: the project's system checks (which
    # import every URL and view) have nothing to say about it and were a fifth of its start.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("key", help="the key's id, or its prefix as createkey printed it")

    def handle(self, *args: Any, **options: Any) -> None:
        given: str = options["key"].strip()
        if given.isdigit():
            ids = [int(given)]
        else:
            # The prefix createkey printed, or the whole secret (matched by its hash).
            matches = ApiKey.objects.filter(Q(prefix=given) | Q(hashed=hash_secret(given)))
            ids = list(matches.values_list("pk", flat=True))
        shown = given[:DISPLAY_PREFIX_LENGTH]  # never echo more of a secret than its prefix
        if len(ids) != 1:
            raise CommandError(
                f"no key with id or prefix {shown!r}"
                if not ids
                else f"prefix {shown!r} matches {len(ids)} keys: give the id"
            )
        try:
            key = key_revoke(key_id=ids[0], actor=default_actor(), path="cli")
        except NotFound as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"revoked key {key.name!r} (id {key.pk}, prefix {key.prefix})")
