"""Process reward data: the three presets on hand-made files, and step labels on the right tokens.

Token positions are checked by hand for a Llama-shaped (word-level, BOS-less, EOS tokenizer), a
Qwen2-shaped (byte-level BPE) and a BERT-shaped (CLS/SEP text pair) tiny tokenizer: the label
must sit on the separator's last token after each step, and nowhere else.
"""

from __future__ import annotations

import json

import pytest

from helpers.data import make_spec, write_jsonl
from rmspec.data import load_canonical, prepare
from rmspec.data.layout import Layout
from rmspec.data.steps import IGNORE, StepEncoder, math_shepherd
from rmspec.errors import DataError

PRM = {"kind": "process", "step_separator": " w79"}


def canonical(tmp_path, rows, mapping, approach=PRM):
    file = write_jsonl(tmp_path / "d.jsonl", rows)
    loaded = make_spec(tmp_path, {"source": {"kind": "files", "paths": [str(file)]}, "mapping": mapping}, approach)
    ds, report = load_canonical(loaded, rejects_path=tmp_path / "rejects.jsonl")
    rejects = [json.loads(x) for x in (tmp_path / "rejects.jsonl").read_text().splitlines()]
    return ds.to_list(), report, rejects


def test_stepwise_preset_and_label_count_rejects(tmp_path):
    rows = [
        {"prompt": "2+2?", "completions": ["2+2=4", "so 4"], "labels": [True, True]},
        {"prompt": "3*3?", "completions": ["3*3=6", "so 6"], "labels": [False, False]},
        {"prompt": "bad", "completions": ["a", "b", "c"], "labels": [True, False]},  # 2 labels, 3 steps
        {"prompt": "bad2", "completions": ["a"], "labels": ["yes"]},
        {"prompt": "bad3", "completions": [], "labels": []},
    ]
    out, report, rejects = canonical(tmp_path, rows, {"preset": "stepwise"})
    assert [(r["prompt_messages"][0]["content"], r["steps"], r["step_labels"]) for r in out] == [
        ("2+2?", ["2+2=4", "so 4"], [1, 1]),
        ("3*3?", ["3*3=6", "so 6"], [0, 0]),
    ]
    assert report.rejected == {"label_count_mismatch": 1, "wrong_type": 1, "no_steps": 1}
    mismatch = next(r for r in rejects if r["reason"] == "label_count_mismatch")
    assert "2 label(s) for 3 step(s)" in mismatch["detail"]


def test_math_shepherd_raw_preset(tmp_path):
    text = (
        "Janet has 3 apples and buys 2. How many? Step 1: 3 + 2 = 5 ки\nStep 2: She has 6 apples. The answer is: 6 ки"
    )
    label = text.replace("ки", "\x00")
    label = label[: label.index("\x00")] + "+" + label[label.index("\x00") + 1 :]
    label = label.replace("\x00", "-")
    rows = [
        {"input": text, "label": label, "task": "GSM8K"},
        {"input": "No steps here", "label": "No steps here", "task": "GSM8K"},
        {"input": "Q? Step 1: x ки", "label": "Q? Step 1: x  +", "task": "GSM8K"},
    ]  # label text misaligned
    out, report, _ = canonical(tmp_path, rows, {"preset": "math-shepherd"})
    assert len(out) == 1
    assert out[0]["prompt_messages"] == [{"role": "user", "content": "Janet has 3 apples and buys 2. How many?"}]
    assert out[0]["steps"] == ["Step 1: 3 + 2 = 5", "Step 2: She has 6 apples. The answer is: 6"]
    assert out[0]["step_labels"] == [1, 0]
    assert report.rejected == {"no_steps": 1, "label_count_mismatch": 1}
    # the same split as TRL's conversion script: question before "Step 1:", one label per ки
    q, steps, labels = math_shepherd("Q? step 1: a ки b ки", "Q? step 1: a + b -")
    assert (q, steps, labels) == ("Q?", ["step 1: a", "b"], [1, 0])


def test_processbench_preset_keeps_steps_up_to_the_first_error(tmp_path):
    rows = [
        {"id": "gsm8k-0", "problem": "p0", "steps": ["a", "b", "c"], "label": -1},
        {"id": "gsm8k-1", "problem": "p1", "steps": ["a", "b", "c", "d"], "label": 1},
        {"id": "gsm8k-2", "problem": "p2", "steps": ["a"], "label": 3},
        {"id": "gsm8k-3", "problem": "p3", "steps": ["a"], "label": True},
    ]
    out, report, _ = canonical(tmp_path, rows, {"preset": "processbench", "columns": {"id": "id"}})
    assert [(r["id"], r["steps"], r["step_labels"]) for r in out] == [
        ("gsm8k-0", ["a", "b", "c"], [1, 1, 1]),
        ("gsm8k-1", ["a", "b"], [1, 0]),
    ]
    assert report.rejected == {"label_count_mismatch": 1, "wrong_type": 1}


def test_spec_rules_for_process(tmp_path):
    from rmspec.errors import SpecError

    with pytest.raises(SpecError) as err:
        make_spec(tmp_path, {"source": {"kind": "files", "paths": ["x.jsonl"]}, "mapping": {"preset": "pairs"}}, PRM)
    assert "process" in str(err.value) and "stepwise" in str(err.value)
    with pytest.raises(SpecError) as err:
        make_spec(tmp_path, {"source": {"kind": "files", "paths": ["x.jsonl"]}, "mapping": {"preset": "stepwise"}})
    assert "approach" in str(err.value)


# ------------------------------------------------------------------ tokens, by hand


@pytest.fixture(scope="module")
def tokenizers(tmp_path_factory):
    from helpers.data import bert_tokenizer
    from helpers.models import build_bpe_tokenizer, build_tokenizer

    root = tmp_path_factory.mktemp("prm_tok")
    # BERT-shaped: the packaged MiniLM tokenizer (a real [CLS] a [SEP] b [SEP] pair template).
    return {
        "llama": build_tokenizer(root / "llama", unk=True),
        "qwen2": build_bpe_tokenizer(root / "qwen2"),
        "bert": bert_tokenizer(),
    }


def ids(tok, text):
    return tok(text, add_special_tokens=False)["input_ids"]


@pytest.mark.parametrize("kind", ["llama", "qwen2", "bert"])
def test_step_labels_sit_on_each_separator_token(tokenizers, kind):
    tok = tokenizers[kind]
    sep = {"qwen2": "\n", "llama": " w79", "bert": " ;"}[kind]
    layout = Layout(tok, "plain" if kind != "bert" else "auto")
    enc = StepEncoder(layout, sep)
    prompt = [{"role": "user", "content": "w1 w2 w3"}]
    steps = ["w10 w11", "w12", "w13 w14 w15"] if kind != "bert" else ["two plus two", "is four", "so four"]
    seq = enc.encode([prompt], [steps], [[1, 0, 1]], 128)[0]
    sep_ids = ids(tok, sep)
    assert len(sep_ids) == 1
    step_ids = [ids(tok, s) + sep_ids for s in steps]
    if kind == "bert":  # [CLS] prompt [SEP] steps [SEP], segment 0 then 1
        cls_, sep_tok = tok.cls_token_id, tok.sep_token_id
        prefix = [cls_] + ids(tok, "w1 w2 w3") + [sep_tok]
        expected = prefix + sum(step_ids, []) + [sep_tok]
        assert seq.type_ids == [0] * len(prefix) + [1] * (len(expected) - len(prefix))
    else:  # plain layout: "User: ...\n\nAssistant:" then a newline, then the steps (no EOS)
        prefix = ids(tok, "User: w1 w2 w3\n\nAssistant:") + ids(tok, "\n")
        expected = prefix + sum(step_ids, [])
    assert seq.ids == expected
    # labels: only at the last token of each step + separator
    ends, pos = [], len(prefix)
    for piece in step_ids:
        pos += len(piece)
        ends.append(pos - 1)
    assert seq.ends == ends
    assert [i for i, lab in enumerate(seq.labels) if lab != IGNORE] == ends
    assert [seq.labels[e] for e in ends] == [1, 0, 1]
    assert all(seq.ids[e] == sep_ids[-1] for e in ends)


def test_steps_past_max_length_are_dropped_whole(tokenizers):
    tok = tokenizers["llama"]
    enc = StepEncoder(Layout(tok, "plain"), " w79")
    prompt = [{"role": "user", "content": "w1"}]
    full = enc.encode([prompt], [["w10 w11 w12", "w13 w14", "w15"]], [[1, 1, 0]], 1000)[0]
    prefix = len(full.ids) - (4 + 3 + 2)
    # room for the first step and half of the second: the second (and third) go, whole
    cut = enc.encode([prompt], [["w10 w11 w12", "w13 w14", "w15"]], [[1, 1, 0]], prefix + 4 + 2)[0]
    assert cut.ids == full.ids[: prefix + 4] and cut.steps_dropped == 2 and cut.labels[-1] == 1
    assert enc.encode([prompt], [["w10 w11 w12"]], [[1]], prefix + 3)[0] is None


def test_separator_that_tokenizes_to_nothing_is_a_clear_error(tokenizers):
    # BERT's normaliser drops newlines: TRL's default separator gives no token to put the label on
    with pytest.raises(DataError, match="tokenizes to nothing"):
        StepEncoder(Layout(tokenizers["bert"]), "\n")


def test_prepare_counts_dropped_steps_and_rejects_rows_with_none_left(tmp_path):
    from transformers import AutoTokenizer

    from rmspec.packaged import resolve_model_path

    tok = AutoTokenizer.from_pretrained(resolve_model_path("sentence-transformers/all-MiniLM-L6-v2"))
    long_step = "one two three four five six seven eight nine ten"
    rows = [
        {"prompt": "short", "completions": ["a", "b"], "labels": [True, False]},
        {"prompt": "short", "completions": ["c", long_step, long_step, long_step], "labels": [True, True, True, False]},
        {"prompt": " ".join(["word"] * 40), "completions": ["d"], "labels": [False]},
    ]
    file = write_jsonl(tmp_path / "d.jsonl", rows)
    loaded = make_spec(
        tmp_path,
        {"source": {"kind": "files", "paths": [str(file)]}, "mapping": {"preset": "stepwise"}},
        {"kind": "process", "step_separator": " ;"},
        max_length=24,
    )
    prepared = prepare(loaded, tok, rejects_path=tmp_path / "rej.jsonl", cache_dir=tmp_path / "cache")
    report = prepared.report.to_json()
    assert report["rejected"] == {"no_step_fits": 1}
    assert report["steps"]["steps_dropped_past_max_length"] == 2 and report["steps"]["rows_with_steps_dropped"] == 1
    rej = [json.loads(x) for x in (tmp_path / "rej.jsonl").read_text().splitlines()]
    assert rej[0]["reason"] == "no_step_fits" and "[0]" in rej[0]["detail"]
    kept = {tuple(r["steps"]): r for r in prepared.train}
    second = kept[("c", long_step)]
    assert second["step_labels"] == [1, 1] and len(second["input_ids"]) == 3 + 2 + 11 + 1
    assert [lab for lab in second["labels"] if lab != IGNORE] == [1, 1]
