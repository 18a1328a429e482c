"""Test modules import from tests/helpers/, never from one another (tests/helpers/__init__.py): changing or
renaming one test file must not break another, and pytest must not collect a module twice under two names."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def _imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    return names


def test_no_test_module_imports_another():
    modules = {p.stem for p in TESTS.rglob("test_*.py")} | {p.stem for p in TESTS.rglob("*_test.py")}
    found = {
        str(path.relative_to(TESTS)): sorted(n for n in _imported(path) if n.split(".")[0] in modules)
        for path in sorted(TESTS.rglob("*.py"))
        if "fixtures" not in path.parts
    }
    found = {k: v for k, v in found.items() if v}
    assert not found, f"move what these import into tests/helpers/: {found}"
