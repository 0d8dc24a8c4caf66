"""The architecture as import contracts (pyproject.toml ``[tool.importlinter]``): the
parts in layers (the engine and the limits' pure rules at the bottom, the gateway above
them, the management API and the dashboard at the top, independent of each other); the
engine imports only the standard library; only ``routing.upstream`` imports HTTP client
libraries; the gateway never imports the dashboard; the management API and the dashboard
do not import each other; ``routing.config`` (parsing, export) never imports the services
that write; the limits' rules (``spec``, ``windows``, ``rules``) import only the standard
library; nothing in ``routing.limits`` imports the gateway (the gateway builds the gate);
the selectors (configuration reads) never import the services (writes). And three circles
that once were, closed: the audit writer and the metrics (both hub subscribers), the
config API and the module that mounts it, the health checker and the runtime (it takes
what it uses).

The deny-lists are escaped by a new package; the limits' rules are also held to an
allow-list here (the standard library, the engine, each other)."""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

import grimp
import pytest

REPO = Path(__file__).resolve().parents[1]
CONTRACTS = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"][
    "contracts"
]


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
    assert f"{len(CONTRACTS)} kept, 0 broken" in done.stdout


def test_the_parts_are_layered_engine_and_rules_gateway_then_api_and_dashboard() -> None:
    """The layers contract names the parts in this order (docs/architecture.md draws it)."""
    (layers,) = [c["layers"] for c in CONTRACTS if c["type"] == "layers"]
    split = [sorted(p.strip() for p in layer.replace(":", "|").split("|")) for layer in layers]
    assert split == [
        ["dashboard", "routing.api"],
        ["routing.gateway"],
        ["routing.engine", "routing.limits.rules", "routing.limits.spec", "routing.limits.windows"],
    ]
    assert "|" in layers[0]  # the API and the dashboard do not import each other


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


def test_the_architecture_doc_lists_every_contract() -> None:
    """docs/architecture.md's table of contracts names each contract of pyproject.toml,
    and no other."""
    doc = (REPO / "docs" / "architecture.md").read_text()
    table = doc.split("The contracts, as `[tool.importlinter]`", 1)[1].split("\n\n")[1]
    rows = [line.split(" | ")[0].removeprefix("| ") for line in table.splitlines()[2:]]
    assert sorted(rows) == sorted(c["name"] for c in CONTRACTS)


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("routing", "dashboard", "router_project", cache_dir=None)


@pytest.mark.parametrize(
    ("one", "other"),
    [
        # the writer records the hub's events and the metrics count them: both subscribers
        ("routing.audit.writer", "routing.observability.metrics"),
        # the config API reads who asked from the request, not from the module mounting it
        ("routing.api.config_api", "routing.api.management"),
        # the checker takes the store, clients, hub and clocks, not the runtime
        ("routing.gateway.checker", "routing.gateway.runtime"),
    ],
)
def test_no_circle_between(graph: grimp.ImportGraph, one: str, other: str) -> None:
    """Imports (at any depth, lazy and type-only ones too) go one way between these, if
    at all."""
    there = graph.find_shortest_chains(one, other, as_packages=True)
    back = graph.find_shortest_chains(other, one, as_packages=True)
    assert not (there and back), f"{one} -> {other}: {there}; back: {back}"
