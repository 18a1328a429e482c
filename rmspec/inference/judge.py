"""Evaluate a generative judge (approach kind: generative) on pair benchmarks.

Each pair is judged twice, as (A, B) and with the responses swapped, the way JudgeBench runs
order-dependent judges; the verdict is the first group of the spec's verdict_pattern in the
generated text. The judge prompt is the one rmspec's judge data uses (rmspec/data/demo/
judge_messages.jsonl, written by scripts/make_demo_data.py), laid out by the data pipeline's
layout (chat template, or "User: ...\\n\\nAssistant:").

torch/transformers are imported inside the functions.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rmspec.approaches.generative import JUDGE_INSTRUCTION, LAYOUT
from rmspec.errors import RmspecError
from rmspec.spec.benchmarks import JUDGE, kinds_scored_by

# The pairwise benchmarks a judge can be scored on, from the benchmark catalogue (alphabetical, as listed in messages).
JUDGE_KINDS = tuple(sorted(kinds_scored_by(JUDGE)))


def judge_prompt_text(prompt: Any) -> str:
    """The prompt as the judge message quotes it: a conversation's one user turn as is, more as plain turns
    (an image part written as the data stage's picture mark, rmspec.vision.marks: judge_prompt gives its image)."""
    return judge_prompt(prompt)[0]


def judge_prompt(prompt: Any) -> tuple[str, list[Any]]:
    """(the prompt as the judge message quotes it, the images of its image parts in order). Image parts
    are the Hugging Face processor convention, {"type": "image", "image": IMAGE} (rmspec.evaluate.
    image_prompts); each stands as a picture mark where it was, as the data stage writes it, so a judge prompt
    with images is laid out as a VLM judge trained on it (rmspec.vision.judge)."""
    if isinstance(prompt, str):
        return prompt, []
    images: list[Any] = []
    turns = [(m["role"], _content_text(m["content"], images)) for m in prompt]
    if len(turns) == 1 and turns[0][0] == "user":
        return turns[0][1], images
    return "\n\n".join(f"{role}: {content}" for role, content in turns), images


def _content_text(content: Any, images: list[Any]) -> str:
    if not isinstance(content, list):
        return str(content)
    from rmspec.vision.marks import PICTURE

    pieces = []
    for part in content:
        if isinstance(part, dict) and part.get("type") in ("image", "image_url", "input_image"):
            images.append(part.get("image"))
            pieces.append(PICTURE)
        elif isinstance(part, dict) and part.get("type") == "text":
            pieces.append(str(part.get("text", "")))
    return "".join(pieces)


def judge_message(prompt: Any, response_a: str, response_b: str) -> str:
    return judge_request(prompt, response_a, response_b)[0]


def judge_request(prompt: Any, response_a: str, response_b: str) -> tuple[str, list[Any]]:
    """(the judge's user message for (prompt, A, B), the prompt's images): both responses are text."""
    text, images = judge_prompt(prompt)
    return JUDGE_INSTRUCTION + LAYOUT.format(prompt=text, response_a=response_a, response_b=response_b), images


def parse_verdict(text: str, pattern: str) -> str | None:
    """The verdict letter, or None when there is none or the text names both (JudgeBench's rule)."""
    found = {m if isinstance(m, str) else next((g for g in m if g), "") for m in re.findall(pattern, text)}
    found.discard("")
    return found.pop() if len(found) == 1 else None


def load_judge(model_dir: str | Path):
    path = Path(model_dir)
    if not (path / "config.json").exists():
        raise RmspecError(
            f"{model_dir}: no config.json, not a model folder",
            "point at the folder with the judge's weights (RUN/model)",
        )
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForImageTextToText, AutoTokenizer

    from rmspec.vision.processor import is_vision_config

    tokenizer = AutoTokenizer.from_pretrained(str(path))
    # a VLM judge (rmspec.vision.judge) is its *ForConditionalGeneration: image-text-to-text
    vision = is_vision_config(AutoConfig.from_pretrained(str(path)))
    model = (AutoModelForImageTextToText if vision else AutoModelForCausalLM).from_pretrained(str(path)).eval()
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token or tokenizer.unk_token
    return model, tokenizer


def judge_encoder(model: Any, tokenizer: Any, model_dir: str | Path) -> Any:
    """A VLM judge's image side (rmspec.vision.collate.VisionEncoder: the processor training saved beside
    the weights, over the judge's tokenizer); None for a text judge."""
    from rmspec.vision.processor import is_vision_config

    if not is_vision_config(model.config):
        return None
    from rmspec.vision.collate import VisionEncoder
    from rmspec.vision.processor import image_text, load_processor

    try:
        processor = load_processor(str(model_dir), tokenizer)
    except (OSError, ValueError) as exc:
        raise RmspecError(
            f"cannot load the image processor of the vision-language judge in {model_dir}: {exc}",
            "the folder needs the processor's settings (processor_config.json), as rmspec run saves them",
        ) from None
    return VisionEncoder(processor, image_text(model.config, processor))


def generate_requests(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[Sequence[int]],
    images: Sequence[Sequence[Any]],
    max_new_tokens: int,
    batch_size: int = 8,
    encoder: Any = None,
) -> list[str]:
    """Greedy replies to judge prompts (token ids), each read with its images (generate_request_ids)."""
    ids = generate_request_ids(model, tokenizer, prompts, images, max_new_tokens, batch_size, encoder)
    return [tokenizer.decode(row, skip_special_tokens=True) for row in ids]


def generate_request_ids(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[Sequence[int]],
    images: Sequence[Sequence[Any]],
    max_new_tokens: int,
    batch_size: int = 8,
    encoder: Any = None,
) -> list[list[int]]:
    """The generated ids of judge prompts; with images, read through the VLM judge's encoder
    (rmspec.vision.judge.generate_with_images) as training read them. Images for a text judge: an error."""
    if not any(images):
        return generate_ids(model, tokenizer, prompts, max_new_tokens, batch_size)
    if encoder is None:
        raise RmspecError(
            "these pairs' prompts hold images, but the judge is a text model",
            "judge them with a vision-language judge (approach kind generative, method sft, trained on a "
            "*ForConditionalGeneration model with images), or leave the images out",
        )
    from rmspec.vision.judge import generate_with_images

    return generate_with_images(model, encoder, prompts, images, max_new_tokens, batch_size)


def _prompt_ids(layout: Any, tokenizer: Any, messages: Sequence[str]) -> list[list[int]]:
    texts = layout.prompt_texts([[{"role": "user", "content": m}] for m in messages])
    # A VLM judge's layout encodes each picture's place as its one id (rmspec.vision.marks).
    encoded = layout.encode(texts) if layout.pictures else tokenizer(texts, add_special_tokens=False)["input_ids"]
    if layout.kind == "template":  # the rendering carries its own special tokens
        return [list(ids) for ids in encoded]
    return [list(layout.single_head) + ids for ids in encoded]


def generate(
    model: Any, tokenizer: Any, prompts: Sequence[Sequence[int]], max_new_tokens: int, batch_size: int = 8
) -> list[str]:
    """Greedy continuations of token-id prompts, batched by length with left padding."""
    return [
        tokenizer.decode(ids, skip_special_tokens=True)
        for ids in generate_ids(model, tokenizer, prompts, max_new_tokens, batch_size)
    ]


def generate_ids(
    model: Any, tokenizer: Any, prompts: Sequence[Sequence[int]], max_new_tokens: int, batch_size: int = 8
) -> list[list[int]]:
    """The generated token ids of each greedy continuation (a finished row is padded after its
    stop token; generated_length finds where it ended)."""
    import torch

    from rmspec.inference.batches import length_batches

    pad = tokenizer.pad_token_id
    out: list[list[int]] = [[] for _ in prompts]
    with torch.inference_mode():
        for batch in length_batches([len(p) for p in prompts], batch_size):  # long prompts prefilled alone
            width = max(len(prompts[i]) for i in batch)
            ids = torch.full((len(batch), width), pad, dtype=torch.long)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            for row, i in enumerate(batch):
                seq = prompts[i]
                ids[row, width - len(seq) :] = torch.tensor(seq, dtype=torch.long)
                mask[row, width - len(seq) :] = 1
            generated = model.generate(
                input_ids=ids, attention_mask=mask, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=pad
            )
            for row, i in enumerate(batch):
                out[i] = generated[row, width:].tolist()
    return out


def generated_length(ids: Sequence[int], stops: set[int]) -> tuple[int, bool]:
    """(tokens generated, whether a stop token ended the reply): up to and with the first stop
    token; without one, every token (the reply ran into its budget)."""
    for k, token in enumerate(ids):
        if token in stops:
            return k + 1, True
    return len(ids), False


def judge_rows(
    model: Any,
    tokenizer: Any,
    data: Any,
    *,
    pattern: str,
    max_new_tokens: int,
    layout: Any,
    batch_size: int = 8,
    encoder: Any = None,
) -> list[dict[str, Any]]:
    """Per-example rows: id, subset, label, the verdicts in both orders and the generated texts.
    A prompt's image parts are read in both orders (`encoder`: a VLM judge's, see judge_encoder)."""
    if data.kind not in JUDGE_KINDS:
        raise RmspecError(
            f"a generative judge cannot be scored on {data.kind!r}", f"use one of: {', '.join(JUDGE_KINDS)}"
        )
    firsts, seconds, images = [], [], []
    for ex in data.examples:
        a, b = ex.responses[0], ex.responses[1]
        first, pictures = judge_request(ex.prompt, a, b)
        firsts.append(first)
        seconds.append(judge_request(ex.prompt, b, a)[0])
        images.append(pictures)
    ids = _prompt_ids(layout, tokenizer, firsts + seconds)
    texts = generate_requests(model, tokenizer, ids, images + images, max_new_tokens, batch_size, encoder)
    n = len(data.examples)
    rows = []
    for i, ex in enumerate(data.examples):
        # pairs / rewardbench list the chosen response first: the label is A>B.
        label = ex.meta.get("label", "A>B")
        row = {
            "id": ex.id,
            "subset": ex.subset,
            "label": label,
            "verdict": parse_verdict(texts[i], pattern),
            "verdict_swapped": parse_verdict(texts[n + i], pattern),
            "output": texts[i],
            "output_swapped": texts[n + i],
        }
        if "source" in ex.meta:
            row["source"] = ex.meta["source"]
        rows.append(row)
    return rows
