"""Models, credentials at rest (crypto, rotation) and the admin write path."""

from __future__ import annotations

import json
import logging
import stat
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import IntegrityError, transaction
from django.db.models import ProtectedError
from django.test import Client

from routing import crypto
from routing.config.export import TIMEOUT_FIELDS
from routing.config.schema import TIMEOUT_DEFAULTS
from routing.crypto import CredentialDecryptError
from routing.models import ApiKey, GlobalSettings, Group, Provider, Target

PLAIN = "sk-live-PLAINTEXT-abcdefghijklmnop-3xYz"
SECRET = "test-secret"


@pytest.fixture(autouse=True)
def _secret(settings: Any) -> None:
    settings.SWITCHYARD = {**settings.SWITCHYARD, "SECRET_KEY": SECRET, "ALGORITHMS": {}}


def use_secret(settings: Any, secret: str, fallbacks: tuple[str, ...] = ()) -> None:
    settings.SWITCHYARD = {
        **settings.SWITCHYARD,
        "SECRET_KEY": secret,
        "SECRET_KEY_FALLBACKS": list(fallbacks),
    }


def make_provider(name: str = "primary", key: str = PLAIN) -> Provider:
    provider = Provider(name=name, base_url="http://127.0.0.1:9001/v1")
    provider.set_api_key(key)
    provider.save()
    return provider


# --- credentials on the model --------------------------------------------------------


@pytest.mark.django_db
def test_the_plaintext_never_reaches_the_database() -> None:
    provider = make_provider()
    (stored,) = Provider.objects.values_list("api_key_encrypted", flat=True)
    assert PLAIN not in stored and stored.startswith("gAAAA")  # a Fernet token
    row = Provider.objects.values().get()
    assert all(PLAIN not in str(value) for value in row.values())
    assert Provider.objects.get().get_api_key() == PLAIN
    assert PLAIN not in repr(provider) and PLAIN not in str(provider)


@pytest.mark.django_db
def test_hint_shows_at_most_the_last_four_characters() -> None:
    provider = make_provider()
    assert provider.api_key_hint == "…3xYz"
    provider.set_api_key("  short-key\n")
    assert provider.api_key_hint == "…"  # under 12 characters: no characters at all
    assert provider.get_api_key() == "short-key"
    provider.set_api_key("")
    assert (provider.api_key_encrypted, provider.api_key_hint, provider.get_api_key()) == (
        "",
        "",
        "",
    )
    assert provider.has_api_key is False


@pytest.mark.django_db
def test_each_encryption_is_a_fresh_token() -> None:
    first, second = crypto.encrypt(PLAIN), crypto.encrypt(PLAIN)
    assert first != second
    assert crypto.decrypt(first) == crypto.decrypt(second) == PLAIN


def test_a_wrong_secret_gives_a_clear_error(settings: Any) -> None:
    token = crypto.encrypt(PLAIN)
    use_secret(settings, "another-secret")
    with pytest.raises(CredentialDecryptError) as caught:
        crypto.decrypt(token)
    assert "rotate_secret" in str(caught.value)
    assert token not in str(caught.value) and PLAIN not in str(caught.value)


def test_fallback_secrets_decrypt_during_rotation(settings: Any) -> None:
    token = crypto.encrypt(PLAIN)
    use_secret(settings, "new-secret", fallbacks=(SECRET,))
    assert crypto.decrypt(token) == PLAIN
    assert crypto.fernet_for("new-secret").decrypt(crypto.encrypt("x").encode()) == b"x"


def test_a_missing_secret_is_generated_once_and_kept_private(
    settings: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    use_secret(settings, "")
    settings.VAR_DIR = tmp_path / "var"
    with caplog.at_level(logging.WARNING, logger="switchyard"):
        token = crypto.encrypt(PLAIN)
        assert crypto.decrypt(token) == PLAIN
    secret_file = tmp_path / "var" / "secret.key"
    secret = secret_file.read_text().strip()
    assert len(secret) >= 48
    assert stat.S_IMODE(secret_file.stat().st_mode) == 0o600
    warnings = [r for r in caplog.records if r.name == "switchyard"]
    assert len(warnings) == 1 and "SWITCHYARD_SECRET_KEY is not set" in warnings[0].getMessage()
    assert secret not in caplog.text
    # The persisted secret is the one in use: setting it explicitly decrypts the same token.
    use_secret(settings, secret)
    assert crypto.decrypt(token) == PLAIN


def test_an_existing_secret_file_is_reused(settings: Any, tmp_path: Path) -> None:
    (tmp_path / "secret.key").write_text("persisted-secret\n")
    use_secret(settings, "")
    settings.VAR_DIR = tmp_path
    token = crypto.encrypt(PLAIN)
    use_secret(settings, "persisted-secret")
    assert crypto.decrypt(token) == PLAIN


# --- rotation ------------------------------------------------------------------------


@pytest.mark.django_db
def test_rotate_secret_reencrypts_every_credential(settings: Any, capsys: Any) -> None:
    make_provider("a", PLAIN)
    make_provider("b", "sk-b-0123456789abcdef")
    nokey = Provider(name="nokey", base_url="http://localhost:1/v1")
    nokey.set_headers({"x-org-token": "hv-0123456789"})  # header values are encrypted too
    nokey.save()
    before = dict(Provider.objects.values_list("name", "api_key_encrypted"))
    header_before = Provider.objects.get(name="nokey").headers_encrypted["x-org-token"]
    call_command("rotate_secret", "--old", SECRET, "--new", "rotated-secret")
    assert "re-encrypted 2 credentials" in capsys.readouterr().out
    after = dict(Provider.objects.values_list("name", "api_key_encrypted"))
    assert after["a"] != before["a"] and after["nokey"] == ""
    assert Provider.objects.get(name="a").version == 1

    with pytest.raises(CredentialDecryptError):
        Provider.objects.get(name="a").get_api_key()  # still running with the old secret
    use_secret(settings, "rotated-secret")
    assert Provider.objects.get(name="a").get_api_key() == PLAIN
    assert Provider.objects.get(name="b").get_api_key() == "sk-b-0123456789abcdef"
    rotated = Provider.objects.get(name="nokey")
    assert rotated.headers_encrypted["x-org-token"] != header_before
    assert rotated.get_headers() == {"x-org-token": "hv-0123456789"}


@pytest.mark.django_db
def test_header_values_are_stored_encrypted_and_an_unchanged_one_keeps_its_token() -> None:
    row = Provider(name="h", base_url="http://localhost:1/v1")
    row.set_headers({"x-org-token": "hv-0123456789", "x-team": "ops"})
    row.save()
    stored = Provider.objects.get(name="h")
    tokens = dict(stored.headers_encrypted)
    assert all(token.startswith("gAAAAA") for token in tokens.values())
    assert "hv-0123456789" not in str(tokens) and stored.header_names == ["x-org-token", "x-team"]
    stored.set_headers({"x-org-token": "hv-0123456789", "x-team": "dev"})
    assert stored.headers_encrypted["x-org-token"] == tokens["x-org-token"]
    assert stored.headers_encrypted["x-team"] != tokens["x-team"]
    assert stored.get_headers() == {"x-org-token": "hv-0123456789", "x-team": "dev"}


@pytest.mark.django_db
def test_rotate_with_a_wrong_old_secret_changes_nothing() -> None:
    make_provider("a")
    before = list(Provider.objects.values_list("api_key_encrypted", flat=True))
    with pytest.raises(CommandError) as caught:
        call_command("rotate_secret", "--old", "wrong", "--new", "rotated-secret")
    assert "provider 'a'" in str(caught.value) and "nothing was changed" in str(caught.value)
    assert list(Provider.objects.values_list("api_key_encrypted", flat=True)) == before
    with pytest.raises(CommandError, match="the same"):
        call_command("rotate_secret", "--old", SECRET, "--new", SECRET)


# --- model rules ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "valid"),
    [
        ("auto", True),
        ("gpt-4.1", True),
        ("a_b.c-d", True),
        ("-auto", False),
        ("a b", False),
        ("auto\n", False),
        ("x" * 101, False),
    ],
)
def test_group_names(name: str, valid: bool) -> None:
    group = Group(name=name)
    if valid:
        group.full_clean(validate_unique=False)
    else:
        with pytest.raises(ValidationError):
            group.full_clean(validate_unique=False)


@pytest.mark.parametrize(
    ("url", "valid"),
    [
        ("http://127.0.0.1:9001/v1", True),
        ("http://localhost:11434/v1", True),
        ("https://api.openai.com/v1", True),
        ("http://[::1]:8000/v1", True),
        ("ftp://example.com", False),
        ("not a url", False),
    ],
)
def test_provider_base_urls(url: str, valid: bool) -> None:
    provider = Provider(name="p", base_url=url)
    if valid:
        provider.full_clean(validate_unique=False)
    else:
        with pytest.raises(ValidationError):
            provider.full_clean(validate_unique=False)


@pytest.mark.django_db
def test_targets_are_unique_per_group_and_protect_their_provider() -> None:
    provider = make_provider()
    group = Group.objects.create(name="auto")
    Target.objects.create(group=group, provider=provider, model="m", position=0)
    with pytest.raises(IntegrityError), transaction.atomic():
        Target.objects.create(group=group, provider=provider, model="m", position=1)
    with pytest.raises(ProtectedError):
        provider.delete()
    group.delete()
    assert Target.objects.count() == 0
    provider.delete()


@pytest.mark.django_db
def test_global_settings_is_a_singleton() -> None:
    first = GlobalSettings.load()
    GlobalSettings(policy={"commit": "complete"}).save()
    assert GlobalSettings.objects.count() == 1
    assert first.pk == GlobalSettings.load().pk == 1
    assert GlobalSettings.load().policy == {"commit": "complete"}


# --- admin ---------------------------------------------------------------------------


@pytest.fixture
def admin_client(db: None) -> Client:
    user = get_user_model().objects.create_superuser("root", "root@example.com", "pw-0123456789")
    client = Client()
    client.force_login(user)
    return client


def provider_form(provider: Provider | None = None, **overrides: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": provider.name if provider else "primary",
        "kind": "openai",
        "base_url": provider.base_url if provider else "http://127.0.0.1:9001/v1",
        "headers": "{}",
        "models": '["model-a"]',
        # the declared defaults (an unchanged provider posts what it holds)
        **{column: str(TIMEOUT_DEFAULTS[key]) for key, column in TIMEOUT_FIELDS.items()},
        "api_key": "",
        "based_on_version": str(provider.version) if provider else "",
        "_save": "Save",
    }
    data.update(overrides)
    return data


@pytest.mark.django_db
def test_admin_change_page_never_shows_the_credential(admin_client: Client) -> None:
    provider = make_provider()
    for url in (f"/admin/routing/provider/{provider.pk}/change/", "/admin/routing/provider/"):
        response = admin_client.get(url)
        assert response.status_code == 200
        html = response.content.decode()
        assert PLAIN not in html
        assert provider.api_key_encrypted not in html
        assert "set (…3xYz)" in html
    html = admin_client.get(f"/admin/routing/provider/{provider.pk}/change/").content.decode()
    assert 'type="password" name="api_key"' in html
    assert "api_key_encrypted" not in html


@pytest.mark.django_db
def test_admin_sets_keeps_and_clears_the_credential(admin_client: Client) -> None:
    response = admin_client.post("/admin/routing/provider/add/", provider_form(api_key=PLAIN))
    assert response.status_code == 302, response.content.decode()
    provider = Provider.objects.get()
    assert (provider.get_api_key(), provider.version, provider.models) == (PLAIN, 1, ["model-a"])

    url = f"/admin/routing/provider/{provider.pk}/change/"
    response = admin_client.post(url, provider_form(provider, base_url="http://localhost:9002/v1"))
    assert response.status_code == 302
    provider.refresh_from_db()
    assert (provider.get_api_key(), provider.base_url, provider.version) == (
        PLAIN,
        "http://localhost:9002/v1",
        2,
    )

    response = admin_client.post(url, provider_form(provider, clear_api_key="on"))
    assert response.status_code == 302
    provider.refresh_from_db()
    assert (provider.has_api_key, provider.version) == (False, 3)


@pytest.mark.django_db
def test_admin_refuses_a_stale_write(admin_client: Client) -> None:
    provider = make_provider()
    url = f"/admin/routing/provider/{provider.pk}/change/"
    stale = provider_form(provider, base_url="http://localhost:1/v1")
    Provider.objects.filter(pk=provider.pk).update(version=2)  # another window saved first
    response = admin_client.post(url, stale)
    assert response.status_code == 200
    assert "Someone else changed this provider (now version 2)" in response.content.decode()
    provider.refresh_from_db()
    assert provider.base_url == "http://127.0.0.1:9001/v1"


@pytest.mark.django_db
def test_admin_provider_uses_the_config_schema(admin_client: Client) -> None:
    response = admin_client.post(
        "/admin/routing/provider/add/",
        provider_form(
            headers=json.dumps({"Authorization": "Bearer x"}),
            models='["a", "a"]',
            total_timeout_s="0",
        ),
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert "put the credential in api_key" in html
    assert "repeats a" in html
    assert "must be greater than or equal to 0.1" in html
    assert Provider.objects.count() == 0


def group_form(
    group: Group | None, policy: dict[str, Any], targets: list[dict[str, Any]]
) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": group.name if group else "auto",
        "policy": json.dumps(policy),
        "based_on_version": str(group.version) if group else "",
        "targets-TOTAL_FORMS": str(len(targets)),
        "targets-INITIAL_FORMS": "0",
        "targets-MIN_NUM_FORMS": "0",
        "targets-MAX_NUM_FORMS": "1000",
        "_save": "Save",
    }
    for index, target in enumerate(targets):
        for key, value in target.items():
            data[f"targets-{index}-{key}"] = value
    return data


def target_row(provider: Provider, model: str, position: int) -> dict[str, Any]:
    return {
        "provider": str(provider.pk),
        "model": model,
        "position": str(position),
        "weight": "1",
        "enabled": "on",
    }


@pytest.mark.django_db
def test_admin_group_policy_is_validated_and_normalized(admin_client: Client) -> None:
    provider = make_provider()
    bad = group_form(
        None, {"retry.max_retries": 99, "quarantineBaseMs": 1}, [target_row(provider, "m", 0)]
    )
    response = admin_client.post("/admin/routing/group/add/", bad)
    html = response.content.decode()
    assert response.status_code == 200
    assert "retry.max_retries: must be less than or equal to 20" in html
    assert "was renamed: write `circuit.cooldown_base_ms` instead" in html
    assert Group.objects.count() == 0

    good = group_form(
        None,
        {"commit": "complete", "retry.max_delay_ms": 20000},
        [target_row(provider, "m2", 7), target_row(provider, "m1", 3)],
    )
    response = admin_client.post("/admin/routing/group/add/", good)
    assert response.status_code == 302, response.content.decode()
    group = Group.objects.get()
    assert group.policy == {"retry.max_delay_ms": 20000, "commit": "complete"}
    assert list(group.targets.values_list("model", "position")) == [("m1", 0), ("m2", 1)]


@pytest.mark.django_db
def test_admin_group_checks_the_effective_policy(admin_client: Client) -> None:
    provider = make_provider()
    settings_row = GlobalSettings.load()
    settings_row.file_policy = {"retry.max_delay_ms": 1000}
    settings_row.save()
    form = group_form(None, {"retry.initial_delay_ms": 5000}, [target_row(provider, "m", 0)])
    html = admin_client.post("/admin/routing/group/add/", form).content.decode()
    assert (
        "retry.initial_delay_ms: must be &lt;= retry.max_delay_ms (1000, from the config file)"
        in html
    )
    assert Group.objects.count() == 0


@pytest.mark.django_db
def test_admin_group_needs_distinct_targets(admin_client: Client) -> None:
    provider = make_provider()
    duplicate = group_form(None, {}, [target_row(provider, "m", 0), target_row(provider, "m", 1)])
    assert (
        "duplicate target primary/m"
        in admin_client.post("/admin/routing/group/add/", duplicate).content.decode()
    )
    empty = group_form(None, {}, [])
    assert (
        "a group needs at least one target"
        in admin_client.post("/admin/routing/group/add/", empty).content.decode()
    )
    assert Group.objects.count() == 0


@pytest.mark.django_db
def test_admin_global_settings_policy_is_validated(admin_client: Client) -> None:
    row = GlobalSettings.load()
    url = f"/admin/routing/globalsettings/{row.pk}/change/"
    data = {"policy": json.dumps({"switch_codes": []}), "based_on_version": "1", "_save": "Save"}
    assert (
        "switch_codes: must list at least one failure code"
        in admin_client.post(url, data).content.decode()
    )
    data["policy"] = json.dumps({"switch_codes": ["SERVER"]})
    assert admin_client.post(url, data).status_code == 302
    row.refresh_from_db()
    assert (row.policy, row.version) == ({"switch_codes": ["SERVER"]}, 2)


@pytest.mark.django_db
def test_admin_global_settings_are_checked_against_every_group(admin_client: Client) -> None:
    """The admin saves through the global-settings service, so it refuses what the API and
    the page refuse: a global layer that would break a group's effective policy."""
    Group.objects.create(name="auto", policy={"retry.max_delay_ms": 1000})
    row = GlobalSettings.load()
    url = f"/admin/routing/globalsettings/{row.pk}/change/"
    policy = json.dumps({"retry.initial_delay_ms": 5000})
    data = {"policy": policy, "based_on_version": str(row.version), "_save": "Save"}
    html = admin_client.post(url, data).content.decode()
    assert "group &#x27;auto&#x27; would break" in html
    row.refresh_from_db()
    assert (row.policy, row.version) == ({}, 1)


@pytest.mark.django_db
def test_admin_cannot_rename_a_provider(admin_client: Client) -> None:
    provider = make_provider()
    url = f"/admin/routing/provider/{provider.pk}/change/"
    response = admin_client.post(url, provider_form(provider, name="renamed"))
    assert response.status_code == 302
    provider.refresh_from_db()
    assert provider.name == "primary"
    assert 'name="name"' not in admin_client.get(url).content.decode()


@pytest.mark.django_db
def test_admin_api_keys_show_prefix_and_revoke(admin_client: Client) -> None:
    from routing.services.api_keys import generate_key

    key, secret = generate_key(name="ci")
    html = admin_client.get("/admin/routing/apikey/").content.decode()
    assert key.prefix in html and secret not in html
    assert admin_client.get("/admin/routing/apikey/add/").status_code == 403
    response = admin_client.post(
        "/admin/routing/apikey/", {"action": "revoke", "_selected_action": [str(key.pk)]}
    )
    assert response.status_code == 302
    key.refresh_from_db()
    assert key.revoked_at is not None
    assert ApiKey.objects.filter(revoked_at__isnull=True).count() == 0


@pytest.mark.django_db
def test_admin_target_options_use_the_config_schema(admin_client: Client) -> None:
    provider = make_provider()
    row = target_row(provider, "m", 0)
    bad = group_form(None, {}, [{**row, "options": '{"keepThinking": true}'}])
    page = admin_client.post("/admin/routing/group/add/", bad).content.decode()
    assert "keep_thinking" in page and Group.objects.count() == 0
    bad = group_form(None, {}, [{**row, "options": '{"efforts": ["low", "low"]}'}])
    assert (
        "list each effort once"
        in admin_client.post("/admin/routing/group/add/", bad).content.decode()
    )
    good = group_form(
        None, {}, [{**row, "options": '{"keep_thinking": true, "break_tool_loop": false}'}]
    )
    assert admin_client.post("/admin/routing/group/add/", good).status_code == 302
    # stored as the other paths store it: only what differs from the defaults
    assert Group.objects.get().targets.get().options == {"keep_thinking": True}


@pytest.mark.django_db
def test_admin_group_aliases_are_validated_against_other_groups(admin_client: Client) -> None:
    provider = make_provider()
    Group.objects.create(name="claude", aliases=["claude-*"])
    form = group_form(None, {}, [target_row(provider, "m", 0)])
    html = admin_client.post(
        "/admin/routing/group/add/", {**form, "aliases": '["claude-opus-*"]'}
    ).content.decode()
    assert "could match the same model names" in html and "&#x27;claude&#x27;" in html
    assert not Group.objects.filter(name="auto").exists()
    done = admin_client.post("/admin/routing/group/add/", {**form, "aliases": '["gpt-*"]'})
    assert done.status_code == 302, done.content.decode()
    assert Group.objects.get(name="auto").aliases == ["gpt-*"]
