"""The final model: saved whole into a temporary folder, then renamed into RUN/model.

A reader never sees a half-written model: either the previous folder or the complete new one.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from rmspec.inference import scorers
from rmspec.rundir.layout import follow_umask


def reward_stats(rewards: np.ndarray | list[float]) -> dict[str, float]:
    """Mean and std of validation rewards, for normalising scores later ((r - mean) / std)."""
    values = np.asarray(rewards, dtype=np.float64).ravel()
    if values.size == 0:
        return {}
    return {"reward_mean": float(values.mean()), "reward_std": float(values.std())}


def _stats(reward_stats: dict[str, float] | None) -> dict[str, Any]:
    if not reward_stats:
        return {}
    return {**reward_stats, "reward_stats_source": "validation"}


def merge_lora(model: Any) -> Any:
    """A peft model becomes a plain transformers model (adapters merged, score head kept)."""
    if hasattr(model, "merge_and_unload"):
        return model.merge_and_unload()
    return model


def unshard_fsdp2(model: Any) -> bool:
    """FSDP2 leaves each rank a shard (a DTensor) of every weight, which LoRA cannot merge into: gather
    the whole weights into every rank's modules (a collective every rank joins; the model trains no
    further). False without FSDP2."""
    from torch.distributed.fsdp import FSDPModule

    sharded = [module for module in model.modules() if isinstance(module, FSDPModule)]
    for module in sharded:
        module.unshard()
    return bool(sharded)


def whole_state_dict(model: Any) -> dict[str, Any]:
    """The weights as plain CPU tensors, read from the unsharded modules without model.state_dict():
    FSDP2's state-dict hook would reshard them (measured: save_pretrained then reads freed storage)."""
    out = {name: p.detach().to("cpu", copy=True) for name, p in model.named_parameters(remove_duplicate=False)}
    for prefix, module in model.named_modules(remove_duplicate=False):
        for name, buffer in module.named_buffers(recurse=False):
            if buffer is not None and name not in module._non_persistent_buffers_set:
                out[f"{prefix}.{name}" if prefix else name] = buffer.detach().to("cpu", copy=True)
    return out


def save_final_model(
    trainer: Any,
    tokenizer: Any,
    target: Path,
    *,
    config_extra: dict[str, Any],
    card: str,
    reward_stats: dict[str, float] | None = None,
    finalize: Any = None,
) -> None:
    """Save weights (safetensors), tokenizer and config (with ``rmspec`` extras) and the card.

    ``reward_stats`` (reward_mean, reward_std) go at the top of config.json, where rmspec.evaluate
    also writes them (it rescored the validation split after training, and replaces them).
    ``finalize(model) -> {name: tensor}`` turns a training-only head into the saved one in place
    (rmspec.train.heads.finalize_heads); what it returns is saved as ENSEMBLE_FILE beside the weights.
    Goes through Trainer.save_model, which gathers sharded (FSDP/DeepSpeed) weights and writes on
    the main process only; a LoRA model is merged first so the folder loads with the Auto classes.
    """
    target = Path(target)
    args = trainer.args
    is_main = trainer.is_world_process_zero()
    model = trainer.accelerator.unwrap_model(trainer.model)
    tmp = Path(tempfile.mkdtemp(prefix=".model.", dir=target.parent)) if is_main else None
    # Every rank takes part in gathering; only the main one writes.
    side_tensors: dict[str, Any] = {}
    if hasattr(model, "merge_and_unload"):
        gathered = unshard_fsdp2(model)
        merged = merge_lora(model)
        if finalize is not None:
            side_tensors = finalize(merged)
        if is_main:
            merged.config.update({"rmspec": config_extra, **_stats(reward_stats)})
            state = whole_state_dict(merged) if gathered else None
            merged.save_pretrained(tmp, safe_serialization=True, state_dict=state)
    else:
        if finalize is not None:
            side_tensors = finalize(model)
        model.config.update({"rmspec": config_extra, **_stats(reward_stats)})
        out = tmp if is_main else Path(args.output_dir) / ".unused"
        trainer.save_model(str(out))
    if not is_main:
        return
    assert tmp is not None, "the main process made the temporary folder above"
    tokenizer.save_pretrained(tmp)
    save_image_processor(trainer, tmp)
    if side_tensors:
        from safetensors.torch import save_file

        from rmspec.train.heads import ENSEMBLE_FILE

        save_file(side_tensors, str(tmp / ENSEMBLE_FILE), metadata={"format": "pt", "reduce": "mean"})
    for stray in ("training_args.bin",):
        (tmp / stray).unlink(missing_ok=True)
    (tmp / "README.md").write_text(card, encoding="utf-8")
    follow_umask(tmp, tree=True)  # mkdtemp's 0700 and safetensors' 0600 would hide it from other users
    old = None
    if target.exists():
        old = target.with_name(f".{target.name}.old")
        shutil.rmtree(old, ignore_errors=True)
        target.rename(old)
    tmp.rename(target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def save_image_processor(trainer: Any, folder: Path) -> None:
    """A VLM's processor as training used it (model.vision's min/max pixels included), saved beside the
    weights with its own settings (processor_config.json: LLaVA's patch size, Idefics3's image_seq_len;
    its tokenizer is the run's, saved just before): the folder then scores alone, without the base model
    (rmspec.inference.scorers.vision_reward), and `AutoProcessor.from_pretrained(folder,
    trust_remote_code=True)` loads it without rmspec or torchvision (rmspec.vision.saved_processor).
    Text models have no image encoder in their collator."""
    encoder = getattr(trainer.data_collator, "encoder", None)
    processor = getattr(encoder, "processor", None)
    if processor is not None and getattr(processor, "image_processor", None) is not None:
        from rmspec.vision.saved_processor import save_portable

        save_portable(processor, folder)


def model_card(
    *,
    name: str,
    approach: str,
    base_model: str,
    spec_yaml: str,
    weights: dict[str, Any] | None = None,
    data_summary: dict[str, Any] | None,
    results: dict[str, Any],
    scorer: str = "reward",
    use: tuple[str, ...] | None = None,
) -> str:
    """A model card: metadata, how to use it (`use`, else the scorer kind's lines), the spec as run, the
    data and the results."""
    from huggingface_hub import ModelCardData

    meta = ModelCardData(
        library_name="transformers",
        base_model=base_model if "/" in base_model and not base_model.startswith("/") else None,
        tags=["reward-model", "rmspec", approach],
    )
    lines = [
        "---",
        meta.to_yaml(),
        "---",
        "",
        f"# {name}",
        "",
        f"A reward model trained with rmspec ({approach.replace('_', '-')}), from `{base_model}`.",
        "",
        *(
            [
                f"Base weights: {weights['note']} (`{weights['file']}`"
                + (f"; the original model is `{weights['original']}`" if weights.get("original") else "")
                + "). This model is saved as plain safetensors.",
                "",
            ]
            if weights
            else []
        ),
        "## Use",
        "",
        *(use or scorers.get(scorer).card_use),  # the saved model's kind: a token classifier, a causal LM, a score head
        "",
        "## Results",
        "",
        "| metric | value |",
        "|---|---|",
    ]
    for key, value in results.items():
        if key.startswith("eval/") and key.count("/") < 2:  # runtime, samples per second
            continue
        if isinstance(value, float):
            value = f"{value:.4f}"
        lines.append(f"| {key} | {value} |")
    if data_summary:
        lines += ["", "## Data", "", "```json", json.dumps(data_summary, indent=2, default=str), "```"]
    lines += ["", "## Spec", "", "```yaml", spec_yaml.rstrip(), "```", ""]
    return "\n".join(lines)
