"""``manage.py rotate_secret --old OLD --new NEW``: re-encrypt stored credentials.

Every provider credential is re-encrypted from OLD to NEW in one transaction (all or
nothing). Afterwards set ``SWITCHYARD_SECRET_KEY=NEW`` for every gateway process and
restart them. For no downtime, first run the gateways with ``SWITCHYARD_SECRET_KEY=NEW``
and OLD in ``SWITCHYARD["SECRET_KEY_FALLBACKS"]``, rotate, then drop the fallback.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from routing.crypto import CredentialDecryptError
from routing.services import providers_rotate_secret


class Command(BaseCommand):
    help = "Re-encrypt every provider credential from the old secret to the new one."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--old", required=True, help="the secret the credentials use now")
        parser.add_argument("--new", required=True, help="the secret to encrypt them with")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            count = providers_rotate_secret(old_secret=options["old"], new_secret=options["new"])
        except (CredentialDecryptError, ValueError) as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            f"re-encrypted {count} credential{'s' if count != 1 else ''}; "
            "now set SWITCHYARD_SECRET_KEY to the new secret and restart the gateway"
        )
