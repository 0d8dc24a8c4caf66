"""The documentation's code is part of the product: the README's and ``docs/``'s examples
(``<!-- example: NAME -->`` before a python block) must work."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.test import override_settings

from tests.conftest import Harness

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def readme_example(name: str) -> str:
    """The example named ``name``, from whichever document holds it (exactly one does)."""
    pattern = rf"<!-- example: {name} -->\s*```python\n(.*?)```"
    found = [m.group(1) for doc in DOCUMENTS for m in re.finditer(pattern, doc.read_text(), re.S)]
    assert len(found) == 1, f"{len(found)} documents have the example {name!r}"
    return found[0]


@pytest.fixture
def example_module(tmp_path: Path) -> str:
    (tmp_path / "readme_routing_example.py").write_text(readme_example("custom-algorithm"))
    sys.path.insert(0, str(tmp_path))
    yield "readme_routing_example"
    sys.path.remove(str(tmp_path))
    sys.modules.pop("readme_routing_example", None)


CONFIG = """
providers:
  - {name: p1, kind: openai, base_url: "{upstream}", api_key: k1}
groups:
  - name: auto
    algorithm: ALGO
    targets:
      - {provider: p1, model: big}
      - {provider: p1, model: gpt-mini}
"""


@pytest.mark.parametrize("by", ["name", "dotted-path"])
def test_the_readme_algorithm_routes_calls(harness: Harness, example_module: str, by: str) -> None:
    path = f"{example_module}.CheapestFirst"
    algorithms = {"cheapest-first": path}
    with override_settings(SWITCHYARD={**settings.SWITCHYARD, "ALGORITHMS": algorithms}):
        harness.configure(CONFIG.replace("ALGO", "cheapest-first" if by == "name" else path))
        raw = harness.client().chat.completions.with_raw_response.create(
            model="auto", messages=[{"role": "user", "content": "hi"}]
        )
    assert raw.headers["x-switchyard-target"] == "p1/gpt-mini"
    assert harness.upstream.count("big") == 0


def test_the_readme_minimal_configuration_loads() -> None:
    """The README's configuration (one provider per platform) is a valid file as written."""
    from routing.config.yaml import load_text

    [block] = re.findall(
        r"## A minimal configuration\s*```yaml\n(.*?)```", (ROOT / "README.md").read_text(), re.S
    )
    env = {"PRIMARY_API_KEY": "k1", "ANTHROPIC_API_KEY": "k2", "AZURE_OPENAI_API_KEY": "k3"}
    config = load_text(block, env=env)
    assert {p.platform for p in config.providers} == {"direct", "bedrock", "vertex", "azure"}
    assert [t.provider for t in config.groups[1].targets] == [
        "claude",
        "claude-bedrock",
        "claude-vertex",
    ]
