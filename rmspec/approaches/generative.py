"""Generative: a causal LM judge that writes a verdict ([[A]] or [[B]]) for a pair.

Trained by rmspec.train.generative (next-token loss on the judge's answer); validation judges each
held-out pair in both orders with the saved model (rmspec.inference.judge): verdict accuracy in the
written order, with the responses swapped, and in both.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field, PositiveInt, field_validator

from rmspec.approaches.base import LM_HEAD, Approach
from rmspec.spec.approach import MESSAGES, PAIRS, ApproachSection
from rmspec.spec.approach_rules import looks_encoder
from rmspec.spec.base import Problem, Section
from rmspec.spec.heads import HeadOptionsCheck
from rmspec.spec.scorer_kind import ScorerKind

if TYPE_CHECKING:
    from rmspec.spec.root import Spec


# ---------------------------------------------------------------- options: the GRPO method
# `grpo:` maps one to one onto TRL's GRPOConfig (rmspec.train.judge_grpo); `reward:` is the verdict
# reward (rmspec.train.judge_reward, defaults after RM-R1). The checks TRL makes when the trainer
# starts are made here, at validate time, each naming the field and what to write.

# The judge prompt when approach.judge_template is unset: the layout rmspec's judge inference uses
# (rmspec.inference.judge.judge_message: evaluation, JudgeBench, `rmspec serve`), so a judge trained by
# GRPO is asked as it was trained. {prompt}, {response_a}, {response_b} are filled per row, once with
# the chosen response as A and once as B.
JUDGE_INSTRUCTION = (
    "Compare the two responses to the prompt below and decide which one is better. "
    "Consider correctness, safety, tone and whether the instructions are followed. "
    "End your answer with [[A]] or [[B]]."
)
LAYOUT = "\n\n[Prompt]\n{prompt}\n\n[Response A]\n{response_a}\n\n[Response B]\n{response_b}"
DEFAULT_JUDGE_TEMPLATE = JUDGE_INSTRUCTION + LAYOUT
DEFAULT_SCORES_TEMPLATE = (
    "Score each of the two responses to the prompt below from 0 to 10 for correctness, safety, tone and "
    "whether the instructions are followed. End your answer with [[score of A, score of B]]." + LAYOUT
)
TEMPLATE_FIELDS = ("{prompt}", "{response_a}", "{response_b}")
DEFAULT_SCORES_PATTERN = r"\[\[\s*(\d+(?:\.\d+)?)\s*,\s*(\d+(?:\.\d+)?)\s*\]\]"


class JudgeReward(Section):
    """The reward of one generated judgement (rmspec.train.judge_reward)."""

    correct: float = Field(1.0, description="Reward when the parsed verdict equals the label (RM-R1: 1).")
    wrong: float = Field(-1.0, description="Reward when the parsed verdict is the other one (RM-R1: -1).")
    unparsed: float = Field(
        -1.0,
        description="Reward when verdict_pattern finds no verdict, or several that disagree (RM-R1: -1).",
    )
    format_pattern: str | None = Field(
        None,
        description="Optional format term: a regex searched in the whole completion (e.g. '<think>.+</think>'); "
        "format_reward is added when it is found.",
    )
    format_reward: float = Field(0.0, description="Added to the reward when format_pattern is found.")


class GRPOOptions(Section):
    """TRL GRPOConfig fields, under the same names (rmspec.train.judge_grpo passes them on)."""

    num_generations: PositiveInt = Field(
        4,
        description="Completions sampled per prompt (the group); at least 2. training.global_batch_size counts "
        "completions and must be divisible by it.",
    )
    max_completion_length: PositiveInt = Field(64, description="Tokens generated per completion at most.")
    temperature: float = Field(1.0, gt=0, description="Sampling temperature of the generations.")
    top_p: float = Field(1.0, gt=0, le=1, description="Nucleus sampling: keep the tokens within this probability mass.")
    beta: float = Field(
        0.0,
        ge=0,
        description="KL coefficient against the starting model; a reference model is loaded only when > 0 "
        "(RM-Gallery: 0.001).",
    )
    epsilon: float = Field(0.2, gt=0, description="PPO clipping range of the importance ratio.")
    loss_type: Literal["grpo", "dr_grpo", "dapo", "bnpo"] = Field(
        "dapo",
        description="How token losses are averaged: grpo (per sequence), dr_grpo (a constant), dapo (active tokens "
        "of the accumulated batch, TRL's default), bnpo (active tokens of the local batch).",
    )
    scale_rewards: Literal["group", "batch", "none"] = Field(
        "group", description="Divide advantages by the group's reward std, the batch's, or not at all (Dr. GRPO)."
    )
    mask_truncated_completions: bool = Field(
        False, description="Leave completions cut at max_completion_length out of the loss (DAPO)."
    )
    steps_per_generation: PositiveInt | None = Field(
        None,
        description="Optimizer micro-steps fed by one generation batch; unset: the gradient accumulation steps "
        "(the generation batch is then training.global_batch_size).",
    )
    use_vllm: bool = Field(False, description="Generate with vLLM (GPU plans only; vllm must be installed).")


def template_problems(template: str, path: tuple[str, ...]) -> Iterator[Problem]:
    missing = [f for f in TEMPLATE_FIELDS if f not in template]
    if missing:
        yield (path, f"the judge template lacks {', '.join(missing)}", "write each of " + ", ".join(TEMPLATE_FIELDS))
        return
    try:
        template.format(prompt="", response_a="", response_b="")
    except (KeyError, IndexError, ValueError) as exc:
        yield (path, f"the judge template does not format: {exc}", "write literal braces as {{ and }}")


def grpo_problems(spec: Spec, approach: Any) -> Iterator[Problem]:
    """TRL's own launch checks and rmspec's, before anything runs."""
    grpo, training, hardware = approach.grpo, spec.training, spec.hardware
    where = ("approach", "grpo")
    if grpo.num_generations < 2:
        yield (
            (*where, "num_generations"),
            f"GRPO compares completions within a group: num_generations {grpo.num_generations} gives no advantage",
            "write approach.grpo.num_generations: 2 or more (RM-Gallery uses 4)",
        )
        return
    if grpo.use_vllm and hardware.device == "cpu":
        yield (
            (*where, "use_vllm"),
            "use_vllm generates on a GPU, but hardware.device is cpu",
            "write approach.grpo.use_vllm: false (generation uses transformers on CPU)",
        )
    if grpo.steps_per_generation is None:
        batch, how = training.global_batch_size, "training.global_batch_size"
    elif isinstance(training.micro_batch_size, int):
        world = hardware.gpus_per_node * hardware.nodes
        batch = training.micro_batch_size * world * grpo.steps_per_generation
        how = f"micro_batch_size {training.micro_batch_size} x {world} processes x steps_per_generation"
    else:
        yield (
            (*where, "steps_per_generation"),
            "with steps_per_generation the generation batch is micro_batch_size x processes x steps_per_generation, "
            "but training.micro_batch_size is auto",
            "write training.micro_batch_size as a number, or remove approach.grpo.steps_per_generation",
        )
        return
    if batch % grpo.num_generations:
        fit = (batch // grpo.num_generations + 1) * grpo.num_generations
        yield (
            ("training", "global_batch_size")
            if grpo.steps_per_generation is None
            else (*where, "steps_per_generation"),
            f"the generation batch ({how} = {batch} completions) is not divisible by "
            f"approach.grpo.num_generations {grpo.num_generations}: TRL needs whole groups",
            f"write training.global_batch_size: {fit}"
            if grpo.steps_per_generation is None
            else "pick steps_per_generation so that the product is a multiple of num_generations",
        )
    pattern = re.compile(approach.judge_pattern)
    need = 2 if approach.output == "scores" else 1
    if pattern.groups != need:  # more groups: alternatives that leave the one read unset
        yield (
            ("approach", "verdict_pattern"),
            f"output: {approach.output} reads {need} group(s), but verdict_pattern has {pattern.groups}",
            f"write a pattern with two groups, e.g. {DEFAULT_SCORES_PATTERN}"
            if need == 2
            else r"write one group, other parentheses as (?:...), e.g. (?:\[\[|Verdict: )(A|B)",
        )
    if approach.ties == "verdict" and approach.output == "verdict":
        shown = re.search(pattern, _shown(approach.judge_pattern, approach.tie_verdict))
        if shown is None or (shown.group(1) or "").strip() != approach.tie_verdict:
            yield (
                ("approach", "tie_verdict"),
                f"ties: verdict trains the verdict {approach.tie_verdict!r}, which verdict_pattern cannot read",
                r"write a verdict_pattern that captures it, e.g. \[\[(A|B|C)\]\] with tie_verdict: C",
            )
    if approach.judge_template is not None:
        yield from template_problems(approach.judge_template, ("approach", "judge_template"))
    # GRPO validates once, at the end (held-out pairs judged in both orders): nothing periodic to watch
    for name in ("early_stopping", "eval_steps", "best_metric"):
        if getattr(training, name) is not None:
            yield (
                ("training", name),
                f"training.{name} needs periodic validation, but a GRPO judge is validated once, at the end",
                f"delete training.{name}",
            )
    if training.final_model == "best":
        yield (("training", "final_model"), "final_model: best needs periodic validation", "write final_model: last")


def _shown(pattern: str, verdict: str) -> str:
    """The verdict as the default bracket convention writes it, e.g. [[C]]; a pattern without
    brackets is tried on the bare verdict."""
    return f"[[{verdict}]]" if pattern.startswith(r"\[\[") else verdict


# ---------------------------------------------------------------- the section


class Generative(HeadOptionsCheck, ApproachSection):
    """A causal LM judge writing a verdict for a pair: trained on written verdicts (method: sft, chat
    messages ending with the verdict) or by reinforcement on preference pairs (method: grpo, TRL's
    GRPOTrainer, rewarded when its parsed verdict matches the label: docs/judges_grpo.md)."""

    no_head_options: ClassVar[str] = "a judge writes a verdict; it has no score head to split or repeat"
    rows: ClassVar[str] = MESSAGES
    best_metrics: ClassVar[tuple[str, ...]] = ("eval/sft/loss",)
    logged_metrics: ClassVar[tuple[str, ...] | None] = ("eval/sft/loss",)
    kind: Literal["generative"]
    method: Literal["sft", "grpo"] = Field(
        "sft",
        description="sft: next-token loss on written verdicts (messages rows); grpo: reinforcement on preference "
        "pairs (pairs rows, both orders), reward from the parsed verdict (approach.reward, approach.grpo).",
    )
    output: Literal["verdict", "scores"] = Field(
        "verdict",
        description="What the judge writes: a verdict (A or B), or with method: grpo two scores whose order is the "
        "verdict (JudgeLRM; verdict_pattern then has two groups).",
    )
    verdict_pattern: str = Field(
        r"\[\[(A|B)\]\]", description="Regex whose first group is the verdict or score in the generated text."
    )
    max_new_tokens: PositiveInt = Field(64, description="Generation budget at evaluation.")
    judge_template: str | None = Field(
        None,
        description="method: grpo: the judge prompt, with {prompt}, {response_a} and {response_b}; unset: a shipped "
        "default asking for [[A]] or [[B]] (or [[score A, score B]] with output: scores).",
    )
    ties: Literal["reject", "verdict"] = Field(
        "reject",
        description="method: grpo: rows labelled tie are rejected (reason `tie`), or trained to the verdict "
        "tie_verdict; a tie never counts as a win for the first response.",
    )
    tie_verdict: str = Field("C", min_length=1, description="ties: verdict: the verdict a tie should get.")
    reward: JudgeReward = Field(
        default_factory=JudgeReward, description="method: grpo: the verdict reward (defaults after RM-R1)."
    )
    grpo: GRPOOptions = Field(
        default_factory=GRPOOptions, description="method: grpo: TRL GRPOConfig settings, under TRL's names."
    )

    @property
    def row_kind(self) -> str:
        return PAIRS if self.method == "grpo" else MESSAGES

    def extra_needs(self) -> list[tuple[str, str]]:
        return [("approach.method: grpo (TRL's GRPOTrainer)", "grpo")] if self.method == "grpo" else []

    @property
    def tie_rows(self) -> str:
        return self.ties

    @property
    def reinforcement(self) -> GRPOOptions | None:
        return self.grpo if self.method == "grpo" else None

    @property
    def judge_pattern(self) -> str:
        """The pattern the reward reads: verdict_pattern, or with output: scores and no pattern
        written, the default two-score pattern."""
        if self.output == "scores" and "verdict_pattern" not in self.model_fields_set:
            return DEFAULT_SCORES_PATTERN
        return self.verdict_pattern

    @property
    def prompt_template(self) -> str:
        """The judge prompt: judge_template, or the shipped default for the output."""
        if self.judge_template is not None:
            return self.judge_template
        return DEFAULT_SCORES_TEMPLATE if self.output == "scores" else DEFAULT_JUDGE_TEMPLATE

    @field_validator("verdict_pattern")
    @classmethod
    def _one_group(cls, pattern: str) -> str:
        import re

        try:
            compiled = re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"invalid regular expression: {exc}") from None
        if compiled.groups < 1:
            raise ValueError("the pattern needs a capture group around the verdict, e.g. \\[\\[(A|B)\\]\\]")
        return pattern

    def problems(self, spec: Spec) -> Iterator[Problem]:
        yield from judge_needs_causal_lm(spec)
        if self.method == "grpo":
            yield from grpo_problems(spec, self)
        else:
            yield from judge_writes_verdicts(self)


# ---------------------------------------------------------------- its rules


def judge_needs_causal_lm(spec: Spec) -> Iterator[Problem]:
    if looks_encoder(spec):
        yield (
            ("model", "name_or_path"),
            f"the generative approach trains a causal LM, but {spec.model.name_or_path!r} is an encoder",
            "pick a decoder model (e.g. Qwen/Qwen2.5-0.5B-Instruct) or approach kind: bradley_terry",
        )


def judge_writes_verdicts(approach: Any) -> Iterator[Problem]:
    """method: sft learns written verdicts: the GRPO-only options have no effect there."""
    if approach.output != "verdict":
        yield (
            ("approach", "output"),
            "approach.output: scores is trained by reinforcement only: method sft learns written verdicts "
            "(A or B, read with verdict_pattern)",
            "write approach.method: grpo, or delete approach.output (verdict)",
        )
    for name in ("judge_template", "ties", "tie_verdict", "reward", "grpo"):
        if name in approach.model_fields_set:
            yield (
                ("approach", name),
                f"approach.{name} is read by method: grpo only, but approach.method is sft",
                f"write approach.method: grpo, or delete approach.{name}",
            )


# ---------------------------------------------------------------- the declaration


class GenerativeApproach(Approach):
    name = "generative"
    section = Generative
    scorer = ScorerKind.JUDGE
    description = "a judge model writing verdicts"
    head = LM_HEAD
    causal_lm = True
    # hardware.context_parallel (method sft): each example one packed row read by the LM head where the next token
    # is a label (one process keeps padded sequences), split through the forward the others use
    # (rmspec.train.generative, tests/test_context_parallel_generative.py)
    packs_when_split = True
    trains_split = True
    packed_row = (
        "generative: each example one row [judge prompt + verdict], the LM head read before every verdict token"
    )
    trainer = "rmspec.train.factory:generative"
    metric_family = "sft"
    final_metrics = "rmspec.train.generative:final_metrics"
    auto_model = "causal_lm"
    lora_task = "CAUSAL_LM"
    evaluation = "rmspec.evaluate.judge_run:evaluate_judge"
    validation_metrics = ("verdict_accuracy_first_order", "verdict_accuracy_swapped_order", "verdict_accuracy")
    # a judge trained by GRPO (approach.method: grpo; the exporter refuses others): its training for verl
    exporter = "rmspec.train.judge_export:export_judge"
    export_targets = ("verl",)
    export_writes = "dir"
    template = "generative.yaml"
    demo_data = "judge-demo"

    def config_extra(self, spec: Any) -> dict[str, Any]:
        return {"verdict_pattern": spec.approach.verdict_pattern}

    def split_refusal(self, section: Any) -> str | None:
        if section.method == "grpo":  # TRL's GRPOTrainer generates its rollouts and computes its own loss
            return (
                "approach.method: grpo is not trained split in this version (its rollouts are generated whole by "
                "TRL's GRPOTrainer, which computes its own loss): write method: sft, or hardware.context_parallel: 1"
            )
        return None

    def image_refusal(self, section: Any) -> str | None:
        # method: sft reads messages rows with images through rmspec.vision.judge (the prompt's images
        # in the user turn, the loss on the verdict); GRPO generates through TRL's GRPOTrainer, whose
        # rollouts rmspec does not feed images.
        if section.method == "grpo":
            return "approach.method: grpo does not train on images (not built: write method: sft to train a VLM judge)"
        return None


APPROACH = GenerativeApproach()
