"""Score texts with any Hugging Face sequence-classification reward model.

- Inputs are laid out exactly as the data pipeline lays out training data
  (rmspec.data.layout): the tokenizer's chat template when it has one, an encoder's text pair
  ([CLS] prompt [SEP] response [SEP]) otherwise, else "User: ...\n\nAssistant: ..." + EOS.
- Over-long inputs lose the start of the prompt first; the closing tokens always stay.
- Only input_ids and attention_mask reach the model (as rmspec's trainer feeds it), padded on
  the right, so positions of real tokens are 0..n-1 as when a text is alone.
- Batches are sorted by length (little padding) and scores return in input order; a text gets
  the same score whatever its batch (tested).

torch/transformers are imported inside the functions.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple, Sequence

from rmspec.errors import RmspecError

Prompt = str | list[dict[str, str]]
DEFAULT_MAX_LENGTH = 4096


def load_reward_model(model_dir: str | Path, *, dtype: str = "float32", device: str | None = None):
    """(model, tokenizer) from a local directory, offline; clear errors for what is missing."""
    path = Path(model_dir)
    if not path.is_dir():
        raise RmspecError(f"model directory not found: {model_dir}", "give a folder with config.json, weights and tokenizer files (e.g. RUN/model)")
    if not (path / "config.json").exists():
        raise RmspecError(f"{model_dir} has no config.json: not a Hugging Face model folder", "point at the folder that holds config.json and the weights")
    import json

    architectures = json.loads((path / "config.json").read_text(encoding="utf-8")).get("architectures") or []
    if architectures and all(a.endswith("ForCausalLM") for a in architectures):
        raise RmspecError(
            f"{model_dir} is a causal language model ({', '.join(architectures)}), not a reward model with a score head",
            "a generative judge is evaluated from its run directory (rmspec eval RUN_DIR), which knows its verdict pattern",
        )
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(str(path))
        model, info = AutoModelForSequenceClassification.from_pretrained(
            str(path), dtype=getattr(torch, dtype), output_loading_info=True
        )
    except (OSError, ValueError) as exc:
        raise RmspecError(f"cannot load a sequence-classification model from {model_dir}: {exc}", "the folder needs weights, config.json and tokenizer files") from None
    # A backbone without a trained head (e.g. a sentence encoder) gets a random one: say so in the results.
    model.rmspec_fresh_head = [k for k in info.get("missing_keys", ()) if k.split(".")[0] in ("score", "classifier")]
    prepare_tokenizer(tokenizer, model)
    model.eval()
    if device:
        model.to(device)
    return model, tokenizer


def prepare_tokenizer(tokenizer: Any, model: Any) -> None:
    """Right padding and a pad token (the model config's own when it has one)."""
    tokenizer.padding_side = "right"
    if tokenizer.pad_token_id is None:
        pad_id = getattr(model.config, "pad_token_id", None)
        if pad_id is not None:
            tokenizer.pad_token = tokenizer.convert_ids_to_tokens(pad_id)
        elif tokenizer.unk_token is not None and tokenizer.unk_token != tokenizer.eos_token:
            tokenizer.pad_token = tokenizer.unk_token
        else:
            tokenizer.pad_token = tokenizer.eos_token
    if getattr(model.config, "pad_token_id", None) is None:
        model.config.pad_token_id = tokenizer.pad_token_id


def max_length_for(model: Any, tokenizer: Any) -> int:
    candidates = [DEFAULT_MAX_LENGTH]
    model_max = getattr(tokenizer, "model_max_length", None)
    if isinstance(model_max, int) and 0 < model_max < 1_000_000:
        candidates.append(model_max)
    positions = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    if isinstance(positions, int) and positions > 0:
        candidates.append(positions)
    return min(candidates)


def as_messages(prompt: Prompt) -> list[dict[str, str]]:
    return [{"role": "user", "content": prompt}] if isinstance(prompt, str) else [dict(m) for m in prompt]


def make_layout(tokenizer: Any, chat_template: str = "auto", architecture: str | None = None) -> Any:
    """The data pipeline's layout for this tokenizer, so benchmarks are formatted as training data is."""
    from rmspec.data.layout import Layout

    return Layout(tokenizer, chat_template, architecture)


class Encoded(NamedTuple):
    """One sequence as the model reads it: token ids and, for encoders, segment ids (prompt 0, response 1)."""

    ids: list[int]
    type_ids: list[int] | None = None


def encode_many(tokenizer: Any, items: Sequence[tuple[Prompt, str]], max_length: int, layout: Any = None) -> list[Encoded]:
    """(prompt, response) items as the model reads them (rmspec.data's layout and cut).

    Too long: the prompt is cut from the left; if the response alone does not fit, its end is cut
    (the closing special tokens always stay, so the reward is read at the end of the response).
    Segment ids come along for encoders because training passes them: scoring without them
    would give a different reward for the same text.
    """
    from rmspec.data.tokenize import CUT_PROMPT, CUT_RESPONSE, fit

    if not items:
        return []
    layout = layout or make_layout(tokenizer)
    segments = layout.segments([as_messages(p) for p, _ in items], [r for _, r in items])
    out = []
    for seg in segments:
        fitted, _, _ = fit(seg, max_length, CUT_PROMPT)
        if fitted is None:
            fitted, _, _ = fit(seg, max_length, CUT_RESPONSE)
        if fitted is not None:
            out.append(Encoded(fitted.ids(), fitted.type_ids()))
        else:
            types = seg.type_ids()
            out.append(Encoded(seg.ids()[-max_length:], types[-max_length:] if types is not None else None))
    return out


def encode(tokenizer: Any, prompt: Prompt, response: str, max_length: int, layout: Any = None) -> Encoded:
    return encode_many(tokenizer, [(prompt, response)], max_length, layout)[0]


def score_token_ids(model: Any, sequences: Sequence[Sequence[int]], pad_token_id: int, batch_size: int = 32,
                    type_ids: Sequence[Sequence[int] | None] | None = None) -> list[float]:
    """One reward per sequence (head output 0), batches sorted by length, results in input order.

    ``type_ids`` (segment ids, per sequence or None) are passed to the model when given, as the
    trainer's collator does.
    """
    import torch

    from rmspec.train.collators import pad_right

    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    device = next(model.parameters()).device
    order = sorted(range(len(sequences)), key=lambda i: len(sequences[i]))
    scores = [0.0] * len(sequences)
    with torch.inference_mode():
        for start in range(0, len(order), batch_size):
            batch = order[start : start + batch_size]
            # The trainer's own padding, so a text is scored as it was trained on.
            input_ids, attention_mask = pad_right([sequences[i] for i in batch], pad_token_id)
            token_type_ids = None
            if type_ids is not None and any(type_ids[i] is not None for i in batch):
                token_type_ids, _ = pad_right([type_ids[i] or [0] * len(sequences[i]) for i in batch], 0)
            extra = {} if token_type_ids is None else {"token_type_ids": token_type_ids.to(device)}
            logits = model(input_ids=input_ids.to(device), attention_mask=attention_mask.to(device), **extra).logits
            values = logits[:, 0].float().cpu().tolist()
            for i, value in zip(batch, values):
                scores[i] = float(value)
    return scores


def score_texts(model: Any, tokenizer: Any, texts: Sequence[str | tuple[Prompt, str]], batch_size: int = 32, max_length: int | None = None, layout: Any = None) -> list[float]:
    """Rewards for plain texts (tokenized as they are) or (prompt, response) pairs (formatted by `encode`)."""
    # Never past what the model can read, whatever the caller (or the spec) asks for.
    limit = max_length_for(model, tokenizer)
    max_length = min(max_length, limit) if max_length else limit
    pairs = [i for i, item in enumerate(texts) if not isinstance(item, str)]
    encoded = dict(zip(pairs, encode_many(tokenizer, [texts[i] for i in pairs], max_length, layout)))
    sequences = [
        encoded[i] if i in encoded else Encoded(tokenizer(item, truncation=True, max_length=max_length)["input_ids"])
        for i, item in enumerate(texts)
    ]
    return score_token_ids(model, [s.ids for s in sequences], tokenizer.pad_token_id, batch_size,
                           type_ids=[s.type_ids for s in sequences])


def score_pairs(model: Any, tokenizer: Any, prompts: Sequence[Prompt], chosen: Sequence[str], rejected: Sequence[str], batch_size: int = 32, max_length: int | None = None, layout: Any = None) -> tuple[list[float], list[float]]:
    """(chosen scores, rejected scores), all sequences scored together so batches pack well."""
    n = len(prompts)
    if not (len(chosen) == len(rejected) == n):
        raise ValueError("prompts, chosen and rejected differ in length")
    items = [(p, c) for p, c in zip(prompts, chosen)] + [(p, r) for p, r in zip(prompts, rejected)]
    scores = score_texts(model, tokenizer, items, batch_size, max_length, layout)
    return scores[:n], scores[n:]


def score_examples(model: Any, tokenizer: Any, examples: Sequence[Any], batch_size: int = 32, max_length: int | None = None, layout: Any = None) -> list[list[float]]:
    """Scores for each benchmark Example's responses, in the example's order."""
    items = [(ex.prompt, response) for ex in examples for response in ex.responses]
    flat = score_texts(model, tokenizer, items, batch_size, max_length, layout)
    out, cursor = [], 0
    for ex in examples:
        out.append(flat[cursor : cursor + len(ex.responses)])
        cursor += len(ex.responses)
    return out
