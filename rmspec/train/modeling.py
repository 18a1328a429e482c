"""Load the model and tokenizer a reward model trains from.

What peers get wrong and this module gets right (REFERENCE section 1):
- dropout off: every dropout field of the config is 0 and every nn.Dropout has p=0, so
  chosen and rejected see the same network and rewards do not jitter between passes;
- a freshly created score head starts at normal(0, 1/sqrt(hidden+1)), bias 0;
- a pad token that never appears in real text (not eos where avoidable), written into the
  model config, so the sequence-classification heads of transformers, which pool "the rightmost
  token that is not pad", read the last real token whatever the padding side;
- right padding (BERT pools [CLS] at position 0 and decoders count positions from 0).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

PAD_TOKEN = "<|pad|>"

# Outputs of a process reward model's token-classification head, by index (TRL: label 1 = correct).
PROCESS_LABELS = ("wrong", "correct")

# Names of the score head in the sequence-classification classes of transformers.
HEAD_NAMES = ("score", "classifier")


@dataclass
class LoadedModel:
    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    head_initialized: bool  # the score head was created here (not loaded from the checkpoint)


def num_outputs(approach: Any) -> int:
    """Outputs of the score head: 1 for a pairwise reward, one per attribute (or scale bin) pointwise."""
    kind = approach.kind
    if kind == "bradley_terry":  # ODIN: 2 heads, an ensemble: N, while training (rmspec.train.heads)
        from rmspec.spec.heads import head_outputs

        return head_outputs(approach)
    if kind in ("bradley_terry", "listwise"):
        return 1
    if kind == "process":
        return 2  # token classification, TRL's PRM layout: 0 wrong, 1 correct
    if kind == "pointwise":
        if approach.objective == "ordinal":
            bins = int(round(approach.scale.max - approach.scale.min)) + 1
            return len(approach.attributes) * bins
        return len(approach.attributes)
    raise ValueError(f"no score head for approach {kind!r}")


def output_labels(approach: Any) -> list[str]:
    """Names of the head's outputs, saved in config.id2label so the model says what it scores."""
    if approach.kind == "process":
        return list(PROCESS_LABELS)
    if approach.kind == "pointwise":
        if approach.objective == "ordinal":
            low, bins = approach.scale.min, num_outputs(approach) // len(approach.attributes)
            return [f"{a}={low + b:g}" for a in approach.attributes for b in range(bins)]
        return list(approach.attributes)
    if approach.kind == "bradley_terry":
        from rmspec.spec.heads import head_labels

        return head_labels(approach)
    return ["reward"]


def disable_dropout_config(config: Any) -> None:
    """Zero every dropout probability the config names (hidden, attention, classifier, ...)."""
    for key, value in list(config.to_dict().items()):
        if (
            ("dropout" in key or key.endswith("_pdrop"))
            and isinstance(value, (int, float))
            and not isinstance(value, bool)
        ):
            setattr(config, key, 0.0)
    if hasattr(config, "classifier_dropout"):
        config.classifier_dropout = 0.0


def disable_dropout(model: nn.Module) -> None:
    """Belt and braces after the config: some modules hard-code their dropout."""
    for module in model.modules():
        if isinstance(module, nn.Dropout):
            module.p = 0.0


def score_head(model: nn.Module) -> nn.Linear | None:
    for name in HEAD_NAMES:
        head = getattr(model, name, None)
        if isinstance(head, nn.Linear):
            return head
    return None


def init_score_head(model: nn.Module, hidden_size: int, seed: int) -> None:
    """normal(0, 1/sqrt(hidden+1)) as open-instruct does; seeded so runs are reproducible."""
    head = score_head(model)
    if head is None:
        raise ValueError(f"{type(model).__name__} has no score head ({' or '.join(HEAD_NAMES)})")
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        weight = torch.randn(head.weight.shape, generator=generator) / math.sqrt(hidden_size + 1)
        head.weight.copy_(weight.to(head.weight.dtype))
        if head.bias is not None:
            head.bias.zero_()


def ensure_pad_token(tokenizer: PreTrainedTokenizerBase) -> bool:
    """Give the tokenizer a pad token distinct from eos when it has none; True if a token was added.

    Order: the existing pad token (BERT's [PAD], Qwen's <|endoftext|>), else unk when it differs
    from eos, else a new special token (the embeddings are resized by the caller). pad == eos
    would make the last real token (eos) look like padding.
    """
    if tokenizer.pad_token is not None and tokenizer.pad_token != tokenizer.eos_token:
        return False
    if tokenizer.unk_token is not None and tokenizer.unk_token != tokenizer.eos_token:
        tokenizer.pad_token = tokenizer.unk_token
        return False
    tokenizer.add_special_tokens({"pad_token": PAD_TOKEN})
    return True


def load_tokenizer(model_path: str, *, trust_remote_code: bool = False, revision: str | None = None):
    tokenizer = AutoTokenizer.from_pretrained(model_path, trust_remote_code=trust_remote_code, revision=revision)
    tokenizer.padding_side = "right"
    return tokenizer


def torch_dtype(precision: str | None) -> torch.dtype:
    return {"bf16": torch.bfloat16, "fp16": torch.float32, "fp32": torch.float32, None: torch.float32}.get(
        precision, torch.float32
    )


def load_model(
    model_path: str,
    approach: Any,
    *,
    seed: int = 42,
    precision: str | None = "fp32",
    attn_implementation: str | None = None,
    trust_remote_code: bool = False,
    revision: str | None = None,
    tokenizer: PreTrainedTokenizerBase | None = None,
) -> LoadedModel:
    """The model for ``approach`` (sequence classification, or causal LM for generative) with its tokenizer.

    fp16 trains with fp32 master weights under autocast (the Trainer's fp16 flag), so only bf16
    loads the weights in 16 bits.
    """
    tokenizer = tokenizer or load_tokenizer(model_path, trust_remote_code=trust_remote_code, revision=revision)
    added = ensure_pad_token(tokenizer)
    config = AutoConfig.from_pretrained(model_path, trust_remote_code=trust_remote_code, revision=revision)
    disable_dropout_config(config)
    vocab_size = getattr(config.get_text_config(), "vocab_size", None) or len(tokenizer)
    # A token the tokenizer added (ours, or a default its class brings) lies past the embedding
    # until the resize below.
    grow = added or len(tokenizer) > vocab_size
    if tokenizer.pad_token_id < vocab_size:
        config.pad_token_id = tokenizer.pad_token_id
    kwargs: dict[str, Any] = {"config": config, "dtype": torch_dtype(precision), "trust_remote_code": trust_remote_code}
    if revision:
        kwargs["revision"] = revision
    if attn_implementation and attn_implementation != "auto":
        kwargs["attn_implementation"] = attn_implementation

    if approach.kind == "generative":
        model = AutoModelForCausalLM.from_pretrained(model_path, **kwargs)
        head_initialized = False
    else:
        config.num_labels = num_outputs(approach)
        labels = output_labels(approach)
        config.id2label = dict(enumerate(labels))
        config.label2id = {name: i for i, name in enumerate(labels)}
        # No built-in loss is used; the problem type says what the outputs are.
        config.problem_type = "single_label_classification" if approach.kind == "process" else "regression"
        torch.manual_seed(seed)
        # A PRM reads a score at every step's last token: a token-classification head on any backbone.
        auto = AutoModelForTokenClassification if approach.kind == "process" else AutoModelForSequenceClassification
        model, info = auto.from_pretrained(model_path, output_loading_info=True, **kwargs)
        missing = set(info.get("missing_keys", ()))
        head_initialized = any(key.split(".")[0] in HEAD_NAMES for key in missing)
        if head_initialized:
            init_score_head(model, config.get_text_config().hidden_size, seed)
    if grow:
        model.resize_token_embeddings(len(tokenizer), mean_resizing=True)
    model.config.pad_token_id = tokenizer.pad_token_id
    if approach.kind != "generative" and hasattr(model.config, "use_cache"):
        model.config.use_cache = False  # a KV cache is dead weight when scoring whole sequences
    if getattr(model, "generation_config", None) is not None:
        model.generation_config.pad_token_id = tokenizer.pad_token_id
    disable_dropout(model)
    return LoadedModel(model=model, tokenizer=tokenizer, head_initialized=head_initialized)


def apply_lora(model: PreTrainedModel, lora: Any, approach_kind: str) -> PreTrainedModel:
    """Wrap in peft LoRA; the score head is trained in full and saved with the adapter (modules_to_save)."""
    from peft import LoraConfig, TaskType, get_peft_model

    head = score_head(model)
    modules_to_save = None
    if approach_kind != "generative" and head is not None:
        modules_to_save = [name for name in HEAD_NAMES if getattr(model, name, None) is head]
    config = LoraConfig(
        r=lora.r,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        target_modules=lora.target_modules,
        task_type={"generative": TaskType.CAUSAL_LM, "process": TaskType.TOKEN_CLS}.get(
            approach_kind, TaskType.SEQ_CLS
        ),
        modules_to_save=modules_to_save,
    )
    return get_peft_model(model, config)
