"""The Trainer for a spec's approach, with its collator, sampler and metrics.

`build_trainer` is the same for every approach: it decides the packing path and the arguments every
Trainer takes, then calls the builder the approach's declaration names (rmspec.approaches: its
`trainer` hook, one of the functions below for the shipped approaches).
"""

from __future__ import annotations

from typing import Any

from rmspec import approaches
from rmspec.plan.packing import OFF
from rmspec.train.collators import LMCollator, PairCollator, ScoresCollator
from rmspec.train.packing import SHARED_PREFIX, PackedPairCollator, packed_length, packing_path
from rmspec.train.vision_packing import VisionPackedPairCollator, why_not_packable
from rmspec.vision.collate import VisionEncoder, VisionPairCollator, VisionScoresCollator, has_images


def vision_encoder(model: Any, tokenizer: Any, vision: Any = None) -> VisionEncoder:
    """The image side of a VLM's batches: its processor (rmspec.vision.processor) over the run's tokenizer,
    at the spec's resolution (model.vision.min_pixels / max_pixels, model.vision.image_processor) where it sets one."""
    from rmspec.vision.processor import image_text, load_processor

    bounds = {"min_pixels": vision.min_pixels, "max_pixels": vision.max_pixels} if vision is not None else {}
    settings = getattr(vision, "image_processor", None) or None  # the processor's own names (crop_size, ...)
    processor = load_processor(model.config._name_or_path, tokenizer, **bounds, settings=settings)
    return VisionEncoder(processor, image_text(model.config, processor))


def with_lengths(dataset: Any, packed: bool = False) -> Any:
    """Add the `length` column the length-grouped sampler reads (the longer side of a pair, or the
    shared-prefix row's P + C + R when pairs are packed)."""
    if dataset is None or "length" in dataset.column_names:
        return dataset
    if "chosen_input_ids" in dataset.column_names and packed:  # pairs
        return dataset.map(
            lambda r: {"length": packed_length(r["chosen_input_ids"], r["rejected_input_ids"])}, desc="lengths"
        )
    if "chosen_input_ids" in dataset.column_names:
        return dataset.map(
            lambda r: {"length": max(len(r["chosen_input_ids"]), len(r["rejected_input_ids"]))},
            desc="lengths",
        )
    return dataset.map(lambda r: {"length": len(r["input_ids"])}, desc="lengths")


def build_trainer(
    spec: Any,
    model: Any,
    tokenizer: Any,
    args: Any,
    train: Any,
    validation: Any | None,
    callbacks: list | None = None,
    split: bool = False,
):
    """``split``: the plan splits each row over a context-parallel group (hardware.context_parallel above 1)."""
    approach = approaches.of(spec)
    packing, packing_reason = packing_path(spec.training.packing, approach, model.config, split)
    if has_images(train) and packing == SHARED_PREFIX:  # image rows: prompt-once packing with M-RoPE, where it applies
        why = why_not_packable(model.config)  # ODIN and ensembles pack too (rmspec.train.heads.pair_outputs)
        packing, packing_reason = (
            (SHARED_PREFIX, "prompt-once packing with M-RoPE: each image encoded once per pair")
            if why is None
            else (OFF, f"rows with images: {why}")
        )
    packed = packing == SHARED_PREFIX
    common = dict(
        model=model,
        args=args,
        train_dataset=with_lengths(train, packed),
        eval_dataset=with_lengths(validation, packed),
        processing_class=tokenizer,
        callbacks=callbacks or [],
        group_by_length=spec.training.group_by_length,
    )
    trainer = approach.hook("trainer")(spec, model, tokenizer, common, packed, validation)
    trainer.packing = (packing, packing_reason)  # what ran and why (the plan predicted it)
    return trainer


# ---------------------------------------------------------------- the shipped approaches' builders


def bradley_terry(spec: Any, model: Any, tokenizer: Any, common: dict, packed: bool, validation: Any) -> Any:
    approach = spec.approach
    pad = tokenizer.pad_token_id
    collator: Any = PackedPairCollator(pad, sft=bool(approach.sft_weight)) if packed else PairCollator(pad)
    if has_images(common["train_dataset"]):
        encoder = vision_encoder(model, tokenizer, spec.model.vision)
        collator = VisionPackedPairCollator(encoder) if packed else VisionPairCollator(encoder)
    if approach.length_debias is not None or approach.ensemble is not None:
        from rmspec.train.heads import build_head_trainer  # ODIN or an ensemble of heads

        return build_head_trainer(spec, collator, tokenizer, common)
    from rmspec.train.bradley_terry import BradleyTerryTrainer
    from rmspec.train.pair_extras import attach_tie, davidson_pair_metrics

    tie = attach_tie(model, approach.tie_nu) if approach.ties == "davidson" else None
    if approach.sft_weight:
        from rmspec.train.pair_extras import attach_lm_head

        how = attach_lm_head(model, model.config._name_or_path, len(tokenizer))
        print(
            f"rmspec: sft_weight {approach.sft_weight}: {how}; the saved model keeps only the score head",
            flush=True,
        )
    if tie is not None:
        common["compute_metrics"] = davidson_pair_metrics(tie)
    return BradleyTerryTrainer(
        data_collator=collator,
        margin_mode=approach.margin_mode,
        center_rewards_coefficient=approach.center_rewards_coefficient,
        tie=tie,
        tie_learning_rate=approach.tie_learning_rate,
        sft_weight=approach.sft_weight,
        **common,
    )


def listwise(spec: Any, model: Any, tokenizer: Any, common: dict, packed: bool, validation: Any) -> Any:
    from rmspec.train.listwise import ListCollator, ListwiseTrainer, PackedListCollator

    pad = tokenizer.pad_token_id
    return ListwiseTrainer(
        data_collator=PackedListCollator(pad) if packed else ListCollator(pad),
        top_k=spec.approach.top_k,
        center_rewards_coefficient=spec.approach.center_rewards_coefficient,
        **common,
    )


def pointwise(spec: Any, model: Any, tokenizer: Any, common: dict, packed: bool, validation: Any) -> Any:
    from rmspec.approaches.pointwise import bins
    from rmspec.train.pointwise import PackedScoresCollator, PointwiseTrainer, pointwise_metrics

    approach = spec.approach
    prompts = list(validation["prompt"]) if validation is not None and "prompt" in validation.column_names else None
    # packed only where the rows are split (packing_path's split): one process keeps its padded sequences
    collator: Any = PackedScoresCollator(tokenizer.pad_token_id) if packed else ScoresCollator(tokenizer.pad_token_id)
    if has_images(common["train_dataset"]):
        collator = VisionScoresCollator(vision_encoder(model, tokenizer, spec.model.vision))
    return PointwiseTrainer(
        data_collator=collator,
        objective=approach.objective,
        bins=bins(approach),
        low=approach.scale.min,
        compute_metrics=pointwise_metrics(list(approach.attributes), approach.weights, prompts),
        **common,
    )


def process(spec: Any, model: Any, tokenizer: Any, common: dict, packed: bool, validation: Any) -> Any:
    from rmspec.train.process import PackedStepCollator, ProcessTrainer, StepCollator, process_metrics

    # packed only where the rows are split (packing_path's split): one process keeps its padded sequences
    return ProcessTrainer(
        data_collator=PackedStepCollator(tokenizer.pad_token_id) if packed else StepCollator(tokenizer.pad_token_id),
        train_on=spec.approach.train_on,
        compute_metrics=process_metrics(spec.approach.threshold),
        **common,
    )


def generative(spec: Any, model: Any, tokenizer: Any, common: dict, packed: bool, validation: Any) -> Any:
    if spec.approach.method == "grpo":  # a judge trained by reinforcement on pairs (TRL's GRPOTrainer)
        from rmspec.train.judge_grpo import build_trainer as grpo_trainer

        return grpo_trainer(spec, model, tokenizer, common, packed, validation)
    from rmspec.train.generative import GenerativeTrainer, PackedLMCollator

    # packed only where the rows are split (packing_path's split): one process keeps its padded sequences
    collator: Any = PackedLMCollator(tokenizer.pad_token_id) if packed else LMCollator(tokenizer.pad_token_id)
    if has_images(common["train_dataset"]):  # a VLM judge: the prompt's images, the loss on the verdict
        from rmspec.vision.judge import VisionLMCollator

        collator = VisionLMCollator(vision_encoder(model, tokenizer, spec.model.vision))
    return GenerativeTrainer(data_collator=collator, **common)
