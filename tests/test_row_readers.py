"""Evaluation's row readers (rmspec/evaluate/row_readers.py): one reader per ScoredAs, the one place
that tells a reward model's scores, a judge's verdicts and a process model's steps apart.

- Each ScoredAs has exactly one reader; a stored `scorer` (the enum or its value) finds it; without
  one, the rows say which (a kind only a process model scores, a verdict, else rewards).
- Each reader's diagnostics, figures, report pairs and notes are what evaluation wrote before the
  readers (values worked out by hand on small rows).
- scripts/check_scorer_kinds.py reports a comparison with a ScoredAs outside the home, and finds
  none in this checkout.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace

import pytest

from rmspec.evaluate import registry, row_readers
from rmspec.evaluate.diagnostics import pair_diagnostics
from rmspec.spec.benchmarks import JUDGE, PROCESS, REWARD, ScoredAs

REPO = Path(__file__).resolve().parent.parent

REWARD_ROWS = [
    {"id": "0", "subset": "x", "score_chosen": 1.0, "score_rejected": 0.0, "len_chosen": 10, "len_rejected": 5},
    {"id": "1", "subset": "y", "score_chosen": 0.0, "score_rejected": 0.5, "len_chosen": 3, "len_rejected": 8},
]
# 0: right in both orders; 1: wrong in both; 2: unparsed, then right
JUDGE_ROWS = [
    {"id": str(i), "subset": "x", "source": s, "label": lab, "verdict": v, "verdict_swapped": w}
    for i, (s, lab, v, w) in enumerate(
        zip(
            ["mmlu-pro-law", "livecodebench", "livecodebench"], ["A>B", "B>A", "A>B"], ["A", "A", None], ["B", "B", "B"]
        )
    )
]
# P(correct) per step; steps 0.2 and the first of math-1 (0.7) are wrong
STEP_ROWS = [
    {"id": "gsm8k-0", "subset": "gsm8k", "label": -1, "prediction": -1, "step_scores": [0.9], "step_labels": [1]},
    {"id": "gsm8k-1", "subset": "gsm8k", "label": 1, "prediction": 1, "step_scores": [0.9, 0.2], "step_labels": [1, 0]},
    {"id": "math-1", "subset": "math", "label": 0, "prediction": -1, "step_scores": [0.7, 0.6], "step_labels": [0, 1]},
]
for _row in STEP_ROWS:
    _row["threshold"] = 0.5


def test_each_scored_as_has_exactly_one_reader():
    assert set(row_readers.READERS) == set(ScoredAs)
    assert len({type(r) for r in row_readers.READERS.values()}) == len(ScoredAs)
    for scored_as, reader in row_readers.READERS.items():
        assert reader.scored_as is scored_as
        assert row_readers.of(scored_as) is reader and row_readers.of(scored_as.value) is reader
    assert [s for s, r in row_readers.READERS.items() if r.steps] == [PROCESS]
    with pytest.raises(ValueError):
        row_readers.of("pointwise")  # a scorer kind, not a way of reading rows


@pytest.mark.parametrize(
    ("kind", "rows", "scorer", "expected"),
    [
        ("processbench", [], None, PROCESS),
        ("process_validation", STEP_ROWS, None, PROCESS),  # an entry kind: scored as processbench
        ("prmbench", STEP_ROWS, None, PROCESS),
        ("judgebench", JUDGE_ROWS, None, JUDGE),
        ("validation", JUDGE_ROWS, None, JUDGE),
        ("pairs", REWARD_ROWS, None, REWARD),
        ("pairs", [], None, REWARD),
        ("judgebench", JUDGE_ROWS, "reward", REWARD),  # a recorded scorer wins over the rows
        ("pairs", REWARD_ROWS, JUDGE, JUDGE),
    ],
)
def test_read_as_the_recorded_scorer_else_the_rows(kind, rows, scorer, expected):
    assert row_readers.read_as(kind, rows, scorer).scored_as is expected


def test_step_reader_diagnostics_are_the_kinds_step_diagnostics():
    diag = row_readers.of(PROCESS).diagnostics("processbench", STEP_ROWS)
    assert diag == registry.get("processbench").step_diagnostics(STEP_ROWS)
    assert diag["step_accuracy"] == pytest.approx(4 / 5)
    assert diag["auroc"] == pytest.approx(5 / 6)  # correct steps 0.9, 0.9, 0.6 against wrong 0.2, 0.7
    assert diag["first_error_accuracy"] == pytest.approx(2 / 3)
    assert row_readers.of(PROCESS).diagnostics("processbench", []) == {}


def test_verdict_reader_diagnostics_and_figures():
    reader = row_readers.of(JUDGE)
    verdicts = reader.diagnostics("judgebench", JUDGE_ROWS)["verdicts"]
    assert verdicts["n_unparsed"] == 1 and verdicts["consistency"] == 1.0
    assert verdicts["position_bias_A"] == pytest.approx(2 / 5)
    assert verdicts["accuracy_first_order"] == pytest.approx(1 / 3)
    assert verdicts["accuracy_swapped_order"] == pytest.approx(2 / 3)
    score = reader.score("judgebench", JUDGE_ROWS)
    assert score.overall == pytest.approx(2 / 3) and score.sections == {"knowledge": 1.0, "coding": 0.5}
    assert reader.pairs(registry.get("judgebench"), JUDGE_ROWS) == []
    assert reader.diagnostics("judgebench", []) == {}


def test_reward_reader_reads_pairs_and_keeps_the_entry_kind():
    reader = row_readers.of(REWARD)
    assert reader.diagnostics("pairs", REWARD_ROWS) == pair_diagnostics("pairs", REWARD_ROWS)
    assert reader.diagnostics("pairs", REWARD_ROWS)["pair_accuracy"] == 0.5
    assert [p.margin for p in reader.pairs(registry.get("pairs"), REWARD_ROWS)] == [1.0, -0.5]
    score = reader.score("validation", REWARD_ROWS)
    assert score.overall == 0.5 and score.kind == "validation"


def test_notes_and_progress():
    assert (
        row_readers.of(PROCESS).not_scored("rewardbench")
        == "a process reward model is scored on processbench, prmbench"
    )
    assert row_readers.of(REWARD).not_scored("prmbench") == "prmbench needs a process reward model (per-step scores)"
    assert row_readers.of(JUDGE).not_scored("rm_bench") == "rm_bench is not scored by a reward model"
    data = SimpleNamespace(examples=[SimpleNamespace(responses=["a", "b"]), SimpleNamespace(responses=["a", "b", "c"])])
    assert row_readers.of(REWARD).progress_total(data) == 5
    assert row_readers.of(JUDGE).progress_total(data) is None and row_readers.of(PROCESS).progress_total(data) is None


def _checker():
    spec = importlib.util.spec_from_file_location("check_scorer_kinds", REPO / "scripts" / "check_scorer_kinds.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_no_comparison_with_a_scored_as_outside_the_home():
    found = [f"{rel}:{n}: {line}" for rel, n, line in _checker().find_scored_as(REPO)]
    assert found == [], "ask rmspec.evaluate.row_readers (of, read_as) instead:\n" + "\n".join(found)


def test_the_check_finds_a_comparison_with_a_scored_as(tmp_path):
    package = tmp_path / "rmspec"
    for folder in ("evaluate", "render", "spec"):
        (package / folder).mkdir(parents=True)
    (package / "spec" / "benchmarks.py").write_text(  # binds the names the modules below import
        "class ScoredAs:\n    pass\nREWARD, JUDGE, PROCESS = ScoredAs.REWARD, ScoredAs.JUDGE, ScoredAs.PROCESS\n"
    )
    home = "from rmspec.spec.benchmarks import PROCESS\ndef f(scorer):\n    return scorer == PROCESS\n"
    (package / "evaluate" / "row_readers.py").write_text(home)  # the home: not counted
    (package / "uses.py").write_text(
        "from rmspec.spec.benchmarks import JUDGE, PROCESS, REWARD, ScoredAs\n"
        "from rmspec.annotate.source import PROCESS as TASK\n"
        "def f(scorer, entry, info, source):\n"
        "    if scorer == PROCESS:\n"  # 4
        "        pass\n"
        '    if entry.get("scorer") != JUDGE:\n'  # 6
        "        pass\n"
        "    if scorer in (REWARD, JUDGE):\n"  # 8
        "        pass\n"
        "    table = {ScoredAs.PROCESS: 1}\n"  # 10
        "    if PROCESS in info.scorers:\n"  # 11
        "        pass\n"
        "    if source.kind == TASK:\n"  # an annotation task's kind: a string, not a ScoredAs
        "        pass\n"
        "    return scorer not in info.scorers\n"  # asks the catalogue, names no member
    )
    # the light side's console view may keep one line; a second is reported with it
    (package / "render" / "report_view.py").write_text(
        'from rmspec.spec.benchmarks import PROCESS\ndef g(entry):\n    return entry.get("scorer") == PROCESS\n'
    )
    check = _checker()
    found = check.find_scored_as(tmp_path)
    assert [(rel, n) for rel, n, _ in found] == [("rmspec/uses.py", n) for n in (4, 6, 8, 10, 11)]
    assert check.find(tmp_path) == []  # not scorer kinds: the scorer-kind scan counts none of these
    with (package / "render" / "report_view.py").open("a") as f:
        f.write("def h(scorer):\n    return scorer == JUDGE or scorer == PROCESS\n")
    assert [n for rel, n, _ in check.find_scored_as(tmp_path) if rel == "rmspec/render/report_view.py"] == [3, 5]
    assert check.main([str(tmp_path)]) == 1
