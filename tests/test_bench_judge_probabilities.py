"""bench/_judge_common.letter_probabilities (issue 50 item 5): the letter probabilities at the verdict
position, read from one batched, right-padded forward, equal those of an unpadded forward of each prompt
alone; the figures are consistent with the per-pair probabilities. A ~100k-parameter random Llama, no
training."""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import LlamaForCausalLM, PreTrainedTokenizerFast

from helpers.models import tiny_llama_config

BENCH = Path(__file__).resolve().parents[1] / "bench"
CHAT_TEMPLATE = (
    "{% for m in messages %}<{{ m['role'] }}> {{ m['content'] }} {% endfor %}"
    "{% if add_generation_prompt %}<assistant>{% endif %}"
)


def _judge(folder: Path):
    words = "Question ( A ) B Which option is correct ? Answer : or . < user > assistant cat dog fox tiny long : Repeat"
    vocab = {w: i for i, w in enumerate(["<unk>", "<eos>", *dict.fromkeys(words.split())])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()  # "(A)" -> "(", "A", ")" as SmolLM2's tokenizer writes it
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>", unk_token="<unk>", pad_token="<eos>")
    fast.chat_template = CHAT_TEMPLATE
    config = tiny_llama_config(
        vocab_size=len(fast),
        max_position_embeddings=256,
        eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id,
        tie_word_embeddings=False,
    )
    torch.manual_seed(0)
    return fast, LlamaForCausalLM(config).eval()


def test_letter_probabilities_match_an_unpadded_forward(tmp_path: Path) -> None:
    sys.path.insert(0, str(BENCH))
    from _judge_common import _prompt_ids_of, letter_probabilities, letter_tokens
    from judge_smollm2 import approach_for_eval

    from rmspec.train.judge_grpo import judge_rows

    tok, model = _judge(tmp_path)
    held = [  # prompts of different lengths, so the batch is padded
        {"id": "h0", "prompt": "Repeat cat", "chosen": "cat", "rejected": "dog"},
        {"id": "h1", "prompt": "Repeat fox fox fox tiny long long", "chosen": "fox", "rejected": "cat dog"},
        {"id": "h2", "prompt": "Repeat dog", "chosen": "dog", "rejected": "fox fox"},
    ]
    prefix, a, b = letter_tokens(tok)
    assert [tok.convert_ids_to_tokens(i) for i in (*prefix, a, b)] == ["(", "A", "B"]
    figures = letter_probabilities(model, tok, held, approach_for_eval(), batch_size=4)

    pairs = [{"id": r["id"], "prompt_messages": [{"role": "user", "content": r["prompt"]}], **r} for r in held]
    rows = judge_rows(pairs, approach_for_eval(), seed=0)
    expected = []
    for row in rows:
        ids = _prompt_ids_of(tok, [row["prompt"]])[0] + prefix
        with torch.no_grad():
            p = model(torch.tensor([ids])).logits[0, -1].softmax(-1)
        expected.append((p[a] if row["gold"] == "A" else p[b]).item() / (p[a] + p[b]).item())
    got = [x for r in rows[::2] for x in figures["p_correct_by_pair"][r["pair"]]]
    assert got == [round(x, 4) for x in expected]
    assert abs(figures["p_correct"] - statistics.mean(expected)) < 1e-5
    first, swapped = expected[::2], expected[1::2]
    assert figures["p_both"] == sum(x > 0.5 and y > 0.5 for x, y in zip(first, swapped)) / 3
    assert 0 < figures["p_letters"] <= 1 and 0 < figures["p_open"] <= 1 and 0 < figures["p_a"] < 1
