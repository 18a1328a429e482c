"""The Trainer for a spec's approach, with its collator, sampler and metrics."""

from __future__ import annotations

from typing import Any

from rmspec.train.bradley_terry import BradleyTerryTrainer
from rmspec.train.collators import LMCollator, PairCollator, ScoresCollator
from rmspec.train.generative import GenerativeTrainer
from rmspec.train.listwise import ListCollator, ListwiseTrainer, PackedListCollator
from rmspec.train.packing import SHARED_PREFIX, PackedPairCollator, packed_length, packing_path
from rmspec.train.pointwise import PointwiseTrainer, pointwise_metrics
from rmspec.train.process import ProcessTrainer, StepCollator, process_metrics


def with_lengths(dataset: Any, approach_kind: str, packed: bool = False) -> Any:
    """Add the `length` column the length-grouped sampler reads (the longer side of a pair, or the
    shared-prefix row's P + C + R when pairs are packed)."""
    if dataset is None or "length" in dataset.column_names:
        return dataset
    if approach_kind == "bradley_terry" and packed:
        return dataset.map(
            lambda r: {"length": packed_length(r["chosen_input_ids"], r["rejected_input_ids"])}, desc="lengths"
        )
    if approach_kind == "bradley_terry":
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
):
    approach = spec.approach
    sft = bool(getattr(approach, "sft_weight", 0.0))
    packing, packing_reason = packing_path(getattr(spec.training, "packing", "auto"), approach.kind, model.config, sft)
    packed = packing == SHARED_PREFIX
    common = dict(
        model=model,
        args=args,
        train_dataset=with_lengths(train, approach.kind, packed),
        eval_dataset=with_lengths(validation, approach.kind, packed),
        processing_class=tokenizer,
        callbacks=callbacks or [],
        group_by_length=spec.training.group_by_length,
    )
    pad = tokenizer.pad_token_id
    if approach.kind == "bradley_terry" and (approach.length_debias is not None or approach.ensemble is not None):
        from rmspec.train.heads import build_head_trainer  # ODIN or an ensemble of heads

        trainer = build_head_trainer(spec, PackedPairCollator(pad) if packed else PairCollator(pad), tokenizer, common)
        trainer.packing = (packing, packing_reason)
        return trainer
    if approach.kind == "bradley_terry":
        from rmspec.train.pair_extras import attach_tie, davidson_pair_metrics

        tie = attach_tie(model, approach.tie_nu) if approach.ties == "davidson" else None
        if sft:
            from rmspec.train.pair_extras import attach_lm_head

            how = attach_lm_head(model, model.config._name_or_path, len(tokenizer))
            print(
                f"rmspec: sft_weight {approach.sft_weight}: {how}; the saved model keeps only the score head",
                flush=True,
            )
        if tie is not None:
            common["compute_metrics"] = davidson_pair_metrics(tie)
        trainer = BradleyTerryTrainer(
            data_collator=PackedPairCollator(pad) if packed else PairCollator(pad),
            margin_mode=approach.margin_mode,
            center_rewards_coefficient=approach.center_rewards_coefficient,
            tie=tie,
            tie_learning_rate=approach.tie_learning_rate,
            sft_weight=approach.sft_weight,
            **common,
        )
        trainer.packing = (packing, packing_reason)  # what ran and why (the plan predicted it)
        return trainer
    if approach.kind == "listwise":
        trainer = ListwiseTrainer(
            data_collator=PackedListCollator(pad) if packed else ListCollator(pad),
            top_k=approach.top_k,
            center_rewards_coefficient=approach.center_rewards_coefficient,
            **common,
        )
        trainer.packing = (packing, packing_reason)
        return trainer
    if approach.kind == "pointwise":
        prompts = list(validation["prompt"]) if validation is not None and "prompt" in validation.column_names else None
        return PointwiseTrainer(
            data_collator=ScoresCollator(pad),
            objective=approach.objective,
            bins=int(round(approach.scale.max - approach.scale.min)) + 1,
            low=approach.scale.min,
            compute_metrics=pointwise_metrics(list(approach.attributes), approach.weights, prompts),
            **common,
        )
    if approach.kind == "process":
        return ProcessTrainer(
            data_collator=StepCollator(pad),
            train_on=approach.train_on,
            compute_metrics=process_metrics(approach.threshold),
            **common,
        )
    if approach.kind == "generative":
        return GenerativeTrainer(data_collator=LMCollator(pad), **common)
    raise ValueError(f"unknown approach {approach.kind!r}")
