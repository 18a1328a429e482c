"""The benchmark registry is the one source of benchmark kinds: the spec, the CLI, the judge and
evaluation read it, and a kind registered with one line flows through eval, results and report."""

from __future__ import annotations

import json
import re
import typing
from pathlib import Path

import pytest

from rmspec.evaluate import registry
from rmspec.evaluate.kinds.base import BenchmarkKind
from rmspec.evaluate.loading import Example
from rmspec.spec.benchmarks import CATALOGUE, JUDGE, PROCESS, REWARD, BenchmarkInfo

REPO = Path(__file__).resolve().parents[1]


def overrides(kind: BenchmarkKind, method: str) -> bool:
    return getattr(type(kind), method) is not getattr(BenchmarkKind, method)


def test_every_spec_choice_has_a_loader_a_rule_and_diagnostics():
    from rmspec.spec.evaluation import BENCHMARK_DEFAULTS, Benchmark

    choices = typing.get_args(Benchmark.model_fields["kind"].annotation)
    assert choices == tuple(CATALOGUE) and tuple(BENCHMARK_DEFAULTS) == choices
    for name in choices:
        kind = registry.get(name)
        assert isinstance(kind, BenchmarkKind) and kind.name == name and kind.info is CATALOGUE[name]
        assert overrides(kind, "examples") or overrides(kind, "load"), name  # a loader
        assert overrides(kind, "score"), name  # the official rule
        if PROCESS in kind.info.scorers:
            assert overrides(kind, "step_diagnostics"), name
        else:  # pairs for the diagnostics: the default reads score_chosen/score_rejected rows
            rows = (
                kind.per_example_rows(_two_examples(kind), [[2.0] * 6, [1.0] * 6])
                if not overrides(kind, "load")
                else None
            )
            assert rows is None or kind.pairs(rows), name


def _two_examples(kind: BenchmarkKind):
    from rmspec.evaluate.loading import BenchmarkData

    meta = {"num_correct": 1, "label": "A>B", "source": "mmlu-pro-x"}
    return BenchmarkData(
        kind.name, "here", None, [Example(str(i), "s", "p", ["a b"] * 6, dict(meta)) for i in range(2)]
    )


def test_judge_kinds_and_cli_choices_come_from_the_catalogue():
    from rmspec.inference.judge import JUDGE_KINDS

    assert (
        set(JUDGE_KINDS)
        == {n for n, i in CATALOGUE.items() if JUDGE in i.scorers}
        == {"judgebench", "pairs", "rewardbench"}
    )


def test_no_module_outside_the_registry_names_a_benchmark_kind():
    # processbench and pairs are also data presets, so only the other names are searched for.
    names = re.compile(r"""["'](rewardbench2?|rm_bench|judgebench)["']""")
    allowed = {REPO / "rmspec/spec/benchmarks.py"}
    found = [
        str(p.relative_to(REPO))
        for p in (REPO / "rmspec").rglob("*.py")
        if p not in allowed and "kinds" not in p.parts and names.search(p.read_text(encoding="utf-8"))
    ]
    assert found == []


# ----------------------------------------------------------------- a toy benchmark, registered with one line


class Toy(BenchmarkKind):
    """Rows {q, good, bad}; the figure: the share of rows whose good answer scores higher."""

    name = "toy"
    columns = ("q", "good", "bad")

    def examples(self, rows, source):
        return [
            Example(str(i), str(r.get("topic") or "all"), r["q"], [r["good"], r["bad"]]) for i, r in enumerate(rows)
        ]

    def score(self, rows):
        from rmspec.evaluate.figures import BenchmarkScore

        wins = [float(r["score_chosen"] > r["score_rejected"]) for r in rows]
        return BenchmarkScore("toy", sum(wins) / len(wins), counts={"all": len(rows)})


class WordCounter:
    """Stands in for a RewardEngine: a response's reward is its number of words."""

    kind = "reward"

    def score_groups(self, groups):
        return [[float(len(r.split())) for r in responses] for _, responses in groups]


@pytest.fixture
def toy():
    registry.register(BenchmarkInfo("toy", None, None, (REWARD,), __name__, "a toy benchmark"), Toy())
    yield
    registry.unregister("toy")


def test_a_registered_toy_benchmark_flows_through_eval_results_and_report(toy, tmp_path):
    from rmspec.evaluate import results as res
    from rmspec.evaluate.benchmark_runs import BenchmarkRequest, evaluate_benchmarks
    from rmspec.evaluate.report import build_html
    from rmspec.evaluate.scoring_rules import score_rows

    rows = [
        {"q": "q1", "good": "a b c", "bad": "a"},
        {"q": "q2", "good": "a", "bad": "a b"},
        {"q": "q3", "good": "a b", "bad": "a b c d"},
        {"q": "q4", "good": "a b c d e", "bad": "a b"},
    ]
    data = tmp_path / "toy.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run = tmp_path / "run"
    (run / "eval").mkdir(parents=True)
    results = res.new_results(str(run / "model"), "toy-run")
    evaluate_benchmarks(
        WordCounter(), [BenchmarkRequest("toy", str(data)), BenchmarkRequest("processbench")], run / "eval", results
    )

    entry = results["benchmarks"]["toy"]
    expected = sum(len(r["good"].split()) > len(r["bad"].split()) for r in rows) / len(rows)
    assert expected == 0.5 and entry["overall"] == expected and entry["scorer"] == REWARD
    assert entry["diagnostics"]["num_pairs"] == 4 and entry["diagnostics"]["pair_accuracy"] == expected
    saved = res.read_jsonl(run / "eval" / "toy.jsonl")
    assert [(r["score_chosen"], r["score_rejected"]) for r in saved] == [(3.0, 1.0), (1.0, 2.0), (2.0, 4.0), (5.0, 2.0)]
    assert score_rows("toy", saved).overall == expected
    assert results["notes"] == ["processbench: not scored: processbench needs a process reward model (per-step scores)"]

    res.write_results(run / "results.json", results)
    html = build_html(run)
    assert "<h3>toy <span class=muted>(toy, 4 examples" in html and "Overall: <b>50.0%</b>" in html


@pytest.mark.parametrize("kind", ["pairs", "processbench"])
@pytest.mark.parametrize(
    "content, where, what",
    [
        (b'{"a": 1}\n{"a": "caf\xe9"}\n', ":2:11", "0xe9"),
        (b'{"a": 1}\nnull\n', ":2", "a bare null"),
        (b"PAR1 not json", "", "is a Parquet file"),
    ],
)
def test_benchmark_loaders_use_the_row_readers_guards(kind, content, where, what, tmp_path):
    """ProcessBench's loader had none of these guards (a bare null line crashed pyarrow)."""
    from rmspec.errors import DataError
    from rmspec.evaluate.benchmarks import load_benchmark

    path = tmp_path / "bench.jsonl"
    path.write_bytes(content)
    with pytest.raises(DataError) as info:
        load_benchmark(kind, str(path))
    assert f"benchmark {kind!r}: {path}{where}: " in info.value.message and what in info.value.message
