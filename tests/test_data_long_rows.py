"""Long rows (issue 49 item 4): pairs of 30k-100k tokens read, tokenize and pack with no silent cut.

With `max_length` 65,536: a row that fits keeps every token (the chat template's layout of the whole
prompt and both answers), and the shared-prefix packer holds all of it; a row over
the limit leaves with its reason and its length (policy `drop`), or, under the default policy, is cut
from the prompt's start and counted (`truncated`, the report's truncation rate and its note). The data
report counts the rows per length bucket.
"""

from __future__ import annotations

import pytest

from helpers.data import chat_tokenizer, make_spec, read_jsonl, write_jsonl
from rmspec.data import prepare

WORDS = [f"w{i}" for i in range(1000)]
LIMIT = 65_536


@pytest.fixture(scope="module")
def tok():
    return chat_tokenizer([" ".join(WORDS)])  # one token per word


def long_text(n: int, seed: int) -> str:
    return " ".join(WORDS[(seed + 7 * k) % len(WORDS)] for k in range(n))


def conversation(prompt_words: int, k: int) -> dict:
    prompt = [{"role": "user", "content": long_text(prompt_words, k)}]
    return {
        "prompt": prompt,
        "chosen": [*prompt, {"role": "assistant", "content": long_text(40, k + 1)}],
        "rejected": [*prompt, {"role": "assistant", "content": long_text(25, k + 2)}],
    }


# Prompts of about 30k, 60k and 100k tokens, and a short one.
ROWS = [conversation(30_000, 0), conversation(60_000, 1), conversation(100_000, 2), conversation(50, 3)]


def whole(tok, row: dict, side: str) -> list[int]:
    """The sequence as the chat template lays it out, every token."""
    return tok(tok.apply_chat_template(row[side], tokenize=False), add_special_tokens=False)["input_ids"]


def run(tmp_path, tok, filters):
    write_jsonl(tmp_path / "long.jsonl", ROWS)
    loaded = make_spec(
        tmp_path,
        {
            "source": {"kind": "files", "paths": ["long.jsonl"]},
            "mapping": {"preset": "conversational"},
            "filters": filters,
        },
        max_length=LIMIT,
        model="Qwen/Qwen2.5-0.5B-Instruct",
    )
    return prepare(loaded, tok, cache_dir=tmp_path / "cache", rejects_path=tmp_path / "rejects.jsonl")


def test_long_rows_kept_whole_and_over_the_limit_dropped_with_the_reason(tmp_path, tok):
    prepared = run(tmp_path, tok, [{"kind": "max_length", "policy": "drop"}])
    kept = sorted(prepared.train, key=lambda r: -len(r["chosen_input_ids"]))
    assert len(kept) == 3
    for row, source in zip(kept, [ROWS[1], ROWS[0], ROWS[3]]):
        for side in ("chosen", "rejected"):
            assert row[f"{side}_input_ids"] == whole(tok, source, side)  # no token lost
    assert len(kept[0]["chosen_input_ids"]) > 60_000

    (reject,) = read_jsonl(tmp_path / "rejects.jsonl")
    n = len(whole(tok, ROWS[2], "chosen"))
    assert (reject["reason"], reject["stage"], reject["source_index"]) == ("too_long", "filter:max_length", 2)
    assert reject["detail"] == f"{n} tokens > max {LIMIT}" and n > 100_000
    report = prepared.report.to_json()
    assert report["rejected"] == {"too_long": 1} and report["truncation_rate"] == 0.0
    sequence = report["token_lengths"]["chosen_sequence"]
    assert sequence["buckets"] == {"<=512": 1, "<=32k": 1, "<=64k": 1} and sequence["over_max_length"] == 0
    assert report["token_lengths"]["prompt"]["buckets"] == {"<=512": 1, "<=32k": 1, "<=64k": 1}

    # The shared-prefix packer holds every token: the prompt once, then each answer.
    from rmspec.train.packing import PackedPairCollator

    row = kept[0]
    batch = PackedPairCollator(pad_token_id=tok.pad_token_id)([row])
    chosen, rejected = row["chosen_input_ids"], row["rejected_input_ids"]
    common = next(i for i, (a, b) in enumerate(zip(chosen, rejected)) if a != b)
    assert batch["input_ids"].shape[-1] == len(chosen) + len(rejected) - common
    ends = batch["packed_ends"].tolist()
    flat = batch["input_ids"].flatten().tolist()
    assert flat[ends[0]] == chosen[-1] and flat[ends[1]] == rejected[-1]
    assert batch["position_ids"].flatten().tolist()[ends[1]] == len(rejected) - 1  # the global position


def test_the_default_policy_cuts_the_prompt_and_says_so(tmp_path, tok):
    prepared = run(tmp_path, tok, [])
    report = prepared.report.to_json()
    assert len(prepared.train) == 4 and report["rejected"] == {}
    full = {len(whole(tok, r, "chosen")) for r in ROWS}
    cut = [r for r in prepared.train if len(r["chosen_input_ids"]) not in full]
    assert len(cut) == 1 and len(cut[0]["chosen_input_ids"]) == LIMIT
    assert cut[0]["chosen_input_ids"][-41:] == whole(tok, ROWS[2], "chosen")[-41:]  # the answer stays whole
    assert report["truncation_rate"] == 0.25
    assert any("applied one at the end (policy truncate_prompt_left" in n for n in report["notes"])
    # Lengths before any cut: the report shows the row past the limit.
    assert report["token_lengths"]["chosen_sequence"]["buckets"] == {"<=512": 1, "<=32k": 1, "<=64k": 1, "<=128k": 1}
    assert report["token_lengths"]["chosen_sequence"]["over_max_length"] == 1


def test_the_data_view_shows_the_buckets(tmp_path, tok):
    from rich.console import Console

    from rmspec.render.data_view import report_view

    prepared = run(tmp_path, tok, [])
    console = Console(record=True, width=140)
    console.print(report_view(prepared.report.to_json()))
    text = console.export_text()
    assert "rows by length (tokens)" in text and "<=64k" in text and "<=128k" in text
