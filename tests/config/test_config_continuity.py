"""The keys SPEC §13 adds, and the seed-shaped keys it renames, on every write path: the
config file (``loadconfig``), the management API and the routing table they compile to."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.core.management import call_command
from django.core.management.base import CommandError

from routing.config.errors import ConfigError
from routing.config.schema import RENAMED_KEYS, parse_config, parse_target, target_options
from routing.continuity.effort import EffortPolicy
from routing.engine.health import CircuitPolicy
from routing.gateway.table import compile_table


@pytest.fixture(autouse=True)
def _secret(settings: Any) -> None:
    settings.SWITCHYARD = {**settings.SWITCHYARD, "SECRET_KEY": "test-secret", "ALGORITHMS": {}}


DOC: dict[str, Any] = {
    "providers": [{"name": "p1", "base_url": "http://127.0.0.1:9/v1"}],
    "groups": [{"name": "auto", "targets": [{"provider": "p1", "model": "a"}]}],
}


def errors_of(doc: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(ConfigError) as caught:
        parse_config(doc)
    return {e.path: e.message for e in caught.value.errors}


def with_group(**fields: Any) -> dict[str, Any]:
    doc = copy.deepcopy(DOC)
    doc["groups"][0].update(fields)
    return doc


def with_target(**fields: Any) -> dict[str, Any]:
    doc = copy.deepcopy(DOC)
    doc["groups"][0]["targets"][0].update(fields)
    return doc


@pytest.mark.parametrize(
    ("doc", "path", "write"),
    [
        (with_group(fallbacks=[]), "groups.0.fallbacks", "targets"),
        (with_group(chains=[]), "groups.0.chains", "targets"),
        (with_group(match=[]), "groups.0.match", "targets"),
        (with_group(routes=[]), "groups.0.routes", "targets"),
        ({**DOC, "routes": []}, "routes", "targets"),
        ({**DOC, "activeGroup": "auto"}, "activeGroup", "name"),
        (with_group(compactWindow=500000), "groups.0.compactWindow", "compact_window"),
        (with_group(contextWindow=128000), "groups.0.contextWindow", "context_window"),
        (with_target(contextWindow=128000), "groups.0.targets.0.contextWindow", "context_window"),
        (with_target(keepThinking=True), "groups.0.targets.0.keepThinking", "keep_thinking"),
        (with_target(breakToolLoop=True), "groups.0.targets.0.breakToolLoop", "break_tool_loop"),
        (with_group(maxRetries=3), "groups.0.maxRetries", "retry.max_retries"),
        (with_group(retryableCodes=["SERVER"]), "groups.0.retryableCodes", "retry.retry_codes"),
        (
            with_group(retry={"retryableCodes": ["SERVER"]}),
            "groups.0.retry.retryableCodes",
            "retry.retry_codes",
        ),
        (with_group(retry={"maxRetries": 3}), "groups.0.retry.maxRetries", "retry.max_retries"),
        (with_group(retry={"backoff": {}}), "groups.0.retry.backoff", "retry.initial_delay_ms"),
        (
            with_group(retry={"initialDelayMs": 1}),
            "groups.0.retry.initialDelayMs",
            "retry.initial_delay_ms",
        ),
        (with_group(retry={"maxDelayMs": 1}), "groups.0.retry.maxDelayMs", "retry.max_delay_ms"),
        (
            with_group(retry={"jitterRatio": 0.1}),
            "groups.0.retry.jitterRatio",
            "retry.jitter_ratio",
        ),
        (with_group(switchCodes=["SERVER"]), "groups.0.switchCodes", "switch_codes"),
        (with_group(failureThreshold=1), "groups.0.failureThreshold", "circuit.failure_threshold"),
        (with_group(cooldownMs=1), "groups.0.cooldownMs", "circuit.cooldown_base_ms"),
        (with_group(quarantineBaseMs=1), "groups.0.quarantineBaseMs", "circuit.cooldown_base_ms"),
        (with_group(quarantineCapMs=1), "groups.0.quarantineCapMs", "circuit.cooldown_cap_ms"),
    ],
)
def test_seed_shaped_keys_fail_with_the_key_to_write(
    doc: dict[str, Any], path: str, write: str
) -> None:
    message = errors_of(doc)[path]
    assert "renamed" in message and f"`{RENAMED_KEYS[path.rsplit('.', 1)[-1]]}`" in message
    assert write in message


def test_target_options_validate_and_store_only_what_differs() -> None:
    item = parse_target(
        {
            "provider": "p1",
            "model": "a",
            "keep_thinking": True,
            "reasoning_effort": "max",
            "efforts": ["low", "high"],
            "circuit": {"failure_threshold": 3},
        }
    )
    assert target_options(item) == {
        "keep_thinking": True,
        "reasoning_effort": "max",
        "efforts": ["low", "high"],
        "circuit": {"failure_threshold": 3},
    }
    assert target_options(parse_target({"provider": "p1", "model": "a"})) == {}
    bad = {
        "reasoning_effort": "turbo",
        "efforts": ["low", "low"],
        "keep_thinking": "yes",
        "circuit": {"cooldown_base_ms": 10, "cooldown_cap_ms": 5},
    }
    errors = errors_of(with_target(**bad))
    assert set(errors) >= {
        "groups.0.targets.0.reasoning_effort",
        "groups.0.targets.0.efforts",
        "groups.0.targets.0.keep_thinking",
        "groups.0.targets.0.circuit.cooldown_cap_ms",
    }
    assert "efforts" in errors_of(with_target(reasoning_effort="max"))["groups.0.targets.0.efforts"]


def test_compact_window_is_exclusive_with_context_window() -> None:
    errors = errors_of(with_group(compact_window=500000, context_window=128000))
    assert "exclusive" in errors["groups.0.compact_window"]


def test_loadconfig_applies_options_and_warns(
    tmp_path: Path, capsys: Any, transactional_db: None
) -> None:
    doc = with_group(compact_window=12000)
    doc["groups"][0]["targets"][0].update(
        {"break_tool_loop": True, "reasoning_effort": "drop", "circuit": {"failure_threshold": 4}}
    )
    doc["groups"].append(
        {"name": "tiny", "context_window": 32000, "targets": [{"provider": "p1", "model": "b"}]}
    )
    path = tmp_path / "switchyard.yaml"
    path.write_text(yaml.safe_dump(doc))
    call_command("loadconfig", str(path))
    err = capsys.readouterr().err
    assert "warning: group auto: compact_window 12000 is below 12484" in err
    assert "warning: group tiny: context_window 32000 is not above 65536" in err
    table = compile_table()
    target = table.groups["auto"].targets[0]
    assert target.break_tool_loop and target.reasoning_effort is EffortPolicy.DROP
    assert target.circuit == CircuitPolicy(
        failure_threshold=4, cooldown_base_ms=10_000, cooldown_cap_ms=600_000
    )
    assert table.groups["auto"].window.tokens == 12000 + 65536
    # a bad file changes nothing and says what to write
    path.write_text(yaml.safe_dump(with_target(keepThinking=True)))
    with pytest.raises(CommandError, match="keep_thinking"):
        call_command("loadconfig", str(path))
    assert compile_table().groups["auto"].targets[0].break_tool_loop
