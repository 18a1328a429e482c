"""Split: grouped by prompt (no leak), seeded, stratified; a separate validation source; and
augmentation that stays on the training side."""

from __future__ import annotations

import random
from collections import Counter

from helpers.data import bert_tokenizer, make_spec, write_jsonl
from rmspec.data import prepare
from rmspec.data.split import validation_mask


def rows_with_repeated_prompts(n_prompts=60, seed=1):
    rng = random.Random(seed)
    rows = []
    for p in range(n_prompts):
        for k in range(rng.randint(1, 4)):
            rows.append(
                {
                    "prompt": f"prompt number {p}",
                    "chosen": f"a good answer to {p} variant {k}",
                    "rejected": f"bad {p} {k}",
                    "src": "alpha" if p % 3 else "beta",
                    "score_chosen": 5.0 + k,
                    "score_rejected": 1.0 + k,
                }
            )
    rng.shuffle(rows)
    return rows


def spec(tmp_path, rows, split, **data):
    write_jsonl(tmp_path / "d.jsonl", rows)
    return make_spec(
        tmp_path,
        {
            "source": {"kind": "files", "paths": ["d.jsonl"]},
            "mapping": {"preset": "pairs", "columns": {"group": "src"}},
            "split": split,
            **data,
        },
    )


def test_no_prompt_on_both_sides(tmp_path):
    rows = rows_with_repeated_prompts()
    prepared = prepare(
        spec(tmp_path, rows, {"validation_fraction": 0.25, "seed": 3}), bert_tokenizer(), cache_dir=tmp_path / "c"
    )
    train_prompts = {r["prompt"] for r in prepared.train}
    val_prompts = {r["prompt"] for r in prepared.validation}
    assert val_prompts and not train_prompts & val_prompts
    assert len(prepared.train) + len(prepared.validation) == len(rows)
    # about a quarter of the prompts (not rows) are held out
    assert abs(len(val_prompts) / 60 - 0.25) < 0.05
    assert prepared.report.splits == {"train": len(prepared.train), "validation": len(prepared.validation)}


def test_split_is_seeded():
    keys = [f"k{i % 37}" for i in range(200)]
    a = validation_mask(keys, 0.2, seed=0)
    assert a == validation_mask(keys, 0.2, seed=0)
    assert a != validation_mask(keys, 0.2, seed=1)


def test_stratified_split_holds_out_each_stratum_evenly():
    keys = [f"p{i}" for i in range(400)]
    strata = ["small" if i < 40 else "big" for i in range(400)]
    mask = validation_mask(keys, 0.25, seed=7, strata=strata)
    held = Counter(s for s, m in zip(strata, mask) if m)
    assert held == {"small": 10, "big": 90}


def test_ungrouped_split_may_split_a_prompt():
    keys = ["same"] * 100
    mask = validation_mask(keys, 0.3, seed=0, group_by_prompt=False)
    assert sum(mask) == 30
    assert validation_mask(keys, 0.3, seed=0) in ([True] * 100, [False] * 100)  # grouped: all or nothing


def test_separate_validation_source(tmp_path):
    rows = rows_with_repeated_prompts(10)
    write_jsonl(tmp_path / "val.jsonl", [{"prompt": "held out", "chosen": "a", "rejected": "b", "src": "x"}])
    loaded = spec(
        tmp_path, rows, {"validation_fraction": None, "validation_source": {"kind": "files", "paths": ["val.jsonl"]}}
    )
    prepared = prepare(loaded, bert_tokenizer(), cache_dir=tmp_path / "c")
    assert [r["prompt"] for r in prepared.validation] == ["held out"]
    assert len(prepared.train) == len(rows)
    assert prepared.report.sources["validation"].rows_read == 1 and prepared.report.reconciled


def test_augmentation_stays_on_the_training_side(tmp_path):
    rows = rows_with_repeated_prompts()
    loaded = spec(
        tmp_path,
        rows,
        {"validation_fraction": 0.25, "seed": 0},
        augment=[
            {"kind": "cross_prompt_negatives", "fraction": 0.2, "seed": 1},
            {"kind": "truncated_negatives", "fraction": 0.1, "keep": 0.5, "seed": 2},
        ],
    )
    prepared = prepare(loaded, bert_tokenizer(), cache_dir=tmp_path / "c")
    train = prepared.train.to_list()
    base = [r for r in train if not r["augmented"]]
    extra = [r for r in train if r["augmented"]]
    assert not any(r["augmented"] for r in prepared.validation)
    train_chosen = {r["chosen"] for r in base}
    val_texts = {r["chosen"] for r in prepared.validation} | {r["rejected"] for r in prepared.validation}
    xneg = [r for r in extra if r["id"].endswith("-xneg")]
    trunc = [r for r in extra if r["id"].endswith("-trunc")]
    assert len(xneg) == round(0.2 * len(base)) and trunc
    by_prompt = {}
    for r in base:
        by_prompt.setdefault(r["prompt"], set()).add(r["chosen"])
    for r in xneg:  # another training prompt's chosen response, never one from validation
        assert r["rejected"] in train_chosen and r["rejected"] not in by_prompt[r["prompt"]]
        assert r["rejected"] not in val_texts and r["chosen"] not in val_texts
    for r in trunc:
        assert r["chosen"].startswith(r["rejected"]) and len(r["rejected"]) < len(r["chosen"])
    assert prepared.report.augmented == {"cross_prompt_negatives": len(xneg), "truncated_negatives": len(trunc)}
    assert prepared.report.splits["train"] == len(train)


def test_pairs_from_scores(tmp_path):
    rows = [
        {"prompt": "q", "chosen": "best", "rejected": "worst", "score_chosen": 9.0, "score_rejected": 1.0, "src": "a"},
        {"prompt": "q", "chosen": "good", "rejected": "meh", "score_chosen": 7.0, "score_rejected": 4.0, "src": "a"},
    ]
    loaded = spec(
        tmp_path,
        rows,
        {"validation_fraction": None},
        augment=[{"kind": "pairs_from_scores", "attribute": "score", "min_gap": 2.0}],
    )
    prepared = prepare(loaded, bert_tokenizer(), cache_dir=tmp_path / "c")
    made = {(r["chosen"], r["rejected"]) for r in prepared.train if r["augmented"]}
    # all ordered pairs with a gap >= 2 that were not already pairs
    scores = {"best": 9, "good": 7, "meh": 4, "worst": 1}
    expected = {(a, b) for a in scores for b in scores if scores[a] - scores[b] >= 2} - {
        ("best", "worst"),
        ("good", "meh"),
    }
    assert made == expected


# ---------------------------------------------------------------- issue 47 item 4: an empty validation split


def one_prompt_rows(n=30):
    return [{"prompt": "the one question", "chosen": f"good {i}", "rejected": f"bad {i}", "src": "a"} for i in range(n)]


def test_an_empty_validation_split_stops_the_data_stage_with_its_cause(tmp_path):
    import pytest

    from rmspec.errors import DataError

    loaded = spec(tmp_path, one_prompt_rows(), {"validation_fraction": 0.2})
    with pytest.raises(DataError) as caught:
        prepare(loaded, bert_tokenizer(), cache_dir=tmp_path / "c")
    assert caught.value.exit_code == 2
    assert "all 30 rows share one prompt" in caught.value.message
    assert "data.split.group_by_prompt: false" in caught.value.hint
    assert not list((tmp_path / "c").glob("*/report.json"))  # nothing cached: no empty split to reload later
    # the hint's way out: rows of one prompt on both sides, at the fraction
    loaded = spec(tmp_path, one_prompt_rows(), {"validation_fraction": 0.2, "group_by_prompt": False})
    prepared = prepare(loaded, bert_tokenizer(), cache_dir=tmp_path / "c2")
    assert (len(prepared.train), len(prepared.validation)) == (24, 6)


def test_an_empty_validation_source_stops_the_data_stage(tmp_path):
    import pytest

    from rmspec.errors import DataError

    write_jsonl(tmp_path / "val.jsonl", [{"prompt": "held out", "chosen": "same", "rejected": "same", "src": "x"}])
    loaded = spec(
        tmp_path,
        rows_with_repeated_prompts(10),
        {"validation_fraction": None, "validation_source": {"kind": "files", "paths": ["val.jsonl"]}},
        filters=[{"kind": "drop_identical"}],
    )
    with pytest.raises(DataError, match=r"validation_source: no validation rows left .*identical 1"):
        prepare(loaded, bert_tokenizer(), cache_dir=tmp_path / "c")


def test_validation_off_lets_an_unsplittable_set_train(tmp_path):
    """eval.validation: false and no training.eval_steps: nothing reads the split, so one prompt trains
    (and the prepared validation is None, never an empty set a later load cannot read)."""
    write_jsonl(tmp_path / "d.jsonl", one_prompt_rows())
    loaded = make_spec(
        tmp_path,
        {
            "source": {"kind": "files", "paths": ["d.jsonl"]},
            "mapping": {"preset": "pairs"},
            "split": {"validation_fraction": 0.2},
        },
        extra={"eval": {"validation": False, "benchmarks": []}},
    )
    for _ in range(2):  # the second reads the cache
        prepared = prepare(loaded, bert_tokenizer(), cache_dir=tmp_path / "c")
        assert len(prepared.train) == 30 and prepared.validation is None


def test_the_split_always_leaves_a_prompt_to_train_on():
    keys = ["a", "a", "b"]
    for seed in range(5):
        mask = validation_mask(keys, 0.9, seed=seed)
        assert any(mask) and not all(mask)


def test_rmspec_run_stops_before_training_when_all_rows_share_one_prompt(tmp_path):
    """The CLI as a user runs it: exit 2, the cause and its fix, and no training step (the old code
    trained, then failed in the run's evaluation with an IndexError from datasets)."""
    import json

    from helpers.runs import make_run_spec, rmspec

    rows = [
        {"id": f"r{i}", "prompt": "w10 w11", "chosen": f"w1 w{12 + i}", "rejected": f"w2 w{12 + i}"} for i in range(40)
    ]
    write_jsonl(tmp_path / "pairs.jsonl", rows)
    spec_file = make_run_spec(tmp_path, rows=40, training="  max_steps: 2")
    done = rmspec("run", spec_file.name, cwd=tmp_path)
    said = done.stdout + done.stderr
    assert done.returncode == 2, said
    assert "data.split: the validation split is empty: all 40 rows share one prompt" in said
    assert "data.split.group_by_prompt: false" in said
    assert "Traceback" not in said and "IndexError" not in said
    run = tmp_path / "runs" / "tiny"
    assert "step 1/" not in said and not (run / "metrics.jsonl").exists()
    assert not list(run.glob("checkpoints/checkpoint-*")) and not (run / "model").exists()
    status = json.loads((run / "status.json").read_text())
    assert status["state"] == "failed" and status["exit_code"] == 2
