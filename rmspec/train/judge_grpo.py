"""A generative judge trained by reinforcement: TRL's GRPOTrainer on preference pairs.

Each training pair becomes two judge prompts, the chosen response shown as A and then as B, kept
next to each other (a generation batch of an even number of prompts holds both orders of its
pairs, so position agreement is measured while training). The prompt is laid out and tokenized
exactly as the judge inference path does it (rmspec.inference.judge: evaluation, `rmspec serve`),
so the model is trained on the prompts it will be asked. The reward is rmspec.train.judge_reward.
"""

from __future__ import annotations

import random
from dataclasses import fields
from typing import Any

from rmspec.inference.judge import judge_prompt_text
from rmspec.train.judge_reward import FIRST, SWAPPED, RewardRule, gold_verdict, parse, verdict_reward


def rule_from_spec(approach: Any) -> RewardRule:
    reward = approach.reward
    return RewardRule(
        pattern=approach.judge_pattern,
        output=approach.output,
        correct=reward.correct,
        wrong=reward.wrong,
        unparsed=reward.unparsed,
        tie_verdict=approach.tie_verdict if approach.ties == "verdict" else None,
        format_pattern=reward.format_pattern,
        format_reward=reward.format_reward,
    )


def judge_rows(pairs: Any, approach: Any, seed: int) -> list[dict[str, Any]]:
    """Both orders of every pair, pairs in a seeded order, the two orders of a pair adjacent."""
    rule = rule_from_spec(approach)
    order = list(range(len(pairs)))
    random.Random(seed).shuffle(order)
    rows = []
    for i in order:
        pair = pairs[i]
        prompt, tie = judge_prompt_text(pair["prompt_messages"]), bool(pair.get("tie"))
        shown = {FIRST: (pair["chosen"], pair["rejected"]), SWAPPED: (pair["rejected"], pair["chosen"])}
        for which, (a, b) in shown.items():
            rows.append(
                {
                    "prompt": approach.prompt_template.format(prompt=prompt, response_a=a, response_b=b),
                    "gold": gold_verdict(which, tie, rule),
                    "order": which,
                    "pair": str(pair.get("id") or i),
                }
            )
    return rows


class VerdictReward:
    """The reward function GRPOTrainer calls (its signature: prompts, completions, the dataset's
    other columns, log_metric); logs the judge's own figures beside TRL's reward statistics."""

    __name__ = "verdict"  # TRL names a reward function's metrics after it

    def __init__(self, rule: RewardRule):
        self.rule = rule

    def __call__(self, prompts, completions, gold, order, pair, log_metric=None, **_: Any) -> list[float]:
        texts = [c if isinstance(c, str) else c[-1]["content"] for c in completions]
        verdicts = [parse(t, self.rule) for t in texts]
        rewards = [verdict_reward(t, g, self.rule) for t, g in zip(texts, gold)]
        if log_metric is not None:
            for name, value in batch_figures(verdicts, gold, order, pair).items():
                log_metric(name, value)
        return rewards


def batch_figures(verdicts: list, gold: list, order: list, pair: list) -> dict[str, float]:
    """Verdict accuracy, unparsed rate and position agreement of one batch of completions. Position
    agreement: of the pairs seen in both orders, the share whose majority verdicts pick the same
    response (A in the first order and B when swapped, or the reverse). A split vote (as many
    completions for each response) has no majority: that pair counts as disagreement."""
    n = len(verdicts)
    out = {
        "judge/verdict_accuracy": sum(v == g for v, g in zip(verdicts, gold)) / n,
        "judge/unparsed_rate": sum(v is None for v in verdicts) / n,
    }
    votes: dict[tuple[str, str], list[str]] = {}
    for v, o, p in zip(verdicts, order, pair):
        if v in ("A", "B"):  # the response picked: chosen or rejected
            votes.setdefault((p, o), []).append("chosen" if (v == "A") == (o == FIRST) else "rejected")
    both = [p for (p, o) in votes if o == FIRST and (p, SWAPPED) in votes]
    if both:

        def majority(key: tuple[str, str]) -> str | None:
            """The response most completions picked; None on a tie (a split vote picks neither)."""
            picks = votes[key]
            counts = sorted((picks.count(c) for c in set(picks)), reverse=True)
            return None if len(counts) > 1 and counts[0] == counts[1] else max(set(picks), key=picks.count)

        agree = [majority((p, FIRST)) is not None and majority((p, FIRST)) == majority((p, SWAPPED)) for p in both]
        out["judge/position_agreement"] = sum(agree) / len(both)
    return out


def grpo_config(args: Any, spec: Any) -> Any:
    """GRPOConfig from rmspec's TrainingArguments and approach.grpo. Precision is the plan's, passed
    explicitly (GRPOConfig turns bf16 on by default, very slow on CPUs without native bf16);
    validation runs once at the end (final_metrics), not periodically."""
    from transformers import TrainingArguments
    from trl import GRPOConfig

    grpo = spec.approach.grpo
    kept = {f.name: getattr(args, f.name) for f in fields(TrainingArguments) if f.init and hasattr(args, f.name)}
    kept.update(eval_strategy="no", load_best_model_at_end=False, metric_for_best_model=None)
    kept.update(bf16=bool(args.bf16), fp16=bool(args.fp16))
    kept.pop("generation_config", None)
    return GRPOConfig(
        **kept,
        num_generations=grpo.num_generations,
        max_completion_length=grpo.max_completion_length,
        temperature=grpo.temperature,
        top_p=grpo.top_p,
        beta=grpo.beta,
        epsilon=grpo.epsilon,
        loss_type=grpo.loss_type,
        scale_rewards=grpo.scale_rewards,
        mask_truncated_completions=grpo.mask_truncated_completions,
        steps_per_generation=grpo.steps_per_generation,
        use_vllm=grpo.use_vllm,
        shuffle_dataset=False,  # judge_rows shuffled the pairs, keeping each pair's two orders together
    )


def build_trainer(spec: Any, model: Any, tokenizer: Any, common: dict, packed: bool, validation: Any) -> Any:
    """approach generative, method grpo: a GRPOTrainer whose prompts are laid out as the judge
    inference path lays them out."""
    from datasets import Dataset
    from trl import GRPOTrainer

    from rmspec.inference.encoding import make_layout
    from rmspec.inference.judge import _prompt_ids

    shape = spec.model.shape
    layout = make_layout(tokenizer, spec.data.mapping.chat_template, shape.architecture if shape else None)

    class JudgeGRPOTrainer(GRPOTrainer):
        def _tokenize_prompts(self, prompts: list):
            return _prompt_ids(layout, self.processing_class, prompts), None, {}

    rows = judge_rows(common["train_dataset"], spec.approach, spec.training.seed)
    if model.generation_config is not None:  # the judge stops at its end of turn; no pad warning per step
        model.generation_config.pad_token_id = tokenizer.pad_token_id
    trainer = JudgeGRPOTrainer(
        model=model,
        reward_funcs=[VerdictReward(rule_from_spec(spec.approach))],
        args=grpo_config(common["args"], spec),
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
        callbacks=common["callbacks"],
    )
    trainer.judge_layout = layout
    return trainer


def final_metrics(trainer: Any, validation: Any, spec: Any, tokenizer: Any, main: bool) -> tuple[dict, dict]:
    """Held-out pairs judged greedily in both orders (up to 200 pairs): verdict accuracy in each
    order and both, unparsed rate, position agreement; no reward statistics."""
    from rmspec import approaches
    from rmspec.inference.judge import _prompt_ids, generate

    family = approaches.of(spec).metric_family
    if not main or validation is None or len(validation) == 0:
        return {}, {}
    rows = judge_rows(validation.select(range(min(len(validation), 200))), spec.approach, spec.training.seed)
    model = trainer.accelerator.unwrap_model(trainer.model)
    model.eval()
    ids = _prompt_ids(trainer.judge_layout, tokenizer, [r["prompt"] for r in rows])
    texts = generate(model, tokenizer, ids, spec.approach.max_new_tokens)
    rule = rule_from_spec(spec.approach)
    verdicts = [parse(t, rule) for t in texts]
    gold, order, pair = ([r[k] for r in rows] for k in ("gold", "order", "pair"))
    figures = batch_figures(verdicts, gold, order, pair)
    for which in (FIRST, SWAPPED):
        hits = [v == g for v, g, o in zip(verdicts, gold, order) if o == which]
        figures[f"judge/verdict_accuracy_{which}_order"] = sum(hits) / len(hits)
    figures["judge/reward"] = sum(verdict_reward(t, g, rule) for t, g in zip(texts, gold)) / len(texts)
    out = {f"eval/{family}/{k.split('/', 1)[1]}": v for k, v in figures.items()}
    trainer.log({f"eval_{k.split('/', 1)[1]}": v for k, v in figures.items()})
    return out, {}
