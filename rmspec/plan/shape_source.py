"""Where a model's shape is read from, in order: the spec's `model.shape`, a local folder's config.json,
the Hugging Face cache, then the catalogue of known models (rmspec.plan.catalog). The shape itself and how a
config becomes one live in rmspec.plan.model_shape."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from rmspec.errors import PlanError
from rmspec.plan.model_shape import FAMILIES, SHAPE_HINT, ModelShape, shape_from_config


def possible_shape(shape: ModelShape) -> None:
    """Refuse a model.shape whose embeddings (and LM head) alone exceed its num_parameters: every count, memory
    and time figure planned from it would go negative (trained = num_parameters - head)."""
    embedding = shape.embedding_parameters()
    head = shape.lm_head_parameters() if shape.architecture == "decoder" else 0
    given = shape.given_num_parameters
    if given is None or embedding + head < given:
        return
    head_text = (
        f" + {head:,} in the untied LM head (vocab_size x hidden_size again), {embedding + head:,} in all"
        if head
        else ""
    )
    raise PlanError(
        f"model.shape is impossible: model.shape.vocab_size {shape.vocab_size:,} x model.shape.hidden_size "
        f"{shape.hidden_size:,} puts {embedding:,} parameters in the embeddings{head_text}: "
        f"not less than model.shape.num_parameters {given:,}",
        hint="model.shape.num_parameters counts the whole model, embeddings included: check it, vocab_size and "
        "hidden_size against the model's config.json (or point model.name_or_path at a folder holding it)",
    )


def shape_from_spec(shape: Any, source: str = "spec model.shape") -> ModelShape:
    """A shape from the spec's `model.shape` block; its num_parameters is taken as given, once it can hold
    the embedding table and the (untied, decoder) LM head that the other fields imply."""
    kv = shape.num_key_value_heads or shape.num_attention_heads
    family = FAMILIES["llama" if shape.architecture == "decoder" else "bert"]
    result = ModelShape(
        architecture=shape.architecture,
        model_type="custom",
        hidden_size=shape.hidden_size,
        num_layers=shape.num_layers,
        num_attention_heads=shape.num_attention_heads,
        num_key_value_heads=kv,
        head_dim=shape.hidden_size // shape.num_attention_heads,
        intermediate_size=shape.intermediate_size,
        vocab_size=shape.vocab_size,
        layer_class=shape.layer_class,
        source=source,
        tie_word_embeddings=False,
        gated_mlp=family["gated_mlp"],
        norm=family["norm"],
        attention_bias=family.get("attention_bias", False),
        mlp_bias=family.get("mlp_bias", False),
        pooler=family.get("pooler", False),
        given_num_parameters=shape.num_parameters,
    )
    possible_shape(result)
    return result


def hf_cache_config(name: str, hub_cache: Path | None = None) -> Path | None:
    """config.json of a model in the local Hugging Face cache (any snapshot), if there is one."""
    if "/" not in name:
        return None
    if hub_cache is None:
        env = os.environ.get("HF_HUB_CACHE")
        home = os.environ.get("HF_HOME")
        if env:
            hub_cache = Path(env)
        elif home:
            hub_cache = Path(home) / "hub"
        else:
            hub_cache = Path.home() / ".cache" / "huggingface" / "hub"
    folder = hub_cache / ("models--" + name.replace("/", "--")) / "snapshots"
    if not folder.is_dir():
        return None
    found = sorted(folder.glob("*/config.json"), key=lambda p: p.stat().st_mtime, reverse=True)
    return found[0] if found else None


def read_config(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise PlanError(f"cannot read {path}: {exc}", hint=SHAPE_HINT) from None


def resolve_shape(
    name_or_path: str, model_path: str, spec_shape: Any = None, hub_cache: Path | None = None
) -> ModelShape:
    """The model's shape from the first source that has it (see the module docstring)."""
    from rmspec.plan.catalog import catalog_config

    if spec_shape is not None:
        return shape_from_spec(spec_shape)
    local = Path(model_path)
    if local.is_dir():
        config_file = local / "config.json"
        if not config_file.exists():
            raise PlanError(f"model folder {local} has no config.json", hint=SHAPE_HINT)
        return shape_from_config(read_config(config_file), f"config.json in {local}")
    cached = hf_cache_config(name_or_path, hub_cache)
    if cached is not None:
        return shape_from_config(read_config(cached), f"Hugging Face cache ({cached})")
    entry = catalog_config(name_or_path)
    if entry is not None:
        key, config = entry
        return shape_from_config(config, f"built-in catalog ({key})")
    raise PlanError(
        f"model.name_or_path: cannot find the shape of {name_or_path!r}: no local folder, nothing in the "
        "Hugging Face cache, and not in the built-in catalog",
        hint=SHAPE_HINT,
    )
