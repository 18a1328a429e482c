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
    AutoModelForImageTextToText,
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from rmspec import approaches
from rmspec.approaches.process import PROCESS_LABELS  # noqa: F401  (re-exported: the PRM head's outputs)
from rmspec.vision.models import reward_class
from rmspec.vision.processor import is_vision_config

PAD_TOKEN = "<|pad|>"

# The transformers class each kind of model loads with (an approach declares its `auto_model`).
AUTO_CLASSES = {
    "sequence_classification": AutoModelForSequenceClassification,
    "token_classification": AutoModelForTokenClassification,
    "causal_lm": AutoModelForCausalLM,
}

# Names of the score head in the sequence-classification classes of transformers.
HEAD_NAMES = ("score", "classifier")


@dataclass
class LoadedModel:
    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    head_initialized: bool  # the score head was created here (not loaded from the checkpoint)


def num_outputs(approach: Any) -> int:
    """Outputs of the score head: 1 for a pairwise reward, one per attribute (or scale bin) pointwise;
    the approach's declaration says (rmspec.approaches)."""
    return approaches.get(approach.kind).num_outputs(approach)


def output_labels(approach: Any) -> list[str]:
    """Names of the head's outputs, saved in config.id2label so the model says what it scores."""
    return approaches.get(approach.kind).output_labels(approach)


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

    declared = approaches.get(approach.kind)
    auto = AUTO_CLASSES[declared.auto_model]
    if auto is AutoModelForCausalLM:  # a judge: the LM head is the model's own
        # a VLM judge is its *ForConditionalGeneration (AutoModelForCausalLM does not map VLM configs)
        model = (AutoModelForImageTextToText if is_vision_config(config) else auto).from_pretrained(
            model_path, **kwargs
        )
        head_initialized = False
    else:
        config.num_labels = num_outputs(approach)
        labels = output_labels(approach)
        config.id2label = dict(enumerate(labels))
        config.label2id = {name: i for i, name in enumerate(labels)}
        # No built-in loss is used; the problem type says what the outputs are: a token classifier's
        # labels (a PRM reads a score at every step's last token), else regressed scores.
        config.problem_type = "single_label_classification" if auto is AutoModelForTokenClassification else "regression"
        if is_vision_config(config):  # a VLM: transformers' own reward class, or one registered for it
            reward_class(config)
        torch.manual_seed(seed)
        # A reward checkpoint whose score head has another number of outputs (one, trained again as ODIN's
        # two heads, an ensemble's N or several attributes) loads all but its head, which starts fresh
        # as on a base model; a size mismatch anywhere else stays an error.
        model, info = auto.from_pretrained(model_path, output_loading_info=True, ignore_mismatched_sizes=True, **kwargs)
        resized = [key for key, *_ in info.get("mismatched_keys", ())]
        if any(key.split(".")[0] not in HEAD_NAMES for key in resized):
            raise ValueError(f"{model_path}: weights whose size differs from its config.json: {', '.join(resized[:5])}")
        missing = set(info.get("missing_keys", ())) | set(resized)
        head_initialized = any(key.split(".")[0] in HEAD_NAMES for key in missing)
        if head_initialized:
            init_score_head(model, config.get_text_config().hidden_size, seed)
    if grow:
        model.resize_token_embeddings(len(tokenizer), mean_resizing=True)
    model.config.pad_token_id = tokenizer.pad_token_id
    if auto is not AutoModelForCausalLM and hasattr(model.config, "use_cache"):
        model.config.use_cache = False  # a KV cache is dead weight when scoring whole sequences
    if getattr(model, "generation_config", None) is not None:
        model.generation_config.pad_token_id = tokenizer.pad_token_id
    disable_dropout(model)
    return LoadedModel(model=model, tokenizer=tokenizer, head_initialized=head_initialized)


def apply_lora(
    model: PreTrainedModel, lora: Any, approach_kind: str, language_model_only: bool = False
) -> PreTrainedModel:
    """Wrap in peft LoRA; the score head is trained in full and saved with the adapter (modules_to_save).
    ``language_model_only``: a VLM's adapters go on its language model's linear layers only
    (rmspec.vision.freeze.language_linears), so the vision tower and projector keep their weights."""
    from peft import LoraConfig, TaskType, get_peft_model

    target_modules = lora.target_modules
    if language_model_only:
        from rmspec.vision.freeze import language_linears

        target_modules = language_linears(model, lora.target_modules)
    declared = approaches.get(approach_kind)
    head = score_head(model)
    modules_to_save = None
    if declared.auto_model != "causal_lm" and head is not None:
        modules_to_save = [name for name in HEAD_NAMES if getattr(model, name, None) is head]
    config = LoraConfig(
        r=lora.r,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        target_modules=target_modules,
        task_type=TaskType[declared.lora_task],
        modules_to_save=modules_to_save,
    )
    return get_peft_model(model, config)
