"""Load a reward model folder the way training left it: right padding, a pad token, a length limit.

torch/transformers are imported inside the functions.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rmspec.errors import RmspecError

DEFAULT_MAX_LENGTH = 4096


def load_reward_model(model_dir: str | Path, *, dtype: str = "float32", device: str | None = None):
    """(model, tokenizer) from a local directory, offline; clear errors for what is missing."""
    path = Path(model_dir)
    if not path.is_dir():
        raise RmspecError(
            f"model directory not found: {model_dir}",
            "give a folder with config.json, weights and tokenizer files (e.g. RUN/model)",
        )
    if not (path / "config.json").exists():
        raise RmspecError(
            f"{model_dir} has no config.json: not a Hugging Face model folder",
            "point at the folder that holds config.json and the weights",
        )
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
        raise RmspecError(
            f"cannot load a sequence-classification model from {model_dir}: {exc}",
            "the folder needs weights, config.json and tokenizer files",
        ) from None
    # A backbone without a trained head (e.g. a sentence encoder) gets a random one: say so in the results.
    model.rmspec_fresh_head = [k for k in info.get("missing_keys", ()) if k.split(".")[0] in ("score", "classifier")]
    from rmspec.inference.ensemble import attach_ensemble

    # An ensemble's members (rmspec.inference.ensemble): outputs become [reward, member_1..member_N].
    model.rmspec_ensemble_members = attach_ensemble(model, path)
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
