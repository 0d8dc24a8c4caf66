"""The architecture as import contracts (pyproject.toml ``[tool.importlinter]``): the
engine imports only the standard library; only ``routing.upstream`` imports HTTP client
libraries; the gateway never imports the dashboard; the management API and the dashboard
do not import each other; ``routing.config`` (parsing, export) never imports the services
that write; the limits' rules (``spec``, ``windows``, ``rules``) import only the standard
library; nothing in ``routing.limits`` imports the gateway (the gateway builds the gate);
the selectors (configuration reads) never import the services (writes).

The contracts are deny-lists, which a new package escapes; the limits' rules are also
held to an allow-list here (the standard library, the engine, each other)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_the_import_contracts_hold() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run(
        [str(lint), "--no-cache"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "8 kept, 0 broken" in done.stdout


PURE_LIMITS = ("spec", "windows", "rules")


def _imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def _allowed(name: str) -> bool:
    top = name.partition(".")[0]
    if top in sys.stdlib_module_names or top == "__future__":
        return True
    own = {"routing.limits"} | {f"routing.limits.{module}" for module in PURE_LIMITS}
    return name in own or name == "routing.engine" or name.startswith("routing.engine.")


@pytest.mark.parametrize("module", PURE_LIMITS)
def test_the_limits_rules_import_only_the_standard_library_and_the_engine(module: str) -> None:
    imported = _imported(REPO / "routing" / "limits" / f"{module}.py")
    assert imported, "nothing read: the module moved?"
    assert sorted(name for name in imported if not _allowed(name)) == []
