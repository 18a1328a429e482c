"""Each preset on a small file in the dataset's published layout (tests/fixtures/data), compared with
what the format's documentation says the fields mean, computed here independently."""

from __future__ import annotations

import math

import pytest

from helpers.data import FIXTURES, make_spec, read_jsonl, write_jsonl
from rmspec.data import load_canonical


def canonical(tmp_path, file, mapping, approach=None, **kw):
    loaded = make_spec(
        tmp_path, {"source": {"kind": "files", "paths": [str(file)]}, "mapping": mapping}, approach, **kw
    )
    ds, report = load_canonical(loaded)
    return ds.to_list(), report


def test_pairs_with_explicit_columns(tmp_path):
    rows = [
        {"q": f"question {i}", "good": f"good {i}", "bad": f"bad {i}", "src": "a" if i % 2 else "b", "uid": f"u{i}"}
        for i in range(5)
    ]
    file = write_jsonl(tmp_path / "x.jsonl", rows)
    out, report = canonical(
        tmp_path, file, {"columns": {"prompt": "q", "chosen": "good", "rejected": "bad", "group": "src", "id": "uid"}}
    )
    assert [r["id"] for r in out] == [r["uid"] for r in rows]
    assert [r["prompt_messages"] for r in out] == [[{"role": "user", "content": r["q"]}] for r in rows]
    assert [(r["chosen"], r["rejected"], r["group"]) for r in out] == [(r["good"], r["bad"], r["src"]) for r in rows]
    assert report.rows_read == 5 and report.rows_kept == 5 and report.reconciled


def test_hh_rlhf(tmp_path):
    raw = read_jsonl(FIXTURES / "hh_rlhf.jsonl")
    out, report = canonical(tmp_path, FIXTURES / "hh_rlhf.jsonl", {"preset": "hh-rlhf"})
    assert len(out) == len(raw) and report.reconciled and not report.rejected
    for src, rec in zip(raw, out):
        cut = src["chosen"].rfind("\n\nAssistant:")
        assert src["rejected"][:cut] == src["chosen"][:cut]
        assert rec["chosen"] == src["chosen"][cut + len("\n\nAssistant:") :].strip()
        assert rec["rejected"] == src["rejected"][cut + len("\n\nAssistant:") :].strip()
        # The turns of the prefix are kept, alternating user/assistant, ending with the user's.
        n_human = src["chosen"][:cut].count("\n\nHuman:")
        roles = [m["role"] for m in rec["prompt_messages"]]
        assert roles.count("user") == n_human and roles[-1] == "user"
        assert all(a != b for a, b in zip(roles, roles[1:]))
    multi = [r for r in out if len(r["prompt_messages"]) == 3]
    assert multi, "the fixture has two-turn transcripts"


def test_hh_rlhf_rejects_unsplittable(tmp_path):
    write_jsonl(
        tmp_path / "hh.jsonl",
        [
            {"chosen": "\n\nHuman: hi\n\nAssistant: hello", "rejected": "\n\nHuman: hi\n\nAssistant: go away"},
            {"chosen": "no turns at all", "rejected": "\n\nHuman: hi\n\nAssistant: x"},
            {"chosen": "\n\nHuman: hi\n\nAssistant: a", "rejected": "\n\nHuman: other\n\nAssistant: b"},
        ],
    )
    rejects = tmp_path / "rejects.jsonl"
    loaded = make_spec(tmp_path, {"source": {"kind": "files", "paths": ["hh.jsonl"]}, "mapping": {"preset": "hh-rlhf"}})
    ds, report = load_canonical(loaded, rejects_path=rejects)
    assert len(ds) == 1 and report.rejected == {"malformed": 2}
    assert sorted(r["source_index"] for r in read_jsonl(rejects)) == [1, 2]


@pytest.mark.parametrize("preset", ["conversational", "ultrafeedback-binarized"])
def test_conversational(tmp_path, preset):
    raw = read_jsonl(FIXTURES / "ultrafeedback_binarized.jsonl")
    out, _ = canonical(tmp_path, FIXTURES / "ultrafeedback_binarized.jsonl", {"preset": preset})
    for src, rec in zip(raw, out):
        assert rec["prompt_messages"] == src["chosen"][:-1]
        assert rec["chosen"] == src["chosen"][-1]["content"]
        assert rec["rejected"] == src["rejected"][-1]["content"]
        assert (rec["score_chosen"], rec["score_rejected"]) == (src["score_chosen"], src["score_rejected"])


def test_conversational_with_separate_prompt(tmp_path):
    """TRL's explicit-prompt layout: prompt messages in their own column, completions only."""
    file = write_jsonl(
        tmp_path / "c.jsonl",
        [
            {
                "prompt": [{"role": "user", "content": "hi"}],
                "chosen": [{"role": "assistant", "content": "hello"}],
                "rejected": [{"role": "assistant", "content": "go"}],
            }
        ],
    )
    out, _ = canonical(tmp_path, file, {"preset": "conversational"})
    assert out[0]["prompt_messages"] == [{"role": "user", "content": "hi"}]
    assert (out[0]["chosen"], out[0]["rejected"]) == ("hello", "go")


def test_shp(tmp_path):
    raw = read_jsonl(FIXTURES / "shp.jsonl")
    out, _ = canonical(tmp_path, FIXTURES / "shp.jsonl", {"preset": "shp"})
    for src, rec in zip(raw, out):
        a_wins = src["labels"] == 1
        assert rec["chosen"] == (src["human_ref_A"] if a_wins else src["human_ref_B"])
        assert rec["rejected"] == (src["human_ref_B"] if a_wins else src["human_ref_A"])
        assert rec["prompt_messages"] == [{"role": "user", "content": src["history"]}]
        winner, loser = (src["score_A"], src["score_B"]) if a_wins else (src["score_B"], src["score_A"])
        assert rec["margin"] == pytest.approx(math.log(winner / loser))


def test_helpsteer2_pointwise(tmp_path):
    raw = read_jsonl(FIXTURES / "helpsteer2.jsonl")
    attrs = ["helpfulness", "correctness", "verbosity"]
    out, _ = canonical(
        tmp_path, FIXTURES / "helpsteer2.jsonl", {"preset": "helpsteer2"}, {"kind": "pointwise", "attributes": attrs}
    )
    assert len(out) == len(raw)
    for src, rec in zip(raw, out):
        assert rec["response"] == src["response"]
        assert rec["scores"] == [float(src[a]) for a in attrs]


def test_helpsteer2_pairs_by_attribute(tmp_path):
    raw = read_jsonl(FIXTURES / "helpsteer2.jsonl")
    out, report = canonical(tmp_path, FIXTURES / "helpsteer2.jsonl", {"preset": "helpsteer2", "pair_by": "helpfulness"})
    by_prompt = {}
    for r in raw:
        by_prompt.setdefault(r["prompt"], []).append(r)
    expected = {}
    for prompt, rs in by_prompt.items():
        rs = sorted(rs, key=lambda r: -r["helpfulness"])
        if rs[0]["helpfulness"] > rs[-1]["helpfulness"]:
            expected[prompt] = (rs[0]["response"], rs[-1]["response"], rs[0]["helpfulness"] - rs[-1]["helpfulness"])
    got = {r["prompt_messages"][0]["content"]: (r["chosen"], r["rejected"], r["margin"]) for r in out}
    assert got == expected
    # Two rows became one pair: the mapping's delta says so and the counts still reconcile.
    src = report.sources["train"]
    assert src.rows_read == len(raw) and src.rows_kept == len(expected) and src.reconciled


def test_ultrafeedback_raw_binarizations(tmp_path):
    raw = read_jsonl(FIXTURES / "ultrafeedback_raw.jsonl")
    worst, _ = canonical(
        tmp_path, FIXTURES / "ultrafeedback_raw.jsonl", {"preset": "ultrafeedback", "binarize": "best_vs_worst"}
    )
    for src, rec in zip(raw, worst):
        scored = sorted(src["completions"], key=lambda c: -c["overall_score"])
        assert rec["chosen"] == scored[0]["response"] and rec["rejected"] == scored[-1]["response"]
        assert rec["margin"] == scored[0]["overall_score"] - scored[-1]["overall_score"]
    rand, _ = canonical(
        tmp_path, FIXTURES / "ultrafeedback_raw.jsonl", {"preset": "ultrafeedback", "binarize": "best_vs_random"}
    )
    for src, rec in zip(raw, rand):
        scores = {c["response"]: c["overall_score"] for c in src["completions"]}
        assert rec["chosen"] == max(scores, key=scores.get) and scores[rec["rejected"]] < scores[rec["chosen"]]
    allp, report = canonical(
        tmp_path, FIXTURES / "ultrafeedback_raw.jsonl", {"preset": "ultrafeedback", "binarize": "all_pairs"}
    )
    expected = sum(
        1
        for src in raw
        for a in src["completions"]
        for b in src["completions"]
        if a["overall_score"] > b["overall_score"]
    )
    assert len(allp) == expected and report.sources["train"].rows_added_by_mapping == expected - len(raw)
    assert all(r["score_chosen"] > r["score_rejected"] for r in allp)
    assert report.reconciled


def test_ultrafeedback_ties_and_gaps_are_rejects(tmp_path):
    file = write_jsonl(
        tmp_path / "uf.jsonl",
        [
            {
                "instruction": "q",
                "completions": [{"response": "a", "overall_score": 5}, {"response": "b", "overall_score": 5}],
            },
            {"instruction": "q2", "completions": [{"response": "a", "overall_score": 5}]},
            {"instruction": "q3", "completions": "oops"},
        ],
    )
    out, report = canonical(tmp_path, file, {"preset": "ultrafeedback"})
    assert out == [] and report.rejected == {"tie": 1, "too_few_completions": 1, "wrong_type": 1}


def test_messages_generative(tmp_path):
    from helpers.data import DEMO

    out, report = canonical(
        tmp_path,
        DEMO / "judge_messages.jsonl",
        {"preset": "messages"},
        {"kind": "generative"},
        model="Qwen/Qwen2.5-0.5B-Instruct",
    )
    raw = read_jsonl(DEMO / "judge_messages.jsonl")
    assert [r["messages"] for r in out] == [r["messages"] for r in raw] and report.reconciled


def test_wrong_column_name_is_one_error_not_many_rejects(tmp_path):
    from rmspec.errors import DataError

    file = write_jsonl(tmp_path / "x.jsonl", [{"question": "q", "chosen": "a", "rejected": "b"}])
    with pytest.raises(DataError) as err:
        canonical(tmp_path, file, {"preset": "pairs"})
    assert "'prompt'" in err.value.message and "question" in err.value.message
