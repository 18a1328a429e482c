"""`rmspec init --approach composite` (the registry's approach that trains nothing) goes through
`validate`, `plan` and `run` like every approach: offline on the shipped math demo set, with rule
components only; `run` trains nothing but exits 0 and writes results.json's validation with the
declared metric names, whose figures are recomputed here from the per-row file and the rules
themselves (re.fullmatch, the target-length formula on the packaged MiniLM tokenizer). The shipped
spec specs/composite_math.yaml runs the same way, with its length z-scored on the training rows.
"""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

import pytest

from helpers.ci import need
from helpers.runs import rmspec

need("math_verify")

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "rmspec" / "data" / "demo"
FORMAT = re.compile(r"<think>.*?</think>\s*<answer>.*?</answer>")


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _target_length(texts: list[str], target: int) -> list[float]:
    from transformers import AutoTokenizer

    from rmspec.packaged import resolve_model_path

    tok = AutoTokenizer.from_pretrained(resolve_model_path("sentence-transformers/all-MiniLM-L6-v2"))
    lengths = [len(tok(t, add_special_tokens=False)["input_ids"]) for t in texts]
    return [max(-1.0, -abs(n - target) / target) for n in lengths]


@pytest.mark.slow
def test_init_validate_plan_run_composite(tmp_path):
    from rmspec import documents

    declared = documents.get("composite")
    assert not declared.trains and declared.document is not None
    spec = tmp_path / "c.yaml"
    made = rmspec("init", "--approach", "composite", "-o", str(spec), "--name", "init-composite", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    sets = ["--set", f"output.dir={tmp_path / 'run'}"]
    valid = rmspec("validate", str(spec), *sets, cwd=tmp_path)
    assert (
        valid.returncode == 0 and "valid (composite: format: regex, math: math_answer, length: length)" in valid.stdout
    )
    plan = rmspec("plan", str(spec), "--json", *sets, cwd=tmp_path)
    assert plan.returncode == 0, plan.stderr
    assert [c["name"] for c in json.loads(plan.stdout)["components"]] == ["format", "math", "length"]
    run = rmspec("run", str(spec), *sets, cwd=tmp_path, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]

    out = tmp_path / "run"
    assert (out / "reward.yaml").is_file() and not (out / "model").exists()  # nothing trained
    results = json.loads((out / "results.json").read_text())
    validation = results["validation"]
    assert validation is not None and list(validation["metrics"]) == list(declared.validation_metrics)
    rows = _rows(out / "eval" / "validation.jsonl")
    inputs = _rows(DEMO / "math_answers_val.jsonl")
    assert len(rows) == len(inputs) == validation["num_examples"] > 0
    # each component's value again, independently: the format by re.fullmatch, the length by the formula
    assert [r["values"]["format"] for r in rows] == [float(bool(FORMAT.fullmatch(i["response"]))) for i in inputs]
    lengths = _target_length([i["response"] for i in inputs], 32)
    assert [r["values"]["length"] for r in rows] == pytest.approx(lengths, abs=1e-12)
    # the combination: the format gate's floor, else 1.0 x math + 0.2 x length
    for r in rows:
        v = r["values"]
        expected = -1.0 if v["format"] < 1.0 else 1.0 * v["math"] + 0.2 * v["length"]
        assert r["reward"] == pytest.approx(expected, abs=1e-12), r
    rewards = [r["reward"] for r in rows]
    metrics = validation["metrics"]
    assert metrics["reward_mean"] == pytest.approx(statistics.fmean(rewards), abs=1e-12)
    assert metrics["reward_std"] == pytest.approx(statistics.pstdev(rewards), abs=1e-12)
    assert metrics["rows_scored"] == len(rows) and metrics["rows_failed"] == 0
    assert any(r["values"]["math"] == 1.0 for r in rows) and any(r["values"]["format"] == 0.0 for r in rows)
    status = json.loads((out / "status.json").read_text())
    assert status["state"] == "completed" and status["metrics"] == metrics


def test_init_composite_refuses_data_and_model(tmp_path):
    spec = tmp_path / "c.yaml"
    for extra, said in ((["--data", "hh-rlhf"], "data.train"), (["--model", "m"], "no model")):
        made = rmspec("init", "--approach", "composite", "-o", str(spec), *extra, cwd=tmp_path)
        assert made.returncode == 2 and said in made.stderr and "Traceback" not in made.stderr, made.stderr
        assert not spec.exists()


def test_plan_out_and_run_submit_are_refused_for_a_composite(tmp_path):
    spec = tmp_path / "c.yaml"
    assert rmspec("init", "--approach", "composite", "-o", str(spec), cwd=tmp_path).returncode == 0
    plan = rmspec("plan", str(spec), "--out", str(tmp_path / "p.json"), cwd=tmp_path)
    assert plan.returncode == 2 and "trains nothing" in plan.stderr and not (tmp_path / "p.json").exists()
    run = rmspec("run", str(spec), "--submit", cwd=tmp_path)
    assert run.returncode == 2 and "trains nothing" in run.stderr and not (tmp_path / "runs").exists()


@pytest.mark.slow
def test_shipped_composite_spec_runs(tmp_path):
    """specs/composite_math.yaml: the length z-scored with the training rows' mean and std (by hand here)."""
    run = rmspec(
        "run", str(REPO / "specs" / "composite_math.yaml"), "--set", f"output.dir={tmp_path / 'run'}", cwd=tmp_path
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert results["validation"]["metrics"]["rows_scored"] == 60
    train = _target_length([r["response"] for r in _rows(DEMO / "math_answers_train.jsonl")], 32)
    stats = results["composite"]["fit"]["stats"]["length"]
    assert stats["mean"] == pytest.approx(statistics.fmean(train), abs=1e-12)
    assert stats["std"] == pytest.approx(statistics.pstdev(train), abs=1e-12) and stats["std"] > 0


def test_the_schema_takes_a_composite_spec_and_a_training_spec():
    """schemas/rmspec.schema.json: the composite document where approach.kind is composite (jsonschema
    itself, as an editor would), the training spec elsewhere; each reports its own errors."""
    import jsonschema
    import yaml

    schema = json.loads((REPO / "schemas" / "rmspec.schema.json").read_text())
    check = jsonschema.Draft202012Validator(schema)
    for path in [*(REPO / "specs").glob("*.yaml"), *(REPO / "templates").glob("*.yaml")]:
        assert list(check.iter_errors(yaml.safe_load(path.read_text()))) == [], path
    composite = yaml.safe_load((REPO / "specs" / "composite_math.yaml").read_text())
    composite["training"] = {"max_steps": 3}  # a composite has no training section
    assert [e.message for e in check.iter_errors(composite)] == [
        "Additional properties are not allowed ('training' was unexpected)"
    ]
    trained = yaml.safe_load((REPO / "specs" / "quickstart.yaml").read_text())
    del trained["model"]  # a training spec needs its model
    assert [e.message for e in check.iter_errors(trained)] == ["'model' is a required property"]


@pytest.mark.slow
def test_eval_of_a_composite_run_treats_it_as_a_run(tmp_path):
    """`rmspec eval RUN` on a composite run: the spec's benchmarks by default (a path relative to the
    spec, found from another folder), scored by RUN/reward.yaml into RUN/eval and RUN/results.json,
    whose validation stays; the figures equal those `rmspec run` wrote; --benchmark replaces them."""
    import shutil

    folder = tmp_path / "specs"
    (folder / "bench").mkdir(parents=True)
    shutil.copy(REPO / "tests" / "fixtures" / "benchmarks" / "pairs.jsonl", folder / "bench" / "pairs.jsonl")
    doc = (REPO / "specs" / "composite_math.yaml").read_text()
    doc = doc.replace("../rmspec/data/demo/", f"{DEMO}/").replace(
        "  benchmarks: []", "  benchmarks:\n    - {kind: pairs, path: bench/pairs.jsonl}"
    )
    (folder / "c.yaml").write_text(doc)
    run = tmp_path / "run"
    done = rmspec("run", str(folder / "c.yaml"), "--set", f"output.dir={run}", cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    first = json.loads((run / "results.json").read_text())
    (entry,) = first["benchmarks"].values()

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    again = rmspec("eval", str(run), "--json", cwd=elsewhere)
    assert again.returncode == 0, again.stderr[-3000:]
    results = json.loads((run / "results.json").read_text())
    assert results["validation"] == first["validation"] and results["composite"]["fit"] == first["composite"]["fit"]
    (evaluated,) = results["benchmarks"].values()
    assert evaluated["overall"] == entry["overall"] and evaluated["num_examples"] == entry["num_examples"] > 2
    assert evaluated["failures"] == entry["failures"]
    rows = _rows(Path(evaluated["per_example_path"]))
    assert Path(evaluated["per_example_path"]).parent == run / "eval" and len(rows) == evaluated["num_examples"]
    assert evaluated["overall"] == pytest.approx(sum(r["score_chosen"] > r["score_rejected"] for r in rows) / len(rows))

    limited = rmspec(
        "eval", str(run), "--benchmark", f"pairs={folder / 'bench' / 'pairs.jsonl'}", "--limit", "2", cwd=elsewhere
    )
    assert limited.returncode == 0, limited.stderr[-3000:]
    (only,) = json.loads((run / "results.json").read_text())["benchmarks"].values()
    assert only["num_examples"] == 2
    refused = rmspec("eval", str(run), "--out", str(tmp_path / "o"), cwd=elsewhere)
    assert refused.returncode == 2 and "composite run" in refused.stderr and not (tmp_path / "o").exists()


def test_interactive_init_asks_a_composite_for_no_data_or_model(monkeypatch):
    """On a terminal `init` asks for data and a model; a composite names both inside its spec."""
    from rich.prompt import Prompt

    from rmspec.cli.init_cmd import _ask

    asked = []

    def ask(question, **kwargs):
        asked.append(question)
        return "c.yaml"

    monkeypatch.setattr(Prompt, "ask", ask)
    assert _ask("composite", None, None, None) == ("composite", None, None, Path("c.yaml"))
    assert asked == ["Write the spec to"]
    asked.clear()
    _ask("bradley_terry", None, None, None)
    assert len(asked) == 3 and asked[0].startswith("Data")


@pytest.mark.parametrize("command", [["data", "preview"], ["data", "report"], ["sweep"]])
def test_training_spec_commands_refuse_a_composite_saying_what_to_run(cli, command):
    if command == ["sweep"]:
        need("optuna")
    result = cli(*command, REPO / "specs" / "composite_math.yaml")
    assert result.code == 2 and "trains nothing" in result.err and "rmspec validate|plan|run" in result.err
    assert "unknown key" not in result.err  # not the training spec's errors about keys a composite has


def test_the_composite_declaration_names_hooks_that_exist():
    """What the registry tests skip for an approach that trains nothing: its own hooks import and its
    document is what validate/plan/run find for the shipped spec (and not for a training spec)."""
    from rmspec import documents
    from rmspec.spec.composite_spec import CompositeSpec

    declared = documents.get("composite")
    for hook in ("planner", "plan_view", "runner", "evaluator", "exporter"):
        assert callable(declared.hook(hook)), hook
    assert (REPO / "templates" / declared.template).is_file() and declared.document is CompositeSpec
    assert documents.of_file(REPO / "specs" / "composite_math.yaml") is declared
    assert documents.of_file(REPO / "specs" / "quickstart.yaml") is documents.TRAINING
