"""An approach's options are read inside the approach (issue 36): a module outside the approach's home
that reads one by getattr (`getattr(spec.approach, "method", None) == "grpo"`, "a PRM has a
step_separator") is sniffing what the approach should declare (rmspec.spec.approach.ApproachSection:
tie_rows, margin_table, score_attributes, step_suffix, trained_heads, reinforcement).

The names come from the registered sections themselves (their fields and the properties their classes
define), so an option added tomorrow is guarded too.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# The approaches' homes: their modules (section, options, rules, declaration), and the spec's side of
# every section (the base class and the readers their rules share).
HOMES = ("rmspec/approaches/", "rmspec/spec/approach.py", "rmspec/spec/approach_rules.py", "rmspec/spec/heads.py")
# getattr(<object>, "<name>" ...): the object (a spec's approach under any name) and the name read
GETATTR = re.compile(r"""getattr\(\s*([^,()]+(?:\([^()]*\))?[^,()]*),\s*["']([A-Za-z_]\w*)["']""")


def approach_option_names() -> set[str]:
    """Every option of a registered approach's section and every name its class adds (fields, properties,
    methods), less what any pydantic model or section has (kind, model_dump, ...), plus the facts every
    section declares (its properties: asked directly, never by getattr with a default)."""
    from rmspec import approaches
    from rmspec.spec.approach import ApproachSection

    common = set(dir(ApproachSection)) | {"kind"}
    declared = {n for n, v in vars(ApproachSection).items() if isinstance(v, property)}
    names: set[str] = set()
    for name in approaches.names():
        section = approaches.get(name).section
        names |= set(section.model_fields) | {n for n in dir(section) if not n.startswith("_")}
    return (names - common) | declared


def getattr_reads(options: set[str]) -> list[str]:
    found = []
    for path in sorted((REPO / "rmspec").rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        if rel.startswith(HOMES):
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            code = line.split("#")[0]
            for _, name in GETATTR.findall(code):
                if name in options:
                    found.append(f"{rel}:{n}: {line.strip()}")
    return found


def test_no_module_outside_an_approach_reads_its_options_by_getattr():
    assert getattr_reads(approach_option_names()) == []


def test_the_guard_sees_what_it_forbids():
    """Not vacuous: the option names include the sniffed ones, and the pattern finds each form removed."""
    options = approach_option_names()
    assert {"method", "step_separator", "ties", "attributes", "margin_table", "sft_weight", "ensemble"} <= options
    assert "kind" not in options and "model_dump" not in options
    sniffs = [
        'if getattr(approach, "method", None) != "grpo":',
        'step_separator=getattr(ctx.spec.approach, "step_separator", None),',
        'self.attributes = list(getattr(mapper_input, "attributes", []) or [])',
        "if getattr(section, 'threshold', 0.5) > 0:",
    ]
    for line in sniffs:
        assert GETATTR.search(line), line
        assert any(name in options for _, name in GETATTR.findall(line)), line
    assert GETATTR.findall('saved = dict(getattr(model.config, "rmspec", None) or {})')[0][1] not in options
    assert {"tie_rows", "step_suffix", "reinforcement"} <= options  # what sections declare instead
