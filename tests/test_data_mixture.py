"""Dataset mixtures (data.sources): spec rules, per-source counts, sampling and the split, a
streaming source interleaved, and a run on two datasets of different formats and presets whose
results.json reports validation accuracy per dataset."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import pytest

from helpers.data import bert_tokenizer, make_spec, read_jsonl, write_jsonl
from helpers.models import build_model
from helpers.runs import rmspec
from rmspec.errors import SpecError


def pairs_rows(n: int, seed: int, prefix: str) -> list[dict]:
    """Learnable pairs in the tiny vocabulary (chosen starts with w1), distinct prompts per prefix."""
    rng = random.Random(seed)
    words = lambda k: " ".join(f"w{rng.randint(10, 70)}" for _ in range(k))  # noqa: E731
    return [
        {
            "id": f"{prefix}{i}",
            "prompt": f"{prefix} {i} " + words(rng.randint(1, 6)),
            "chosen": "w1 " + words(rng.randint(0, 4)),
            "rejected": "w2 " + words(rng.randint(0, 4)),
        }
        for i in range(n)
    ]


def hh_parquet(path: Path, rows: list[dict], bad: int) -> Path:
    """rows in Anthropic hh-rlhf's shape, plus `bad` rows the preset rejects (no Assistant turn)
    and one identical pair (drop_identical)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = [
        {
            "chosen": f"\n\nHuman: {r['prompt']}\n\nAssistant: {r['chosen']}",
            "rejected": f"\n\nHuman: {r['prompt']}\n\nAssistant: {r['rejected']}",
        }
        for r in rows
    ]
    out += [{"chosen": f"just text {i}", "rejected": f"other text {i}"} for i in range(bad)]
    out.append({"chosen": "\n\nHuman: same\n\nAssistant: w1", "rejected": "\n\nHuman: same\n\nAssistant: w1"})
    pq.write_table(pa.Table.from_pylist(out), path)
    return path


def mixture(tmp: Path, weights=(0.6, 0.4), n_pairs=150, n_hh=90, bad=3, **extra) -> dict:
    write_jsonl(tmp / "pairs.jsonl", pairs_rows(n_pairs, 1, "pa"))
    hh_parquet(tmp / "hh.parquet", pairs_rows(n_hh, 2, "hh"), bad)
    a = {"name": "pairs_jsonl", "source": {"kind": "files", "paths": ["pairs.jsonl"]}, "mapping": {"preset": "pairs"}}
    b = {
        "name": "hh_parquet",
        "source": {"kind": "files", "paths": ["hh.parquet"]},
        "mapping": {"preset": "hh-rlhf"},
        "filters": [{"kind": "drop_identical"}],
    }
    if weights:
        a["weight"], b["weight"] = weights
    return {"sources": [a, b], "split": {"validation_fraction": 0.2, "seed": 3}, **extra}


# ---------------------------------------------------------------- spec


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda d: d["sources"][1].update(weight=0.3), "weights sum to 0.9"),
        (lambda d: d["sources"][1].update(name="pairs_jsonl"), "duplicate name"),
        (lambda d: d["sources"][1].update(name="validation"), "reserved"),
        (lambda d: d["sources"][1].pop("weight"), "weights on some entries"),
        (lambda d: d["sources"][0].update(rows=10), "weight or rows, not both"),
        (lambda d: d.update(source={"kind": "files", "paths": ["pairs.jsonl"]}), "exactly one of them"),
        (lambda d: d.update(mapping={"preset": "pairs"}), "each dataset has its own"),
        (lambda d: d["sources"][0].update(filters=[{"kind": "max_length"}]), "put it under data.filters"),
    ],
)
def test_validate_refuses(tmp_path, change, message):
    data = mixture(tmp_path)
    change(data)
    with pytest.raises(SpecError) as err:
        make_spec(tmp_path, data)
    assert message in str(err.value)


def test_single_source_is_a_one_entry_list(tmp_path):
    write_jsonl(tmp_path / "pairs.jsonl", pairs_rows(5, 1, "pa"))
    data = make_spec(
        tmp_path, {"source": {"kind": "files", "paths": ["pairs.jsonl"]}, "mapping": {"preset": "pairs"}}
    ).spec.data
    (entry,) = data.mixture()
    assert (entry.name, entry.source, entry.mapping, data.is_mixture) == ("train", data.source, data.mapping, False)


# ---------------------------------------------------------------- data


def _prepare(tmp: Path, data: dict):
    from rmspec.data import prepare

    loaded = make_spec(tmp, data, max_length=64)
    return prepare(loaded, bert_tokenizer(), rejects_path=tmp / "rejects.jsonl", cache_dir=tmp / "cache")


def test_weights_counts_split_and_rejects(tmp_path):
    prepared = _prepare(tmp_path, mixture(tmp_path))
    report = prepared.report.to_json()
    train = Counter(prepared.train["source"])
    total = sum(train.values())
    # counts per source equal the weights within one row per source
    assert abs(train["pairs_jsonl"] - 0.6 * total) <= 1 and abs(train["hh_parquet"] - 0.4 * total) <= 1
    # hh is the smaller one for its weight (first_exhausted): all its training rows are used, pairs sampled down
    hh, pa = report["sources"]["hh_parquet"], report["sources"]["pairs_jsonl"]
    assert hh["rows_train"] == train["hh_parquet"] and pa["rows_train"] == train["pairs_jsonl"]
    assert pa["rejected"]["sampled_out"] > 0 and "sampled_out" not in hh["rejected"]
    # per source: read = kept + rejected; kept = train + validation; totals are the sums
    for counts in report["sources"].values():
        assert counts["rows_read"] + counts["rows_added_by_mapping"] == counts["rows_kept"] + counts["rows_rejected"]
        assert counts["rows_kept"] == counts["rows_train"] - counts["rows_repeated"] + counts["rows_validation"]
        assert counts["reconciled"]
    assert hh["rows_read"] == 90 + 3 + 1 and pa["rows_read"] == 150
    assert hh["rejected"] == {"no_assistant_turn": 3, "identical": 1} or sum(hh["rejected"].values()) == 4
    assert report["rows_read"] == 150 + 94 and report["reconciled"]
    assert report["rows_kept"] == len(prepared.train) + len(prepared.validation)
    # rejects carry the source name, and their number per source matches the report
    rejects = read_jsonl(tmp_path / "rejects.jsonl")
    by_source = Counter(r["source"] for r in rejects)
    assert by_source == {n: c["rows_rejected"] for n, c in report["sources"].items() if c["rows_rejected"]}
    assert {r["reason"] for r in rejects if r["source"] == "pairs_jsonl"} == {"sampled_out"}
    # nothing crosses the split: no prompt on both sides, and each source gives validation rows
    assert not set(prepared.train["prompt"]) & set(prepared.validation["prompt"])
    assert set(prepared.validation["source"]) == {"pairs_jsonl", "hh_parquet"}
    assert report["mixture"]["weights"] == {"pairs_jsonl": 0.6, "hh_parquet": 0.4}


def test_all_exhausted_repeats_the_smaller_source(tmp_path):
    prepared = _prepare(tmp_path, mixture(tmp_path, weights=(0.5, 0.5), stopping_strategy="all_exhausted"))
    counts = prepared.report.to_json()["sources"]
    train = Counter(prepared.train["source"])
    assert train["pairs_jsonl"] == train["hh_parquet"] == counts["pairs_jsonl"]["rows_train"]
    hh = counts["hh_parquet"]
    assert hh["rows_repeated"] == train["hh_parquet"] - (hh["rows_kept"] - hh["rows_validation"])
    assert counts["hh_parquet"]["rows_repeated"] > 0 and counts["pairs_jsonl"]["rows_repeated"] == 0
    assert "sampled_out" not in counts["pairs_jsonl"]["rejected"]


def test_rows_exact_counts(tmp_path):
    data = mixture(tmp_path, weights=None)
    data["sources"][0]["rows"] = 40
    prepared = _prepare(tmp_path, data)
    train = Counter(prepared.train["source"])
    counts = prepared.report.to_json()["sources"]
    assert train["pairs_jsonl"] == 40
    assert train["hh_parquet"] == counts["hh_parquet"]["rows_kept"] - counts["hh_parquet"]["rows_validation"]


def test_weight_on_an_empty_source_is_a_data_error(tmp_path):
    from rmspec.errors import DataError

    data = mixture(tmp_path, n_hh=0, bad=4)
    with pytest.raises(DataError, match=r"data.sources\[1\] \(hh_parquet\): no training rows"):
        _prepare(tmp_path, data)


def test_streaming_source_is_interleaved(tmp_path, monkeypatch):
    """A streaming dataset mixes through datasets.interleave_datasets with the weights, the split seed
    and the stopping strategy; counts reconcile per source and the notes say how it was mixed."""
    import datasets

    seen = {}
    real = datasets.interleave_datasets

    def spy(streams, **kwargs):
        seen.update(kwargs)
        return real(streams, **kwargs)

    monkeypatch.setattr(datasets, "interleave_datasets", spy)
    # a local dataset folder read by the hub source with streaming: true (nothing leaves the machine)
    (tmp_path / "streamset").mkdir()
    datasets.Dataset.from_list(pairs_rows(120, 5, "st")).to_parquet(str(tmp_path / "streamset" / "train.parquet"))
    data = mixture(tmp_path, weights=(0.5, 0.5))
    data["sources"][1] = {
        "name": "streamed",
        "source": {"kind": "huggingface", "path": "streamset", "streaming": True, "split": "train"},
        "mapping": {"preset": "pairs"},
        "weight": 0.5,
    }
    prepared = _prepare(tmp_path, data)
    report = prepared.report.to_json()
    assert seen == {"probabilities": [0.5, 0.5], "seed": 3, "stopping_strategy": "first_exhausted"}
    assert report["reconciled"] and report["mixture"]["method"].startswith("datasets.interleave_datasets")
    assert any("interleave_datasets" in n for n in report["notes"])
    sources = Counter(prepared.train["source"]) + Counter(prepared.validation["source"])
    assert set(sources) == {"pairs_jsonl", "streamed"}
    for counts in report["sources"].values():
        assert counts["reconciled"]
    # first_exhausted: one of the two ran out; the sized one's undrawn rows are counted, not hidden
    st, pa = report["sources"]["streamed"], report["sources"]["pairs_jsonl"]
    assert st["rows_read"] == 120 or pa["rows_read"] + pa["rows_not_drawn"] == 150
    assert pa["rows_read"] + pa["rows_not_drawn"] == 150
    assert not set(prepared.train["prompt"]) & set(prepared.validation["prompt"])


# ---------------------------------------------------------------- a run


@pytest.mark.slow
def test_run_on_a_mixture_reports_accuracy_per_source(tmp_path):
    model = build_model("llama", tmp_path / "model-src")
    data = mixture(tmp_path)
    doc = {
        "version": 1,
        "name": "mix",
        "model": {"name_or_path": str(model)},
        "data": data,
        "approach": {"kind": "bradley_terry"},
        "training": {
            "learning_rate": 3.0e-3,
            "global_batch_size": 8,
            "max_length": 64,
            "logging_steps": 2,
            "seed": 7,
            "max_steps": 6,
        },
        "hardware": {"device": "cpu", "gpus_per_node": 1},
        "eval": {"validation": True, "benchmarks": []},
        "output": {"dir": str(tmp_path / "runs" / "mix")},
    }
    (tmp_path / "mix.yaml").write_text(json.dumps(doc))
    done = rmspec("run", "mix.yaml", cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    run = tmp_path / "runs" / "mix"
    report = json.loads((run / "data_report.json").read_text())
    results = json.loads((run / "results.json").read_text())
    per_source = results["validation"]["per_source"]
    assert set(per_source) == {"pairs_jsonl", "hh_parquet"}
    rows = read_jsonl(Path(results["validation"]["per_example_path"]))
    for name, figures in per_source.items():
        mine = [r for r in rows if r["source"] == name]
        assert figures["count"] == len(mine) == report["sources"][name]["rows_validation"]
        assert figures["accuracy"] == pytest.approx(
            sum(r["score_chosen"] > r["score_rejected"] for r in mine) / len(mine)
        )
    assert sum(f["count"] for f in per_source.values()) == results["validation"]["num_examples"]
    html = (run / "report.html").read_text()
    assert "pairs_jsonl" in html and "hh_parquet" in html


def test_rich_report_shows_each_dataset(tmp_path):
    from rich.console import Console

    from rmspec.render.data_view import print_report

    report = _prepare(tmp_path, mixture(tmp_path)).report.to_json()
    console = Console(record=True, width=160, no_color=True)
    print_report(report, console)
    text = console.export_text()
    pa = report["sources"]["pairs_jsonl"]
    line = next(x for x in text.splitlines() if "pairs_jsonl" in x and "0.6" in x)
    numbers = [int(v) for v in line.replace("│", " ").split() if v.isdigit()]
    assert numbers[:7] == [
        pa["rows_read"],
        pa["rows_kept"],
        pa["rows_rejected"],
        pa["rejected"]["sampled_out"],
        pa["rows_train"],
        pa["rows_repeated"],
        pa["rows_validation"],
    ]
