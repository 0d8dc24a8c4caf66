"""Provider credentials at rest: Fernet tokens keyed from ``SWITCHYARD_SECRET_KEY``.

Decisions:

- The operator's secret is any string. A Fernet key is derived from it with
  HKDF-SHA256 (fixed ``info`` label, no salt: the derivation must be reproducible on
  every process from the secret alone), so short or non-base64 secrets just work.
- No secret configured: one is generated on first use, persisted in
  ``VAR_DIR/secret.key`` (mode 0600, published so that concurrent first starts agree
  on one file: ``routing.var_files``) and a warning is logged. Losing that file makes
  every stored credential unreadable, which is why production should set the variable.
- Decryption tries the current secret, then ``SWITCHYARD["SECRET_KEY_FALLBACKS"]``
  (optional list) — the rotation window, as with Django's ``SECRET_KEY_FALLBACKS``.
- Rotation (``manage.py rotate_secret --old OLD --new NEW``) re-encrypts every
  provider's tokens (the credential and each header value) in one transaction (the rows:
  ``routing.services.providers``; the cipher: :func:`rotator`). Flow: either stop the
  gateway, rotate, set ``SWITCHYARD_SECRET_KEY=NEW`` and start it; or, without downtime,
  first deploy ``SWITCHYARD_SECRET_KEY=NEW`` with ``OLD`` listed in the fallbacks, rotate,
  then drop the fallback.

Nothing here ever logs or formats a secret, a plaintext credential or a token.
"""

from __future__ import annotations

import base64
import functools
import logging
from collections.abc import Callable
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from routing.conf import switchyard_settings
from routing.var_files import EmptySecretFile, read_or_create_secret

logger = logging.getLogger("switchyard")

_HKDF_INFO = b"switchyard provider credentials v1"
SECRET_FILE_NAME = "secret.key"


class CredentialDecryptError(Exception):
    """A stored credential does not decrypt with the configured secret(s)."""


@functools.lru_cache(maxsize=16)
def fernet_for(secret: str) -> Fernet:
    """The Fernet instance for one operator secret (derivation is cached per secret)."""
    if not secret:
        raise ValueError("an empty secret cannot key credential encryption")
    derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_HKDF_INFO).derive(
        secret.encode("utf-8")
    )
    return Fernet(base64.urlsafe_b64encode(derived))


@functools.lru_cache(maxsize=4)
def _secret_from_file(path: str) -> str:
    """Read ``VAR_DIR/secret.key``, creating it (0600) with a random secret if missing."""
    file = Path(path)
    try:
        secret, generated = read_or_create_secret(file)
    except EmptySecretFile:
        raise ImproperlyConfigured(
            f"{file} is empty; restore it or set SWITCHYARD_SECRET_KEY"
        ) from None
    if generated:
        logger.warning(
            "SWITCHYARD_SECRET_KEY is not set: generated a credential-encryption secret in %s "
            "(keep this file; set SWITCHYARD_SECRET_KEY in production)",
            file,
        )
    return secret


def current_secret() -> str:
    """The secret that encrypts new credentials: the setting, else the persisted file."""
    configured = switchyard_settings().SECRET_KEY
    if configured:
        return configured
    return _secret_from_file(str(Path(settings.VAR_DIR) / SECRET_FILE_NAME))


def _decrypting_fernet() -> MultiFernet:
    fallbacks = [s for s in switchyard_settings().SECRET_KEY_FALLBACKS if s]
    return MultiFernet([fernet_for(current_secret()), *(fernet_for(s) for s in fallbacks)])


def encrypt(plain: str) -> str:
    """Encrypt ``plain`` with the current secret; returns a URL-safe text token."""
    return fernet_for(current_secret()).encrypt(plain.encode("utf-8")).decode("ascii")


def decrypt(token: str) -> str:
    """Decrypt a token made by :func:`encrypt` (current secret, then fallbacks)."""
    try:
        return _decrypting_fernet().decrypt(token.encode("ascii")).decode("utf-8")
    except (InvalidToken, UnicodeError):
        raise CredentialDecryptError(
            "a stored provider credential cannot be decrypted with SWITCHYARD_SECRET_KEY "
            "(was the secret changed without `manage.py rotate_secret`?); "
            "set the credential again or restore the previous secret"
        ) from None


def rotator(old_secret: str, new_secret: str) -> Callable[[str, str], str]:
    """``rotate(owner, token)``: the token re-encrypted from ``old_secret`` (or already
    ``new_secret``) to ``new_secret``; :class:`CredentialDecryptError` naming ``owner`` when
    it decrypts with neither. The rows are ``routing.services.providers_rotate_secret``'s."""
    if not new_secret:
        raise ValueError("the new secret must not be empty")
    if not old_secret:
        raise ValueError("the old secret must not be empty")
    if old_secret == new_secret:
        raise ValueError("the old and new secrets are the same")
    fernet = MultiFernet([fernet_for(new_secret), fernet_for(old_secret)])

    def rotate(owner: str, token: str) -> str:
        try:
            return fernet.rotate(token.encode("ascii")).decode("ascii")
        except InvalidToken:
            raise CredentialDecryptError(
                f"provider {owner!r}: the stored credential decrypts with neither the old "
                "nor the new secret; nothing was changed"
            ) from None

    return rotate
