"""`extends:` and `--set key.path=value`: how several sources of values become one document."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rmspec.errors import SpecError, SpecIssue
from rmspec.spec.yaml_io import Loc, Locations, parse_yaml_text


def deep_merge(base: Any, override: Any) -> Any:
    """Maps merge key by key; anything else (lists included) is replaced whole."""
    if isinstance(base, dict) and isinstance(override, dict):
        out = dict(base)
        for key, value in override.items():
            out[key] = deep_merge(base[key], value) if key in base else value
        return out
    return override


def _set_issue(expr: str, message: str, hint: str | None = None) -> SpecIssue:
    return SpecIssue(path="", message=message, file=f"--set {expr}", hint=hint)


def parse_set(expr: str) -> tuple[tuple, Any, Locations]:
    """`a.b.0.c=value` -> (("a", "b", 0, "c"), typed value, its locations)."""
    if "=" not in expr:
        raise SpecError([_set_issue(expr, "expected KEY.PATH=VALUE", "e.g. --set training.learning_rate=2e-5")])
    key, raw = expr.split("=", 1)
    parts = key.strip().split(".")
    if not key.strip() or any(not p for p in parts):
        raise SpecError([_set_issue(expr, f"bad key path {key!r}", "use dots between keys, e.g. training.max_length")])
    path = tuple(int(p) if p.isdigit() else p for p in parts)
    origin = f"--set {expr}"
    # The value is YAML, so `--set training.epochs=2` is an int and `--set x=[a, b]` a list.
    value, sub = parse_yaml_text(raw if raw.strip() else '""', origin)
    locs = Locations(default_file=origin)
    here = Loc(origin)
    for i in range(1, len(path) + 1):
        locs.keys[path[:i]] = here
        locs.values[path[:i]] = here
    for p in sub.values:
        locs.values[path + p] = here
    return path, value, locs


def apply_set(doc: dict, path: tuple, value: Any, expr: str) -> None:
    node: Any = doc
    for i, part in enumerate(path[:-1]):
        nxt = path[i + 1]
        if isinstance(node, dict):
            if part not in node or node[part] is None:
                node[part] = [] if isinstance(nxt, int) else {}
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int):
            if part >= len(node):
                raise SpecError([_set_issue(expr, f"index {part} is past the end of a list of {len(node)}")])
            node = node[part]
        else:
            where = ".".join(map(str, path[: i + 1]))
            raise SpecError(
                [_set_issue(expr, f"cannot set inside {where!r}: it is a {type(node).__name__}, not a map")]
            )
    last = path[-1]
    if isinstance(node, dict) or (isinstance(node, list) and isinstance(last, int) and last < len(node)):
        node[last] = value
    else:
        parent = ".".join(map(str, path[:-1])) or "the spec"
        raise SpecError(
            [
                _set_issue(
                    expr, f"cannot set {'.'.join(map(str, path))!r}: {parent} is a {type(node).__name__}, not a map"
                )
            ]
        )


def resolve_extends(doc: dict, locs: Locations, file: Path, read, seen: tuple[Path, ...]) -> tuple[dict, Locations]:
    """Load the chain of `extends:` files, base first; the child's values win."""
    base_ref = doc.get("extends")
    if base_ref is None:
        return doc, locs
    where = locs.find(("extends",))
    if not isinstance(base_ref, str) or not base_ref:
        raise SpecError(
            [SpecIssue("extends", f"expected a file path, got {base_ref!r}", where.file, where.line, where.col)]
        )
    base_path = (file.parent / base_ref).resolve()
    if base_path in seen:
        chain = " -> ".join(str(p) for p in (*seen, base_path))
        raise SpecError(
            [
                SpecIssue(
                    "extends",
                    f"circular extends: {chain}",
                    where.file,
                    where.line,
                    where.col,
                    hint="remove the extends: that points back",
                )
            ]
        )
    if not base_path.exists():
        raise SpecError(
            [
                SpecIssue(
                    "extends",
                    f"base spec not found: {base_path}",
                    where.file,
                    where.line,
                    where.col,
                    hint="extends: is relative to the file that holds it",
                )
            ]
        )
    base_doc, base_locs = read(base_path)
    if not isinstance(base_doc, dict):
        raise SpecError([SpecIssue("", "a spec must be a YAML map of sections", str(base_path), 1, 1)])
    base_doc, base_locs = resolve_extends(base_doc, base_locs, base_path, read, (*seen, base_path))
    merged = deep_merge(base_doc, {k: v for k, v in doc.items() if k != "extends"})
    for path in list(locs.values):  # a list in the child replaces the base's list whole
        if path and isinstance(_get(doc, path), list):
            base_locs.drop_under(path)
    base_locs.merge(locs)
    merged["extends"] = base_ref
    return merged, base_locs


def _get(doc: Any, path: tuple) -> Any:
    for part in path:
        try:
            doc = doc[part]
        except (KeyError, IndexError, TypeError):
            return None
    return doc
