"""The size rule (CONTRIBUTING.md, docs/architecture.md): every module of ``routing/`` and
``dashboard/`` (migrations excepted) is at most 700 lines, and every function or method
in them at most 80, counted from its ``def`` (or first decorator) to its last line.
Read with ``ast``, so a nested function counts on its own and inside its parent."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("routing", "dashboard")
MODULE_MAX = 700
FUNCTION_MAX = 80


def _modules() -> list[Path]:
    return sorted(
        path
        for package in PACKAGES
        for path in (REPO / package).rglob("*.py")
        if "migrations" not in path.relative_to(REPO).parts
    )


def _long_functions(path: Path) -> list[str]:
    """``path:line name (n lines)`` for each function or method over the limit."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            assert node.end_lineno is not None
            length = node.end_lineno - first + 1
            if length > FUNCTION_MAX:
                where = path.relative_to(REPO)
                out.append(f"{where}:{node.lineno} {node.name} ({length} lines)")
    return out


def test_the_size_rule_reads_every_module() -> None:
    found = {path.relative_to(REPO).as_posix() for path in _modules()}
    assert "routing/gateway/call.py" in found
    assert "dashboard/stats.py" in found
    assert not any("/migrations/" in p for p in found)


def test_modules_are_at_most_700_lines() -> None:
    long = []
    for path in _modules():
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MODULE_MAX:
            long.append(f"{path.relative_to(REPO)} ({lines} lines)")
    assert not long, f"modules over {MODULE_MAX} lines (split them): " + ", ".join(long)


def test_functions_are_at_most_80_lines() -> None:
    long = [entry for path in _modules() for entry in _long_functions(path)]
    assert not long, f"functions over {FUNCTION_MAX} lines (split them): " + ", ".join(long)
