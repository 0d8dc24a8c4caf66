"""Config file layer: validation (every path, every error at once), env interpolation,
atomic apply, export round-trip, layered resolution, and the loadconfig command."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.core.management import call_command
from django.core.management.base import CommandError

from routing.config.errors import ConfigError, FieldError
from routing.config.export import export_config
from routing.config.policy import (
    BUILTIN_DEFAULTS,
    POLICY_FIELDS,
    flatten,
    resolve,
    unflatten,
    validate_effective,
    validate_policy_flat,
)
from routing.config.schema import PolicyIn, parse_group
from routing.config.yaml import load_file, load_text
from routing.models import ConfigVersion, GlobalSettings, Group, Provider, Target
from routing.services.config_file import config_apply

SAMPLES = Path(__file__).parent / "samples"
PRIMARY_KEY = "sk-primary-PLAINTEXT-0123456789"
BACKUP_KEY = "sk-backup-PLAINTEXT-9876543210"
ENV = {"PRIMARY_API_KEY": PRIMARY_KEY, "BACKUP_API_KEY": BACKUP_KEY}


@pytest.fixture(autouse=True)
def _secret(settings: Any) -> None:
    settings.SWITCHYARD = {**settings.SWITCHYARD, "SECRET_KEY": "test-secret", "ALGORITHMS": {}}


def base_doc() -> dict[str, Any]:
    return {
        "providers": [
            {
                "name": "primary",
                "base_url": "http://127.0.0.1:9001/v1",
                "api_key": "${PRIMARY_API_KEY}",
            },
            {"name": "backup", "base_url": "https://backup.example.com/v1"},
        ],
        "groups": [
            {
                "name": "auto",
                "targets": [
                    {"provider": "primary", "model": "model-a"},
                    {"provider": "backup", "model": "model-b", "weight": 2},
                ],
                "retry": {"max_retries": 3, "retry_codes": ["RATE_LIMIT", "SERVER"]},
            }
        ],
    }


def as_yaml(doc: dict[str, Any]) -> str:
    return yaml.safe_dump(doc, sort_keys=False)


def snapshot() -> tuple[Any, ...]:
    """Everything the config layer writes, to prove a rejected write changed nothing."""
    return (
        list(Provider.objects.order_by("name").values()),
        list(Group.objects.order_by("name").values()),
        list(Target.objects.order_by("group__name", "position").values()),
        list(GlobalSettings.objects.values()),
    )


def apply_sample(name: str = "full.yaml", env: dict[str, str] | None = None) -> None:
    config_apply(load_file(SAMPLES / name, env=ENV if env is None else env), source=name)


# --- validation table ----------------------------------------------------------------

Mutation = Callable[[dict[str, Any]], None]


def _group(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["groups"][0]


INVALID: list[tuple[str, Mutation, str, str]] = [
    (
        "unknown top-level key",
        lambda d: d.update(extras=1),
        "extras",
        "unknown key; allowed keys: defaults, providers, groups",
    ),
    (
        "unknown nested key",
        lambda d: _group(d)["retry"].update(bogus=2),
        "groups.0.retry.bogus",
        "unknown key; allowed keys: max_retries, retry_codes, initial_delay_ms, max_delay_ms, "
        "jitter_ratio",
    ),
    (
        "duplicate target",
        lambda d: _group(d)["targets"].append({"provider": "primary", "model": "model-a"}),
        "groups.0.targets.2",
        "duplicate target primary/model-a (already targets.0)",
    ),
    (
        "unknown failure code",
        lambda d: _group(d).update(switch_codes=["RATE_LIMIT", "NOPE"]),
        "groups.0.switch_codes.1",
        "unknown failure code 'NOPE'; known codes: RATE_LIMIT, SERVER,",
    ),
    (
        "lower-case failure code",
        lambda d: _group(d).update(switch_codes=["server"]),
        "groups.0.switch_codes.0",
        "unknown failure code 'server' (codes are upper-case: write SERVER)",
    ),
    (
        "empty switch_codes",
        lambda d: _group(d).update(switch_codes=[]),
        "groups.0.switch_codes",
        "must list at least one failure code",
    ),
    (
        "repeated code",
        lambda d: _group(d)["retry"].update(retry_codes=["SERVER", "TIMEOUT", "SERVER"]),
        "groups.0.retry.retry_codes",
        "repeats SERVER: list each code once",
    ),
    (
        "max_retries above range",
        lambda d: _group(d)["retry"].update(max_retries=21),
        "groups.0.retry.max_retries",
        "must be less than or equal to 20",
    ),
    (
        "weight below range",
        lambda d: _group(d)["targets"][0].update(weight=0),
        "groups.0.targets.0.weight",
        "must be greater than or equal to 1",
    ),
    (
        "failure_threshold below range",
        lambda d: _group(d).update(circuit={"failure_threshold": 0}),
        "groups.0.circuit.failure_threshold",
        "must be greater than or equal to 1",
    ),
    (
        "jitter above range",
        lambda d: d.update(defaults={"retry": {"jitter_ratio": 1.5}}),
        "defaults.retry.jitter_ratio",
        "must be less than or equal to 1",
    ),
    (
        "string where an integer belongs",
        lambda d: _group(d)["retry"].update(max_retries="3"),
        "groups.0.retry.max_retries",
        "must be a valid integer",
    ),
    (
        "switch budget below range",
        lambda d: _group(d)["retry"].update(switch_after_ms=-1),
        "groups.0.retry.switch_after_ms",
        "must be greater than or equal to 0",
    ),
    (
        "switch budget above range",
        lambda d: (
            d.setdefault("defaults", {}).setdefault("retry", {}).update(switch_after_ms=3_600_001)
        ),
        "defaults.retry.switch_after_ms",
        "must be less than or equal to 3600000",
    ),
    (
        "renamed switch budget",
        lambda d: _group(d).update(switchAfterMs=1000),
        "groups.0.switchAfterMs",
        "`switchAfterMs` was renamed: write `retry.switch_after_ms` instead",
    ),
    (
        "unknown resume value",
        lambda d: _group(d).update(resume="sometimes"),
        "groups.0.resume",
        "must be 'off', 'continuation' or 'restart'",
    ),
    (
        "unknown capability",
        lambda d: _group(d)["targets"][1].update(capabilities={"prefil": True}),
        "groups.0.targets.1.capabilities.prefil",
        "unknown key; allowed keys: prefill",
    ),
    (
        "initial delay above max delay",
        lambda d: _group(d)["retry"].update(initial_delay_ms=20000, max_delay_ms=10000),
        "groups.0.retry.max_delay_ms",
        "must be >= initial_delay_ms (20000)",
    ),
    (
        "cooldown base above cap",
        lambda d: _group(d).update(circuit={"cooldown_base_ms": 9000, "cooldown_cap_ms": 10}),
        "groups.0.circuit.cooldown_cap_ms",
        "must be >= cooldown_base_ms (9000)",
    ),
    (
        "renamed key",
        lambda d: _group(d).update(quarantineBaseMs=5000),
        "groups.0.quarantineBaseMs",
        "`quarantineBaseMs` was renamed: write `circuit.cooldown_base_ms` instead",
    ),
    (
        "renamed top-level retry key",
        lambda d: _group(d).update(retry_codes=["SERVER"]),
        "groups.0.retry_codes",
        "`retry_codes` was renamed: write `retry.retry_codes` instead",
    ),
    (
        "missing env var",
        lambda d: d["providers"][1].update(base_url="${MISSING_VAR}"),
        "providers.1.base_url",
        "environment variable MISSING_VAR is not set",
    ),
    (
        "target pointing at unknown provider",
        lambda d: _group(d)["targets"].append({"provider": "ghost", "model": "x"}),
        "groups.0.targets.2.provider",
        "unknown provider 'ghost' (not defined under providers)",
    ),
    (
        "duplicate provider name",
        lambda d: d["providers"].append({"name": "primary", "base_url": "http://localhost:1"}),
        "providers.2.name",
        "duplicate name 'primary' (already providers.0)",
    ),
    (
        "unknown algorithm",
        lambda d: _group(d).update(algorithm="fastest"),
        "groups.0.algorithm",
        "unknown algorithm 'fastest'; use one of priority, round-robin, weighted, least-busy, "
        "latency (another algorithm must first be registered in SWITCHYARD_ALGORITHMS)",
    ),
    (
        "explicit null",
        lambda d: _group(d).update(commit=None),
        "groups.0.commit",
        "must not be null: leave the key out to inherit the lower layer",
    ),
    (
        "bad commit value",
        lambda d: _group(d).update(commit="eventually"),
        "groups.0.commit",
        "must be 'first-content' or 'complete'",
    ),
    (
        "non-http base_url",
        lambda d: d["providers"][0].update(base_url="ftp://example.com"),
        "providers.0.base_url",
        "must be an http:// or https:// URL",
    ),
    (
        "credential in a header",
        lambda d: d["providers"][1].update(headers={"Authorization": "Bearer x"}),
        "providers.1.headers",
        "put the credential in api_key (encrypted at rest), not in an Authorization header",
    ),
    (
        "group without targets",
        lambda d: _group(d).update(targets=[]),
        "groups.0.targets",
        "List should have at least 1 item after validation, not 0",
    ),
    (
        "bad group name",
        lambda d: _group(d).update(name="-auto"),
        "groups.0.name",
        "use 1-100 letters, digits, dots, dashes or underscores, starting with a letter or digit",
    ),
]


@pytest.mark.parametrize(
    ("mutate", "path", "message"),
    [case[1:] for case in INVALID],
    ids=[case[0] for case in INVALID],
)
def test_invalid_config_reports_path_and_message(mutate: Mutation, path: str, message: str) -> None:
    doc = base_doc()
    mutate(doc)
    with pytest.raises(ConfigError) as caught:
        load_text(as_yaml(doc), env=ENV)
    matching = [e for e in caught.value.errors if e.path == path]
    assert matching, caught.value.format()
    assert matching[0].message.startswith(message), matching[0].message
    assert len(caught.value.errors) == 1, caught.value.format()


@pytest.mark.django_db
@pytest.mark.parametrize("mutate", [case[1] for case in INVALID], ids=[case[0] for case in INVALID])
def test_invalid_config_changes_nothing(mutate: Mutation, tmp_path: Path) -> None:
    apply_sample()
    before = snapshot()
    doc = base_doc()
    mutate(doc)
    bad = tmp_path / "bad.yaml"
    bad.write_text(as_yaml(doc))
    with pytest.raises(CommandError) as caught:
        call_command("loadconfig", str(bad))
    assert caught.value.returncode == 1
    assert snapshot() == before


def test_every_error_is_listed_at_once() -> None:
    doc = base_doc()
    for label, mutate, _, _ in INVALID:
        if label == "group without targets":
            continue  # would hide the target-level errors of the same group
        mutate(doc)
    with pytest.raises(ConfigError) as caught:
        load_text(as_yaml(doc), env=ENV)
    found = {e.path for e in caught.value.errors}
    # Cases that collide on one key (two writes to switch_codes, ...) keep the last value.
    expected = {
        "extras",
        "groups.0.retry.bogus",
        "groups.0.targets.2",
        "groups.0.switch_codes",
        "groups.0.retry.retry_codes",
        "groups.0.retry.max_retries",
        "groups.0.targets.0.weight",
        "groups.0.circuit.cooldown_cap_ms",
        "defaults.retry.jitter_ratio",
        "groups.0.retry.max_delay_ms",
        "groups.0.retry.switch_after_ms",
        "defaults.retry.switch_after_ms",
        "groups.0.switchAfterMs",
        "groups.0.resume",
        "groups.0.targets.1.capabilities.prefil",
        "groups.0.quarantineBaseMs",
        "groups.0.retry_codes",
        "providers.1.base_url",
        "groups.0.targets.3.provider",
        "providers.2.name",
        "groups.0.algorithm",
        "groups.0.commit",
        "providers.0.base_url",
        "providers.1.headers",
        "groups.0.name",
    }
    assert expected <= found, caught.value.format()
    assert caught.value.format().count("\n") == len(caught.value.errors) - 1


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "the config file is empty"),
        ("groups: [\n", "YAML syntax error at line 2, column 1"),
        ("providers: []\nproviders: []\n", "line 2: duplicate key 'providers'"),
        ("- just\n- a list\n", "must be a mapping (key: value pairs)"),
    ],
)
def test_document_level_errors(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_text(text, env={})
    assert caught.value.errors[0].path == ""
    assert caught.value.errors[0].message.startswith(message), caught.value.format()


def test_syntax_errors_do_not_quote_the_file() -> None:
    text = "providers:\n  - name: p\n    api_key: sk-inline-SECRET\n    base_url: [unclosed\n"
    with pytest.raises(ConfigError) as caught:
        load_text(text, env={})
    assert "SECRET" not in caught.value.format()


def test_wrong_type_for_api_key_does_not_echo_it() -> None:
    doc = base_doc()
    doc["providers"][0]["api_key"] = ["sk-list-SECRET"]
    with pytest.raises(ConfigError) as caught:
        load_text(as_yaml(doc), env=ENV)
    assert [e.path for e in caught.value.errors] == ["providers.0.api_key"]
    assert "SECRET" not in caught.value.format()
    assert "SECRET" not in str(caught.value)


def test_the_spec_example_and_the_full_sample_validate() -> None:
    config = load_file(SAMPLES / "full.yaml", env=ENV)
    assert [g.name for g in config.groups] == ["auto", "fast.v2"]
    assert config.providers[0].api_key is not None
    assert config.providers[0].api_key.get_secret_value() == PRIMARY_KEY
    assert PRIMARY_KEY not in repr(config)


def test_dotted_path_and_settings_algorithms_are_accepted(settings: Any) -> None:
    settings.SWITCHYARD = {
        **settings.SWITCHYARD,
        "ALGORITHMS": {
            "cheapest": "acme.routing.Cheapest",
            "first": "routing.engine.algorithms.Priority",
        },
    }
    for name in ("first", "routing.engine.algorithms.Priority", "round-robin"):
        doc = base_doc()
        _group(doc)["algorithm"] = name
        assert load_text(as_yaml(doc), env=ENV).groups[0].algorithm == name
    # Checked on write: a registered name or path that does not import is refused with
    # the reason (the operator's own setting); an unregistered path is not imported at all.
    for name, reason in (
        ("cheapest", "cannot import module 'acme.routing'"),
        ("acme.routing.Cheapest", "cannot import module 'acme.routing'"),
        ("acme.", "unknown algorithm 'acme.'"),
        ("routing.models.Provider", "unknown algorithm 'routing.models.Provider'"),
        ("routing.engine.algorithms.Latency", "unknown algorithm"),  # a class, unregistered
    ):
        doc = base_doc()
        _group(doc)["algorithm"] = name
        with pytest.raises(ConfigError) as caught:
            load_text(as_yaml(doc), env=ENV)
        assert reason in caught.value.format()
        assert "registered in SWITCHYARD_ALGORITHMS" in caught.value.format() or (
            "cannot import" in reason
        )


def test_parse_group_checks_providers_like_the_file_does() -> None:
    raw = {
        "name": "g",
        "targets": [{"provider": "ghost", "model": "m"}],
        "retry": {"max_retries": 99},
    }
    with pytest.raises(ConfigError) as caught:
        parse_group(raw, providers={"primary"})
    assert [e.path for e in caught.value.errors] == ["retry.max_retries", "targets.0.provider"]


# --- environment interpolation -------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "env", "expected"),
    [
        ("${HOST}", {"HOST": "h"}, "h"),
        ("http://${HOST}:${PORT}/v1", {"HOST": "h", "PORT": "80"}, "http://h:80/v1"),
        ("${HOST:-fallback}", {}, "fallback"),
        ("${HOST:-fallback}", {"HOST": ""}, "fallback"),
        ("${HOST:-fallback}", {"HOST": "set"}, "set"),
        ("${HOST:-}", {}, ""),
        ("${HOST}", {"HOST": ""}, ""),
        ("literal $${HOST}", {"HOST": "h"}, "literal ${HOST}"),
        ("no references $HOST", {"HOST": "h"}, "no references $HOST"),
    ],
)
def test_env_interpolation(value: str, env: dict[str, str], expected: str) -> None:
    doc = base_doc()
    doc["providers"][1]["headers"] = {"X-Value": value}
    config = load_text(as_yaml(doc), env={**ENV, **env})
    assert config.providers[1].headers["X-Value"] == expected


def test_every_missing_variable_is_named_and_values_never_leak() -> None:
    doc = base_doc()
    doc["providers"][1]["api_key"] = "${BACKUP_KEY_VAR}"
    doc["providers"][1]["headers"] = {"X-A": "${A_VAR}-${B_VAR}", "X-Bad": "${1BAD}"}
    with pytest.raises(ConfigError) as caught:
        load_text(as_yaml(doc), env=ENV)
    assert [str(e) for e in caught.value.errors] == [  # an unset credential variable keeps
        "providers.1.headers.X-A: environment variable A_VAR is not set",
        "providers.1.headers.X-A: environment variable B_VAR is not set",
        "providers.1.headers.X-Bad: invalid reference ${1BAD}: write ${NAME} or ${NAME:-default}",
    ]
    assert PRIMARY_KEY not in caught.value.format()
    del doc["providers"][1]["headers"]
    assert load_text(as_yaml(doc), env=ENV).unset_credentials == {"backup": "BACKUP_KEY_VAR"}


def test_keys_are_not_interpolated() -> None:
    doc = base_doc()
    doc["providers"][1]["headers"] = {"X-${NOT_A_VAR}": "v"}
    with pytest.raises(ConfigError) as caught:
        load_text(as_yaml(doc), env=ENV)
    assert caught.value.errors[0].path == "providers.1.headers"


# --- applying ------------------------------------------------------------------------


@pytest.mark.django_db
def test_apply_creates_everything_in_file_order(django_capture_on_commit_callbacks: Any) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        result = config_apply(load_file(SAMPLES / "full.yaml", env=ENV), source="full.yaml")
    assert result.providers_created == ["primary", "backup"]
    assert result.groups_created == ["auto", "fast.v2"]
    assert ConfigVersion.objects.get(pk=1).version == 1  # one apply, one configuration write

    primary = Provider.objects.get(name="primary")
    assert primary.get_api_key() == PRIMARY_KEY
    assert primary.models == ["model-a", "model-b"]
    assert (primary.connect_timeout_s, primary.total_timeout_s) == (5, 600)
    backup = Provider.objects.get(name="backup")
    assert backup.get_api_key() == BACKUP_KEY
    assert backup.get_headers() == {
        "X-Title": "Switchyard",
        "HTTP-Referer": "https://example.com/docs",
    }

    fast = Group.objects.get(name="fast.v2")
    assert fast.policy == {"algorithm": "weighted", "commit": "complete"}
    rows = list(
        fast.targets.values_list(
            "provider__name", "model", "position", "weight", "enabled", "context_window"
        )
    )
    assert rows == [
        ("backup", "model-b", 0, 3, True, 32000),
        ("primary", "model-b", 1, 1, False, None),
    ]
    auto = Group.objects.get(name="auto")
    assert auto.policy["retry.retry_codes"] == [
        "RATE_LIMIT",
        "SERVER",
        "TRANSPORT",
        "EMPTY_RESPONSE",
    ]
    assert list(auto.policy) == [f for f in POLICY_FIELDS if f in auto.policy]

    settings_row = GlobalSettings.load()
    assert settings_row.file_policy == {
        "retry.max_retries": 5,
        "retry.initial_delay_ms": 500,
        "retry.max_delay_ms": 10000,
        "retry.jitter_ratio": 0.1,
        "deadline_s": 120.0,
    }
    assert settings_row.config_source == "full.yaml"


@pytest.mark.django_db
def test_reapplying_the_same_file_changes_nothing(django_capture_on_commit_callbacks: Any) -> None:
    apply_sample()
    before = snapshot()
    version = ConfigVersion.objects.get(pk=1).version
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        result = config_apply(load_file(SAMPLES / "full.yaml", env=ENV), source="full.yaml")
    assert not result.changed
    assert result.summary() == ["no changes"]
    assert ConfigVersion.objects.get(pk=1).version == version
    assert callbacks == []  # not even a row save (each one would trigger a table rebuild)
    assert snapshot() == before


@pytest.mark.django_db
def test_changes_bump_versions_and_prune() -> None:
    apply_sample()
    doc = base_doc()
    doc["providers"][0]["api_key"] = "${PRIMARY_API_KEY}"
    doc["providers"][1]["timeouts"] = {"connect_s": 2}
    result = config_apply(load_text(as_yaml(doc), env=ENV), source="next.yaml")
    assert result.providers_updated == ["backup"]
    assert result.groups_updated == ["auto"]
    assert result.groups_deleted == ["fast.v2"]
    assert result.defaults_changed
    assert Provider.objects.get(name="primary").version == 1  # same key, same fields
    backup = Provider.objects.get(name="backup")
    assert (backup.version, backup.connect_timeout_s, backup.total_timeout_s) == (2, 2, 600)
    assert Group.objects.get(name="auto").version == 2
    assert list(Group.objects.values_list("name", flat=True)) == ["auto"]
    assert GlobalSettings.load().file_policy == {}

    doc["providers"].pop(1)
    _group(doc)["targets"].pop(1)
    result = config_apply(load_text(as_yaml(doc), env=ENV), source="next.yaml")
    assert result.providers_deleted == ["backup"]
    assert list(Provider.objects.values_list("name", flat=True)) == ["primary"]


@pytest.mark.django_db
def test_credential_and_models_are_kept_unless_the_file_sets_them() -> None:
    apply_sample()
    doc = base_doc()
    del doc["providers"][0]["api_key"]
    config_apply(load_text(as_yaml(doc), env=ENV), source="x")
    primary = Provider.objects.get(name="primary")
    assert primary.get_api_key() == PRIMARY_KEY
    assert primary.models == ["model-a", "model-b"]
    assert primary.version == 1

    doc["providers"][0]["api_key"] = "sk-rotated-0123456789"
    config_apply(load_text(as_yaml(doc), env=ENV), source="x")
    primary.refresh_from_db()
    assert (primary.get_api_key(), primary.version) == ("sk-rotated-0123456789", 2)

    # The one credential rule of every write path: "" keeps, null clears.
    doc["providers"][0]["api_key"] = ""
    config_apply(load_text(as_yaml(doc), env=ENV), source="x")
    primary.refresh_from_db()
    assert (primary.get_api_key(), primary.version) == ("sk-rotated-0123456789", 2)

    doc["providers"][0]["api_key"] = None
    doc["providers"][0]["models"] = []
    config_apply(load_text(as_yaml(doc), env=ENV), source="x")
    primary.refresh_from_db()
    assert (primary.has_api_key, primary.api_key_hint, primary.models) == (False, "", [])


@pytest.mark.django_db
def test_a_failure_mid_apply_changes_nothing(
    monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any
) -> None:
    apply_sample()
    before = snapshot()
    from routing.services import config_file

    real = config_file._apply_group
    calls: list[str] = []

    def failing(group: Any, item: Any, providers: Any, plan: Any) -> Any:
        calls.append(item.name)
        if len(calls) == 2:
            raise RuntimeError("database went away")
        return real(group, item, providers, plan)

    monkeypatch.setattr(config_file, "_apply_group", failing)
    doc = base_doc()
    _group(doc)["commit"] = "complete"
    doc["groups"].append({"name": "second", "targets": [{"provider": "backup", "model": "z"}]})
    with django_capture_on_commit_callbacks() as callbacks, pytest.raises(RuntimeError):
        config_apply(load_text(as_yaml(doc), env=ENV), source="x")
    assert calls == ["auto", "second"]  # the first group was written before the failure
    assert callbacks == []
    assert snapshot() == before


@pytest.mark.django_db
def test_effective_policy_is_checked_against_global_settings() -> None:
    apply_sample()
    settings_row = GlobalSettings.load()
    settings_row.policy = {"retry.max_delay_ms": 1000}
    settings_row.save()
    before = snapshot()
    doc = base_doc()
    _group(doc)["retry"]["initial_delay_ms"] = 5000
    with pytest.raises(ConfigError) as caught:
        config_apply(load_text(as_yaml(doc), env=ENV), source="x")
    assert [str(e) for e in caught.value.errors] == [
        "groups.0.retry.initial_delay_ms: "
        "must be <= retry.max_delay_ms (1000, from global settings)"
    ]
    assert snapshot() == before


@pytest.mark.django_db
def test_a_conflict_between_lower_layers_is_reported_once() -> None:
    settings_row = GlobalSettings.load()
    settings_row.policy = {"circuit.cooldown_cap_ms": 100}
    settings_row.save()
    doc = base_doc()
    doc["defaults"] = {"circuit": {"cooldown_base_ms": 500}}
    doc["groups"].append({"name": "other", "targets": [{"provider": "backup", "model": "m"}]})
    with pytest.raises(ConfigError) as caught:
        config_apply(load_text(as_yaml(doc), env=ENV), source="x")
    assert [str(e) for e in caught.value.errors] == [
        "defaults.circuit.cooldown_cap_ms: must be >= circuit.cooldown_base_ms "
        "(500, from the config file)"
    ]


@pytest.mark.django_db
def test_dry_run_reports_without_writing() -> None:
    result = config_apply(load_file(SAMPLES / "full.yaml", env=ENV), source="f", dry_run=True)
    assert result.dry_run and result.groups_created == ["auto", "fast.v2"]
    assert Provider.objects.count() == 0
    assert GlobalSettings.objects.count() == 0


# --- export --------------------------------------------------------------------------


def _wipe() -> None:
    Target.objects.all().delete()
    Group.objects.all().delete()
    Provider.objects.all().delete()
    GlobalSettings.objects.all().delete()


@pytest.mark.django_db
def test_export_round_trip_is_byte_equal() -> None:
    apply_sample()
    primary = Provider.objects.get(name="primary")
    primary.set_headers({"X-Template": "keep ${THIS} literal"})
    primary.save()
    settings_row = GlobalSettings.load()
    settings_row.policy = {"commit": "complete", "retry.max_retries": 2}
    settings_row.save()

    first = export_config()
    # a header's value is write-only like the credential: exported as a placeholder
    assert "X-Template: ${PRIMARY_HEADER_X_TEMPLATE}" in first and "literal" not in first
    assert "X-Title: ${" in first and "X-Title: Switchyard" not in first
    _wipe()  # a new installation: the operator gives the values again
    with pytest.raises(ConfigError) as unkept:  # unset: "keep", and nothing is stored
        config_apply(load_text(first, env=ENV), source="export")
    refused = sorted(str(e).split(": ", 1)[1] for e in unkept.value.errors)
    assert refused == [
        f"header {name} has no stored value to keep: give its value"
        for name in ("HTTP-Referer", "X-Template", "X-Title")
    ]
    given = {"X_TEMPLATE": "keep ${THIS} literal", "X_TITLE": "Switchyard"}
    given["HTTP_REFERER"] = "https://example.com/docs"
    env = dict(ENV)
    for var in re.findall(r"\$\{(\w+_HEADER_(\w+))\}", first):
        env[var[0]] = given[var[1]]
    config_apply(load_text(first, env=env), source="export")
    second = export_config()
    assert second == first
    assert Provider.objects.get(name="primary").get_headers() == {
        "X-Template": "keep ${THIS} literal"
    }
    file_policy = GlobalSettings.load().file_policy
    assert file_policy["commit"] == "complete" and file_policy["retry.max_retries"] == 2


@pytest.mark.django_db
def test_export_shape_and_no_plaintext() -> None:
    apply_sample(env={"PRIMARY_API_KEY": PRIMARY_KEY})
    text = export_config()
    assert PRIMARY_KEY not in text
    assert Provider.objects.get(name="primary").api_key_encrypted not in text
    doc = yaml.safe_load(text)
    assert list(doc) == ["defaults", "providers", "groups"]
    assert doc["providers"][1]["name"] == "primary"  # providers sorted by name
    assert doc["providers"][1]["api_key"] == "${PRIMARY_API_KEY}"
    assert "api_key" not in doc["providers"][0]  # backup has no credential
    auto = doc["groups"][0]
    assert list(auto)[:3] == ["name", "algorithm", "targets"]
    assert auto["targets"][1] == {"provider": "backup", "model": "model-b", "weight": 2}
    assert auto["retry"]["retry_codes"] == ["RATE_LIMIT", "SERVER", "TRANSPORT", "EMPTY_RESPONSE"]
    assert "  - {provider: primary, model: model-a}\n" in text


@pytest.mark.django_db
def test_export_placeholder_uses_upper_snake_provider_name() -> None:
    provider = Provider(name="my-llm", base_url="http://localhost:8000/v1")
    provider.set_api_key("sk-local-abcdefghijkl")
    provider.save()
    assert "api_key: ${MY_LLM_API_KEY}\n" in export_config()


@pytest.mark.django_db
def test_exportconfig_command_writes_a_file(tmp_path: Path) -> None:
    apply_sample()
    out = tmp_path / "export.yaml"
    call_command("exportconfig", "-o", str(out))
    assert out.read_text() == export_config()


# --- layered policy ------------------------------------------------------------------


def test_policy_fields_match_the_schema() -> None:
    leaves: set[str] = set()
    for name, field in PolicyIn.model_fields.items():
        sub = getattr(field.annotation, "__args__", ())
        model = next((a for a in sub if isinstance(a, type) and hasattr(a, "model_fields")), None)
        if model is None:
            leaves.add(name)
        else:
            leaves.update(f"{name}.{leaf}" for leaf in model.model_fields)
    assert leaves == set(POLICY_FIELDS)
    assert set(BUILTIN_DEFAULTS) == set(POLICY_FIELDS)
    validate_policy_flat({k: v for k, v in BUILTIN_DEFAULTS.items() if v is not None})


def test_builtin_defaults_follow_the_engine() -> None:
    assert BUILTIN_DEFAULTS["retry.retry_codes"] == [
        "EMPTY_RESPONSE",
        "RATE_LIMIT",
        "SERVER",
        "TRANSPORT",
    ]
    assert "TIMEOUT" not in BUILTIN_DEFAULTS["retry.retry_codes"]
    assert {"ABORTED", "BAD_REQUEST", "CONTENT_FILTER"}.isdisjoint(BUILTIN_DEFAULTS["switch_codes"])
    assert len(BUILTIN_DEFAULTS["switch_codes"]) == 13


def test_flatten_and_unflatten_are_inverse() -> None:
    nested = {"algorithm": "priority", "retry": {"max_retries": 2, "retry_codes": ["SERVER"]}}
    flat = flatten(nested)
    assert flat == {
        "algorithm": "priority",
        "retry.max_retries": 2,
        "retry.retry_codes": ["SERVER"],
    }
    assert unflatten(flat) == nested
    with pytest.raises(ValueError):
        unflatten({"retry": 1, "retry.max_retries": 2})


def test_resolve_reports_the_source_of_each_layer() -> None:
    file_layer = {"retry.max_retries": 4, "commit": "complete"}
    global_layer = {"retry.max_retries": 3, "algorithm": "weighted"}
    group_layer = {"algorithm": "latency", "context_window": None}
    resolved = resolve(BUILTIN_DEFAULTS, file_layer, global_layer, group_layer)
    assert list(resolved) == list(POLICY_FIELDS)
    view = {k: (v.value, v.source, v.overridden) for k, v in resolved.items()}
    assert view["retry.jitter_ratio"] == (0.1, "default", False)
    assert view["commit"] == ("complete", "file", False)
    assert view["retry.max_retries"] == (3, "global", False)
    assert view["algorithm"] == ("latency", "group", True)
    assert view["context_window"] == (None, "group", True)

    global_form = resolve(BUILTIN_DEFAULTS, file_layer, global_layer)
    assert (global_form["algorithm"].source, global_form["algorithm"].overridden) == (
        "global",
        True,
    )
    assert global_form["commit"].overridden is False


def test_resolve_returns_copies() -> None:
    resolved = resolve(BUILTIN_DEFAULTS, {}, {})
    resolved["switch_codes"].value.append("X")
    assert "X" not in BUILTIN_DEFAULTS["switch_codes"]


@pytest.mark.parametrize(
    ("file_layer", "group_layer", "expected"),
    [
        (
            {},
            {"retry.initial_delay_ms": 20000},
            "retry.initial_delay_ms: must be <= retry.max_delay_ms (10000, built-in default)",
        ),
        (
            {"retry.initial_delay_ms": 20000},
            {"retry.max_delay_ms": 15000},
            "retry.max_delay_ms: must be >= retry.initial_delay_ms (20000, from the config file)",
        ),
        (
            {},
            {"circuit.cooldown_cap_ms": 5},
            "circuit.cooldown_cap_ms: "
            "must be >= circuit.cooldown_base_ms (10000, built-in default)",
        ),
    ],
)
def test_validate_effective_blames_the_higher_layer(
    file_layer: dict[str, Any], group_layer: dict[str, Any], expected: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        validate_effective(resolve(BUILTIN_DEFAULTS, file_layer, {}, group_layer))
    assert caught.value.format() == expected


def test_validate_effective_accepts_the_defaults() -> None:
    validate_effective(resolve(BUILTIN_DEFAULTS, {}, {}, {}))


def test_validate_policy_flat_normalizes_and_keys_errors_by_field() -> None:
    assert validate_policy_flat(
        {"commit": "complete", "retry.jitter_ratio": 0, "algorithm": "priority"}
    ) == {
        "algorithm": "priority",
        "retry.jitter_ratio": 0.0,
        "commit": "complete",
    }
    with pytest.raises(ConfigError) as caught:
        validate_policy_flat(
            {
                "retry.max_retries": 99,
                "bogus": 1,
                "quarantineCapMs": 5,
                "switch_codes": ["SERVER", "SERVER"],
            }
        )
    assert caught.value.by_path() == {
        "bogus": [f"unknown policy field; known: {', '.join(POLICY_FIELDS)}"],
        "quarantineCapMs": [
            "`quarantineCapMs` was renamed: write `circuit.cooldown_cap_ms` instead"
        ],
        "switch_codes": ["repeats SERVER: list each code once"],
        "retry.max_retries": ["must be less than or equal to 20"],
    }
    with pytest.raises(ConfigError):
        validate_policy_flat(["not", "a", "mapping"])


def test_config_error_formats_one_line_per_error() -> None:
    error = ConfigError(
        [FieldError("a.b", "bad"), FieldError("", "whole"), FieldError("a.b", "bad")]
    )
    assert error.format() == "a.b: bad\nwhole"
    assert error.prefixed("groups.0").format() == "groups.0.a.b: bad\ngroups.0: whole"


def test_renamed_keys_table_points_at_real_fields() -> None:
    from routing.config.schema import RENAMED_KEYS, GroupIn, TargetIn

    def exists(path: str) -> bool:
        model: Any = GroupIn
        for part in path.split("."):
            fields = model.model_fields
            if model is GroupIn and part not in fields and part in TargetIn.model_fields:
                return True  # a target's own key (keep_thinking, context_window, ...)
            if part not in fields:
                return False
            model = fields[part].annotation
            model = next(
                (a for a in getattr(model, "__args__", ()) if hasattr(a, "model_fields")), model
            )
        return True

    written = [p.strip() for value in RENAMED_KEYS.values() for p in value.split("/")]
    assert written and all(exists(path) for path in written), [p for p in written if not exists(p)]


# --- loadconfig command --------------------------------------------------------------


@pytest.mark.django_db
def test_loadconfig_applies_and_reports(monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    call_command("loadconfig", str(SAMPLES / "full.yaml"))
    out = capsys.readouterr().out
    assert "applied" in out and "groups created: auto, fast.v2" in out
    assert Group.objects.count() == 2


@pytest.mark.django_db
def test_loadconfig_check_validates_without_writing(
    monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    call_command("loadconfig", str(SAMPLES / "full.yaml"), "--check")
    assert "would change" in capsys.readouterr().out
    assert Provider.objects.count() == 0


@pytest.mark.django_db
def test_loadconfig_lists_every_error(tmp_path: Path) -> None:
    doc = base_doc()
    doc["providers"][0]["base_url"] = "${NOT_SET_ANYWHERE}"
    _group(doc)["switch_codes"] = []
    _group(doc)["cooldown_ms"] = 5
    bad = tmp_path / "bad.yaml"
    bad.write_text(as_yaml(doc))
    with pytest.raises(CommandError) as caught:
        call_command("loadconfig", str(bad), "--check")
    message = str(caught.value)
    assert message.startswith(f"{bad}: 3 errors, nothing applied:\n")
    assert "providers.0.base_url: environment variable NOT_SET_ANYWHERE is not set" in message
    assert "groups.0.switch_codes: must list at least one failure code" in message
    assert (
        "groups.0.cooldown_ms: `cooldown_ms` was renamed: write `circuit.cooldown_base_ms` instead"
        in message
    )


@pytest.mark.django_db
def test_loadconfig_missing_file() -> None:
    with pytest.raises(CommandError) as caught:
        call_command("loadconfig", "/nonexistent/switchyard.yaml")
    assert "cannot read /nonexistent/switchyard.yaml: FileNotFoundError" in str(caught.value)
    assert caught.value.returncode == 1


def test_policy_dict_copy_is_untouched() -> None:
    before = copy.deepcopy(BUILTIN_DEFAULTS)
    resolve(BUILTIN_DEFAULTS, {}, {}, {})
    assert before == BUILTIN_DEFAULTS


@pytest.mark.django_db
def test_a_providers_health_check_interval_loads_and_round_trips() -> None:
    doc = base_doc()
    doc["providers"][0]["health_check_s"] = 30
    doc["providers"][1]["health_check_s"] = 0
    config_apply(load_text(as_yaml(doc), env=ENV), source="f")
    assert Provider.objects.get(name="primary").health_check_s == 30.0
    assert Provider.objects.get(name="backup").health_check_s == 0.0
    first = export_config()
    assert "health_check_s: 30.0" in first and "health_check_s: 0.0" in first
    _wipe()
    config_apply(load_text(first, env=ENV), source="export")
    assert export_config() == first
    # left out of the file: the gateway's interval again (like a timeout left out)
    del doc["providers"][0]["health_check_s"]
    config_apply(load_text(as_yaml(doc), env=ENV), source="f")
    assert Provider.objects.get(name="primary").health_check_s is None
    assert "health_check_s" not in yaml.safe_load(export_config())["providers"][1]


def test_a_health_check_interval_below_a_second_is_a_field_error() -> None:
    doc = base_doc()
    doc["providers"][0]["health_check_s"] = 0.5
    with pytest.raises(ConfigError) as caught:
        load_text(as_yaml(doc), env=ENV)
    [error] = caught.value.errors
    assert error.path == "providers.0.health_check_s"
    assert "0 turns active health checks off" in error.message
