"""Units of issue 22's Messages side: the betas filter, the structured-output and
mid-conversation-system translations, and aliases/betas through export and the API."""

from __future__ import annotations

import pytest

from routing.protocols import messages, responses
from routing.protocols.betas import filter_betas

SENT = {"anthropic-beta": "a-1, b-2,c-3", "anthropic-version": "2023-06-01"}


def test_betas_pass_unless_a_provider_allows_or_strips() -> None:
    assert filter_betas(SENT, None, frozenset()) == (SENT, [])
    kept, notes = filter_betas(SENT, None, frozenset({"b-2"}))
    assert kept == {**SENT, "anthropic-beta": "a-1,c-3"} and notes == ["stripped beta b-2"]
    kept, notes = filter_betas(SENT, frozenset({"c-3", "z"}), frozenset())
    assert kept["anthropic-beta"] == "c-3" and notes == ["stripped beta a-1", "stripped beta b-2"]
    kept, _ = filter_betas(SENT, frozenset(), frozenset())
    assert "anthropic-beta" not in kept and kept["anthropic-version"] == "2023-06-01"


def test_a_mid_conversation_system_message_stays_in_place() -> None:
    body = {
        "model": "m",
        "max_tokens": 10,
        "system": "top",
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "system", "content": [{"type": "text", "text": "agents: ..."}]},
            {"role": "assistant", "content": "hello"},
            {"role": "user", "content": "go"},
        ],
    }
    canonical, _ = messages.to_canonical(body)
    assert [(m["role"], m["content"]) for m in canonical["messages"]] == [
        ("system", "top"),
        ("user", "hi"),
        ("system", "agents: ..."),
        ("assistant", "hello"),
        ("user", "go"),
    ]
    out, _ = responses.from_canonical(canonical, "r")
    assert out["instructions"] == "top"
    assert [(i.get("role"), i["type"]) for i in out["input"]] == [
        ("user", "message"),
        ("developer", "message"),
        ("assistant", "message"),
        ("user", "message"),
    ]
    with pytest.raises(Exception, match="role"):
        messages.to_canonical({**body, "messages": [{"role": "tool", "content": "x"}]})


def test_structured_output_maps_across_all_three_protocols() -> None:
    schema = {"type": "object", "properties": {"t": {"type": "string"}}}
    body = {
        "model": "m",
        "max_tokens": 10,
        "messages": [{"role": "user", "content": "x"}],
        "output_config": {"format": {"type": "json_schema", "schema": schema}},
    }
    canonical, notes = messages.to_canonical(body)
    assert canonical["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "output", "schema": schema},
    }
    assert not [n for n in notes if "format" in n]
    out, _ = responses.from_canonical(canonical, "r")
    assert out["text"]["format"] == {"type": "json_schema", "name": "output", "schema": schema}
    back, notes = messages.from_canonical(canonical, "a")
    assert back["output_config"]["format"] == {"type": "json_schema", "schema": schema}
    with pytest.raises(Exception, match="output_config.format"):
        messages.to_canonical({**body, "output_config": {"format": {"type": "xml"}}})


@pytest.mark.django_db
def test_aliases_and_betas_survive_an_export_round_trip() -> None:
    from routing.config.export import export_config
    from routing.config.yaml import load_text
    from routing.models import Group, Provider
    from routing.services.config_file import config_apply

    text = """
providers:
  - name: p
    kind: anthropic
    base_url: http://127.0.0.1:9
    betas: {allow: [x-1, y-2], strip: [y-2]}
groups:
  - name: claude
    aliases: ["claude-*", sonnet]
    targets: [{provider: p, model: m}]
"""
    config_apply(load_text(text), source="t")
    first = export_config()
    assert "claude-*" in first and "betas:" in first
    Group.objects.all().delete()
    Provider.objects.all().delete()
    config_apply(load_text(first), source="export")
    assert export_config() == first
    assert Group.objects.get(name="claude").aliases == ["claude-*", "sonnet"]
    assert Provider.objects.get(name="p").betas == {"allow": ["x-1", "y-2"], "strip": ["y-2"]}
