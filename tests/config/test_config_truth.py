"""One configuration truth (issue 11) in one process: the file layer keeps operator work,
every write path leaves one config-change record, one credential rule, checks on write,
and ``exportconfig`` -> ``loadconfig`` without the credential variables.

The same behaviours across real processes (daphne + ``manage.py``) are in
``tests/config/test_config_processes.py``."""

from __future__ import annotations

import os
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from routing.audit import writer
from routing.audit.models import ConfigChange
from routing.config.errors import ConfigError
from routing.config.schema import TIMEOUT_DEFAULTS
from routing.config.yaml import load_text
from routing.models import ApiKey, Group, Provider
from routing.services import group_create, group_update_policy, provider_update
from routing.services.config_file import OperatorWork, config_apply
from tests.audit.conftest import clear_audit_tables

pytestmark = pytest.mark.django_db(transaction=True)

UPSTREAM_KEY = "sk-upstream-PLAINTEXT-0123456789"
FILE = """
providers:
  - name: p1
    kind: openai
    base_url: http://127.0.0.1:9/v1
    api_key: ${P1_API_KEY}
    timeouts: {first_token_s: 30}
groups:
  - name: auto
    targets:
      - {provider: p1, model: a}
    retry: {max_retries: 2}
"""


@pytest.fixture(autouse=True)
def _clean(settings: Any) -> None:
    settings.SWITCHYARD = {**settings.SWITCHYARD, "SECRET_KEY": "test-secret", "ALGORITHMS": {}}
    writer.flush(10)
    clear_audit_tables()


def load(text: str, **options: Any) -> Any:
    return config_apply(load_text(text, env={"P1_API_KEY": UPSTREAM_KEY}), source="f", **options)


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "switchyard.yaml"
    path.write_text(text)
    return str(path)


def changes() -> list[tuple[str, str, str, str]]:
    assert writer.flush(10)
    return list(
        ConfigChange.objects.order_by("id").values_list(
            "path", "object_type", "object_name", "actor"
        )
    )


# --- the file layer (item 2) -----------------------------------------------------------


def test_a_file_load_keeps_objects_made_on_the_page_and_the_api() -> None:
    load(FILE, replace=False)
    group_create(
        data={"name": "page-made", "targets": [{"provider": "p1", "model": "b"}]},
        actor="user:alice",
        path="page",
    )
    result = load(FILE.replace("max_retries: 2", "max_retries: 3"), replace=False)
    assert result.groups_updated == ["auto"] and result.groups_deleted == []
    assert set(Group.objects.values_list("name", flat=True)) == {"auto", "page-made"}
    assert Group.objects.get(name="auto").policy["retry.max_retries"] == 3


def test_a_page_change_to_a_file_object_is_refused_naming_it_unless_replace(
    tmp_path: Path,
) -> None:
    load(FILE, replace=False)
    auto = Group.objects.get(name="auto")
    group_update_policy(
        name="auto", changes={"retry.max_retries": 7}, based_on=auto.version, actor="u", path="page"
    )
    changed_file = write(tmp_path, FILE.replace("max_retries: 2", "max_retries: 4"))
    os.environ["P1_API_KEY"] = UPSTREAM_KEY
    try:
        with pytest.raises(CommandError) as refused:
            run("loadconfig", changed_file)
        assert "nothing applied; it would overwrite operator work" in str(refused.value)
        assert "group auto (changed through the page, API or admin" in str(refused.value)
        assert "--replace" in str(refused.value)
        assert Group.objects.get(name="auto").policy["retry.max_retries"] == 7

        out = run("loadconfig", changed_file, "--replace")
        assert "groups updated: auto" in out
        assert Group.objects.get(name="auto").policy["retry.max_retries"] == 4
    finally:
        del os.environ["P1_API_KEY"]


def test_a_start_keeps_operator_work_and_says_so() -> None:
    load(FILE, replace=False)
    p1 = Provider.objects.get(name="p1")
    provider_update(
        name="p1", data={"timeouts": {"idle_s": 9}}, based_on=p1.version, actor="u", path="api"
    )
    result = load(FILE.replace("first_token_s: 30", "first_token_s: 31"), replace=False,
                  keep_operator_work=True)  # fmt: skip
    assert result.kept == [
        "provider p1 (changed through the page, API or admin since the file set it)"
    ]
    p1.refresh_from_db()
    assert (p1.idle_timeout_s, p1.first_token_timeout_s) == (9, 30)
    assert any("kept (not overwritten): provider p1" in line for line in result.summary())


def test_the_file_layer_deletes_what_it_no_longer_lists_unless_changed_elsewhere() -> None:
    two = FILE + "  - name: extra\n    targets:\n      - {provider: p1, model: c}\n"
    load(two, replace=False)
    assert load(FILE, replace=False).groups_deleted == ["extra"]  # from the file, untouched

    auto = Group.objects.get(name="auto")
    group_update_policy(
        name="auto", changes={"commit": "complete"}, based_on=auto.version, actor="u", path="api"
    )
    renamed = FILE.replace("name: auto", "name: other")
    with pytest.raises(OperatorWork) as refused:
        load(renamed, replace=False)
    assert [e.message for e in refused.value.errors] == [
        "would overwrite group auto (changed through the page, API or admin since the file set it)"
    ]
    assert set(Group.objects.values_list("name", flat=True)) == {"auto"}  # nothing applied
    result = load(renamed, replace=True)
    assert (result.groups_created, result.groups_deleted) == (["other"], ["auto"])


# --- one write path: records, the credential rule, checks on write (item 3, 4) ---------


def test_file_loads_and_key_commands_leave_config_change_records(tmp_path: Path) -> None:
    os.environ["P1_API_KEY"] = UPSTREAM_KEY
    try:
        run("loadconfig", write(tmp_path, FILE))
    finally:
        del os.environ["P1_API_KEY"]
    created = run("createkey", "ops", "--admin")
    secret = created.strip().splitlines()[-1]
    key = ApiKey.objects.get(name="ops")
    revoked = run("revokekey", key.prefix)
    assert f"revoked key 'ops' (id {key.pk}" in revoked
    key.refresh_from_db()
    assert key.revoked_at is not None

    records = changes()
    assert [(path, kind, name) for path, kind, name, _ in records] == [
        ("file", "provider", "p1"),
        ("file", "group", "auto"),
        ("cli", "key", f"ops ({key.prefix}…)"),
        ("cli", "key", f"ops ({key.prefix}…)"),
    ]
    assert all(actor.startswith("cli") for *_, actor in records)
    dump = str(list(ConfigChange.objects.values_list("before", "after", "diff")))
    assert UPSTREAM_KEY[6:12] not in dump and secret[6:18] not in dump
    group = ConfigChange.objects.get(object_type="group")
    assert group.diff["policy.retry.max_retries"] == {"before": None, "after": 2}
    provider = ConfigChange.objects.get(object_type="provider")
    assert provider.after["timeouts"]["first_token_s"] == 30  # a timeout, not a credential


def test_revokekey_by_the_whole_secret_never_echoes_it() -> None:
    secret = run("createkey", "ci").strip().splitlines()[-1]
    assert "revoked key 'ci'" in run("revokekey", secret)
    with pytest.raises(CommandError) as unknown:
        run("revokekey", secret + "x")
    assert secret[12:] not in str(unknown.value)


@pytest.mark.parametrize(
    ("written", "expected"),
    [("absent", UPSTREAM_KEY), ('""', UPSTREAM_KEY), ("null", None), ('"sk-new-0123456789"', "sk-new-0123456789")],
)  # fmt: skip
def test_one_credential_rule_for_the_file_and_the_api(written: str, expected: str | None) -> None:
    load(FILE, replace=False)
    line = "" if written == "absent" else f"    api_key: {written}\n"
    load(FILE.replace("    api_key: ${P1_API_KEY}\n", line), replace=True)
    from_file = Provider.objects.get(name="p1")
    assert (from_file.get_api_key() if from_file.has_api_key else None) == expected

    load(FILE, replace=True)
    p1 = Provider.objects.get(name="p1")
    data: dict[str, Any] = {} if written == "absent" else {"api_key": _value(written)}
    provider_update(
        name="p1", data=data or {"models": []}, based_on=p1.version, actor="u", path="api"
    )
    through_api = Provider.objects.get(name="p1")
    assert (through_api.get_api_key() if through_api.has_api_key else None) == expected


def _value(written: str) -> str | None:
    return None if written == "null" else written.strip('"')


def test_an_unregistered_algorithm_is_refused_on_every_write_path(tmp_path: Path) -> None:
    """Refused on write without importing anything: the same message for a module that
    exists and one that does not (issue 37 item 13)."""
    bad = FILE.replace("    retry:", "    algorithm: nope.Missing\n    retry:")
    with pytest.raises(ConfigError) as from_file:
        load(bad)
    assert "unknown algorithm 'nope.Missing'" in from_file.value.format()
    assert "registered in SWITCHYARD_ALGORITHMS" in from_file.value.format()
    load(FILE)
    with pytest.raises(ConfigError) as from_api:
        group_create(
            data={
                "name": "g2",
                "algorithm": "routing.models.Provider",
                "targets": [{"provider": "p1", "model": "a"}],
            },
            actor="u",
            path="api",
        )
    assert "unknown algorithm 'routing.models.Provider'" in from_api.value.format()
    assert not Group.objects.filter(name="g2").exists()


LISTED = FILE.replace("    timeouts:", "    models: [a]\n    timeouts:")


def test_the_file_refuses_a_model_outside_the_list_with_every_other_error() -> None:
    # Two problems at once: the credential variable is unset with nothing stored to keep,
    # and the target names a model the provider does not list.
    unlisted = LISTED.replace("model: a}", "model: b}")
    with pytest.raises(ConfigError) as refused:
        config_apply(load_text(unlisted, env={}), source="f")
    assert [str(e) for e in refused.value.errors] == [
        "providers.0.api_key: environment variable P1_API_KEY is not set "
        "(and provider p1 has no stored credential to keep)",
        "groups.0.targets.0.model: 'b' is not in provider 'p1''s model list "
        "(refresh its models, or fix the name)",
    ]
    assert not Provider.objects.exists() and not Group.objects.exists()


def test_the_file_checks_a_target_against_the_stored_list_when_it_declares_none() -> None:
    load(LISTED)  # p1 lists [a]; a file without `models` keeps that list
    without_list = FILE.replace("model: a}", "model: b}")
    with pytest.raises(ConfigError) as refused:
        load(without_list, replace=False)
    assert "groups.0.targets.0.model: 'b' is not in provider 'p1''s model list" in str(
        refused.value
    )
    auto = Group.objects.get(name="auto")
    assert list(auto.targets.values_list("model", flat=True)) == ["a"]  # nothing applied
    assert Provider.objects.get(name="p1").models == ["a"]


def test_the_admin_refuses_a_target_model_outside_the_providers_list(admin_client: Any) -> None:
    from html import unescape

    from tests.test_models import group_form, make_provider, target_row

    provider = make_provider()
    provider.models = ["a"]
    provider.save()
    refused = admin_client.post(
        "/admin/routing/group/add/", group_form(None, {}, [target_row(provider, "b", 0)])
    )
    assert refused.status_code == 200
    assert "'b' is not in provider 'primary''s model list" in unescape(refused.content.decode())
    assert not Group.objects.exists()
    added = admin_client.post(
        "/admin/routing/group/add/", group_form(None, {}, [target_row(provider, "a", 0)])
    )
    assert added.status_code == 302, added.content.decode()


# --- exportconfig -> loadconfig without the credential variables (item 5) --------------


def test_export_then_load_round_trips_without_the_credential_variables(tmp_path: Path) -> None:
    load(FILE, replace=False)
    exported = write(tmp_path, run("exportconfig"))
    assert "${P1_API_KEY}" in Path(exported).read_text()
    assert "P1_API_KEY" not in os.environ
    out = run("loadconfig", exported)
    assert "kept the stored credential of p1 (P1_API_KEY is not set)" in out
    assert Provider.objects.get(name="p1").get_api_key() == UPSTREAM_KEY
    assert run("exportconfig") == Path(exported).read_text()


def test_an_unset_credential_variable_with_nothing_stored_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(CommandError) as refused:
        run("loadconfig", write(tmp_path, FILE))
    assert "providers.0.api_key: environment variable P1_API_KEY is not set" in str(refused.value)
    assert "no stored credential to keep" in str(refused.value)
    assert not Provider.objects.exists()


def test_the_admins_writes_and_key_revocations_leave_records(admin_client: Any) -> None:
    from tests.test_models import provider_form

    added = admin_client.post("/admin/routing/provider/add/", provider_form(api_key=UPSTREAM_KEY))
    assert added.status_code == 302, added.content.decode()
    provider = Provider.objects.get()
    url = f"/admin/routing/provider/{provider.pk}/change/"
    changed = admin_client.post(url, provider_form(provider, first_token_timeout_s="30"))
    assert changed.status_code == 302, changed.content.decode()
    secret = run("createkey", "ci").strip().splitlines()[-1]
    key = ApiKey.objects.get(name="ci")
    revoked = admin_client.post(
        "/admin/routing/apikey/", {"action": "revoke", "_selected_action": [str(key.pk)]}
    )
    assert revoked.status_code == 302

    records = [(path, kind) for path, kind, _, _ in changes()]
    assert records == [
        ("admin", "provider"),
        ("admin", "provider"),
        ("cli", "key"),
        ("admin", "key"),
    ]
    edit = ConfigChange.objects.filter(path="admin", object_type="provider").order_by("id").last()
    assert edit is not None and edit.actor.startswith("admin:")
    default = TIMEOUT_DEFAULTS["first_token_s"]
    assert edit.diff == {"timeouts.first_token_s": {"before": default, "after": 30.0}}
    assert UPSTREAM_KEY[8:20] not in str(ConfigChange.objects.values_list("before", "after"))
    assert secret[8:20] not in str(ConfigChange.objects.values_list("before", "after", "diff"))


def test_the_admins_key_page_renames_through_the_service_with_a_record(admin_client: Any) -> None:
    """Issue 38: the key page's one editable field goes through ``key_rename``, which
    records the change like every other write; a name the services refuse is a field
    error and changes nothing; the same name again records nothing."""
    secret = run("createkey", "ci").strip().splitlines()[-1]
    key = ApiKey.objects.get(name="ci")
    url = f"/admin/routing/apikey/{key.pk}/change/"
    refused = admin_client.post(url, {"name": "tab\there"})
    assert refused.status_code == 200 and "printable characters" in refused.content.decode()
    assert admin_client.post(url, {"name": "ci-nightly"}).status_code == 302
    assert admin_client.post(url, {"name": "ci-nightly"}).status_code == 302
    key.refresh_from_db()
    assert key.name == "ci-nightly" and key.hashed  # the secret's hash stays
    assert [(path, kind) for path, kind, _, _ in changes()] == [("cli", "key"), ("admin", "key")]
    rename = ConfigChange.objects.get(path="admin")
    assert rename.actor.startswith("admin:")
    assert rename.diff == {"name": {"before": "ci", "after": "ci-nightly"}}
    assert secret[8:20] not in str((rename.before, rename.after, rename.diff))
