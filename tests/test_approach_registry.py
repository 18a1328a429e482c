"""The approach registry (rmspec/approaches): one home per approach.

- Outside the registry, no code branches on the approach's kind (a grep, with a short list of
  allowed lines, each with its reason).
- The registry and the spec agree: every approach's section is one the spec accepts, and each
  declaration's facts are the ones the planner and the trainer read.
- A toy approach from outside rmspec (tests/helpers/toy_approach.py: one module, registered by one
  line) goes through validate, plan, a 2-step run, results.json, the report and `rmspec score`.
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

import pytest

from helpers.runs import rmspec, write_pairs

REPO = Path(__file__).resolve().parent.parent
NAMES = "bradley_terry|listwise|pointwise|generative|process|composite"
# What a branch on an approach's kind looks like: a comparison of `approach`, `approach_kind` or
# `approach.kind`, an approach's name compared or listed, a table keyed by approach names, an
# isinstance test against a section class.
PATTERNS = [
    re.compile(r"\bapproach(?:_kind)?(?:\.kind)?\s*(?:==|!=|\bnot in\b|\bin\b)"),
    re.compile(rf"(?:==|!=)\s*\"(?:{NAMES})\""),
    re.compile(rf"\"(?:{NAMES})\"\s*(?:==|!=)"),
    re.compile(rf"\bin\s*\([^)]*\"(?:{NAMES})\""),
    re.compile(rf"(?:^|[{{,])\s*\"(?:{NAMES})\"\s*:"),  # a key, also at the start of a line of a table
    re.compile(r"isinstance\([^)]*\b(?:BradleyTerry|Listwise|Pointwise|Generative|Process)\b"),
]
# The registry itself: the declarations, and the spec side of each approach (its section and rules).
REGISTRY = ("rmspec/approaches/", "rmspec/spec/approach.py", "rmspec/spec/approach_rules.py")
# (file, text of the line) -> why it may stay.
ROW_SHAPE = "the data stage branches on the rows (rmspec.data.records), named `approach` there: a new approach on the same rows goes through unchanged"
ALLOWED_FILES = {
    "rmspec/data/augment.py": ROW_SHAPE,
    "rmspec/data/filters.py": ROW_SHAPE,
    "rmspec/data/identity.py": ROW_SHAPE,
    "rmspec/data/presets.py": ROW_SHAPE,
    "rmspec/data/records.py": ROW_SHAPE,
    "rmspec/data/summarize.py": ROW_SHAPE,
    "rmspec/data/tokenize.py": ROW_SHAPE,
    "rmspec/plan/estimate.py": "the length estimate reads the rows' text columns (pairs, scored responses): row shapes",
    "rmspec/render/data_view.py": "data_report.json's `approach` is the row shape the data stage wrote (rmspec.data.summarize)",
}
ALLOWED_LINES = {
    (
        "rmspec/scaffold/__init__.py",
        "if approach not in APPROACHES:",
    ): "an unknown --approach refused: membership in the registry's names",
    (
        "rmspec/extras.py",
        '"process": ("sklearn",),',
    ): "the `process` extra of pyproject.toml (what it installs), not the approach",
}


def branches_on_the_kind() -> list[str]:
    found = []
    for path in sorted((REPO / "rmspec").rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        if rel.startswith(REGISTRY) or rel in ALLOWED_FILES:
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            code = line.split("#")[0]
            if any(p.search(code) for p in PATTERNS) and not any(
                rel == f and text in line for f, text in ALLOWED_LINES
            ):
                found.append(f"{rel}:{n}: {line.strip()}")
    return found


def test_no_code_outside_the_registry_branches_on_the_approach_kind():
    assert branches_on_the_kind() == []


def test_the_grep_finds_a_branch_on_the_kind(tmp_path, monkeypatch):
    """The scan is not vacuous: the branches this refactor removed are what it reports."""
    assert any(p.search('    if spec.approach.kind == "listwise":') for p in PATTERNS)
    assert any(p.search('    return {"generative": "lm", "process": "token"}.get(approach, "score")') for p in PATTERNS)
    assert any(p.search("    if approach_kind in ('bradley_terry', 'process'):".replace("'", '"')) for p in PATTERNS)
    assert not any(p.search('    if source.kind == "files":') for p in PATTERNS)
    # the tables H8's composite brought (export_cmd's EXPORTERS, keyed by approach; the CLI's own test)
    assert any(
        p.search('    "composite": ("rmspec.composite.export:export_composite", ("verl",), "file"),') for p in PATTERNS
    )
    assert any(p.search('    return isinstance(a, dict) and a.get("kind") == "composite"') for p in PATTERNS)
    for (file, text), _ in ALLOWED_LINES.items():  # each allowed line still exists (else drop it)
        assert text in (REPO / file).read_text(encoding="utf-8"), (file, text)


def test_every_registered_approach_is_a_section_the_spec_accepts():
    from rmspec import approaches
    from rmspec.spec.approach import SECTIONS
    from rmspec.spec.root import APPROACH_KINDS

    shipped = ("bradley_terry", "listwise", "pointwise", "generative", "process")
    assert approaches.names()[: len(shipped)] == shipped
    for name in approaches.names():
        declared = approaches.get(name)
        if not getattr(declared, "trains", True):  # an approach that trains nothing has its own document
            continue
        assert declared.section in SECTIONS and name in APPROACH_KINDS
        assert (REPO / "templates" / declared.template).is_file()
        assert declared.validation_metrics or name == "pointwise"  # pointwise: one pair per attribute
        for hook in ("trainer", "evaluation", "final_metrics"):
            assert callable(declared.hook(hook)), (name, hook)
    with pytest.raises(ValueError, match="unknown approach 'listwize'.*did you mean 'listwise'"):
        approaches.get("listwize")


def test_registering_a_toy_approach_extends_the_spec(tmp_path):
    from helpers.toy_approach import APPROACH, ToySection
    from rmspec import approaches
    from rmspec.errors import SpecError
    from rmspec.spec import load_spec

    spec = tmp_path / "toy.yaml"
    spec.write_text(_toy_spec(tmp_path, Path("model")))
    with pytest.raises(SpecError):  # not registered: the spec does not know the kind
        load_spec(spec)
    approaches.register(APPROACH)
    try:
        loaded = load_spec(spec)
        assert isinstance(loaded.spec.approach, ToySection) and loaded.spec.approach.temperature == 0.5
        assert approaches.of(loaded.spec) is APPROACH
    finally:
        approaches.unregister("toy")
    with pytest.raises(SpecError):
        load_spec(spec)


TOY = """version: 1
name: toy
model: {{name_or_path: {model}}}
data:
  source: {{kind: files, paths: [pairs.jsonl]}}
  mapping: {{preset: pairs}}
  filters: [{{kind: drop_identical}}]
  split: {{validation_fraction: 0.25, seed: 0}}
approach: {{kind: toy, temperature: 0.5}}
training: {{max_steps: 2, learning_rate: 3.0e-3, global_batch_size: 8, max_length: 64, logging_steps: 1, seed: 7}}
hardware: {{device: cpu}}
eval: {{validation: true, benchmarks: []}}
output: {{dir: {out}}}
"""


def _toy_spec(tmp: Path, model: Path) -> str:
    return TOY.format(model=model, out=tmp / "runs" / "toy")


def _install_entry_point(site: Path, name: str, module: str) -> Path:
    """What `pip install` of a package declaring `[project.entry-points."rmspec.approaches"] NAME = MODULE`
    leaves on sys.path: a dist-info folder whose entry_points.txt importlib.metadata reads."""
    info = site / f"{name}_plugin-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[rmspec.approaches]\n{name} = {module}\n")
    return site


def test_a_toy_approach_goes_from_validate_to_score(tmp_path, monkeypatch):
    """Registered as an installed plugin would be: through the rmspec.approaches entry-point group."""
    from helpers.models import build_model

    site = _install_entry_point(tmp_path / "site", "toy", "helpers.toy_approach")
    monkeypatch.delenv("RMSPEC_APPROACHES", raising=False)
    monkeypatch.setenv("PYTHONPATH", f"{REPO / 'tests'}{os.pathsep}{site}")
    model = build_model("llama", tmp_path / "model")
    write_pairs(tmp_path / "pairs.jsonl", 64)
    spec = tmp_path / "toy.yaml"
    spec.write_text(_toy_spec(tmp_path, model))
    run = tmp_path / "runs" / "toy"

    valid = rmspec("validate", str(spec), cwd=tmp_path)
    assert valid.returncode == 0 and "valid (toy" in valid.stdout, valid.stderr
    plan = rmspec("plan", str(spec), "--json", cwd=tmp_path)
    assert plan.returncode == 0, plan.stderr
    facts = json.loads(plan.stdout)
    assert facts["approach"] == "toy"
    done = rmspec("run", str(spec), cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    status = json.loads((run / "status.json").read_text())
    assert status["state"] == "completed" and status["step"] == 2
    config = json.loads((run / "model" / "config.json").read_text())
    assert config["rmspec"]["approach"] == "toy" and config["rmspec"]["temperature"] == 0.5
    results = json.loads((run / "results.json").read_text())
    validation = results["validation"]
    rows = [json.loads(line) for line in (run / "eval" / "validation.jsonl").read_text().splitlines()]
    # pair accuracy recomputed here from the per-example rows the saved model wrote
    assert validation["metrics"]["accuracy"] == pytest.approx(
        sum(r["score_chosen"] > r["score_rejected"] for r in rows) / len(rows)
    )
    assert len(rows) == validation["num_examples"] > 0
    html = (run / "report.html").read_text()
    assert "validation metric" in html and "accuracy" in html
    report = rmspec("report", str(run), cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    assert "Validation (the approach's metrics)" in report.stdout

    pairs = tmp_path / "score_me.jsonl"
    pairs.write_text(
        "".join(json.dumps(r) for r in [{"prompt": "w11", "chosen": "w1 w12", "rejected": "w2 w12"}]) + "\n"
    )
    scored = rmspec("score", str(run), str(pairs), "--out", str(tmp_path / "scored.jsonl"), cwd=tmp_path)
    assert scored.returncode == 0, scored.stderr
    row = json.loads((tmp_path / "scored.jsonl").read_text().splitlines()[0])
    assert {"reward_chosen", "reward_rejected"} <= set(row), row
    assert all(math.isfinite(row[k]) for k in ("reward_chosen", "reward_rejected"))
    # the same rewards from plain transformers on the saved model: the tiny tokenizer has no chat template,
    # so the text is rmspec's plain layout (rmspec.data.layout), closed by the tokenizer's EOS
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    saved = AutoModelForSequenceClassification.from_pretrained(run / "model").eval()
    tok = AutoTokenizer.from_pretrained(run / "model")
    assert tok.chat_template is None
    for side, response in (("chosen", "w1 w12"), ("rejected", "w2 w12")):
        ids = tok(f"User: w11\n\nAssistant: {response}")["input_ids"]
        assert ids[-1] == tok.eos_token_id
        with torch.no_grad():
            plain = float(saved(input_ids=torch.tensor([ids])).logits[0, 0])
        assert row[f"reward_{side}"] == pytest.approx(plain, abs=1e-5), side


def test_a_toy_approach_from_rmspec_approaches_is_accepted(tmp_path, monkeypatch):
    """RMSPEC_APPROACHES: the same module, importable but not installed, registers as well."""
    from helpers.models import build_model

    monkeypatch.setenv("RMSPEC_APPROACHES", "helpers.toy_approach")
    monkeypatch.setenv("PYTHONPATH", f"{REPO / 'tests'}")
    spec = tmp_path / "toy.yaml"
    spec.write_text(_toy_spec(tmp_path, build_model("llama", tmp_path / "model")))
    write_pairs(tmp_path / "pairs.jsonl", 8)
    valid = rmspec("validate", str(spec), cwd=tmp_path)
    assert valid.returncode == 0 and "valid (toy" in valid.stdout, valid.stderr
    monkeypatch.delenv("RMSPEC_APPROACHES")
    refused = rmspec("validate", str(spec), cwd=tmp_path)  # not registered: the spec does not know the kind
    assert refused.returncode == 2 and "toy" in refused.stderr and "bradley_terry" in refused.stderr


def test_console_shows_the_approach_metrics_and_no_empty_benchmark_table(tmp_path):
    """A listwise run with no benchmarks: its validation metrics in a table of their own, and no
    'Benchmarks (official scoring)' table with nothing in it."""
    from rich.console import Console

    from rmspec.render.report_view import print_results

    results = {
        "model": "m",
        "validation": {
            "name": "validation",
            "kind": "metrics",
            "metrics": {"pair_accuracy": 0.75, "kendall_tau": 0.5},
            "num_examples": 4,
            "notes": [],
        },
        "benchmarks": {},
        "notes": [],
    }
    console = Console(record=True, width=120)
    print_results(results, console)
    text = console.export_text()
    assert "pair_accuracy" in text and "0.7500" in text and "kendall_tau" in text and "0.5000" in text
    assert "Benchmarks (official scoring)" not in text
    results["benchmarks"] = {"pairs": {"kind": "pairs", "overall": 0.5, "num_examples": 2}}
    console = Console(record=True, width=120)
    print_results(results, console)
    assert "Benchmarks (official scoring)" in console.export_text()


def test_validate_refuses_a_filter_or_preset_for_other_rows_naming_the_usable_ones(tmp_path):
    """`init --approach listwise` used to write drop_identical, which only the data stage refused."""
    from rmspec.errors import SpecError
    from rmspec.spec import load_spec

    ranked = tmp_path / "ranked.jsonl"
    ranked.write_text(json.dumps({"prompt": "p", "responses": ["a", "b"], "scores": [1, 0]}) + "\n")
    spec = tmp_path / "s.yaml"
    spec.write_text(
        "version: 1\nname: s\nmodel: {name_or_path: m}\n"
        "data: {source: {kind: files, paths: [ranked.jsonl]}, mapping: {preset: ranked}, "
        "filters: [{kind: drop_empty}, {kind: drop_identical}]}\napproach: {kind: listwise}\n"
    )
    with pytest.raises(SpecError) as err:
        load_spec(spec)
    issues = [(i.path, i.message, i.hint) for i in err.value.issues]
    assert len(issues) == 1
    path, message, hint = issues[0]
    assert (
        path in ("data.filters.1.kind", "data.filters[1].kind")
        and "drop_identical" in message
        and "listwise" in message
    )
    assert hint is not None and "drop_empty" in hint and "dedup" in hint and "drop_identical" not in hint
    spec.write_text(spec.read_text().replace("preset: ranked", "preset: messages"))
    with pytest.raises(SpecError) as err:
        load_spec(spec)
    preset = [i for i in err.value.issues if i.path == "data.mapping.preset"]
    assert preset and "ranked" in (preset[0].hint or "")


def test_a_plugin_that_does_not_load_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("RMSPEC_APPROACHES", "no_such_plugin_module")
    spec = tmp_path / "s.yaml"
    spec.write_text("version: 1\n")
    done = rmspec("validate", str(spec), cwd=tmp_path)
    assert done.returncode == 2
    assert "RMSPEC_APPROACHES" in done.stderr and "no_such_plugin_module" in done.stderr
    assert "Traceback" not in done.stderr


def test_an_entry_point_that_does_not_load_is_a_clear_error(tmp_path, monkeypatch):
    site = _install_entry_point(tmp_path / "site", "broken", "no_such_plugin_module")
    monkeypatch.delenv("RMSPEC_APPROACHES", raising=False)
    monkeypatch.setenv("PYTHONPATH", str(site))
    spec = tmp_path / "s.yaml"
    spec.write_text("version: 1\n")
    done = rmspec("validate", str(spec), cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "entry point 'broken' of group rmspec.approaches" in done.stderr and "no_such_plugin_module" in done.stderr
    assert "uninstall the package" in done.stderr and "Traceback" not in done.stderr
