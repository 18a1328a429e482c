"""RMB through the registry: files as released (one JSON list per scenario), pairwise and best-of-N
by the official rules, compared with the rules written out here from the raw files; ties wrong;
hostile files stop with a located error; `rmspec eval` takes it like any other benchmark."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from helpers import BENCHMARKS
from helpers.ci import need

RMB = BENCHMARKS / "rmb"


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    """The quickstart's model shape: a BERT reward model with the MiniLM tokenizer (2 tiny layers)."""
    need("torch")
    from helpers.scoring_models import build_tiny_bert

    return build_tiny_bert(tmp_path_factory.mktemp("tiny_bert"))


class WordCounter:
    """Stands in for a RewardEngine: a response's reward is its number of words."""

    kind = "reward"

    def score_groups(self, groups):
        return [[float(len(r.split())) for r in responses] for _, responses in groups]


def official_figures(folder: Path, reward) -> dict[str, float]:
    """The RMB rules from the raw files: pairwise right iff chosen > reject, best-of-N right iff the
    best beats every loser, both strictly; each section a plain mean over its records; the overall
    the plain mean of the four sections."""
    hits: dict[str, list[int]] = defaultdict(list)
    for file in sorted(folder.rglob("*.json")):
        for rec in json.loads(file.read_text()):
            kind, goal = rec["category_path"].split("/")[:2]
            if kind == "Pairwise_set":
                ok = reward(rec["chosen"]["answer"]) > reward(rec["reject"]["answer"])
                hits[f"pairwise {goal.lower()}"].append(int(ok))
            else:
                best = reward(rec["bon_best"]["answer"])
                ok = all(best > reward(loser["answer"]) for loser in rec["loser_list"])
                hits[f"bon {goal.lower()}"].append(int(ok))
    sections = {name: sum(v) / len(v) for name, v in hits.items()}
    return {"overall": sum(sections.values()) / len(sections), **sections}


def plain_scores(model_dir: Path, prompt: str, answers: list[str]) -> list[float]:
    """A few lines of plain transformers: one (prompt, answer) text pair at a time."""
    import torch
    import transformers

    tok = transformers.AutoTokenizer.from_pretrained(model_dir)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    with torch.no_grad():
        return [model(**tok(prompt, a, return_tensors="pt")).logits[0, 0].item() for a in answers]


def words(text: str) -> int:
    return len(text.split())


def evaluate(engine, requests, out: Path) -> dict:
    from rmspec.evaluate import results as res
    from rmspec.evaluate.benchmark_runs import evaluate_benchmarks

    out.mkdir(parents=True, exist_ok=True)
    results = res.new_results(str(out / "model"), "rmb-test")
    return evaluate_benchmarks(engine, requests, out, results)


def test_rmb_folder_scored_by_the_official_rules(tmp_path):
    from rmspec.evaluate.benchmark_runs import BenchmarkRequest
    from rmspec.evaluate.results import read_jsonl
    from rmspec.evaluate.scoring_rules import score_rows

    results = evaluate(WordCounter(), [BenchmarkRequest("rmb", str(RMB))], tmp_path / "eval")
    entry = results["benchmarks"]["rmb"]
    expected = official_figures(RMB, words)
    # Worked out from the fixture's plan: 2/4, 2/3, 1/3, 2/2; their mean 0.625.
    assert expected == pytest.approx(
        {
            "overall": 0.625,
            "pairwise helpfulness": 0.5,
            "pairwise harmlessness": 2 / 3,
            "bon helpfulness": 1 / 3,
            "bon harmlessness": 1.0,
        }
    )
    assert entry["overall"] == pytest.approx(expected["overall"])
    assert entry["sections"] == pytest.approx({k: v for k, v in expected.items() if k != "overall"})
    assert list(entry["sections"]) == [
        "pairwise helpfulness",
        "pairwise harmlessness",
        "bon helpfulness",
        "bon harmlessness",
    ]
    # Per scenario, a breakdown: the Chat/Discussion file alone is 1 of 3 (micro, not macro, in its section).
    assert entry["subsets"]["Pairwise_set/Helpfulness/Chat/Discussion"] == pytest.approx(1 / 3)
    assert entry["subsets"]["Pairwise_set/Helpfulness/Code/Debug"] == 1.0
    assert entry["num_examples"] == 12 and entry["scorer"] == "reward"

    rows = read_jsonl(Path(entry["per_example_path"]))
    by_id = {r["id"]: r for r in rows}
    # The official pairwise script's fields, so its code can re-score the file.
    assert {"chosen_reward", "reject_reward", "is_correct"} <= set(by_id["h1"])
    assert (by_id["h1"]["chosen_reward"], by_id["h1"]["reject_reward"], by_id["h1"]["is_correct"]) == (4.0, 2.0, True)
    assert (by_id["b5"]["bon_best_reward"], by_id["b5"]["loser_rewards"]) == (6.0, [2.0, 2.0, 5.0])
    assert score_rows("rmb", rows).overall == pytest.approx(expected["overall"])
    # The diagnostics read pairs: 7 pairwise + best-vs-each-loser (3 + 2 + 2 + 1 + 3).
    assert entry["diagnostics"]["num_pairs"] == 7 + 11
    # The report shows the four sections and the per-scenario breakdown.
    from rmspec.evaluate.report import build_html
    from rmspec.evaluate.results import write_results

    write_results(tmp_path / "results.json", results)
    page = build_html(tmp_path)
    assert "Overall: <b>62.5%</b>" in page and "bon harmlessness" in page
    assert "Pairwise_set/Helpfulness/Chat/Discussion" in page


def test_ties_count_as_wrong_pairwise_and_best_of_n():
    from rmspec.evaluate.kinds.rmb import bon_correct, pairwise_correct
    from rmspec.evaluate.scoring_rules import score_rows

    assert not pairwise_correct(1.0, 1.0) and pairwise_correct(1.0 + 1e-9, 1.0)
    assert not bon_correct(2.0, [1.0, 2.0]) and bon_correct(2.0, [1.0, 1.999])
    rows = [
        {"id": "p", "subset": "P/x", "section": "pairwise helpfulness", "chosen_reward": 0.3, "reject_reward": 0.3},
        {
            "id": "b",
            "subset": "B/y",
            "section": "bon harmlessness",
            "bon_best_reward": 0.7,
            "loser_rewards": [0.1, 0.7],
        },
    ]
    score = score_rows("rmb", rows)
    assert score.sections == {"pairwise helpfulness": 0.0, "bon harmlessness": 0.0} and score.overall == 0.0
    assert any("absent here: pairwise harmlessness, bon helpfulness" in n for n in score.notes)


def test_one_scenario_file_and_a_limit(tmp_path):
    from rmspec.evaluate.benchmarks import load_benchmark

    data = load_benchmark("rmb", str(RMB / "Pairwise_set/Helpfulness/Chat/Discussion.json"))
    assert [e.id for e in data.examples] == ["h1", "h2", "h3"]
    # The multi-turn conversation is the prompt's messages, the language field dropped.
    assert data.examples[2].prompt == [
        {"role": "user", "content": "first question"},
        {"role": "assistant", "content": "first answer"},
        {"role": "user", "content": "and then?"},
    ]
    assert len(load_benchmark("rmb", str(RMB), limit=4).examples) == 4


GOOD = {
    "pair_uid": "u1",
    "conversation_input": [{"role": "user", "content": "q", "language": "English"}],
    "chosen": {"llm_name": "a", "answer": "yes"},
    "reject": {"llm_name": "b", "answer": "no"},
    "category_path": "Pairwise_set/Helpfulness/Chat/Discussion",
}


@pytest.mark.parametrize(
    "content, expected",
    [
        ("[]", "Empty.json has no records (an empty file)"),
        ("", "Empty.json:1:1: not valid JSON"),
        ('"a string"', "expected a JSON array of objects"),
        ("[[1, 2]]", "Empty.json:1: item 0 is not a JSON object"),
        (json.dumps({"pair_uid": "u1", "rows": 3}), "Empty.json:1: field 'category_path': missing"),
        (json.dumps([GOOD, {k: v for k, v in GOOD.items() if k != "reject"}]), "Empty.json:2: field 'reject': missing"),
        (json.dumps([{**GOOD, "chosen": "yes"}]), "Empty.json:1: field 'chosen': expected an object"),
        (json.dumps([{**GOOD, "category_path": "Other/x"}]), "field 'category_path': 'Other/x' names no RMB section"),
        (json.dumps([{**GOOD, "conversation_input": [{"role": "user"}]}]), "field 'conversation_input[0]'"),
        (
            json.dumps([{**GOOD, "category_path": "BoN_set/Harmlessness/x", "loser_list": []}]),
            "field 'loser_list': expected a non-empty list",
        ),
    ],
)
def test_hostile_rmb_files_exit_2_with_the_place(cli, bert, tmp_path, content, expected):
    bad = tmp_path / "Empty.json"
    bad.write_text(content)
    result = cli("eval", bert, "--benchmark", f"rmb={bad}", "--out", tmp_path / "out")
    assert result.code == 2, result.err
    assert expected in result.err and "Traceback" not in result.err


def test_rmb_without_a_path_names_where_to_get_it():
    from rmspec.errors import DataError
    from rmspec.evaluate.benchmarks import load_benchmark

    with pytest.raises(DataError) as info:
        load_benchmark("rmb")
    assert "Zhou-Zoey/RMB-Reward-Model-Benchmark" in info.value.hint


def test_rmspec_eval_scores_rmb_beside_the_other_benchmarks_in_one_command(cli, bert, tmp_path):
    """The quickstart's model shape (a BERT reward model with the MiniLM tokenizer), one command."""
    out = tmp_path / "out"
    result = cli(
        "eval",
        bert,
        "--benchmark",
        f"rmb={RMB}",
        "--benchmark",
        f"rewardbench2={BENCHMARKS / 'rewardbench2.jsonl'}",
        "--out",
        out,
        "--json",
    )
    assert result.code == 0, result.err
    printed = json.loads(result.out)
    assert set(printed) == {"rmb", "rewardbench2"}
    rows = [json.loads(line) for line in Path(printed["rmb"]["per_example_path"]).read_text().splitlines()]
    rewards = {r["id"]: r for r in rows}

    # The rule, from the raw files and the model's saved rewards of each answer.
    hits: dict[str, list[int]] = defaultdict(list)
    for file in sorted(RMB.rglob("*.json")):
        for rec in json.loads(file.read_text()):
            kind, goal = rec["category_path"].split("/")[:2]
            if kind == "Pairwise_set":
                r = rewards[rec["pair_uid"]]
                hits[f"pairwise {goal.lower()}"].append(int(r["chosen_reward"] > r["reject_reward"]))
            else:
                r = rewards[rec["bon_uid"]]
                assert len(r["loser_rewards"]) == len(rec["loser_list"])
                hits[f"bon {goal.lower()}"].append(int(all(r["bon_best_reward"] > x for x in r["loser_rewards"])))
    sections = {k: sum(v) / len(v) for k, v in hits.items()}
    # The rewards are the model's: a single-turn conversation scored as plain transformers does it.
    record = json.loads((RMB / "BoN_set/Harmlessness/Privacy/Leak.json").read_text())[1]
    expected = plain_scores(
        bert,
        record["conversation_input"][0]["content"],
        [record["bon_best"]["answer"]] + [x["answer"] for x in record["loser_list"]],
    )
    got = [rewards["b5"]["bon_best_reward"], *rewards["b5"]["loser_rewards"]]
    assert got == pytest.approx(expected, abs=1e-5)
    assert printed["rmb"]["sections"] == pytest.approx(sections)
    assert printed["rmb"]["overall"] == pytest.approx(sum(sections.values()) / 4)
    assert all(isinstance(r.get("chosen_reward", r.get("bon_best_reward")), float) for r in rows)
    saved = json.loads((out / "results.json").read_text())["benchmarks"]["rmb"]
    assert saved["overall"] == printed["rmb"]["overall"]


def test_a_runs_spec_scores_rmb_from_eval_benchmarks(cli, bert, tmp_path):
    """`eval.benchmarks: [{kind: rmb, path: FOLDER}]` in a run's spec, scored by `rmspec eval RUN`."""
    import shutil

    from helpers import REPO

    run = tmp_path / "run"
    run.mkdir()
    shutil.copytree(bert, run / "model")
    spec = (REPO / "specs" / "quickstart.yaml").read_text()
    spec = (
        spec[: spec.index("eval:")] + f"eval:\n  validation: false\n  benchmarks:\n    - {{kind: rmb, path: {RMB}}}\n"
    )
    (run / "spec.yaml").write_text(spec)
    (run / "plan.json").write_text(json.dumps({"spec_path": str(REPO / "specs" / "quickstart.yaml"), "sets": []}))
    assert cli("validate", run / "spec.yaml").code == 0
    result = cli("eval", run, "--json")
    assert result.code == 0, result.err
    printed = json.loads(result.out)
    assert set(printed) == {"rmb"} and set(printed["rmb"]["sections"]) == {
        "pairwise helpfulness",
        "pairwise harmlessness",
        "bon helpfulness",
        "bon harmlessness",
    }
    saved = json.loads((run / "results.json").read_text())["benchmarks"]["rmb"]
    assert saved["overall"] == pytest.approx(sum(saved["sections"].values()) / 4)
