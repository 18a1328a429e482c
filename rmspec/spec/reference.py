"""The spec reference (docs/spec_reference.md): every option of the spec models, a section per spec
area, from the fields' own descriptions, with a one-line YAML example each.

Generated, never edited by hand: `python -m rmspec.spec.reference` rewrites the file, `--check`
exits 1 when it is stale (tests/test_spec_reference.py runs the same comparison). Light: pydantic only.
"""

from __future__ import annotations

import json
import sys
import types
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from rmspec.spec.root import Spec

DOC = Path(__file__).resolve().parents[2] / "docs" / "spec_reference.md"
HEADER = """# Spec reference

Every option of an rmspec spec, a section per area, generated from the field descriptions by
`python -m rmspec.spec.reference` (do not edit by hand; tests/test_spec_reference.py fails when this
file is stale). Each example is one line of YAML that sets the option (nested keys in flow style);
`--set PATH=VALUE` on `validate`, `plan` and `run` sets the same value for plain paths.
Sections with variants (`kind:`) list each variant's options under its own heading.
"""


COVERED: set[str] = set()  # "Class.field" of every row the last render() wrote (the test reads it)


def _models(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for a in typing.get_args(annotation) for m in _models(a)]


def _is_list(annotation: Any) -> bool:
    """A list (possibly optional) whose items are spec models."""
    if typing.get_origin(annotation) is list:
        return True
    return any(_is_list(a) for a in typing.get_args(annotation) if a is not type(None))


def _type(annotation: Any) -> str:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Literal:
        return " \\| ".join(str(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        parts = [_type(a) for a in args if a is not type(None)]
        return " \\| ".join(dict.fromkeys(parts)) + (" \\| unset" if type(None) in args else "")
    if origin is list:
        return f"list of {_type(args[0])}" if args else "list"
    if origin is dict:
        return "mapping"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "section"
    if typing.get_origin(annotation) is typing.Annotated:
        return _type(args[0])
    name = getattr(annotation, "__name__", str(annotation))
    return {"str": "text", "int": "integer", "float": "number", "bool": "true \\| false"}.get(name, name)


def _default(field: FieldInfo) -> Any:
    if field.default_factory is not None:
        return field.default_factory()  # type: ignore[call-arg]
    return None if field.default is PydanticUndefined else field.default


def _literal_choices(annotation: Any) -> list[Any]:
    if typing.get_origin(annotation) is typing.Literal:
        return list(typing.get_args(annotation))
    return [c for a in typing.get_args(annotation) for c in _literal_choices(a)]


def _example_value(field: FieldInfo) -> Any:
    """A value worth showing: another choice than the default, else the default, else a plausible one."""
    default = _default(field)
    choices = _literal_choices(field.annotation)
    if choices:
        other = [c for c in choices if c != default and not (isinstance(default, list) and c in default)]
        pick = other[0] if other else choices[0]
        return [pick] if _type(field.annotation).startswith("list") else pick
    if isinstance(default, bool):
        return not default
    if default not in (None, [], {}) and not isinstance(default, BaseModel):
        return default
    text = _type(field.annotation)
    if "number" in text:
        return 0.5
    if "integer" in text:
        return 1
    if "true" in text:
        return True
    if text.startswith("list"):
        return []
    if "mapping" in text:
        return {}
    return "..."


def _flow(value: Any) -> str:
    if isinstance(value, BaseModel):
        return "{...}"
    if isinstance(value, str):
        plain = value and value.replace("_", "").replace("-", "").replace("/", "").replace(".", "").isalnum()
        reserved = ("on", "off", "yes", "no", "null", "true", "false")
        return value if plain and value not in reserved else json.dumps(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_flow(v) for v in value) + "]"
    return json.dumps(value)


def _example(trail: list[tuple[str, str | None, bool]], name: str, value: Any) -> str:
    """One line of YAML: the keys down to `name`, a variant's kind beside its options, lists as [...]."""
    inner = f"{{{name}: {_flow(value)}}}" if trail else f"{name}: {_flow(value)}"
    for i, (key, kind, is_list) in reversed(list(enumerate(trail))):
        body = inner[1:-1] if inner.startswith("{") else inner
        if kind is not None:
            body = f"kind: {kind}, {body}"
        node = f"{{{body}}}"
        node = f"[{node}]" if is_list else node
        inner = f"{key}: {node}" if i == 0 else f"{{{key}: {node}}}"
    return inner


def _kind(model: type[BaseModel]) -> str | None:
    field = model.model_fields.get("kind")
    choices = _literal_choices(field.annotation) if field is not None else []
    return str(choices[0]) if len(choices) == 1 else None


def _describe(model: type[BaseModel], name: str, field: FieldInfo) -> str:
    if name == "kind" and _kind(model) is not None:
        return f"selects this variant: `kind: {_kind(model)}`"
    text = " ".join((field.description or "").split())
    return text.replace("|", "\\|")


def _section(
    rows: list[str],
    title: str,
    model: type[BaseModel],
    path: str,
    trail: list[tuple[str, str | None, bool]],
    seen: set[tuple[type, str]],
) -> None:
    """A table of `model`'s options under `title`, then a sub-section per nested section or variant."""
    if (model, path) in seen:
        return
    seen.add((model, path))
    rows += [f"### {title}", "", "| option | type | default | what it does | example |", "|---|---|---|---|---|"]
    nested = []
    for name, field in model.model_fields.items():
        subs = _models(field.annotation)
        default = _default(field)
        shown_default = "required" if field.is_required() else ("unset" if default is None else f"`{_flow(default)}`")
        example = (
            "(a section: see below)"
            if subs and not _literal_choices(field.annotation)
            else f"`{_example(trail, name, _example_value(field))}`"
        )
        COVERED.add(f"{model.__name__}.{name}")
        rows.append(
            f"| `{path}.{name}` | {_type(field.annotation)} | {shown_default} | "
            f"{_describe(model, name, field)} | {example} |"
        )
        for sub in subs:
            nested.append((name, sub, _is_list(field.annotation), len(subs) > 1))
    rows.append("")
    for name, sub, is_list, variant in nested:
        kind = _kind(sub) if variant or _kind(sub) else None
        sub_path = f"{path}.{name}" + ("[]" if is_list else "")
        sub_title = sub_path + (f" (kind: {kind})" if kind else "")
        _section(rows, sub_title, sub, sub_path, [*trail, (name, kind, is_list)], seen)


def render() -> str:
    COVERED.clear()
    rows = [HEADER]
    top = [(n, f) for n, f in Spec.model_fields.items() if not _models(f.annotation)]
    rows += ["## top level", "", "| option | type | default | what it does | example |", "|---|---|---|---|---|"]
    for name, field in top:
        default = _default(field)
        shown = "required" if field.is_required() else ("unset" if default is None else f"`{_flow(default)}`")
        COVERED.add(f"Spec.{name}")
        rows.append(
            f"| `{name}` | {_type(field.annotation)} | {shown} | {_describe(Spec, name, field)} | "
            f"`{name}: {_flow(_example_value(field))}` |"
        )
    rows.append("")
    for name, field in Spec.model_fields.items():
        subs = _models(field.annotation)
        if not subs:
            continue
        COVERED.add(f"Spec.{name}")  # the area's heading and description
        rows += [f"## {name}", "", _describe(Spec, name, field), ""]
        seen: set[tuple[type, str]] = set()
        for sub in subs:
            kind = _kind(sub) if len(subs) > 1 else None
            if kind is None:
                _section(rows, name, sub, name, [(name, None, False)], seen)
            else:
                _variant(rows, name, sub, kind, seen)
    return "\n".join(rows).rstrip() + "\n"


def _variant(rows: list[str], name: str, model: type[BaseModel], kind: str, seen: set[tuple[type, str]]) -> None:
    """A top-level section with variants (approach): its options sit at the top of the spec, beside kind."""
    title = f"{name} (kind: {kind})"
    rows += [f"### {title}", "", "| option | type | default | what it does | example |", "|---|---|---|---|---|"]
    nested = []
    for fname, field in model.model_fields.items():
        subs = _models(field.annotation)
        default = _default(field)
        shown = "required" if field.is_required() else ("unset" if default is None else f"`{_flow(default)}`")
        value = _example_value(field)
        example = (
            "(a section: see below)"
            if subs and not _literal_choices(field.annotation)
            else f"`{name}: {{kind: {kind}" + ("" if fname == "kind" else f", {fname}: {_flow(value)}") + "}`"
        )
        COVERED.add(f"{model.__name__}.{fname}")
        rows.append(
            f"| `{name}.{fname}` | {_type(field.annotation)} | {shown} | {_describe(model, fname, field)} | {example} |"
        )
        nested += [(fname, sub, _is_list(field.annotation), len(subs) > 1) for sub in subs]
    rows.append("")
    for fname, sub, is_list, variant in nested:
        sub_kind = _kind(sub) if variant or _kind(sub) else None
        sub_path = f"{name}.{fname}" + ("[]" if is_list else "")
        _section(
            rows,
            sub_path + (f" (kind: {sub_kind})" if sub_kind else ""),
            sub,
            sub_path,
            [(name, kind, False), (fname, sub_kind, is_list)],
            seen,
        )


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    text = render()
    if "--check" in args:
        if not DOC.exists() or DOC.read_text(encoding="utf-8") != text:
            print(f"{DOC} is stale: run python -m rmspec.spec.reference", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(text, encoding="utf-8")
    print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
