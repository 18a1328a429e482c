"""One chosen answer and a list of rejected ones (LongRM's training pairs: `context_and_question`, `chosen`,
`rejects` of 4, `index`; rmspec.data.rejected_list), read only as data.mapping.binarize says. The rows here have
LongRM's fields and types; what each mapping should give is written out from that rule, not read from rmspec."""

from __future__ import annotations

import json
import random

import pytest

from helpers.ci import need
from helpers.data import bert_tokenizer, make_spec, read_jsonl, write_jsonl
from rmspec.data import load_canonical, prepare
from rmspec.errors import DataError

COLUMNS = {"prompt": "context_and_question", "chosen": "chosen", "rejected": "rejects", "id": "index"}


def _rows(n: int = 6) -> list[dict]:
    return [
        {
            "index": i,
            "context_and_question": f"Chapter {i}: a long context ... Question: what happened in chapter {i}?",
            "chosen": f"[Analysis] the grounded answer {i}",
            "rejects": [f"[Analysis] ungrounded answer {i}.{k}" for k in range(4)],
            "prompt_ctx_length": 8000 + i,
        }
        for i in range(n)
    ]


def _spec(tmp_path, rows, mapping, approach=None, **data):
    file = write_jsonl(tmp_path / "longrm.jsonl", rows)
    return make_spec(
        tmp_path, {"source": {"kind": "files", "paths": [str(file)]}, "mapping": mapping, **data}, approach
    )


def _load(tmp_path, rows, mapping, approach=None, **data):
    ds, report = load_canonical(_spec(tmp_path, rows, mapping, approach, **data))
    return ds.to_list(), report


def _prepare(tmp_path, rows, mapping, approach=None, **data):
    """Tokenized splits, the report and the rejects file's lines."""
    rejects = tmp_path / "rejects.jsonl"
    prepared = prepare(
        _spec(tmp_path, rows, mapping, approach, **data),
        bert_tokenizer(),
        rejects_path=rejects,
        cache_dir=tmp_path / "cache",
    )
    return prepared, read_jsonl(rejects) if rejects.exists() else []


def test_all_pairs_gives_one_pair_per_rejected_answer(tmp_path):
    rows = _rows()
    out, report = _load(tmp_path, rows, {"columns": COLUMNS, "binarize": "all_pairs"})
    want = [
        (row["context_and_question"], row["chosen"], rejected, f"{row['index']}-{k}")
        for row in rows
        for k, rejected in enumerate(row["rejects"])
    ]
    got = [(r["prompt_messages"][0]["content"], r["chosen"], r["rejected"], r["id"]) for r in out]
    assert got == want
    assert report.rows_read == 6 and report.rows_kept == 24 and report.reconciled
    assert report.sources["train"].rows_added_by_mapping == 18


def test_all_pairs_keeps_a_rows_pairs_on_one_side_of_the_split(tmp_path):
    rows = _rows(40)
    prepared, _ = _prepare(
        tmp_path, rows, {"columns": COLUMNS, "binarize": "all_pairs"}, split={"validation_fraction": 0.25, "seed": 3}
    )
    sides = {
        side: {r["id"].split("-")[0] for r in split}
        for side, split in (("t", prepared.train), ("v", prepared.validation))
    }
    assert sides["t"] and sides["v"] and not sides["t"] & sides["v"]
    assert len(prepared.train) + len(prepared.validation) == 160


def test_best_vs_random_draws_one_rejected_answer_seeded_by_the_row(tmp_path):
    rows = _rows()
    out, report = _load(tmp_path, rows, {"columns": COLUMNS, "binarize": "best_vs_random"})
    assert [r["rejected"] for r in out] == [random.Random(i).choice(row["rejects"]) for i, row in enumerate(rows)]
    assert len({r["rejected"][-1] for r in out}) > 1  # not always the same position
    assert report.rows_kept == 6


def test_the_default_rejects_every_list_row_and_says_what_to_set(tmp_path):
    rows = _rows() + [{**_rows(1)[0], "index": 99, "rejects": "one rejected answer"}]
    prepared, rejects = _prepare(tmp_path, rows, {"columns": COLUMNS}, max_rejected=1.0)
    assert [r["rejected"] for r in prepared.train] == ["one rejected answer"]  # a text is one pair, as ever
    assert [r["reason"] for r in rejects] == ["rejected_list"] * 6
    assert [r["row"]["index"] for r in rejects] == list(range(6))
    detail = rejects[0]["detail"]
    assert (
        "rejected holds 4 answers, binarize best_vs_worst" in detail
        and "all_pairs" in detail
        and "approach.kind: listwise" in detail
    )


def test_nothing_left_stops_with_the_hint(tmp_path):
    with pytest.raises(DataError, match="rejected_list.*data.mapping.binarize: all_pairs"):
        _prepare(tmp_path, _rows(), {"columns": COLUMNS})


def test_a_bad_answer_in_the_list_names_its_place(tmp_path):
    rows = _rows(2)
    rows[1]["rejects"] = ["fine", {"text": "an answer in an object"}]
    prepared, rejects = _prepare(tmp_path, rows, {"columns": COLUMNS, "binarize": "all_pairs"}, max_rejected=1.0)
    assert len(prepared.train) == 4 and [r["reason"] for r in rejects] == ["wrong_type"]
    assert rejects[0]["detail"] == "rejected[1] must be text, got dict"


@pytest.mark.parametrize("approach", [None, {"kind": "listwise"}])
def test_an_empty_rejected_list_is_an_empty_reject(tmp_path, approach):
    rows = _rows(3)
    rows[1]["rejects"] = []
    mapping = {"columns": COLUMNS, **({} if approach else {"binarize": "all_pairs"})}
    prepared, rejects = _prepare(tmp_path, rows, mapping, approach=approach, max_rejected=1.0)
    assert [(r["reason"], r["detail"], r["row"]["index"]) for r in rejects] == [
        ("empty", "rejected is an empty list", 1)
    ]


def test_listwise_puts_the_chosen_answer_over_the_rejected_ones_tied(tmp_path):
    rows = _rows()
    out, report = _load(tmp_path, rows, {"columns": COLUMNS}, {"kind": "listwise"})
    assert [(r["responses"], r["scores"]) for r in out] == [
        ([row["chosen"], *row["rejects"]], [1.0, 0.0, 0.0, 0.0, 0.0]) for row in rows
    ]
    assert report.rows_kept == 6 and report.reconciled


def test_the_listwise_loss_on_such_a_list_by_hand():
    """With approach.top_k: 1 the Plackett-Luce loss of [chosen, 4 rejected] is -log softmax(rewards)[chosen]: the
    rejected answers are not ranked. Without it, Breslow's rule also scores each tied rejected answer against the
    tied group, sum_j [r_j - log sum_k exp(r_k)], which pulls their rewards together. Both computed here by hand."""
    import math

    torch = need("torch")
    from rmspec.train.objectives.listwise import plackett_luce_loss

    rewards = torch.tensor([[0.3, 1.2, -0.4, 0.0, 0.9], [2.0, -1.0, 0.5, 0.1, -0.3]])
    scores = torch.tensor([[1.0, 0.0, 0.0, 0.0, 0.0]] * 2)

    def lse(values):
        return math.log(sum(math.exp(v) for v in values))

    first = [-(row[0] - lse(row)) for row in rewards.tolist()]
    tied = [-sum(v - lse(row[1:]) for v in row[1:]) for row in rewards.tolist()]
    assert plackett_luce_loss(rewards, scores, top_k=1).item() == pytest.approx(sum(first) / 2, rel=1e-6)
    assert plackett_luce_loss(rewards, scores).item() == pytest.approx((sum(first) + sum(tied)) / 2, rel=1e-6)


def test_the_plan_reads_the_list_size_from_the_rejected_lists(tmp_path):
    from rmspec.plan import compile_plan

    rows = _rows()
    rows[2]["rejects"].append("a fifth rejected answer")
    spec = _spec(tmp_path, rows, {"columns": COLUMNS}, {"kind": "listwise", "top_k": 1})
    plan = json.dumps(compile_plan(spec).to_json())
    assert "listwise: 6 responses per prompt (1 chosen + the largest of 6 sampled rows' 'rejects')" in plan


def test_the_plans_length_guesses_count_each_rejected_answer(tmp_path):
    """The time estimate's tokens per sequence and the prompt-once row's mean, by hand: 4 characters a token,
    +10% padding, every rejected answer of a row its own sequence (or its own pair's row)."""
    import math

    from rmspec.plan import compile_plan
    from rmspec.plan.sequences import packed_lengths

    rows = _rows()
    spec = _spec(tmp_path, rows, {"columns": COLUMNS, "binarize": "all_pairs"})
    chars = [len(r["context_and_question"]) + len(t) for r in rows for t in (r["chosen"], *r["rejects"])]
    plan = compile_plan(spec)
    assert plan.estimate["tokens_per_sequence"] == math.ceil(sum(chars) / len(chars) / 4 * 1.1)
    data = spec.spec.data
    mean_row, _, per_pair, how = packed_lengths(data.source, data.mapping, spec.base_dir, 256)
    rows_chars = [len(r["context_and_question"]) + len(r["chosen"]) + len(t) for r in rows for t in r["rejects"]]
    assert mean_row == math.ceil(sum(rows_chars) / len(rows_chars) / 4 * 1.1)
    assert "from 24 sampled pairs" in how and per_pair > mean_row


@pytest.mark.parametrize("layout", ["chosen_over_rejected", "responses"])
def test_a_listwise_plan_guesses_its_prompt_once_row_from_the_sampled_lists(tmp_path, layout):
    """The listwise row [prompt | r_1 | ... | r_N] for time, by hand: prompt and every response at 4 characters a
    token, +10% padding; the unpacked count repeats the prompt for each response. It used to count every list at
    N x max_length."""
    import math

    from rmspec.plan.recipes import packed_list_lengths

    rows = _rows()
    if layout == "responses":
        rows = [
            {"q": r["context_and_question"], "answers": [r["chosen"], *r["rejects"]], "s": [5, 1, 1, 1, 1]}
            for r in rows
        ]
        mapping = {"columns": {"prompt": "q", "responses": "answers", "response_scores": "s"}}
    else:
        mapping = {"columns": COLUMNS}
    spec = _spec(tmp_path, rows, mapping, {"kind": "listwise"})
    prompts = [len(r.get("q") or r.get("context_and_question")) for r in rows]
    answers = [[len(t) for t in (r.get("answers") or [r["chosen"], *r["rejects"]])] for r in rows]
    row = sum(p + sum(a) for p, a in zip(prompts, answers)) / len(rows) / 4
    unpacked = sum(len(a) * p + sum(a) for p, a in zip(prompts, answers)) / len(rows) / 4
    got_row, bound, got_unpacked, how = packed_list_lengths(spec.spec.data, "list", spec.base_dir, 256, 5)
    assert (got_row, got_unpacked) == (math.ceil(row * 1.1), math.ceil(unpacked * 1.1))
    assert bound == 5 * 256 and "from 6 sampled lists" in how


def test_the_plan_counts_the_pairs_all_pairs_makes_of_the_rows(tmp_path):
    """20 rows of 4 rejected answers and 1 row of 1: the time estimate trains on 81 pairs, not 21 rows."""
    from rmspec.plan import compile_plan

    rows = _rows(20) + [{**_rows(1)[0], "index": 20, "rejects": "one rejected answer"}]
    plan = compile_plan(_spec(tmp_path, rows, {"columns": COLUMNS, "binarize": "all_pairs"}))
    assert plan.estimate["rows"] == 81
    assert "x 3.86 pairs a row (binarize: all_pairs, 21 sampled rows' 'rejects')" in plan.estimate["rows_source"]
    plain = compile_plan(_spec(tmp_path, rows, {"columns": COLUMNS, "binarize": "best_vs_random"}))
    assert plain.estimate["rows"] == 21


def test_binarize_on_rows_that_never_read_it_is_refused_at_validate(tmp_path):
    from rmspec.errors import SpecError

    with pytest.raises(SpecError, match="binarize makes pairs of UltraFeedback's completions or of a rejected list"):
        _spec(tmp_path, _rows(), {"columns": COLUMNS, "binarize": "all_pairs"}, {"kind": "listwise"})
    _spec(tmp_path, _rows(), {"columns": COLUMNS}, {"kind": "listwise"})  # the default, unwritten, is fine
