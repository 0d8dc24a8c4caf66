"""Provider writes: create, update (credential write-only), delete."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from django.db import IntegrityError, transaction

from routing import crypto
from routing.config.errors import ConfigError, FieldError, NotFound
from routing.config.export import TIMEOUT_FIELDS
from routing.config.schema import PLATFORM_SECRETS, ProviderIn, parse_provider
from routing.crypto import CredentialDecryptError
from routing.models import Provider
from routing.protocols.registry import PLATFORMS
from routing.services.base import (
    NameTaken,
    Unchanged,
    as_mapping,
    record,
    versioned_write,
)
from routing.services.health import enable_in_store


def new_credential(provider: Provider, *, given: bool, value: str | None) -> str | None:
    """The one credential rule of every write path (file, API, page, admin, commands).

    ``api_key`` absent or ``""`` keeps the stored credential; a non-empty string replaces
    it; ``null`` clears it. Returns the credential to store (``""`` = clear) or None when
    the stored one stays as it is (including "replaced by the same value").
    """
    if not given:
        return None
    if value is None:
        return "" if provider.has_api_key else None
    plain = value.strip()
    if not plain:
        return None
    try:
        if provider.has_api_key and provider.get_api_key() == plain:
            return None
    except CredentialDecryptError:
        pass  # unreadable under the current secret: the new value wins
    return plain


def new_headers(provider: Provider, given: Mapping[str, str]) -> dict[str, str]:
    """The one header rule of every write path: header values are write-only like the
    credential, so a value ``""`` keeps the value stored under that name (what the API,
    the page, the admin and the export show is the names with ``""``); a new value
    replaces it; a name left out is removed."""
    try:
        stored = provider.get_headers() if provider.pk else {}
    except CredentialDecryptError:
        stored = {}  # unreadable under the current secret: only new values can be kept
    by_name = {name.lower(): value for name, value in stored.items()}
    unkept = [name for name, value in given.items() if value == "" and name.lower() not in by_name]
    if unkept:
        raise ConfigError(
            FieldError(
                f"headers.{name}", f"header {name} has no stored value to keep: give its value"
            )
            for name in unkept
        )
    return {name: value or by_name[name.lower()] for name, value in given.items()}


def new_platform_secrets(provider: Provider, data: Mapping[str, Any]) -> dict[str, str]:
    """The platform secrets to store (``""`` = clear) under the credential's rule, per
    secret: absent or ``""`` keeps, a string replaces, ``null`` clears."""
    try:
        stored = provider.get_platform_secrets()
    except CredentialDecryptError:
        stored = {}  # unreadable under the current secret: new values win
    out: dict[str, str] = {}
    for name in PLATFORM_SECRETS:
        if name not in data:
            continue
        value = data[name]
        if value is None:
            if name in (provider.platform_secrets_encrypted or {}):
                out[name] = ""
            continue
        plain = str(value.get_secret_value() if hasattr(value, "get_secret_value") else value)
        plain = plain.strip()
        if plain and stored.get(name) != plain:
            out[name] = plain
    return out


def header_fingerprints(provider: Provider) -> dict[str, str]:
    """Per header, a fingerprint of its encrypted value (what records show; the value
    itself never leaves the row). A value that did not change keeps its token."""
    return {
        name: hashlib.sha256(token.encode()).hexdigest()[:16]
        for name, token in (provider.headers_encrypted or {}).items()
    }


def copy_provider_fields(provider: Provider, item: ProviderIn) -> None:
    """Copy a validated provider onto its row (all but the credential), the same for every
    write path: a timeout left out goes back to its default, absent ``models`` keeps the
    list refreshed from the upstream; a health check interval left out is the gateway's;
    a header value ``""`` keeps the stored one (:func:`new_headers`); a platform secret the
    provider's platform does not read is dropped (moved off Bedrock, its AWS keys go: write-
    only, they could not be seen to clear, and an export would name them for a platform
    that refuses them)."""
    provider.kind = item.kind
    provider.platform = item.platform
    for secret in PLATFORM_SECRETS:
        if secret not in PLATFORMS[item.platform].fields:
            provider.set_platform_secret(secret, "")
    provider.base_url = item.base_url
    provider.region = item.region or ""
    provider.project = item.project or ""
    provider.credentials_file = item.credentials_file or ""
    provider.entra = item.entra
    provider.set_headers(new_headers(provider, item.headers))
    provider.betas = item.betas.model_dump(exclude_none=True) if item.betas else {}
    if item.models is not None:
        provider.models = list(item.models)
    timeouts = item.timeouts.model_dump() if item.timeouts else {}
    for key, column in TIMEOUT_FIELDS.items():
        value = timeouts.get(key)
        setattr(provider, column, value if value is not None else _default(Provider, column))
    provider.health_check_s = item.health_check_s


def _default(model: type[Any], column: str) -> Any:
    return model._meta.get_field(column).default


def provider_snapshot(provider: Provider) -> dict[str, Any]:
    """What a config-change record shows of a provider. ``api_key`` is a fingerprint of the
    encrypted token, which changes whenever a credential is set; the audit redacts it too."""
    token = provider.api_key_encrypted
    return {
        "kind": provider.kind,
        **_platform_snapshot(provider),
        "base_url": provider.base_url,
        "api_key": hashlib.sha256(token.encode()).hexdigest()[:16] if token else "",
        "headers": header_fingerprints(provider),
        **({"betas": dict(provider.betas)} if provider.betas else {}),
        "models": list(provider.models or []),
        "timeouts": {key: getattr(provider, column) for key, column in TIMEOUT_FIELDS.items()},
        "health_check_s": provider.health_check_s,
    }


def _platform_snapshot(provider: Provider) -> dict[str, Any]:
    """The platform and the fields it uses; a secret as a fingerprint of its token."""
    if provider.platform == "direct" and not provider.platform_secrets_encrypted:
        return {}  # as records showed before platforms existed
    fields = {
        name: getattr(provider, name)
        for name in ("region", "project", "credentials_file", "entra")
        if getattr(provider, name)
    }
    secrets = {
        name: hashlib.sha256(token.encode()).hexdigest()[:16]
        for name, token in sorted((provider.platform_secrets_encrypted or {}).items())
    }
    return {"platform": provider.platform, **fields, **secrets}


def get_provider(name: str) -> Provider:
    provider = Provider.objects.filter(name=name).first()
    if provider is None:
        raise NotFound("provider", name)
    return provider


def _stored(provider: Provider) -> dict[str, Any]:
    """The stored provider in ``ProviderIn`` shape, without the credential."""
    return {
        "name": provider.name,
        "kind": provider.kind,
        "platform": provider.platform,
        "base_url": provider.base_url,
        **{
            name: getattr(provider, name) or None
            for name in ("region", "project", "credentials_file")
        },
        "entra": provider.entra,
        "headers": {name: "" for name in provider.header_names},  # "": keep the value
        "betas": dict(provider.betas) if provider.betas else None,
        "models": list(provider.models or []),
        "timeouts": {key: getattr(provider, column) for key, column in TIMEOUT_FIELDS.items()},
        "health_check_s": provider.health_check_s,
    }


def _apply_fields(provider: Provider, raw: Mapping[str, Any]) -> None:
    """Validate ``raw`` through the shared schema and copy it onto ``provider``."""
    copy_provider_fields(provider, parse_provider(raw))


def provider_create(*, data: dict[str, Any], actor: str, path: str) -> Provider:
    """Create a provider from a ``ProviderIn``-shaped dict (``api_key`` optional)."""
    raw = as_mapping(data, "a provider")
    item = parse_provider(raw)
    provider = Provider(name=item.name)
    _apply_fields(provider, raw)
    if item.api_key is not None:
        provider.set_api_key(item.api_key.get_secret_value())
    for secret, plain in new_platform_secrets(provider, raw).items():
        provider.set_platform_secret(secret, plain)
    try:
        with transaction.atomic():
            provider.save()
            record(
                actor=actor,
                path=path,
                object_type="provider",
                object_name=provider.name,
                before=None,
                after=provider_snapshot(provider),
            )
    except IntegrityError:
        raise NameTaken("name", f"a provider named {item.name!r} already exists") from None
    return provider


def _new_credential(provider: Provider, data: Mapping[str, Any]) -> str | None:
    """The credential to store (``""`` = clear), or None to keep: the shared rule."""
    value = data.get("api_key")
    return new_credential(
        provider, given="api_key" in data, value=None if value is None else str(value)
    )


def _merged(provider: Provider, data: Mapping[str, Any]) -> dict[str, Any]:
    raw = _stored(provider)
    for key, value in data.items():
        if key == "timeouts" and isinstance(value, Mapping):
            raw["timeouts"] = {**raw["timeouts"], **value}
        elif key != "api_key" and key not in PLATFORM_SECRETS:
            raw[key] = value
    for key in ("api_key", *PLATFORM_SECRETS):
        if data.get(key) is not None:
            raw[key] = data[key]  # so the schema checks its type
    raw.update(_kept_secrets(provider, data, raw.get("platform")))
    return raw


def _kept_secrets(provider: Provider, data: Mapping[str, Any], platform: Any) -> dict[str, str]:
    """The stored credentials a write leaves as they are, for the platform's check to see
    the provider as it will be (a session token rotated alone goes with the stored keys; a
    key id cleared alone leaves its secret unpaired): only those the platform reads, so a
    provider moved off Bedrock drops its AWS keys instead of being refused for them."""
    spec = PLATFORMS.get(str(platform))
    if spec is None or spec.name == "direct":
        return {}
    try:
        stored = provider.get_platform_secrets() if provider.pk else {}
        api_key = provider.get_api_key() if provider.pk else ""
    except CredentialDecryptError:
        return {}  # unreadable under the current secret: only new values are checked
    kept = {name: value for name, value in stored.items() if name in spec.fields}
    if api_key:
        kept["api_key"] = api_key
    return {name: value for name, value in kept.items() if name not in data}


def provider_update(
    *, name: str, data: dict[str, Any], based_on: int, actor: str, path: str
) -> Provider:
    """Change a provider. ``data`` is merged onto the stored provider: keys left out keep
    their value, ``timeouts`` merges per key (``null`` = the built-in default),
    ``health_check_s`` ``null`` = the gateway's interval. ``api_key``:
    absent or ``""`` keeps, a string replaces, ``null`` clears. ``name`` cannot change."""
    credential_set: list[bool] = []

    def change(provider: Provider) -> None:
        as_mapping(data, "a provider")
        if "name" in data and data["name"] != name:
            raise ConfigError.single("name", "a provider cannot be renamed: create a new one")
        before = provider_snapshot(provider)
        _apply_fields(provider, _merged(provider, data))
        credential = _new_credential(provider, data)
        if credential is not None:
            provider.set_api_key(credential)
            credential_set.append(bool(credential))
        for secret, plain in new_platform_secrets(provider, data).items():
            provider.set_platform_secret(secret, plain)
            credential_set.append(bool(plain))
        after = provider_snapshot(provider)
        if after == before:
            raise Unchanged
        provider.save()
        record(
            actor=actor,
            path=path,
            object_type="provider",
            object_name=name,
            before=before,
            after=after,
        )

    provider = versioned_write(
        Provider, kind="provider", name=name, based_on=based_on, change=change, name__exact=name
    )
    if any(credential_set):
        # SPEC §4: a changed credential lifts a credential-disabled provider.
        enable_in_store(name, by=f"{actor} (credential changed)")
    return provider


def providers_rotate_secret(*, old_secret: str, new_secret: str) -> int:
    """Re-encrypt every stored provider credential from ``old_secret`` to ``new_secret``.

    All-or-nothing: if any token decrypts with neither secret, nothing is changed. Tokens
    already under ``new_secret`` are re-encrypted too, so a repeated run is harmless.
    Provider versions are not bumped and nothing is recorded: the credential itself did
    not change. Returns the number of credentials re-encrypted.
    """
    rotate = crypto.rotator(old_secret, new_secret)
    count = 0
    with transaction.atomic():
        rows = Provider.objects.select_for_update()
        for pk, name, token, headers, secrets in rows.values_list(
            "pk", "name", "api_key_encrypted", "headers_encrypted", "platform_secrets_encrypted"
        ):
            if token:
                Provider.objects.filter(pk=pk).update(api_key_encrypted=rotate(name, token))
                count += 1
            if headers:  # header values are encrypted the same way
                rotated = {header: rotate(name, value) for header, value in headers.items()}
                Provider.objects.filter(pk=pk).update(headers_encrypted=rotated)
            if secrets:  # and the platform's secrets
                rotated = {secret: rotate(name, value) for secret, value in secrets.items()}
                Provider.objects.filter(pk=pk).update(platform_secrets_encrypted=rotated)
    return count


def provider_delete(*, name: str, based_on: int, actor: str, path: str) -> None:
    """Delete a provider no group uses (remove its targets first)."""

    def change(provider: Provider) -> None:
        groups = sorted(set(provider.targets.values_list("group__name", flat=True)))
        if groups:
            raise ConfigError.single(
                "name",
                f"provider {name!r} is used by group(s) {', '.join(groups)}: "
                "remove those targets first",
            )
        before = provider_snapshot(provider)
        provider.delete()
        record(
            actor=actor,
            path=path,
            object_type="provider",
            object_name=name,
            before=before,
            after=None,
        )

    versioned_write(
        Provider, kind="provider", name=name, based_on=based_on, change=change, name__exact=name
    )
