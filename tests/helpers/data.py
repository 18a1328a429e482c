"""Helpers shared by the data tests: specs written to a temp folder, tokenizers
built locally (the packaged MiniLM BERT tokenizer, and a small word-level tokenizer with a
ChatML-style chat template), nothing fetched from a hub."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]  # the checkout (this file is tests/helpers/…)
FIXTURES = REPO / "tests" / "fixtures" / "data"
DEMO = REPO / "rmspec" / "data" / "demo"

BT = {"kind": "bradley_terry"}
CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]


def make_spec(
    folder: Path,
    data: dict,
    approach: dict | None = None,
    max_length: int = 256,
    model: str = "sentence-transformers/all-MiniLM-L6-v2",
    extra: dict | None = None,
):
    """Write a spec (JSON is YAML) into folder and load it; relative paths resolve against folder."""
    from rmspec.spec import load_spec

    data = {"split": {"validation_fraction": None}, **data}
    doc = {
        "version": 1,
        "name": "t",
        "model": {"name_or_path": model},
        "data": data,
        "approach": approach or BT,
        "training": {"max_length": max_length, "global_batch_size": 4},
        "hardware": {"device": "cpu"},
        **(extra or {}),
    }
    path = folder / "spec.yaml"
    path.write_text(json.dumps(doc, indent=1), encoding="utf-8")
    return load_spec(path)


@lru_cache(maxsize=1)
def bert_tokenizer():
    from transformers import AutoTokenizer

    from rmspec.packaged import resolve_model_path

    return AutoTokenizer.from_pretrained(resolve_model_path("sentence-transformers/all-MiniLM-L6-v2"))


def chat_tokenizer(corpus: list[str]):
    """A word-level tokenizer over corpus with a ChatML chat template and <|im_end|> as EOS."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.WordLevelTrainer(special_tokens=["[UNK]", "<pad>", "<|im_start|>", "<|im_end|>"])
    tok.train_from_iterator(corpus + ["user assistant system"], trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        pad_token="<pad>",
        eos_token="<|im_end|>",
        additional_special_tokens=["<|im_start|>"],
    )
    fast.chat_template = CHATML
    return fast


def plain_tokenizer(corpus: list[str]):
    """The same word-level tokenizer without a chat template (a decoder: no CLS/SEP)."""
    tok = chat_tokenizer(corpus)
    tok.chat_template = None
    return tok
