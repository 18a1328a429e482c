"""The data report counts the pairs whose one prompt cut (both sides lose the same prompt tokens,
as the packed row [prefix | chosen | rejected] needs) differs from cutting each sequence on its own.

Expected values come from the chat template rendered and tokenized independently of rmspec."""

from __future__ import annotations

import pytest

from helpers.data import chat_tokenizer, make_spec, write_jsonl
from rmspec.data import prepare
from rmspec.data.tokenize import shared_prefix_cut

WORDS = [f"w{i}" for i in range(300)]
LIMIT = 64


def words(start: int, n: int) -> str:
    return " ".join(WORDS[start : start + n])


ROWS = [
    # the longer side is over the limit, the shorter one also over but by less: flagged
    {"id": "a", "prompt": words(0, 60), "chosen": words(100, 2), "rejected": words(110, 12)},
    # both sides the same length: the common cut is each side's own cut: truncated, not flagged
    {"id": "b", "prompt": words(0, 60), "chosen": words(130, 12), "rejected": words(150, 12)},
    # short: nothing cut
    {"id": "c", "prompt": words(0, 5), "chosen": words(100, 3), "rejected": words(110, 4)},
    # the shorter side fits on its own, the longer one does not: flagged
    {"id": "d", "prompt": words(0, 52), "chosen": words(200, 2), "rejected": words(210, 12)},
]


def full_length(tok, prompt: str, response: str) -> int:
    text = tok.apply_chat_template(
        [{"role": "user", "content": prompt}, {"role": "assistant", "content": response}], tokenize=False
    )
    return len(tok(text, add_special_tokens=False)["input_ids"])


def prepared(tmp_path, tok, policy: str):
    write_jsonl(tmp_path / "d.jsonl", ROWS)
    loaded = make_spec(
        tmp_path,
        {
            "source": {"kind": "files", "paths": ["d.jsonl"]},
            "mapping": {"preset": "pairs"},
            "filters": [{"kind": "max_length", "policy": policy}],
        },
        max_length=LIMIT,
    )
    return prepare(loaded, tok, cache_dir=tmp_path / "cache", rejects_path=tmp_path / "rejects.jsonl")


def test_the_rule_by_hand():
    assert not shared_prefix_cut(70, 70, 64, 6)  # same length: same cut either way
    assert shared_prefix_cut(60, 70, 64, 6)  # the shorter side alone would not be cut at all
    assert shared_prefix_cut(66, 70, 64, 6)  # alone it would lose 2, not 6
    assert not shared_prefix_cut(60, 70, 64, None)  # no cut (drop / truncate_response / fits)


def test_report_counts_pairs_whose_common_cut_differs(tmp_path):
    tok = chat_tokenizer([" ".join(WORDS)])
    lengths = {
        r["id"]: (full_length(tok, r["prompt"], r["chosen"]), full_length(tok, r["prompt"], r["rejected"]))
        for r in ROWS
    }
    # The expectation from the independent lengths: over the limit, and the two sides differ in length.
    expected = {i for i, (c, r) in lengths.items() if max(c, r) > LIMIT and c != r}
    assert expected == {"a", "d"}
    assert lengths["a"][0] > LIMIT and lengths["d"][0] <= LIMIT  # both kinds of flagged pair are covered

    out = prepared(tmp_path, tok, "truncate_prompt_left")
    rows = {r["id"]: r for r in out.train}
    if out.validation is not None:
        rows.update({r["id"]: r for r in out.validation})
    assert set(rows) == {"a", "b", "c", "d"}
    assert out.report.shared_prefix_cut_pairs == len(expected) == 2
    # Flagged pairs are a subset of the truncated ones, and the counts reconcile with truncation_rate.
    truncated = {i for i, r in rows.items() if (len(r["chosen_input_ids"]), len(r["rejected_input_ids"])) != lengths[i]}
    assert truncated == {"a", "b", "d"} and expected <= truncated
    assert out.report.truncation_rate == pytest.approx(len(truncated) / len(rows))
    assert out.report.to_json()["shared_prefix_cut_pairs"] == 2
    for i in expected:
        c, r = lengths[i]
        common = max(c, r) - LIMIT
        short_side = "chosen" if c < r else "rejected"
        # The shorter side lost the common cut, not its own max(0, len - limit).
        assert len(rows[i][f"{short_side}_input_ids"]) == min(c, r) - common
        assert len(rows[i][f"{short_side}_input_ids"]) < min(min(c, r), LIMIT)
        # Both sides still share the same prefix: the prompt they answer is the same.
        ci, ri = rows[i]["chosen_input_ids"], rows[i]["rejected_input_ids"]
        reply = len(tok(next(x["chosen"] for x in ROWS if x["id"] == i), add_special_tokens=False)["input_ids"])
        prefix = len(ci) - reply - 1  # ... <|im_start|> assistant | reply | <|im_end|>
        assert ci[:prefix] == ri[:prefix]


@pytest.mark.parametrize("policy", ["truncate_response", "drop"])
def test_no_common_prompt_cut_no_count(tmp_path, policy):
    out = prepared(tmp_path, chat_tokenizer([" ".join(WORDS)]), policy)
    assert out.report.shared_prefix_cut_pairs == 0
    if policy == "truncate_response":
        assert out.report.truncation_rate > 0


def test_data_view_shows_the_count():
    from rich.console import Console

    from rmspec.render.data_view import print_report

    console = Console(record=True, width=200)
    print_report(
        {
            "rows_read": 4,
            "rows_kept": 4,
            "rejected": {},
            "reconciled": True,
            "splits": {"train": 4},
            "approach": "bradley_terry",
            "truncation_rate": 0.75,
            "shared_prefix_cut_pairs": 2,
        },
        console,
    )
    text = console.export_text()
    assert "75.0%" in text and "prompt cut for both" in text and "2 pairs" in text
