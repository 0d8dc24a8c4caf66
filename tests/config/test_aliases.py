"""Group aliases (SPEC §15): model-name globs that reach a group, refused when two groups'
aliases could match one name; resolved in the compiled table; /v1/models unchanged."""

from __future__ import annotations

import anthropic
import pytest

from routing.config.aliases import could_overlap
from routing.config.errors import ConfigError
from routing.config.schema import parse_config
from tests.conftest import Harness

ALIASED = """
providers:
  - name: p1
    kind: openai
    base_url: {upstream}
    api_key: upstream-key-p1
  - name: p2
    kind: anthropic
    base_url: {upstream}
    api_key: upstream-key-p2
groups:
  - name: auto
    aliases: ["gpt-*"]
    targets:
      - {provider: p1, model: a}
  - name: claude
    aliases: ["claude-*", "sonnet"]
    targets:
      - {provider: p2, model: b}
  - name: claude-exact
    targets:
      - {provider: p1, model: c}
"""


@pytest.mark.parametrize(
    ("a", "b", "overlap"),
    [
        ("claude-*", "gpt-*", False),
        ("claude-*", "claude-opus-*", True),
        ("claude-*", "*-haiku", True),  # claude-3-haiku
        ("claude-*", "*-mini", True),  # conservative: claude-x-mini matches both
        ("gpt-5*", "gpt-4*", False),
        ("a?c", "abc", True),
        ("a?c", "abd", False),
        ("exact", "exact", True),
        ("exact", "other", False),
        ("*.json", "*.yaml", False),
        ("[ab]x*", "cx*", True),  # heads stop at '[': conservative
    ],
)
def test_overlap_is_sound_and_conservative(a: str, b: str, overlap: bool) -> None:
    assert could_overlap(a, b) is overlap
    assert could_overlap(b, a) is overlap


def _config(aliases_a: list[str], aliases_b: list[str]) -> dict[str, object]:
    target = [{"provider": "p", "model": "m"}]
    return {
        "providers": [{"name": "p", "base_url": "http://127.0.0.1:9/v1"}],
        "groups": [
            {"name": "one", "aliases": aliases_a, "targets": target},
            {"name": "two", "aliases": aliases_b, "targets": target},
        ],
    }


def test_the_file_refuses_an_alias_two_groups_could_match_naming_both() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(_config(["claude-*"], ["claude-opus-*"]))
    (error,) = caught.value.errors
    assert error.path == "groups.1.aliases.0"
    assert "'one'" in error.message and "'two'" in error.message
    assert parse_config(_config(["claude-*"], ["gpt-*"])).groups[0].aliases == ["claude-*"]
    with pytest.raises(ConfigError):
        parse_config(_config(["a b"], []))  # no spaces in a model name
    with pytest.raises(ConfigError):
        parse_config(_config(["x", "x"], []))


def test_an_agents_model_name_reaches_the_aliased_group(harness: Harness) -> None:
    harness.configure(ALIASED)
    chat = harness.client().chat.completions.create(
        model="gpt-5.1-codex", messages=[{"role": "user", "content": "hi"}]
    )
    assert chat.choices[0].message.content == "Hello from a."
    claude = anthropic.Anthropic(
        base_url=harness.gateway.url, api_key=harness.key, max_retries=0
    ).messages.create(
        model="claude-opus-4-8", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
    )
    assert claude.content[0].text == "Hello from b."  # type: ignore[union-attr]
    # The exact group name wins over the claude-* alias; a plain alias is exact too.
    exact = harness.client().chat.completions.create(
        model="claude-exact", messages=[{"role": "user", "content": "hi"}]
    )
    assert exact.choices[0].message.content == "Hello from c."
    plain = harness.client().chat.completions.create(
        model="sonnet", messages=[{"role": "user", "content": "hi"}]
    )
    assert plain.choices[0].message.content == "Hello from b."
    with pytest.raises(Exception) as missing:
        harness.client().chat.completions.create(
            model="llama-3", messages=[{"role": "user", "content": "hi"}]
        )
    assert "does not exist" in str(missing.value)
    listed = {m.id for m in harness.client().models.list()}
    assert listed == {"auto", "claude", "claude-exact"}  # aliases are not models


def test_a_scoped_key_reaches_aliases_of_its_groups_only(harness: Harness) -> None:
    from routing.services.api_keys import generate_key

    harness.configure(ALIASED)
    _, scoped = generate_key(name="scoped", kind="client", groups=["auto"])
    harness.runtime.invalidate()  # type: ignore[attr-defined]
    from openai import OpenAI

    own = OpenAI(base_url=harness.gateway.base_url, api_key=scoped, max_retries=0)
    assert (
        own.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
        .choices[0]
        .message.content
        == "Hello from a."
    )
    with pytest.raises(Exception) as refused:
        own.chat.completions.create(
            model="claude-opus-4-8", messages=[{"role": "user", "content": "hi"}]
        )
    assert "does not exist" in str(refused.value)
