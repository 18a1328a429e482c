"""Long-RewardBench through the registry, against its authors' rule written out here from the raw files.

The rule, from github.com/LCM-Lab/Long-RM at bbc90f5 (`evaluate/evaluating/longreward_bench/`:
`preprocess.py` LongRewardBenchDisRMPreprocess, `utils/prompt.py` extract_judgement(is_disrm=True),
`evaluator.py` evaluate), restated here without rmspec's code:
- per task file, `random.seed(42)`, shuffle the rows, then in that order shuffle each row's answers;
- rank the presented scores with a stable sort, highest first (a tie goes to the answer shown first);
- a row earns the fraction of answers ranked at their true rank;
- per task and per length over PairWise rows, Rank2-4 over BestOfN rows, AVG. over all: micro means.
The files are in the released shape (one JSON Lines file per task, named for it); texts made up.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from helpers.runs import rmspec

REPO = Path(__file__).resolve().parents[1]
SCORE = {"good": 3.0, "fine": 2.0, "tie": 2.0, "bad": 1.0, "worst": 0.0}


def reward(text: str) -> float:
    """The stand-in reward model: the score of the answer's first word (ties where two words share one)."""
    return SCORE[text.split()[0]]


class FirstWord:
    """Stands in for a RewardEngine."""

    kind = "reward"

    def score_groups(self, groups):
        return [[reward(r) for r in responses] for _, responses in groups]


def pair_row(k: int, chosen: str, rejected: str, length: str, subtype: str = "same") -> dict:
    """A PairWise row with every key of the card's features (the best-of-N ones absent)."""
    return {
        "id": k,
        "prompt_template": [
            {"role": "system", "content": "Answer from the document."},
            {"role": "user", "content": f"Document {k}: " + "lorem ipsum " * 20 + "\nQuestion?"},
        ],
        "question": "Question?",
        "source": "longbench",
        "chosen": f"{chosen} answer {k}",
        "rejected": f"{rejected} answer {k}",
        "subtask": "qa",
        "chosen_model": "gpt-4o",
        "rejected_model": "Qwen2.5-7B-Instruct",
        "ctx_length_for_length": length,
        "ctx_length_for_words": length,
        "length": 4000,
        "words_count": 3000,
        "task": "LongQA",
        "tasktype": "PairWise",
        "subtype": subtype,
    }


def bon_row(k: int, words: list[str], length: str, subtype: str) -> dict:
    """A BestOfN row: candidates best first; chosen/rejected null as a datasets export writes them."""
    return {
        "id": k,
        "prompt_template": [{"role": "user", "content": f"Long context {k} ...\nRank the answers."}],
        "question": "Rank the answers.",
        "source": "infinitebench",
        "chosen": None,
        "rejected": None,
        "subtask": "math",
        "ctx_length_for_length": length,
        "ctx_length_for_words": length,
        "length": 9000,
        "words_count": 7000,
        "task": "Math",
        "tasktype": "BestOfN",
        "subtype": subtype,
        "candidates_model": ["m"] * len(words),
        "candidates": [f"{w} candidate {k}.{i}" for i, w in enumerate(words)],
        "candidates_score": [float(len(words) - i) for i in range(len(words))],
    }


# LongQA: pairs across lengths, several ties (chosen and rejected score the same), same/diff subtypes.
LONGQA = [
    pair_row(0, "good", "bad", "4k"),
    pair_row(1, "bad", "good", "4k", "diff"),
    pair_row(2, "tie", "fine", "8k"),
    pair_row(3, "fine", "tie", "8k", "diff"),
    pair_row(4, "tie", "fine", "16k"),
    pair_row(5, "good", "fine", "32k"),
    pair_row(6, "fine", "tie", "64k"),
    pair_row(7, "worst", "good", "128k", "diff"),
    pair_row(8, "tie", "fine", "128k"),
]
# Math: best-of-N rows (partial credit, a tie among candidates) and two pairs.
MATH = [
    bon_row(0, ["good", "fine", "bad"], "8k", "2"),
    bon_row(1, ["good", "bad", "fine", "worst"], "16k", "3"),
    bon_row(2, ["fine", "tie", "bad", "worst"], "32k", "4"),
    bon_row(3, ["bad", "good", "fine"], "4k", "2"),
    {**pair_row(9, "good", "bad", "8k"), "task": "Math"},
    {**pair_row(10, "tie", "fine", "8k", "diff"), "task": "Math"},
]


def write_release(folder: Path, files: dict[str, list[dict]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for task, rows in files.items():
        (folder / f"{task}.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    return folder


# ----------------------------------------------------------------- the rule, restated


def official_orders(rows: list[dict]) -> dict[int, list[int]]:
    """preprocess.py, restated: the presented order of each row's answers (by row id)."""
    random.seed(42)
    data = [dict(r) for r in rows]
    random.shuffle(data)
    orders = {}
    for item in data:
        order = list(range(2 if item["tasktype"] != "BestOfN" else len(item["candidates"])))
        random.shuffle(order)
        orders[item["id"]] = order
    return orders


def official_result(answers: list[str], order: list[int]) -> float:
    """The answer at true rank i lands at predicted rank (answers scoring higher) + (answers scoring the
    same and shown before it); the row earns the share of answers whose predicted rank is i."""
    shown_at = {true: j for j, true in enumerate(order)}
    hits = 0
    for i, answer in enumerate(answers):
        higher = sum(reward(a) > reward(answer) for a in answers)
        tied_before = sum(reward(a) == reward(answer) and shown_at[t] < shown_at[i] for t, a in enumerate(answers))
        hits += higher + tied_before == i
    return hits / len(answers)


def official_figures(files: dict[str, list[dict]]) -> dict[str, float]:
    """evaluator.py's table (micro means; an empty group 0), from the raw rows."""
    rows = []
    for task, task_rows in files.items():
        orders = official_orders(task_rows)
        for r in task_rows:
            answers = r["candidates"] if r["tasktype"] == "BestOfN" else [r["chosen"], r["rejected"]]
            rows.append((task, r, official_result(answers, orders[r["id"]])))

    def avg(values):
        values = list(values)
        return sum(values) / max(len(values), 1)

    pair = [(t, r, v) for t, r, v in rows if r["tasktype"] == "PairWise"]
    bon = [(t, r, v) for t, r, v in rows if r["tasktype"] == "BestOfN"]
    table = {
        t: avg(v for tt, _, v in pair if tt == t) for t in ("LongQA", "Summ", "Safety", "ICL", "Cite", "Code", "Math")
    }
    table["Same."] = avg(v for _, r, v in pair if r["subtype"] == "same")
    table["Diff."] = avg(v for _, r, v in pair if r["subtype"] != "same")
    table["PairWise Avg."] = avg(v for _, _, v in pair)
    for k in ("2", "3", "4"):
        table[f"Rank{k}"] = avg(v for _, r, v in bon if r["subtype"] == k)
    table["Rank Avg,"] = avg(v for _, _, v in bon)
    for n in ("4k", "8k", "16k", "32k", "64k", "128k"):
        table[n] = avg(v for _, r, v in pair if r["ctx_length_for_length"] == n)
    table["AVG."] = avg(v for _, _, v in rows)
    return table


def per_row_results(files: dict[str, list[dict]]) -> dict[str, float]:
    out = {}
    for task, task_rows in files.items():
        orders = official_orders(task_rows)
        for r in task_rows:
            answers = r["candidates"] if r["tasktype"] == "BestOfN" else [r["chosen"], r["rejected"]]
            out[f"{task}-{r['id']}"] = official_result(answers, orders[r["id"]])
    return out


def evaluate(engine, requests, out: Path) -> dict:
    from rmspec.evaluate import results as res
    from rmspec.evaluate.benchmark_runs import evaluate_benchmarks

    out.mkdir(parents=True, exist_ok=True)
    return evaluate_benchmarks(engine, requests, out, res.new_results(str(out / "model"), "lrb-test"))


# ----------------------------------------------------------------- tests


def test_the_replayed_shuffles_are_the_official_ones(tmp_path):
    from rmspec.evaluate import registry

    files = {"LongQA": LONGQA, "Math": MATH}
    data = registry.get("long_rewardbench").load(str(write_release(tmp_path / "LongRewardBench", files)))
    expected = {f"{task}-{i}": order for task, rows in files.items() for i, order in official_orders(rows).items()}
    assert {e.id: e.meta["shuffled_order"] for e in data.examples} == expected
    assert [e.subset for e in data.examples] == ["LongQA"] * 9 + ["Math"] * 6  # the official task order
    assert [len(e.responses) for e in data.examples][9:] == [3, 4, 4, 3, 2, 2]


def test_figures_equal_the_official_rule_with_ties_and_several_candidates(tmp_path):
    from rmspec.evaluate.benchmark_runs import BenchmarkRequest
    from rmspec.evaluate.results import read_jsonl
    from rmspec.evaluate.scoring_rules import score_rows

    files = {"LongQA": LONGQA, "Math": MATH}
    folder = write_release(tmp_path / "LongRewardBench", files)
    results = evaluate(FirstWord(), [BenchmarkRequest("long_rewardbench", str(folder))], tmp_path / "eval")
    entry = results["benchmarks"]["long_rewardbench"]
    table = official_figures(files)
    assert entry["details"]["official"] == pytest.approx(table)
    assert list(entry["details"]["official"]) == list(table)  # results.csv's rows, in its order
    assert entry["overall"] == pytest.approx(table["AVG."])
    lengths = ("4k", "8k", "16k", "32k", "64k", "128k")
    assert entry["sections"] == pytest.approx({n: table[n] for n in lengths})
    assert entry["subsets"] == pytest.approx(
        {
            "LongQA": table["LongQA"],
            "Math": table["Math"],
            "Rank2": table["Rank2"],
            "Rank3": table["Rank3"],
            "Rank4": table["Rank4"],
        }
    )
    assert entry["counts"] == {"LongQA": 9, "Math": 2, "Rank2": 2, "Rank3": 1, "Rank4": 1}
    assert entry["num_examples"] == 15 and entry["scorer"] == "reward"

    # Per row: the official result; ties went both ways (by the order shown), partial best-of-N credit.
    rows = {r["id"]: r for r in read_jsonl(Path(entry["per_example_path"]))}
    expected = per_row_results(files)
    assert {i: r["result"] for i, r in rows.items()} == pytest.approx(expected)
    ties = [f"LongQA-{k}" for k in (2, 3, 4, 6, 8)] + ["Math-10"]
    assert {rows[t]["result"] for t in ties} == {0.0, 1.0}
    assert [rows[t]["result"] == 1.0 for t in ties] == [rows[t]["shuffled_order"][0] == 0 for t in ties]
    assert 0 < rows["Math-1"]["result"] < 1 or 0 < rows["Math-2"]["result"] < 1
    # The official result file's fields: the presented order and the scores in it.
    first = rows["Math-1"]
    assert first["output"] == [first["scores"][i] for i in first["shuffled_order"]]
    assert first["scores"] == [3.0, 1.0, 2.0, 0.0] and first["tasktype"] == "BestOfN" and first["subtype"] == "3"
    assert (rows["LongQA-0"]["score_chosen"], rows["LongQA-0"]["score_rejected"]) == (3.0, 1.0)
    assert score_rows("long_rewardbench", list(rows.values())).overall == pytest.approx(table["AVG."])
    # Diagnostics read pairs: one per PairWise row, the best candidate against each other one.
    assert entry["diagnostics"]["num_pairs"] == 11 + (2 + 3 + 3 + 2)


def test_a_single_task_file_and_the_notes(tmp_path):
    from rmspec.evaluate import registry

    kind = registry.get("long_rewardbench")
    folder = write_release(tmp_path / "LRB", {"Math": MATH})
    data = kind.load(str(folder / "Math.jsonl"))
    rows = kind.per_example_rows(data, FirstWord().score_groups([(e.prompt, e.responses) for e in data.examples]))
    figures = kind.score(rows)
    assert figures.overall == pytest.approx(official_figures({"Math": MATH})["AVG."])
    assert any("tasks absent here: LongQA, Summ, Safety, ICL, Cite, Code" in n for n in figures.notes)
    # A stray file in the folder is named, not read; the limit applies after the official shuffles.
    (folder / "notes.jsonl").write_text("{}\n")
    data = kind.load(str(folder), limit=2)
    assert len(data.examples) == 2 and data.notes == ["files other than the task files were not read: notes.jsonl"]
    assert data.examples[1].meta["shuffled_order"] == official_orders(MATH)[1]


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({**pair_row(0, "good", "bad", "4k"), "rejected": None}, "LongQA.jsonl:2: field 'rejected': expected a string"),
        (
            {**pair_row(0, "good", "bad", "4k"), "tasktype": "Pointwise"},
            "field 'tasktype': expected 'PairWise' or 'BestOfN'",
        ),
        ({**bon_row(0, ["good"], "4k", "2"), "task": "LongQA"}, "a best-of-N row needs at least 2 candidates, got 1"),
        ({**pair_row(0, "good", "bad", "4k"), "prompt_template": [{"role": "user"}]}, "prompt_template[0]"),
        (
            {k: v for k, v in pair_row(0, "good", "bad", "4k").items() if k != "ctx_length_for_length"},
            "field 'ctx_length_for_length': missing",
        ),
    ],
)
def test_a_bad_row_stops_with_its_line(tmp_path, row, message):
    from rmspec.errors import DataError
    from rmspec.evaluate import registry

    folder = write_release(tmp_path / "LRB", {"LongQA": [LONGQA[0], row]})
    with pytest.raises(DataError) as caught:
        registry.get("long_rewardbench").load(str(folder))
    assert message in caught.value.message and caught.value.exit_code == 2
    assert "LongQA.jsonl" in caught.value.hint


def test_the_hub_copy_offline_says_how_to_get_the_files(monkeypatch):
    from rmspec.errors import DataError
    from rmspec.evaluate import registry

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(DataError) as caught:
        registry.get("long_rewardbench").load(None)
    assert "cannot download LCM-Lab/LongRewardBench" in caught.value.message
    assert "hf download LCM-Lab/LongRewardBench" in caught.value.hint


def spec_with_benchmarks(folder: Path, benchmarks: str) -> Path:
    text = (REPO / "specs" / "quickstart.yaml").read_text()
    text = text.replace("../rmspec/data/demo/", f"{REPO}/rmspec/data/demo/")
    head, _, _ = text.partition("\neval:\n")
    path = folder / "spec.yaml"
    path.write_text(head + "\neval:\n  benchmarks:\n" + benchmarks)
    return path


@pytest.mark.parametrize("command", ["validate", "plan"])
def test_bad_benchmark_files_stop_validate_and_plan(tmp_path, command):
    """Before the run: a folder without task files, a file not named for its task, a task file with a
    line that does not parse, a task file without the columns; a good folder passes."""
    write_release(tmp_path / "good", {"LongQA": LONGQA})
    (tmp_path / "empty").mkdir()
    write_release(tmp_path / "renamed", {"longqa_small": LONGQA[:2]})
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "Summ.jsonl").write_text(json.dumps(LONGQA[0]) + "\n{not json\n")
    write_release(tmp_path / "narrow", {"Cite": [{"prompt_template": [], "chosen": "a", "rejected": "b"}]})
    spec = spec_with_benchmarks(
        tmp_path,
        "".join(
            f"    - {{kind: long_rewardbench, path: {p}, name: lrb-{i}}}\n"
            for i, p in enumerate(["good", "empty", "renamed/longqa_small.jsonl", "broken", "narrow"])
        ),
    )
    done = rmspec(command, str(spec), cwd=tmp_path)
    out = done.stdout + done.stderr
    assert done.returncode == 2, out
    assert "4 problems in the spec" in out and "Traceback" not in out
    assert "holds none of the task files LongQA, Summ" in out
    assert "the file's name is not a task" in out
    assert "Summ.jsonl:2:" in out
    assert "Cite.jsonl lacks column(s) tasktype, ctx_length_for_length" in out


def test_the_hub_default_passes_validate(tmp_path):
    """No path: the hub copy, read by the evaluation (as rewardbench's); validate has nothing to check."""
    from rmspec.evaluate.file_check import benchmark_issues
    from rmspec.spec import load_spec

    spec = spec_with_benchmarks(tmp_path, "    - kind: long_rewardbench\n")
    assert benchmark_issues(load_spec(str(spec))) == []
