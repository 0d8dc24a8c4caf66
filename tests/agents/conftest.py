"""The real agents, installed by ``make agents`` into a cache outside the clone.

Every test under this package is marked ``agents``: ``make test`` installs the CLIs first
and runs them; ``pytest -m "not agents"`` leaves them out locally. A run that selects them
without the install fails with the command to run, never skips.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

DEFAULT_DIR = (
    Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    / "switchyard"
    / "agents-cc2.1.197-codex0.171.0-gemini0.61.0"
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.agents)


def agents_dir() -> Path:
    return Path(os.environ.get("SWITCHYARD_AGENTS_DIR") or DEFAULT_DIR)


def agent_bin(name: str) -> Path:
    """The path of an installed agent CLI (``claude``, ``codex`` or ``gemini``)."""
    path = agents_dir() / "node_modules" / ".bin" / name
    if not path.exists():
        pytest.fail(f"{name} is not installed at {path}: run `make agents` (or -m 'not agents')")
    return path


@pytest.fixture
def claude_bin() -> Path:
    return agent_bin("claude")


@pytest.fixture
def codex_bin() -> Path:
    return agent_bin("codex")


@pytest.fixture
def gemini_bin() -> Path:
    return agent_bin("gemini")
