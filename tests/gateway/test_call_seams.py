"""A call's parts meet at its state's public interface (issue 38 item 2).

The loop (``routing.gateway.call.Call``) and the call's state
(``routing.gateway.state.CallState``) keep their private names to themselves: the target
walker, the tries, the relay, the rescue and the exhaustion reply use the state's public
operations, so no module reaches into another object's ``_name`` of theirs, and the
gateway's modules import one another without a circle (the parts import the state, never
the loop).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import grimp

from routing.gateway import call, state

REPO = Path(__file__).resolve().parents[2]
SCANNED = ("routing", "dashboard", "bench", "tests")


def private_names(module: Path, classes: set[str]) -> set[str]:
    """The ``_name`` methods and ``self._name`` attributes ``classes`` define."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(module.read_text())):
        if not isinstance(node, ast.ClassDef) or node.name not in classes:
            continue
        for inner in ast.walk(node):
            if isinstance(inner, ast.FunctionDef | ast.AsyncFunctionDef):
                names.add(inner.name)
            elif isinstance(inner, ast.Attribute) and isinstance(inner.ctx, ast.Store):
                names.add(inner.attr)
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def reaches_in(names: set[str]) -> Iterator[str]:
    """Every ``x._name`` (``x`` not ``self`` or ``cls``) of ``names`` in the repository."""
    for top in SCANNED:
        for path in sorted((REPO / top).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if (
                    isinstance(node, ast.Attribute)
                    and node.attr in names
                    and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
                ):
                    yield f"{path.relative_to(REPO)}:{node.lineno}: .{node.attr}"


def test_no_module_reaches_into_a_calls_private_names() -> None:
    names = private_names(Path(call.__file__), {"Call"}) | private_names(
        Path(state.__file__), {"CallState"}
    )
    assert {"_run", "_commit", "_start_trace"} <= names  # the scan sees the classes' own
    assert list(reaches_in(names)) == []


def cycles(edges: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[set[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for imported in edges[module]:
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = set()
            while True:
                member = stack.pop()
                component.add(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(component)

    for module in sorted(edges):
        if module not in index:
            visit(module)
    return found


def test_cycles_finds_a_circle() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(edges) == [{"a", "b", "c"}]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_gateways_modules_import_one_another_without_a_circle() -> None:
    """``TYPE_CHECKING`` imports count: a part typed by the loop would close a circle."""
    graph = grimp.build_graph("routing", cache_dir=None)
    gateway = {m for m in graph.modules if m.startswith("routing.gateway.")}
    edges = {m: graph.find_modules_directly_imported_by(m) & gateway for m in gateway}
    assert {"routing.gateway.state", "routing.gateway.call"} <= gateway
    assert "routing.gateway.state" in edges["routing.gateway.retry"]
    assert cycles(edges) == []
    for part in ("walk", "retry", "relay", "rescue", "exhaustion", "state"):
        assert "routing.gateway.call" not in edges[f"routing.gateway.{part}"], part
