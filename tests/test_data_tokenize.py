"""Tokenization as the model sees it: text pairs for encoders, the chat template for chat models,
a plain layout otherwise; every truncation keeps the end of the response as the last token."""

from __future__ import annotations

import pytest

from helpers.data import bert_tokenizer, chat_tokenizer, make_spec, plain_tokenizer, write_jsonl
from rmspec.data import prepare

WORDS = [f"w{i}" for i in range(300)]
LONG_PROMPT = " ".join(WORDS[:200])


def corpus():
    return [" ".join(WORDS), "hello how are you fine thanks bad answer good answer question"]


def run(tmp_path, rows, tokenizer, filters=None, approach=None, max_length=64, mapping=None, model=None):
    write_jsonl(tmp_path / "d.jsonl", rows)
    loaded = make_spec(
        tmp_path,
        {
            "source": {"kind": "files", "paths": ["d.jsonl"]},
            "mapping": mapping or {"preset": "pairs"},
            "filters": filters or [],
        },
        approach=approach,
        max_length=max_length,
        **({"model": model} if model else {}),
    )
    return prepare(loaded, tokenizer, cache_dir=tmp_path / "cache", rejects_path=tmp_path / "rejects.jsonl")


def test_encoder_pairs_match_the_tokenizer_text_pair(tmp_path):
    tok = bert_tokenizer()
    rows = [{"prompt": "What is the capital of France?", "chosen": "Paris, of course.", "rejected": "Lyon."}]
    row = run(tmp_path, rows, tok).train[0]
    expected = tok(rows[0]["prompt"], rows[0]["chosen"])
    assert row["chosen_input_ids"] == expected["input_ids"]
    assert row["chosen_token_type_ids"] == expected["token_type_ids"]
    assert row["rejected_input_ids"] == tok(rows[0]["prompt"], rows[0]["rejected"])["input_ids"]


def test_encoder_truncate_prompt_left_keeps_responses_whole(tmp_path):
    tok = bert_tokenizer()
    rows = [{"prompt": LONG_PROMPT, "chosen": "the good answer", "rejected": "a much longer bad answer here"}]
    prepared = run(tmp_path, rows, tok, [{"kind": "max_length", "policy": "truncate_prompt_left"}], max_length=40)
    row = prepared.train[0]
    prompt_ids = tok(LONG_PROMPT, add_special_tokens=False)["input_ids"]
    for side in ("chosen", "rejected"):
        ids = row[f"{side}_input_ids"]
        response = tok(rows[0][side], add_special_tokens=False)["input_ids"]
        assert len(ids) <= 40 and ids[0] == tok.cls_token_id and ids[-1] == tok.sep_token_id
        assert ids[-1 - len(response) : -1] == response  # the whole response, right before the final [SEP]
    # Both sides keep the same (rightmost) prompt tokens: they still answer the same prompt.
    longest = row["rejected_input_ids"]
    kept_prompt = longest[1 : longest.index(tok.sep_token_id)]
    assert kept_prompt == prompt_ids[-len(kept_prompt) :]
    assert row["chosen_input_ids"][1 : len(kept_prompt) + 1] == kept_prompt
    assert prepared.report.truncation_rate == 1.0


def test_encoder_truncate_response_keeps_final_sep(tmp_path):
    tok = bert_tokenizer()
    rows = [{"prompt": "short question", "chosen": LONG_PROMPT, "rejected": "no"}]
    row = run(tmp_path, rows, tok, [{"kind": "max_length", "policy": "truncate_response"}], max_length=32).train[0]
    ids = row["chosen_input_ids"]
    assert len(ids) == 32 and ids[-1] == tok.sep_token_id and ids[-2] != tok.sep_token_id
    assert ids[:4] == tok("short question")["input_ids"]
    assert row["chosen"] == tok.decode(ids[4:-1])  # the text column shows what the model sees


def test_response_too_long_for_truncate_prompt_left(tmp_path):
    prepared = run(
        tmp_path,
        [{"prompt": "q", "chosen": LONG_PROMPT, "rejected": "no"}, {"prompt": "q2", "chosen": "yes", "rejected": "no"}],
        bert_tokenizer(),
        [{"kind": "max_length", "policy": "truncate_prompt_left"}],
        max_length=32,
    )
    assert prepared.report.rejected == {"response_too_long": 1} and len(prepared.train) == 1


def test_chat_template_rendering_and_truncation(tmp_path):
    tok = chat_tokenizer(corpus())
    conv = [{"role": "user", "content": "hello how are you"}]
    rows = [
        {
            "prompt": conv,
            "chosen": [*conv, {"role": "assistant", "content": "fine thanks"}],
            "rejected": [*conv, {"role": "assistant", "content": "bad answer"}],
        }
    ]
    row = run(tmp_path, rows, tok, mapping={"preset": "conversational"}).train[0]
    whole = tok.apply_chat_template([*conv, {"role": "assistant", "content": "fine thanks"}], tokenize=False)
    assert row["chosen_input_ids"] == tok(whole, add_special_tokens=False)["input_ids"]
    assert row["prompt"] == tok.apply_chat_template(conv, tokenize=False, add_generation_prompt=True)
    end = tok.convert_tokens_to_ids("<|im_end|>")
    assert row["chosen_input_ids"][-1] == end
    # A response too long for the limit is cut, and <|im_end|> is still the last token.
    long_rows = [
        {
            "prompt": conv,
            "chosen": [*conv, {"role": "assistant", "content": LONG_PROMPT}],
            "rejected": [*conv, {"role": "assistant", "content": "bad answer"}],
        }
    ]
    (tmp_path / "long").mkdir()
    cut = run(
        tmp_path / "long",
        long_rows,
        tok,
        [{"kind": "max_length", "policy": "truncate_response"}],
        mapping={"preset": "conversational"},
        max_length=24,
    ).train[0]
    ids = cut["chosen_input_ids"]
    assert len(ids) == 24 and ids[-1] == end
    start = tok.convert_tokens_to_ids("<|im_start|>")
    assistant_header = [start, tok.convert_tokens_to_ids("assistant")]
    assert any(ids[i : i + 2] == assistant_header for i in range(len(ids) - 1))  # the reply header is kept


def test_plain_layout_for_a_decoder_without_template(tmp_path):
    tok = plain_tokenizer(corpus())
    rows = [{"prompt": "hello how are you", "chosen": "fine thanks", "rejected": "bad answer"}]
    row = run(tmp_path, rows, tok).train[0]
    expected = (
        tok("User: hello how are you\n\nAssistant:", add_special_tokens=False)["input_ids"]
        + tok(" fine thanks", add_special_tokens=False)["input_ids"]
        + [tok.eos_token_id]
    )
    assert row["chosen_input_ids"] == expected
    assert "chosen_token_type_ids" not in row  # only encoders get segment ids


def test_generative_labels_cover_assistant_turns_only(tmp_path):
    tok = chat_tokenizer(corpus())
    msgs = [
        {"role": "user", "content": "hello how are you"},
        {"role": "assistant", "content": "fine thanks"},
        {"role": "user", "content": "good answer question"},
        {"role": "assistant", "content": "bad answer"},
    ]
    row = run(
        tmp_path,
        [{"messages": msgs}],
        tok,
        approach={"kind": "generative"},
        mapping={"preset": "messages"},
        max_length=128,
        model="Qwen/Qwen2.5-0.5B-Instruct",
    ).train[0]
    whole = tok.apply_chat_template(msgs, tokenize=False)
    assert row["input_ids"] == tok(whole, add_special_tokens=False)["input_ids"]
    learned = [t for t, lab in zip(row["input_ids"], row["labels"]) if lab != -100]
    assert tok.convert_ids_to_tokens(learned) == ["fine", "thanks", "<|im_end|>", "bad", "answer", "<|im_end|>"]
    assert all(lab in (-100, t) for t, lab in zip(row["input_ids"], row["labels"]))


def test_pointwise_scores_in_attribute_order(tmp_path):
    tok = bert_tokenizer()
    rows = [{"prompt": "q", "response": "an answer", "helpfulness": 3, "verbosity": 1}]
    prepared = run(
        tmp_path,
        rows,
        tok,
        approach={"kind": "pointwise", "attributes": ["verbosity", "helpfulness"]},
        mapping={"preset": "helpsteer2"},
    )
    row = prepared.train[0]
    assert row["scores"] == [1.0, 3.0]
    assert row["input_ids"] == tok("q", "an answer")["input_ids"]


@pytest.mark.parametrize("policy", ["drop", "truncate_prompt_left", "truncate_response"])
def test_every_kept_sequence_fits(tmp_path, policy):
    tok = bert_tokenizer()
    rows = [
        {"prompt": " ".join(WORDS[: 5 * i]), "chosen": " ".join(WORDS[: 3 * i + 1]), "rejected": "no " * (i + 1)}
        for i in range(20)
    ]
    prepared = run(tmp_path, rows, tok, [{"kind": "max_length", "policy": policy}], max_length=48)
    for row in prepared.train:
        for side in ("chosen", "rejected"):
            assert len(row[f"{side}_input_ids"]) <= 48 and row[f"{side}_input_ids"][-1] == tok.sep_token_id
    report = prepared.report
    assert report.rows_kept + sum(report.rejected.values()) == 20
