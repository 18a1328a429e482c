"""The recipe demo files (issue 21): ranked, length-biased, ties. They match the generator, keep their
shapes, and have the statistics they are built for, counted here independently in MiniLM tokens."""

from __future__ import annotations

import importlib.util
import itertools
from collections import Counter

import pytest

from helpers.data import DEMO, REPO, bert_tokenizer, read_jsonl

FILES = [
    "ranked.jsonl",
    "ranked_heldout.jsonl",
    "length_biased.jsonl",
    "length_balanced_heldout.jsonl",
    "ties.jsonl",
    "ties_heldout.jsonl",
]
HELD_OUT = {
    "ranked.jsonl": "ranked_heldout.jsonl",
    "length_biased.jsonl": "length_balanced_heldout.jsonl",
    "ties.jsonl": "ties_heldout.jsonl",
}


@pytest.fixture(scope="module")
def files():
    spec = importlib.util.spec_from_file_location("make_demo_data", REPO / "scripts" / "make_demo_data.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.build()


@pytest.fixture(scope="module")
def tok():
    return bert_tokenizer()


def n_tokens(tok, texts):
    return [len(ids) for ids in tok(texts, add_special_tokens=False)["input_ids"]]


def test_committed_recipe_files_match_the_generator_and_stay_small(files):
    for name in FILES:
        assert files[f"demo/{name}"] == read_jsonl(DEMO / name), name
        assert (DEMO / name).stat().st_size < 1_000_000, name


def test_held_out_prompts_are_new():
    main = {r["prompt"] for r in read_jsonl(DEMO / "preferences.jsonl")}
    for train, held in HELD_OUT.items():
        train_prompts = {r["prompt"] for r in read_jsonl(DEMO / train)}
        held_prompts = {r["prompt"] for r in read_jsonl(DEMO / held)}
        assert not held_prompts & (train_prompts | main), held
        assert not train_prompts & main, train


def test_ranked_shape_order_and_no_length_signal(tok):
    for name, key in (("ranked.jsonl", "family"), ("ranked_heldout.jsonl", "subset")):
        rows = read_jsonl(DEMO / name)
        assert all(set(r) == {"id", "prompt", "responses", "scores", key} for r in rows)
        assert all(len(r["responses"]) == 4 == len(r["scores"]) and len(set(r["responses"])) == 4 for r in rows)
        tied = sum(len(set(r["scores"])) < 4 for r in rows) / len(rows)
        assert 0.08 < tied < 0.25, (name, tied)
        hits = total = 0
        for r in rows:
            lengths = n_tokens(tok, r["responses"])
            for i, j in itertools.permutations(range(4), 2):
                if r["scores"][i] > r["scores"][j]:
                    total += 1
                    hits += 1.0 if lengths[i] > lengths[j] else 0.5 if lengths[i] == lengths[j] else 0.0
        assert 0.45 < hits / total < 0.55, (name, hits / total)
    # The labelled order is right-polite > right-rude > wrong-polite > wrong-rude: the best response is
    # never rude (a rude opener from the shared pool starts the rude ones).
    rude = ("Ugh", "Are you kidding", "What a dumb", "Fine, if you", "Do I have to", "Obviously.")
    rows = read_jsonl(DEMO / "ranked_heldout.jsonl")
    best = [r["responses"][r["scores"].index(max(r["scores"]))] for r in rows]
    assert not any(b.startswith(rude) for b in best)


def test_length_bias_in_training_and_balance_in_held_out(tok):
    def longer_chosen(rows):
        c, r = n_tokens(tok, [x["chosen"] for x in rows]), n_tokens(tok, [x["rejected"] for x in rows])
        return sum(1.0 if a > b else 0.5 if a == b else 0.0 for a, b in zip(c, r)) / len(rows)

    train = read_jsonl(DEMO / "length_biased.jsonl")
    held = read_jsonl(DEMO / "length_balanced_heldout.jsonl")
    assert all(set(r) == {"id", "prompt", "chosen", "rejected", "family"} for r in train)
    assert all(set(r) == {"id", "prompt", "chosen", "rejected", "subset"} for r in held)
    assert 0.75 < longer_chosen(train) < 0.85
    assert 0.46 < longer_chosen(held) < 0.54
    assert len(Counter(r["subset"] for r in held)) == 7


def test_ties_share_and_tie_rows_are_one_answer():
    for name in ("ties.jsonl", "ties_heldout.jsonl"):
        rows = read_jsonl(DEMO / name)
        assert all(isinstance(r["tie"], bool) and r["chosen"] != r["rejected"] for r in rows)
        share = sum(r["tie"] for r in rows) / len(rows)
        assert 0.15 < share < 0.25, (name, share)
    # A tie's two sides differ only by opener and filler: the family's core answer is in both.
    gen_rows = read_jsonl(DEMO / "ties.jsonl")
    arithmetic_ties = [r for r in gen_rows if r["tie"] and r["family"] == "arithmetic"]
    assert arithmetic_ties
    for r in arithmetic_ties:
        numbers = lambda s: [w for w in s.replace(".", " ").split() if w.isdigit()]  # noqa: E731
        assert numbers(r["chosen"]) == numbers(r["rejected"])
