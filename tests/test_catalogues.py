"""Each catalogue is one table, read by everyone who needs it (issue 36): these fail when a copy appears.

- mapping presets: only the table (rmspec/spec/presets.py) and the row readers (rmspec/data/presets.py)
  hold a preset's name in code;
- the spec checks' Problem is defined once (rmspec/spec/base.py);
- rmspec/extras.py names no benchmark kind and no composite component kind: what needs an extra says so;
- the composite's component kinds are the spec union's, and docs/architecture.md's diagram names every
  package under rmspec/.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from rmspec.composite.components import KINDS
from rmspec.spec import presets
from rmspec.spec.benchmarks import CATALOGUE
from rmspec.spec.composite import COMPONENT_SETTINGS, kind_of

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "rmspec"
# Preset names that are no other word of rmspec ("pairs", "messages", "ranked", "processbench" and "shp"
# are also a benchmark kind, a field, a binarize rule or a RewardBench subset).
DISTINCT = {
    "hh-rlhf",
    "conversational",
    "ultrafeedback-binarized",
    "helpsteer2",
    "ultrafeedback",
    "stepwise",
    "math-shepherd",
}


def code_strings(path: Path) -> set[str]:
    """The string constants of a module's code, docstrings left out."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
        ):
            docstrings.add(id(body[0].value))
    return {
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings
    }


def test_the_distinct_names_are_presets():
    assert set(presets.NAMES) >= DISTINCT


def test_only_the_table_and_the_row_readers_name_a_preset():
    found = sorted(str(p.relative_to(REPO)) for p in PACKAGE.rglob("*.py") if code_strings(p) & DISTINCT)
    assert found == ["rmspec/data/presets.py", "rmspec/spec/presets.py"]


def test_problem_is_defined_once():
    defined = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
            if any(isinstance(t, ast.Name) and t.id == "Problem" for t in targets) and "tuple" in ast.unparse(node):
                defined.append(str(path.relative_to(REPO)))
    assert defined == ["rmspec/spec/base.py"]


def test_extras_names_no_benchmark_or_component_kind():
    # "model" is also the spec section extras.py reads (getattr(spec, "model")), not the component kind.
    named = code_strings(PACKAGE / "extras.py") & (set(CATALOGUE) | set(KINDS) - {"model"})
    assert named == set()


def test_component_kinds_are_the_spec_unions():
    assert tuple(kind_of(s) for s in COMPONENT_SETTINGS) == KINDS


def test_the_architecture_diagram_names_every_package():
    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("## Packages and their one-way imports", 1)[1]
    diagram = section.split("```", 2)[1]
    words = set(re.findall(r"[a-z_]+", diagram))
    packages = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    modules = {p.stem for p in PACKAGE.glob("*.py") if p.stem not in ("__init__",)}
    assert packages - words == set() and modules - words == set()
