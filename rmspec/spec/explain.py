"""Turn pydantic's validation errors into located, actionable SpecIssues."""

from __future__ import annotations

import re
import types
import typing
from typing import Any

from pydantic import BaseModel, ValidationError

from rmspec.errors import SpecIssue
from rmspec.spec.choices import did_you_mean
from rmspec.spec.yaml_io import Locations


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _expand(tp: Any) -> list[Any]:
    """Unwrap Annotated/Optional/Union into the concrete alternatives."""
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _expand(typing.get_args(tp)[0])
    if origin in (typing.Union, types.UnionType):
        out = []
        for arg in typing.get_args(tp):
            out.extend(_expand(arg))
        return out
    return [tp]


def _kind_tags(model: type[BaseModel]) -> tuple[str, ...]:
    field = model.model_fields.get("kind")
    if field is None:
        return ()
    args = typing.get_args(field.annotation)
    return tuple(a for a in args if isinstance(a, str))


def fields_at(root: type[BaseModel], loc: tuple) -> list[str]:
    """Field names of the model(s) that pydantic's ``loc`` points into (tags included in loc)."""
    candidates = _expand(root)
    for comp in loc:
        nxt: list[Any] = []
        for tp in candidates:
            origin = typing.get_origin(tp)
            if isinstance(comp, int) and origin in (list, tuple):
                nxt.extend(_expand(typing.get_args(tp)[0]))
            elif isinstance(comp, str) and origin is dict:
                nxt.extend(_expand(typing.get_args(tp)[1]))
            elif isinstance(tp, type) and issubclass(tp, BaseModel):
                if isinstance(comp, str) and comp in tp.model_fields:
                    nxt.extend(_expand(tp.model_fields[comp].annotation))
                elif comp in _kind_tags(tp) or (comp == "custom" and "options" in tp.model_fields):
                    nxt.append(tp)  # a union's tag: stay on the variant it names
        candidates = nxt or candidates
    names: list[str] = []
    for tp in candidates:
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            names.extend(n for n in tp.model_fields if n not in names)
    return names


def data_path(doc: Any, loc: tuple) -> tuple:
    """Drop the union tags pydantic puts in ``loc``; keep keys and indexes present in the data."""
    path: list = []
    node = doc
    for comp in loc:
        in_dict = isinstance(node, dict) and comp in node
        in_list = isinstance(node, list) and isinstance(comp, int) and comp < len(node)
        if in_dict or in_list:
            path.append(comp)
            node = node[comp]
    return tuple(path)


def _quoted(text: str) -> list[str]:
    return re.findall(r"'([^']*)'", text or "")


def explain(exc: ValidationError, doc: Any, locs: Locations, root: type[BaseModel]) -> list[SpecIssue]:
    issues: list[SpecIssue] = []
    for err in exc.errors(include_url=False):
        loc = tuple(err["loc"])
        kind = err["type"]
        ctx = err.get("ctx") or {}
        got = err.get("input")
        path = data_path(doc, loc)
        hint = None
        prefer_key = False

        if kind == "missing":
            name = loc[-1]
            parent = ".".join(map(str, path)) or "the top level"
            message = f"missing required field {name!r}"
            hint = f"add `{name}:` under {parent}"
        elif kind == "extra_forbidden":
            name = str(loc[-1])
            valid = fields_at(root, loc[:-1])
            message = f"unknown key {name!r}"
            guess = did_you_mean(name, valid)
            if guess:
                hint = f"did you mean {guess!r}?"
            if valid:
                message += f" (expected one of: {', '.join(valid)})"
            prefer_key = True
        elif kind == "literal_error":
            expected = _quoted(ctx.get("expected", "")) or [ctx.get("expected", "")]
            message = f"expected one of: {', '.join(expected)}; got {_short(got)}"
            guess = did_you_mean(str(got), expected)
            if guess:
                hint = f"did you mean {guess!r}?"
        elif kind == "union_tag_invalid":
            expected = _quoted(ctx.get("expected_tags", ""))
            tag = ctx.get("tag")
            message = f"unknown kind {tag!r} (expected one of: {', '.join(expected)})"
            guess = did_you_mean(str(tag), expected)
            if guess:
                hint = f"did you mean {guess!r}?"
            if isinstance(got, dict) and "kind" in got:
                path = path + ("kind",)
        elif kind == "union_tag_not_found":
            expected = _quoted(ctx.get("expected_tags", "")) if ctx.get("expected_tags") else []
            message = "missing 'kind'" + (f" (expected one of: {', '.join(expected)})" if expected else "")
            hint = "every entry of this list or section chooses its kind with `kind:`"
        elif kind in ("value_error", "assertion_error"):
            message = err["msg"].removeprefix("Value error, ").removeprefix("Assertion failed, ")
        elif kind in ("model_type", "model_attributes_type", "dict_type"):
            message = f"expected a map of keys, got {_short(got)}"
        else:
            message = f"{err['msg'][0].lower()}{err['msg'][1:]} (got {_short(got)})"

        where = locs.find(path, prefer_key=prefer_key)
        shown = path + (loc[-1],) if kind == "missing" else path
        issues.append(SpecIssue(".".join(map(str, shown)), message, where.file, where.line, where.col, hint))
    return _drop_noise_under_unknown_kind(issues)


def _drop_noise_under_unknown_kind(issues: list[SpecIssue]) -> list[SpecIssue]:
    """Once a `kind:` is unknown, complaints about that entry's other keys are noise."""
    bad_parents = {i.path.removesuffix(".kind") for i in issues if i.path.endswith("kind") and "unknown" in i.message}
    bad_parents.discard("")
    # Look up each issue's ancestors in the set: linear in the issues (a generated spec can hold
    # thousands of entries with a wrong kind; comparing every issue with every entry was quadratic).
    return [
        i
        for i in issues
        if i.path.endswith("kind") or not any(".".join(parts) in bad_parents for parts in _ancestors(i.path))
    ]


def _ancestors(path: str) -> list[list[str]]:
    parts = path.split(".")
    return [parts[:n] for n in range(1, len(parts))]
