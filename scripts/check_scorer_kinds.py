"""List every line outside the scorer kinds' home that compares with a scorer kind.

The home is rmspec/inference/scorers/ (one module per kind, and the registry) and the enum itself
(rmspec/spec/scorer_kind.py). Everywhere else asks the kind (`rmspec.inference.scorers.of(engine)`)
instead of comparing. What counts, read from the syntax tree (so comments and strings do not):
- a comparison (==, !=, in, not in, is, is not) with a `ScorerKind.X` member, or with a name bound
  to one (`JUDGE = ScorerKind.JUDGE`, and that name imported elsewhere);
- a comparison of a kind's value ("reward", "pointwise", "judge", "process", "composite") with an
  expression that names a scorer (`scorer`, `engine.kind`, `entry.get("scorer")`);
- a `match` case on a scorer kind, and a dict keyed by scorer kinds (a ladder written as a table);
- with --types: `isinstance` against an engine class (RewardEngine, JudgeEngine, StepEngine,
  CompositeScorer), which dispatches on the kind by its class.

None is allowed (a component, a server or a report that needs to know something of a kind asks for
it as a property of the kind: `one_score`, `ranks_pairs`, `text_reward`, ...).

Evaluation's `ScoredAs` (rmspec.spec.benchmarks: rewards, verdicts, steps) is what a kind says its
rows are read as, not a scorer kind, and has its own home: rmspec/evaluate/row_readers.py (a reader
per ScoredAs; evaluation asks it: `steps`, `score`, `diagnostics`, `pairs`, ...). `find_scored_as`
lists the comparisons (and match cases, dict keys) with a `ScoredAs` member, or a name bound to one
(`PROCESS`, imported from rmspec.spec.benchmarks), outside it; SCORED_AS_ALLOWED counts the lines a
module may keep (the light side may not import rmspec.evaluate): one more there is reported too.

Usage: python scripts/check_scorer_kinds.py [--types] [ROOT]   (ROOT: the folder holding rmspec/,
default this checkout). Prints each line and the totals; exit 1 when it finds any, else 0.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

MEMBERS = {"REWARD", "POINTWISE", "JUDGE", "PROCESS", "COMPOSITE"}
VALUES = {"reward", "pointwise", "judge", "process", "composite"}
ENGINES = {"RewardEngine", "JudgeEngine", "StepEngine", "CompositeScorer"}
HOME = ("rmspec/inference/scorers/", "rmspec/spec/scorer_kind.py")
ENUMS = {"ScorerKind": MEMBERS, "ScoredAs": {"REWARD", "JUDGE", "PROCESS"}}
SCORED_AS_HOME = ("rmspec/evaluate/row_readers.py", "rmspec/spec/benchmarks.py")
# module -> how many lines may compare with a ScoredAs: the console view is on the light side (no evaluate)
SCORED_AS_ALLOWED = {"rmspec/render/report_view.py": 1}


def _is_member(node: ast.AST, enum: str = "ScorerKind") -> bool:
    """`ScorerKind.X` (or `something.ScorerKind.X`); with enum="ScoredAs", `ScoredAs.X`."""
    if not (isinstance(node, ast.Attribute) and node.attr in ENUMS[enum]):
        return False
    owner = node.value
    return (isinstance(owner, ast.Name) and owner.id == enum) or (
        isinstance(owner, ast.Attribute) and owner.attr == enum
    )


def _module_name(rel: str) -> str:
    return rel[:-3].replace("/", ".").removesuffix(".__init__")


def aliases(root: Path, enum: str = "ScorerKind") -> dict[str, set[str]]:
    """Module -> names bound at its top level to a ScorerKind (or `enum`) member (`JUDGE =
    ScorerKind.JUDGE`, or imported from a module that binds them)."""
    trees = {
        _module_name(p.relative_to(root).as_posix()): ast.parse(p.read_text(encoding="utf-8")) for p in _files(root)
    }
    bound: dict[str, set[str]] = {name: set() for name in trees}
    for name, tree in trees.items():
        for node in tree.body:
            if isinstance(node, ast.Assign):
                targets = [t for tgt in node.targets for t in (tgt.elts if isinstance(tgt, ast.Tuple) else [tgt])]
                values = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
                for target, value in zip(targets, values):
                    if isinstance(target, ast.Name) and _is_member(value, enum):
                        bound[name].add(target.id)
    changed = True
    while changed:  # names imported from a module that binds them, as far as imports reach
        changed = False
        for name, tree in trees.items():
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.module in bound:
                    for alias in node.names:
                        local = alias.asname or alias.name
                        if alias.name in bound[node.module] and local not in bound[name]:
                            bound[name].add(local)
                            changed = True
    return bound


def _mentions_scorer(node: ast.AST) -> bool:
    """An expression that holds a scorer's kind: a name or attribute called *scorer*, `.kind` of an
    engine or scorer, or a `"scorer"` key."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and "scorer" in sub.id.lower():
            return True
        if isinstance(sub, ast.Attribute) and "scorer" in sub.attr.lower():
            return True
        if isinstance(sub, ast.Attribute) and sub.attr == "kind" and _names_engine(sub.value):
            return True
        if isinstance(sub, ast.Constant) and sub.value == "scorer":
            return True
    return False


def _names_engine(node: ast.AST) -> bool:
    text = ast.unparse(node).lower()
    return "engine" in text or "scorer" in text


def _refers(node: ast.AST, names: set[str], enum: str = "ScorerKind") -> bool:
    return any(_is_member(sub, enum) or (isinstance(sub, ast.Name) and sub.id in names) for sub in ast.walk(node))


def _literal(node: ast.AST) -> bool:
    return any(isinstance(sub, ast.Constant) and sub.value in VALUES for sub in ast.walk(node))


def comparisons(tree: ast.AST, names: set[str], types: bool = False, enum: str = "ScorerKind") -> Iterator[int]:
    """Line numbers of the scorer-kind (or `enum`) comparisons in one module (see the module's docstring)."""
    for node in ast.walk(tree):
        if _compares(node, names, types, enum):
            yield getattr(node, "pattern", node).lineno  # a match case: its pattern's line


def _compares(node: ast.AST, names: set[str], types: bool, enum: str = "ScorerKind") -> bool:
    if isinstance(node, ast.Compare):
        operands = [node.left, *node.comparators]
        by_value = enum == "ScorerKind" and any(_literal(op) for op in operands)
        by_value = by_value and any(_mentions_scorer(op) for op in operands)
        return by_value or any(_refers(op, names, enum) for op in operands)
    if isinstance(node, ast.match_case):
        return _refers(node.pattern, names, enum)
    if isinstance(node, ast.Dict):
        return any(k is not None and _refers(k, names, enum) for k in node.keys)
    return (
        types
        and isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "isinstance"
        and len(node.args) == 2
        and any(isinstance(s, ast.Name) and s.id in ENGINES for s in ast.walk(node.args[1]))
    )


def _files(root: Path) -> list[Path]:
    return sorted((root / "rmspec").rglob("*.py"))


def find(
    root: Path, types: bool = False, enum: str = "ScorerKind", home: tuple[str, ...] = HOME
) -> list[tuple[str, int, str]]:
    """(path, line number, the line's text) of every comparison outside the home."""
    bound = aliases(root, enum)
    found = []
    for path in _files(root):
        rel = path.relative_to(root).as_posix()
        if rel.startswith(home):
            continue
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        for n in sorted(set(comparisons(ast.parse(text), bound[_module_name(rel)], types, enum))):
            found.append((rel, n, lines[n - 1].strip()))
    return found


def find_scored_as(root: Path) -> list[tuple[str, int, str]]:
    """Every comparison with a ScoredAs outside the row readers' home, but in a module that keeps no
    more than SCORED_AS_ALLOWED gives it."""
    found = find(root, enum="ScoredAs", home=SCORED_AS_HOME)
    per_module = {rel: sum(r == rel for r, _, _ in found) for rel, _, _ in found}
    return [f for f in found if per_module[f[0]] > SCORED_AS_ALLOWED.get(f[0], 0)]


def main(argv: list[str]) -> int:
    types = "--types" in argv
    rest = [a for a in argv if a != "--types"]
    root = Path(rest[0]) if rest else Path(__file__).resolve().parent.parent
    found = find(root, types)
    for rel, n, line in found:
        print(f"{rel}:{n}: {line}")
    modules = len({rel for rel, _, _ in found})
    what = "comparisons with a scorer kind" + (" or isinstance on an engine class" if types else "")
    print(f"{len(found)} lines in {modules} modules outside the scorer kinds' home: {what}")
    scored_as = find_scored_as(root)
    for rel, n, line in scored_as:
        print(f"{rel}:{n}: {line}")
    modules = len({rel for rel, _, _ in scored_as})
    print(f"{len(scored_as)} lines in {modules} modules outside the row readers' home: comparisons with a ScoredAs")
    return 1 if found or scored_as else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
