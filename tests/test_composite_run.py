"""`rmspec validate`, `plan`, `run` on a composite spec: nothing trained; the normalisation fitted on
the training rows (checked by hand), RUN/reward.yaml written, results.json with validation and
benchmark figures whose failure counts reconcile with the per-row files, and `rmspec score RUN`
giving the same rewards as the validation rows, each equal to the reward computed here by hand from
independently computed component values (regex, math-verify called directly, the penalty written out)."""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

import pytest

from helpers.ci import need

need("math_verify")


def repetition_penalty(text: str, n: int, max_penalty: float) -> float:
    """Written out here (Open-R1's rule), not imported from the component it checks."""
    words = text.lower().split()
    grams = [" ".join(words[i : i + n]) for i in range(len(words) - n + 1)]
    return (1.0 - len(set(grams)) / len(grams)) * max_penalty if grams else 0.0


def math_by_hand(reference: str, response: str) -> float | None:
    """math-verify called directly, the bare reference wrapped as verl wraps it; None: nothing parsed."""
    from math_verify import LatexExtractionConfig, parse, verify

    gold, answer = parse("\\boxed{" + reference + "}", [LatexExtractionConfig()]), parse(response)
    return float(verify(gold, answer)) if gold and answer else None


REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "rmspec" / "data" / "demo"
FIXTURES = Path(__file__).parent / "fixtures" / "benchmarks"
SPEC = """\
version: 1
name: math-composite
approach:
  kind: composite
  components:
    - {{name: fmt, kind: regex, pattern: '<think>.*?</think>\\s*<answer>.*?</answer>', weight: 0}}
    - {{name: math, kind: math_answer, weight: 1.0, timeout_s: 5}}
    - {{name: rep, kind: repetition, ngram: 2, weight: 0.5, normalize: zscore}}
  gates:
    - {{component: fmt, floor: -1.0}}
  on_failure: {{value: 0.0}}
data:
  train: {demo}/math_answers_train.jsonl
  validation: {demo}/math_answers_val.jsonl
eval:
  benchmarks:
    - {{kind: pairs, path: {fixtures}/pairs.jsonl}}
output:
  dir: {out}
"""


@pytest.fixture(scope="module")
def composite_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("crun")
    spec = folder / "composite.yaml"
    spec.write_text(SPEC.format(demo=DEMO, fixtures=FIXTURES, out=folder / "run"))
    return spec, folder / "run"


def test_validate_and_plan(cli, composite_run):
    spec, _ = composite_run
    result = cli("validate", spec)
    assert result.code == 0 and "composite: fmt: regex, math: math_answer, rep: repetition" in result.out
    result = cli("plan", spec, "--json")
    assert result.code == 0, result.err
    plan = json.loads(result.out)
    math = next(c for c in plan["components"] if c["name"] == "math")
    assert math["worst_rows_per_s"] == pytest.approx(2 / 5) and plan["fit_rows"].endswith("math_answers_train.jsonl")


def test_located_error(cli, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "version: 1\nname: x\napproach:\n  kind: composite\n  components:\n"
        "    - {name: m, kind: math_answer, timeout_s: -1}\n"
    )
    result = cli("validate", bad)
    assert result.code == 2 and "bad.yaml:6" in result.err and "timeout_s" in result.err


def test_run_writes_reward_and_results(cli, composite_run, tmp_path):
    spec, run = composite_run
    result = cli("run", spec)
    assert result.code == 0, result.err
    assert (run / "reward.yaml").is_file() and not (run / "model").exists()
    results = json.loads((run / "results.json").read_text())
    # the fit, by hand: zscore of the repetition penalty over the training responses
    train = [json.loads(x) for x in (DEMO / "math_answers_train.jsonl").read_text().splitlines()]
    penalties = [repetition_penalty(r["response"], 2, -1.0) for r in train]
    stats = results["composite"]["fit"]["stats"]["rep"]
    assert stats["mean"] == pytest.approx(statistics.fmean(penalties))
    assert stats["std"] == pytest.approx(statistics.pstdev(penalties))
    # validation: the counts reconcile with the per-row file
    validation = results["validation"]
    rows = [json.loads(x) for x in Path(validation["per_example_path"]).read_text().splitlines()]
    assert validation["rows"] == len(rows) == 60
    by_reason = {}
    for r in rows:
        for reason in r["failures"].values():
            by_reason[reason] = by_reason.get(reason, 0) + 1
    assert validation["failures"]["components"]["math"]["failed"] == by_reason
    assert validation["gates"]["fmt"] == sum(1 for r in rows if r["gate"] == "fmt") > 0
    assert validation["metrics"]["reward_mean"] == pytest.approx(statistics.fmean(r["reward"] for r in rows))
    assert set(validation["correlations"]) == {"fmt~math", "fmt~rep", "math~rep"}
    # the benchmark: scored, with its failures (pairs carry no reference: math is no_reference on every text)
    (entry,) = results["benchmarks"].values()
    assert entry["failures"]["components"]["math"]["failed"] == {"no_reference": 2 * entry["num_examples"]}
    # rmspec score RUN on the validation rows gives the validation rewards
    out = tmp_path / "scored.jsonl"
    result = cli("score", run, DEMO / "math_answers_val.jsonl", "--out", out)
    assert result.code == 0, result.err
    scored = [json.loads(x) for x in out.read_text().splitlines()]
    assert [s["reward"] for s in scored] == pytest.approx([r["reward"] for r in rows], abs=1e-9)
    # and each reward by hand from independent component values: the fmt gate (re.fullmatch, floor -1),
    # math (math-verify called directly; a failure takes its value 0.0), rep zscored with the fitted stats
    val = [json.loads(x) for x in (DEMO / "math_answers_val.jsonl").read_text().splitlines()]
    fmt_pattern = re.compile(r"<think>.*?</think>\s*<answer>.*?</answer>", re.DOTALL)
    for row, s in zip(val, scored, strict=True):
        fmt = float(fmt_pattern.fullmatch(row["response"]) is not None)
        math = math_by_hand(row["label"], row["response"])
        rep = repetition_penalty(row["response"], 2, -1.0)
        assert (s["fmt"], s["math"]) == (fmt, math) and s["rep"] == pytest.approx(rep)
        by_hand = -1.0 if fmt < 1.0 else 1.0 * (math or 0.0) + 0.5 * (rep - stats["mean"]) / stats["std"]
        assert s["reward"] == pytest.approx(by_hand, abs=1e-9), row
    result = cli("run", spec)
    assert result.code == 2 and "--overwrite" in result.err
    result = cli("report", run)  # the validation entry is a table of named metrics
    assert result.code == 0, result.err
    assert "reward_mean" in result.out and (run / "report.html").is_file()


def test_validate_and_plan_import_nothing_heavy(composite_run):
    import subprocess
    import sys

    spec, _ = composite_run
    code = (
        "import sys\n"
        "from rmspec.cli.main import cli\n"
        f"cli.main(['validate', {str(spec)!r}], standalone_mode=False)\n"
        f"cli.main(['plan', {str(spec)!r}, '--json'], standalone_mode=False)\n"
        "heavy = [m for m in ('torch', 'transformers', 'datasets', 'accelerate', 'math_verify', 'httpx') if m in sys.modules]\n"
        "print('HEAVY', heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "HEAVY []" in out.stdout
