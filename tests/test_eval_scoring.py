"""Scoring with tiny models built from configs: batch invariance and agreement with plain transformers."""

from __future__ import annotations

import pytest

from helpers.ci import need

torch = need("torch")
transformers = need("transformers")

from helpers.scoring_models import PAIRS, build_tiny_bert, build_tiny_llama_chat  # noqa: E402


@pytest.fixture(scope="module", params=["bert", "llama_chat"])
def tiny(request, tmp_path_factory):
    from rmspec.inference.engine import RewardEngine

    directory = tmp_path_factory.mktemp(request.param)
    (build_tiny_bert if request.param == "bert" else build_tiny_llama_chat)(directory)
    engine = RewardEngine.load(directory)
    return request.param, directory, engine


def test_same_score_whatever_the_batch(tiny):
    _, _, engine = tiny
    alone = [engine.rewards([pair], batch_size=1)[0] for pair in PAIRS]
    together = engine.rewards(PAIRS, batch_size=len(PAIRS))
    in_twos = engine.rewards(PAIRS, batch_size=2)
    assert together == pytest.approx(alone, abs=1e-5)
    assert in_twos == pytest.approx(alone, abs=1e-5)
    assert len(set(round(s, 6) for s in alone)) > 1  # the model does tell texts apart


def test_agrees_with_plain_transformers(tiny):
    kind, directory, engine = tiny
    prompts = [p for p, _ in PAIRS]
    chosen = [r for _, r in PAIRS]
    rejected = [r[::-1] for r in chosen]
    got_chosen, got_rejected = engine.score_pairs(prompts, chosen, rejected, batch_size=3)

    # A few lines of plain transformers, one text at a time.
    ref_model = transformers.AutoModelForSequenceClassification.from_pretrained(directory).eval()
    ref_tok = transformers.AutoTokenizer.from_pretrained(directory)

    def plain(prompt, response):
        if kind == "llama_chat":
            history = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt
            text = ref_tok.apply_chat_template(history + [{"role": "assistant", "content": response}], tokenize=False)
            enc = ref_tok(text, add_special_tokens=False, return_tensors="pt")
        else:
            names = {"user": "User", "assistant": "Assistant"}
            prompt_text = (
                prompt
                if isinstance(prompt, str)
                else "\n\n".join(f"{names[m['role']]}: {m['content']}" for m in prompt)
            )
            enc = ref_tok(prompt_text, response, return_tensors="pt")
        with torch.no_grad():
            return ref_model(**enc).logits[0, 0].item()  # BERT gets its segment ids, as plain users pass them

    assert got_chosen == pytest.approx([plain(p, r) for p, r in zip(prompts, chosen)], abs=1e-5)
    assert got_rejected == pytest.approx([plain(p, r) for p, r in zip(prompts, rejected)], abs=1e-5)


def test_long_input_keeps_the_end_of_the_response(tiny):
    from rmspec.inference.encoding import encode

    kind, _, engine = tiny
    tokenizer = engine.tokenizer
    response = "the final answer is forty two"
    encoded = encode(tokenizer, "word " * 500, response, max_length=40)
    ids = encoded.ids
    assert len(ids) <= 40 and encoded.truncated
    assert not encode(tokenizer, "short", response, max_length=40).truncated
    tail = tokenizer(response, add_special_tokens=False)["input_ids"]
    body = ids[:-1] if kind == "bert" else ids  # BERT ends with [SEP]
    assert body[-len(tail) :] == tail


def test_missing_model_dir_is_a_clear_error(tmp_path):
    from rmspec.errors import RmspecError
    from rmspec.inference.loading import load_reward_model

    with pytest.raises(RmspecError, match="not found"):
        load_reward_model(tmp_path / "nope")
    with pytest.raises(RmspecError, match="config.json"):
        load_reward_model(tmp_path)
