"""Dequantise a GGUF model once into a plain Hugging Face folder, which every later step loads as usual.

transformers reads GGUF itself (`from_pretrained(folder, gguf_file=...)`, with the `gguf` package) and
dequantises to float, but a model loaded that way refuses save_pretrained and carries a
quantization_config. So the state dict is copied into a model built from the same config without it,
and saved with the tokenizer as safetensors in the cache folder rmspec.gguf_source.cache_dir names
(the plan's model_path). Training, the tokenizer of the data stage and the final model then see an
ordinary local checkpoint, and RUN/model is plain safetensors. The folder also holds
`rmspec_gguf.json`: where the weights came from and how they were quantised.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
from pathlib import Path

from rmspec.errors import RmspecError
from rmspec.gguf_source import GgufSource, cache_dir, describe

PROVENANCE = "rmspec_gguf.json"


def require_gguf() -> None:
    if importlib.util.find_spec("gguf") is None:
        raise RmspecError(
            "model: reading a GGUF file needs the gguf package, which is not installed",
            "pip install 'rmspec[gguf]'",
        )


def dequantised_model(source: GgufSource) -> Path:
    """The plain folder of `source`'s weights, dequantised to float32 (made once, then reused)."""
    target = cache_dir(source)
    if (target / PROVENANCE).is_file():
        return target
    require_gguf()
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(str(source.folder), gguf_file=source.file)
        loaded = AutoModelForCausalLM.from_pretrained(str(source.folder), gguf_file=source.file, dtype=torch.float32)
    except (OSError, ValueError, KeyError, RuntimeError) as exc:
        reason = " ".join(str(exc).split())[:300]
        raise RmspecError(
            f"model: transformers cannot load the GGUF file {source.path}: {reason}",
            "transformers dequantises the GGUF architectures it knows (llama, qwen2, mistral, ...); use a model folder "
            "or a hub id for others",
        ) from None
    config = loaded.config.to_dict()
    config.pop("quantization_config", None)
    plain = AutoModelForCausalLM.from_config(AutoConfig.for_model(**config), dtype=torch.float32)
    plain.load_state_dict(loaded.state_dict(), strict=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.parent / f"{target.name}.partial-{os.getpid()}"
    shutil.rmtree(partial, ignore_errors=True)
    plain.save_pretrained(partial)
    tokenizer.save_pretrained(partial)
    (partial / PROVENANCE).write_text(json.dumps(describe(source), indent=2) + "\n", encoding="utf-8")
    try:
        os.replace(partial, target)  # atomic: a concurrent run sees no folder or a whole one
    except OSError:  # another process finished first (the target is a non-empty folder): use its copy
        shutil.rmtree(partial, ignore_errors=True)
    return target
