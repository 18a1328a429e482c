"""The import-circle check (scripts/check_import_cycles.py, run by `make lint`) sees every import.

A circle hidden in an import inside a function, or in one under `if TYPE_CHECKING:`, is still a
circle: each fixture package below holds exactly one, the check must name it and fail; the same
package with the back edge removed must pass.
"""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _script():
    spec = importlib.util.spec_from_file_location("check_import_cycles", REPO / "scripts" / "check_import_cycles.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _package(root: Path, name: str, files: dict[str, str]) -> None:
    pkg = root / name
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for module, text in files.items():
        (pkg / f"{module}.py").write_text(textwrap.dedent(text))


BACK_EDGES = {
    "function": """
        def late():
            from {pkg}.a import first
            return first
        """,
    "type_checking": """
        from typing import TYPE_CHECKING
        if TYPE_CHECKING:
            from {pkg}.a import first
        """,
}


@pytest.mark.parametrize("how", sorted(BACK_EDGES))
def test_a_circle_through_a_hidden_import_fails(tmp_path, monkeypatch, capsys, how):
    pkg = f"circle_{how}"
    _package(
        tmp_path,
        pkg,
        {
            "a": f"from {pkg}.b import second\nfirst = 1\n",
            "b": "second = 2\n" + textwrap.dedent(BACK_EDGES[how]).format(pkg=pkg),
        },
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    script = _script()
    assert script.main(["check", pkg]) == 1
    out = capsys.readouterr().out
    assert f"{pkg}.a -> {pkg}.b -> {pkg}.a" in out
    assert "1 import circle(s)" in out
    sys.modules.pop(pkg, None)


def test_one_way_imports_pass(tmp_path, monkeypatch, capsys):
    pkg = "one_way"
    _package(tmp_path, pkg, {"a": f"from {pkg}.b import second\n", "b": "second = 2\ndef late():\n    import json\n"})
    monkeypatch.syspath_prepend(str(tmp_path))
    assert _script().main(["check", pkg]) == 0
    assert "no import circle among 3 modules" in capsys.readouterr().out
