"""Every hint in rmspec's source that names a `--flag` names one that exists.

Read from the source (ast): the hint of every error raised (the `hint=` keyword, or an error's second
positional argument) and every help text. A flag written after `rmspec CMD [SUB]` must be an option
of that command; a flag with no command before it must be an option of some rmspec command; flags
of other programs (hf, pip, sbatch, srun, accelerate, wandb) are theirs to check.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import click

from rmspec.cli.main import cli as root

SRC = Path(__file__).resolve().parents[1] / "rmspec"
OTHER_PROGRAMS = (
    "hf",
    "huggingface-cli",
    "pip",
    "sbatch",
    "srun",
    "accelerate",
    "wandb",
    "python",
    "torchrun",
    "vllm",
    "label-studio",
    "git",
)
FLAG = re.compile(r"(?<![\w-])--([a-z][a-z0-9-]*)")


def _text(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "X" for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _text(node.left), _text(node.right)
        return (left or "") + (right or "") if (left or right) else None
    if isinstance(node, ast.IfExp):
        return " ".join(t for t in (_text(node.body), _text(node.orelse)) if t) or None
    return None


def hints() -> list[tuple[str, str]]:
    found = []
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            name = getattr(node.func, "id", None) or getattr(node.func, "attr", "")
            texts = [_text(k.value) for k in node.keywords if k.arg in ("hint", "help")]
            if name.endswith("Error") and len(node.args) >= 2:
                texts.append(_text(node.args[1]))
            found += [(f"{path.relative_to(SRC.parent)}:{node.lineno}", t) for t in texts if t and "--" in t]
    return found


def commands() -> dict[str, click.Command]:
    """'run', 'data report', 'annotate export', ... -> the click command."""
    out: dict[str, click.Command] = {}

    def walk(group: click.Command, prefix: str) -> None:
        if not isinstance(group, click.Group):
            return
        ctx = click.Context(group)
        for name in group.list_commands(ctx):
            cmd = group.get_command(ctx, name)
            out[f"{prefix}{name}"] = cmd
            walk(cmd, f"{prefix}{name} ")

    walk(root, "")
    return out


def options(cmd: click.Command) -> set[str]:
    names = {"help"}
    for p in cmd.params:
        for o in [*p.opts, *getattr(p, "secondary_opts", [])]:
            if o.startswith("--"):
                names.add(o[2:])
    return names


def check(text: str, cmds: dict[str, click.Command]) -> list[str]:
    every = set().union(*(options(c) for c in cmds.values()))
    wrong = []
    for m in FLAG.finditer(text):
        # the last program named before the flag, within the same clause ("rmspec init ..., or use --set"
        # names --set of no command in particular)
        before = re.split(r"[,;]\s", text[: m.start()])[-1]
        programs = "|".join(map(re.escape, ("rmspec", *OTHER_PROGRAMS)))
        prog = re.findall(r"(?<![\w/.-])(" + programs + r")((?: [a-z][a-z-]*){0,2})", before)
        if prog and prog[-1][0] != "rmspec":
            continue
        if prog:
            words = prog[-1][1].split()
            name = next((" ".join(words[:n]) for n in (2, 1) if " ".join(words[:n]) in cmds), None)
            if name is not None and m.group(1) not in options(cmds[name]):
                wrong.append(f"rmspec {name} has no --{m.group(1)}")
            continue
        if m.group(1) not in every:
            wrong.append(f"no rmspec command has --{m.group(1)}")
    return wrong


def test_the_checker_catches_a_made_up_flag():
    cmds = commands()
    assert check("pass the separator (--step-separater)", cmds) == ["no rmspec command has --step-separater"]
    assert check("then `rmspec plan SPEC --submit`", cmds) == ["rmspec plan has no --submit"]
    assert check("`hf upload REPO --private`", cmds) == []
    assert check("`rmspec run --resume RUN`", cmds) == []


def test_every_hint_names_a_flag_that_exists():
    cmds = commands()
    found = hints()
    assert len(found) > 20  # the walk sees the source's hints
    wrong = [f"{where}: {problem}  [{text!r}]" for where, text in found for problem in check(text, cmds)]
    assert not wrong, "\n".join(wrong)
