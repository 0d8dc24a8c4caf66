"""The README's code is part of the product: its custom-algorithm example must work."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.test import override_settings

from tests.conftest import Harness

README = Path(__file__).resolve().parent.parent / "README.md"


def readme_example(name: str) -> str:
    match = re.search(rf"<!-- example: {name} -->\s*```python\n(.*?)```", README.read_text(), re.S)
    assert match, f"README has no example {name!r}"
    return match.group(1)


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
