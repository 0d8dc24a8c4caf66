"""Gateway API keys: format, hashed storage, the createkey command, revocation, index."""

from __future__ import annotations

import hashlib
import re
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from routing.gateway.table import compile_table
from routing.models import ApiKey, ConfigVersion, Group
from routing.services.api_keys import (
    ApiKeyError,
    generate_key,
    hash_secret,
    revoke_key,
)

SECRET_FORMAT = re.compile(r"^sk-sy-[A-Za-z0-9_-]{40}$")


@pytest.fixture
def groups(db: None) -> None:
    Group.objects.create(name="auto")
    Group.objects.create(name="fast.v2")


def test_hash_secret_is_plain_sha256() -> None:
    assert hash_secret("sk-sy-x") == hashlib.sha256(b"sk-sy-x").hexdigest()


@pytest.mark.django_db
def test_generated_keys_store_only_the_hash() -> None:
    key, secret = generate_key(name="agent")
    assert SECRET_FORMAT.match(secret)
    row = ApiKey.objects.values().get(pk=key.pk)
    assert all(secret not in str(value) for value in row.values())
    assert row["hashed"] == hash_secret(secret)
    assert row["prefix"] == secret[:12] and row["prefix"].startswith("sk-sy-")
    assert (row["kind"], row["groups"], row["revoked_at"]) == ("client", [], None)
    assert secret not in str(key) and key.prefix in str(key)


@pytest.mark.django_db
def test_every_key_is_different() -> None:
    secrets = {generate_key(name=f"k{i}")[1] for i in range(20)}
    assert len(secrets) == 20


@pytest.mark.django_db
def test_keys_can_be_limited_to_groups(groups: None) -> None:
    key, _ = generate_key(name="scoped", groups=["fast.v2", "auto", "auto"])
    assert key.groups == ["auto", "fast.v2"]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": "x", "groups": ["nope"]}, "unknown group(s): nope"),
        ({"name": "x", "groups": ["bad name"]}, "invalid group name(s): bad name"),
        (
            {"name": "x", "kind": "admin", "groups": ["auto"]},
            "admin keys cannot be limited to groups",
        ),
        ({"name": "x", "kind": "root"}, "kind must be one of client, admin"),
        ({"name": "  "}, "a key needs a name of 1-100 characters"),
    ],
)
def test_invalid_key_requests_create_nothing(
    groups: None, kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(ApiKeyError, match=re.escape(message)):
        generate_key(**kwargs)
    assert ApiKey.objects.count() == 0


def _gateway_keys() -> dict[str, tuple[str, frozenset[str]]]:
    """``hashed -> (kind, groups)`` as the gateway authenticates: its compiled table."""
    return {hashed: (spec.kind, spec.groups) for hashed, spec in compile_table().keys.items()}


def _config_version() -> int:
    return ConfigVersion.objects.filter(pk=1).values_list("version", flat=True).first() or 0


@pytest.mark.django_db
def test_revoke_removes_the_key_from_the_gateways_table(
    django_capture_on_commit_callbacks: Any,
) -> None:
    before = _config_version()
    with django_capture_on_commit_callbacks(execute=True):
        client, client_secret = generate_key(name="client")
        admin, admin_secret = generate_key(name="ops", kind="admin")
    assert _config_version() > before  # a configuration write: the gateways recompile
    assert _gateway_keys() == {
        hash_secret(client_secret): ("client", frozenset()),
        hash_secret(admin_secret): ("admin", frozenset()),
    }

    revoked = revoke_key(key_id=client.pk)
    assert revoked.revoked_at is not None
    first_time = revoked.revoked_at
    assert revoke_key(key_id=client.pk).revoked_at == first_time  # idempotent
    assert _gateway_keys() == {hash_secret(admin_secret): ("admin", frozenset())}
    with pytest.raises(ApiKeyError, match="no API key with id 999"):
        revoke_key(key_id=999)


@pytest.mark.django_db
def test_the_gateways_table_carries_a_keys_groups(groups: None) -> None:
    _, secret = generate_key(name="scoped", groups=["auto"])
    assert _gateway_keys()[hash_secret(secret)] == ("client", frozenset({"auto"}))


@pytest.mark.django_db
def test_createkey_prints_the_secret_once_on_the_last_line(groups: None, capsys: Any) -> None:
    call_command("createkey", "ci-bot", "--groups", "auto, fast.v2")
    out = capsys.readouterr().out
    lines = out.strip().splitlines()
    secret = lines[-1]
    assert SECRET_FORMAT.match(secret)
    assert out.count(secret) == 1
    key = ApiKey.objects.get()
    assert key.hashed == hash_secret(secret)
    assert key.groups == ["auto", "fast.v2"]
    assert f"prefix {key.prefix}" in lines[0] and "auto, fast.v2" in lines[0]


@pytest.mark.django_db
def test_createkey_admin(capsys: Any) -> None:
    call_command("createkey", "ops", "--admin")
    out = capsys.readouterr().out
    assert "created admin key 'ops'" in out
    assert ApiKey.objects.get().kind == "admin"


@pytest.mark.django_db
def test_createkey_rejects_unknown_groups() -> None:
    with pytest.raises(CommandError, match="unknown group"):
        call_command("createkey", "x", "--groups", "ghost")
    assert ApiKey.objects.count() == 0
