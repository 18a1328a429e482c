"""The embedded demo data: size, families, the length trap, held-out disjointness, determinism."""

from __future__ import annotations

import importlib.util
import re
from collections import Counter, defaultdict

import pytest

from helpers.data import DEMO, FIXTURES, REPO, bert_tokenizer, read_jsonl

FAMILIES = {"facts", "arithmetic", "constraints", "refusals", "tone", "summaries", "relevance"}


@pytest.fixture(scope="module")
def prefs():
    return read_jsonl(DEMO / "preferences.jsonl")


def _generator():
    spec = importlib.util.spec_from_file_location("make_demo_data", REPO / "scripts" / "make_demo_data.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_preferences_shape(prefs):
    assert len(prefs) >= 3000
    assert all(set(r) == {"id", "prompt", "chosen", "rejected", "family"} for r in prefs)
    assert len({r["id"] for r in prefs}) == len(prefs)
    counts = Counter(r["family"] for r in prefs)
    assert set(counts) == FAMILIES
    assert min(counts.values()) > 0.1 * len(prefs)
    assert all(r["chosen"].strip() and r["rejected"].strip() and r["chosen"] != r["rejected"] for r in prefs)


def test_length_heuristic_is_a_coin_flip_in_tokens(prefs):
    """Counted independently here with the MiniLM tokenizer: longer response = chosen is near 50%."""
    tok = bert_tokenizer()
    chosen = tok([r["chosen"] for r in prefs], add_special_tokens=False)["input_ids"]
    rejected = tok([r["rejected"] for r in prefs], add_special_tokens=False)["input_ids"]
    per = defaultdict(list)
    for r, c, j in zip(prefs, chosen, rejected):
        score = 1.0 if len(c) > len(j) else 0.5 if len(c) == len(j) else 0.0
        per[r["family"]].append(score)
        per["all"].append(score)
    acc = {k: sum(v) / len(v) for k, v in per.items()}
    assert 0.45 <= acc["all"] <= 0.55, acc
    for family in FAMILIES:
        assert 0.40 <= acc[family] <= 0.60, (family, acc[family])
    # Realistic lengths: tens of tokens typically, nothing beyond the quickstart's 256 as a pair.
    lengths = [len(c) for c in chosen]
    assert 10 <= sorted(lengths)[len(lengths) // 2] <= 200


def test_content_signals_hold(prefs):
    """Spot-check the signals a reward model should learn, on the clean (non-swapped) majority."""
    gen = _generator()
    words = lambda text: set(re.findall(r"\d+|[a-z]+", text.lower()))  # noqa: E731
    boilerplate = words(
        " ".join(gen.FILLER + gen.OPENERS) + " I am completely sure about this. This is clearly stated."
        " According to the passage, the text says that from the background; the flag shows"
    )
    # Facts: the right answer only uses what the passage states; the wrong one brings in a new entity.
    facts = [r for r in prefs if r["family"] == "facts"]
    new = lambda resp, prompt: words(resp) - words(prompt) - boilerplate  # noqa: E731
    grounded = sum(1 for r in facts if not new(r["chosen"], r["prompt"]) and new(r["rejected"], r["prompt"]))
    assert grounded / len(facts) > 0.85
    refusals = [r for r in prefs if r["family"] == "refusals"]
    refuse = re.compile(r"\b(can't|cannot|won't|not able|sorry)\b", re.I)
    chosen_refuses = sum(bool(refuse.search(r["chosen"])) for r in refusals) / len(refusals)
    rejected_refuses = sum(bool(refuse.search(r["rejected"])) for r in refusals) / len(refusals)
    assert 0.3 < chosen_refuses < 0.7 and 0.3 < rejected_refuses < 0.7  # refusing is right only for harmful asks


def test_label_noise_is_a_few_percent():
    gen = _generator()
    rows = gen.make_pairs(gen.TRAIN_SEED, gen.N_TRAIN, gen.LABEL_NOISE)
    share = sum(r["noisy"] for r in rows) / len(rows)
    assert 0.01 < share < 0.06


def test_committed_files_match_the_generator(prefs):
    gen = _generator()
    files = gen.build()
    assert files["demo/preferences.jsonl"] == prefs
    assert files["demo/benchmark_pairs.jsonl"] == read_jsonl(DEMO / "benchmark_pairs.jsonl")
    assert files["demo/judge_messages.jsonl"] == read_jsonl(DEMO / "judge_messages.jsonl")
    for name in (
        "hh_rlhf.jsonl",
        "shp.jsonl",
        "helpsteer2.jsonl",
        "ultrafeedback_binarized.jsonl",
        "ultrafeedback_raw.jsonl",
    ):
        assert files[f"fixtures/{name}"] == read_jsonl(FIXTURES / name)


def test_benchmark_is_held_out(prefs):
    bench = read_jsonl(DEMO / "benchmark_pairs.jsonl")
    assert 200 <= len(bench) <= 1000
    assert all(set(r) == {"id", "prompt", "chosen", "rejected", "subset"} for r in bench)
    assert not {r["prompt"] for r in bench} & {r["prompt"] for r in prefs}
    assert set(Counter(r["subset"] for r in bench)) == FAMILIES


def test_judge_messages():
    rows = read_jsonl(DEMO / "judge_messages.jsonl")
    assert len(rows) >= 200
    verdicts = Counter()
    for r in rows:
        user, assistant = r["messages"]
        assert user["role"] == "user" and "[Response A]" in user["content"] and "[Response B]" in user["content"]
        assert assistant["role"] == "assistant"
        found = re.findall(r"\[\[(A|B)\]\]", assistant["content"])
        assert len(found) == 1
        verdicts[found[0]] += 1
    assert 0.35 < verdicts["A"] / len(rows) < 0.65  # position is not a shortcut
