"""`approach:` how the reward model learns: pairwise Bradley-Terry, listwise rankings, pointwise scores, a
generative judge, or a process reward model (one reward per reasoning step)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, Union

from pydantic import Field, PositiveInt, field_validator, model_validator

from rmspec.spec import approach_rules as rules
from rmspec.spec.approach_judge import (
    DEFAULT_JUDGE_TEMPLATE,
    DEFAULT_SCORES_PATTERN,
    DEFAULT_SCORES_TEMPLATE,
    GRPOOptions,
    JudgeReward,
    grpo_problems,
)
from rmspec.spec.base import Section
from rmspec.spec.heads import Ensemble, HeadOptionsCheck, LengthDebias, head_outputs

# The row kinds (rmspec.spec.row_kinds), named here for the sections that declare their rows.
from rmspec.spec.row_kinds import LIST, MESSAGES, PAIRS, SCORED, STEPS

if TYPE_CHECKING:
    from rmspec.spec.root import Spec

MarginMode = Literal["none", "subtract", "scale"]

# The validation metrics a pair-scoring approach logs (metrics.jsonl names); the first is the default
# metric that picks the final model.
PAIR_METRICS = ("eval/rm/accuracy", "eval/rm/loss", "eval/rm/reward_margin")


class ApproachSection(Section):
    """What every `approach:` section tells the spec checks (rmspec.spec.rules): the rows it trains on,
    the validation metrics it logs, and its own cross-field rules. The rest of an approach (sizing,
    trainer, evaluation, init) is declared in its module under rmspec/approaches/."""

    rows: ClassVar[str] = PAIRS
    # Validation metrics that can pick the final model (training.best_metric), the default first.
    best_metrics: ClassVar[tuple[str, ...]] = PAIR_METRICS
    # What early stopping may watch; None: not checked (the approach did not say).
    logged_metrics: ClassVar[tuple[str, ...] | None] = None

    def problems(self, spec: Spec) -> Iterator[rules.Problem]:
        """This approach's own cross-field rules: (path, message, hint)."""
        return iter(())

    @property
    def margin_mode(self) -> str:
        """How a per-pair margin enters the loss; only a pairwise loss reads one."""
        return "none"

    @property
    def row_kind(self) -> str:
        """The rows this spec's approach trains on: `rows`, unless an option changes them (a judge
        trained by GRPO reads pairs)."""
        return self.rows

    def extra_needs(self) -> list[tuple[str, str]]:
        """(what asks, the extra) for the optional packages this approach's run imports
        (rmspec.extras reads it before a run starts)."""
        return []

    # What the stages outside the approach read of its options, declared here with the value every
    # other approach has (a section overrides the ones its options change): the data stage, the
    # planner and the scorers ask these, never an option by name.

    @property
    def tie_rows(self) -> str:
        """What a row labelled tie becomes (rmspec.data.presets): "reject" (reason `tie`), or the tie
        option of a loss that trains ties (Bradley-Terry's davidson, a GRPO judge's verdict)."""
        return "reject"

    @property
    def margin_table(self) -> dict[float, float] | None:
        """Labelled strengths remapped before a pairwise loss (Bradley-Terry's margin_map); None: as labelled."""
        return None

    @property
    def score_attributes(self) -> list[str]:
        """The score attributes a row keeps (pointwise's attributes); none for other approaches."""
        return []

    @property
    def step_suffix(self) -> str | None:
        """The text appended to every reasoning step, whose last token carries the step's label (a process
        reward model's step_separator); None: the rows have no steps."""
        return None

    @property
    def trained_heads(self) -> int:
        """Score heads trained side by side (ODIN's quality and length heads, an ensemble's members); the
        saved model keeps one. 1: one head."""
        return 1

    @property
    def reinforcement(self) -> Any:
        """The GRPO settings (approach.grpo) when this approach trains by reinforcement (a judge with
        method: grpo: its rows, trainer, plan and exporter differ); None: trained by its loss."""
        return None


class BradleyTerry(ApproachSection):
    kind: Literal["bradley_terry"]
    use_margin: bool = Field(
        False,
        description="Subtract the mapped per-pair margin inside the loss (Llama 2 style); the same as margin: subtract.",
    )
    margin: MarginMode | None = Field(
        None,
        description="How the per-pair margin enters the loss: none, subtract (-log sigmoid(d - m), Llama 2) or "
        "scale (-m * log sigmoid(d), HelpSteer2-Preference / INF-ORM). Unset: subtract when use_margin, else none.",
    )
    margin_map: dict[str, float] | None = Field(
        None,
        description="Remap labelled strengths before the loss, e.g. {1: 1, 2: 3, 3: 10} (INF-ORM); a strength not in the map is a reject.",
    )
    ties: Literal["reject", "davidson"] = Field(
        "reject",
        description="Rows with tie: true: reject (reason `tie`, counted in the data report) or train them "
        "under the Davidson (1970) ties model.",
    )
    tie_nu: float | None = Field(
        None,
        gt=0,
        description="ties: davidson: a fixed tie parameter nu; unset learns nu (starting at 1.0) with the model.",
    )
    tie_learning_rate: float | None = Field(
        None,
        gt=0,
        description="ties: davidson with a learned nu: the learning rate of log nu (its own optimizer group, "
        "no weight decay, same schedule). Unset: 100 x training.learning_rate (at the model's "
        "rate one scalar barely moves in a short run).",
    )
    sft_weight: float = Field(
        0.0,
        ge=0,
        description="Decoders: add weight x the language-model loss on the chosen response (GRM's "
        "regularizer); the LM head is kept for training only, the saved model is a plain classifier.",
    )
    center_rewards_coefficient: float | None = Field(
        None, ge=0, description="Weight of mean((r_chosen + r_rejected)^2), keeping rewards centred (e.g. 0.01)."
    )
    length_debias: LengthDebias | None = Field(
        None,
        description="ODIN: a quality head and a length head; only the quality head is saved as the reward.",
    )
    ensemble: Ensemble | None = Field(
        None,
        description="N heads on the shared backbone, each on its own resample; reward = their mean, "
        "`score`/`serve` also give the members' std.",
    )

    @model_validator(mode="after")
    def _consistent(self) -> BradleyTerry:
        if self.length_debias is not None or self.ensemble is not None:
            from rmspec.spec.heads import head_option_conflicts

            for problem in head_option_conflicts(self):
                raise ValueError(problem)
        if self.use_margin and self.margin not in (None, "subtract"):
            raise ValueError(
                f"use_margin: true means margin: subtract, but margin is {self.margin!r}; "
                "remove use_margin (margin: says it all)"
            )
        if self.margin_map is not None and self.margin_mode == "none":
            raise ValueError("margin_map is set but the margin is not used; set margin: scale or margin: subtract")
        if self.tie_nu is not None and self.ties != "davidson":
            raise ValueError("tie_nu only applies with ties: davidson")
        if self.tie_learning_rate is not None and (self.ties != "davidson" or self.tie_nu is not None):
            raise ValueError("tie_learning_rate only applies with ties: davidson and a learned nu (tie_nu unset)")
        return self

    @field_validator("margin_map")
    @classmethod
    def _numeric_keys(cls, table: dict[str, float] | None) -> dict[str, float] | None:
        for key in table or {}:
            try:
                float(key)
            except ValueError:
                raise ValueError(f"margin_map keys are labelled strengths (numbers), got {key!r}") from None
        return table

    @property
    def margin_table(self) -> dict[float, float] | None:
        """margin_map with its keys as numbers (YAML keys arrive as text)."""
        return None if self.margin_map is None else {float(k): v for k, v in self.margin_map.items()}

    @property
    def tie_rows(self) -> str:
        return self.ties

    @property
    def trained_heads(self) -> int:
        return head_outputs(self)

    @property
    def margin_mode(self) -> str:
        """The margin's use, with use_margin: true read as subtract."""
        return self.margin or ("subtract" if self.use_margin else "none")

    def problems(self, spec: Spec) -> Iterator[rules.Problem]:
        yield from rules.pairs_need_pairs(spec)
        yield from rules.sft_needs_decoder(spec, self.sft_weight)
        yield from rules.margin_needs_a_column(spec, self)


class Listwise(HeadOptionsCheck, ApproachSection):
    """Plackett-Luce over N >= 2 scored responses per prompt (UltraFeedback's four ratings kept whole)."""

    no_head_options: ClassVar[str] = (
        "its loss ranks N responses; these heads are trained with the pairwise (Bradley-Terry) loss"
    )
    rows: ClassVar[str] = LIST
    kind: Literal["listwise"]
    loss: Literal["plackett_luce"] = Field(
        "plackett_luce",
        description="The listwise loss: Plackett-Luce (ties in the scores by Breslow's rule).",
    )
    top_k: PositiveInt | None = Field(
        None,
        description="Only the first top_k positions of each labelled ranking contribute; unset: the whole ranking.",
    )
    center_rewards_coefficient: float | None = Field(
        None,
        ge=0,
        description="Weight of the mean squared reward, keeping rewards centred (e.g. 0.01).",
    )

    def problems(self, spec: Spec) -> Iterator[rules.Problem]:
        return rules.list_needs_lists(spec)


class ScoreScale(Section):
    min: float = Field(0.0, description="Lowest score on the scale.")
    max: float = Field(4.0, description="Highest score on the scale.")

    @model_validator(mode="after")
    def _ordered(self) -> ScoreScale:
        if self.max <= self.min:
            raise ValueError(f"max must be greater than min (got min={self.min}, max={self.max})")
        return self


class Pointwise(HeadOptionsCheck, ApproachSection):
    no_head_options: ClassVar[str] = (
        "its heads regress scores; these heads are trained with the pairwise (Bradley-Terry) loss"
    )
    rows: ClassVar[str] = SCORED
    best_metrics: ClassVar[tuple[str, ...]] = ("eval/rm/loss", "eval/rm/mse", "eval/rm/mae", "eval/rm/accuracy")
    kind: Literal["pointwise"]
    attributes: list[str] = Field(
        min_length=1,
        description="Score attributes to learn, each a key of data.mapping.columns.scores (or the preset's).",
    )
    weights: dict[str, float] | None = Field(
        None, description="Attribute -> weight for the single reward; default equal weights."
    )
    objective: Literal["regression", "ordinal"] = Field(
        "regression", description="MSE regression, or ordinal classification over the integer scale."
    )
    scale: ScoreScale = Field(default_factory=ScoreScale, description="The score scale (HelpSteer2: 0 to 4).")

    @property
    def score_attributes(self) -> list[str]:
        return list(self.attributes)

    def problems(self, spec: Spec) -> Iterator[rules.Problem]:
        return rules.scores_needed(spec, self)


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

    def problems(self, spec: Spec) -> Iterator[rules.Problem]:
        yield from rules.judge_needs_causal_lm(spec)
        if self.method == "grpo":
            yield from grpo_problems(spec, self)
        else:
            yield from rules.judge_writes_verdicts(self)


class Process(HeadOptionsCheck, ApproachSection):
    """A process reward model (PRM): P(step is correct) read at the last token of every step.

    The head is a token classifier with 2 labels (0 wrong, 1 correct), exactly what TRL's
    PRMTrainer saves (AutoModelForTokenClassification, num_labels=2) and what vLLM serves as
    `token_classify`; so an rmspec PRM and a TRL PRM load, score and serve the same way. A
    1-output sigmoid head would be equivalent (softmax over 2 logits = sigmoid of their
    difference) but would be unreadable by those tools.
    """

    def extra_needs(self) -> list[tuple[str, str]]:
        return [("approach.kind: process (step AUROC on validation)", "process")]

    no_head_options: ClassVar[str] = (
        "a process reward model scores every step with a token classifier, not one reward head"
    )
    rows: ClassVar[str] = STEPS
    best_metrics: ClassVar[tuple[str, ...]] = (
        "eval/rm/step_accuracy",
        "eval/rm/loss",
        "eval/rm/auroc",
        "eval/rm/first_error_accuracy",
    )
    logged_metrics: ClassVar[tuple[str, ...] | None] = (
        "eval/rm/first_error_accuracy",
        "eval/rm/step_accuracy",
        "eval/rm/auroc",
        "eval/rm/loss",
    )
    kind: Literal["process"]
    step_separator: str = Field(
        "\n",
        min_length=1,
        description="Text appended to every step; the step's label sits on its last token (TRL's default: a newline).",
    )
    train_on: Literal["all_steps", "last_step"] = Field(
        "all_steps",
        description="Learn every step's label, or only the last step's (an outcome model); evaluation always scores every step.",
    )
    threshold: float = Field(
        0.5, gt=0, lt=1, description="A step is predicted wrong when P(correct) < threshold (ProcessBench's rule)."
    )
    tune_threshold: bool = Field(
        False,
        description="Also report the threshold that maximises first-error F1 on the validation split (reported as tuned, never used in place of `threshold`).",
    )

    @property
    def step_suffix(self) -> str:
        return self.step_separator

    def problems(self, spec: Spec) -> Iterator[rules.Problem]:
        return rules.process_needs_steps(spec, self)


# The approach sections the spec accepts, in the order of the schema's choices. rmspec.approaches
# declares each approach around its section; `add_section` (rmspec.spec.root) extends this at run
# time for an approach registered there (a plugin, a test).
SECTIONS: list[type[ApproachSection]] = [BradleyTerry, Listwise, Pointwise, Generative, Process]


def approach_union(sections: list[type[ApproachSection]]) -> Any:
    """The `approach:` type: the sections, told apart by `kind`."""
    return Annotated[Union[tuple(sections)], Field(discriminator="kind")]  # noqa: UP007  (a runtime tuple)


if TYPE_CHECKING:  # the type checker reads the shipped sections; at run time the union is SECTIONS'
    Approach = BradleyTerry | Listwise | Pointwise | Generative | Process
else:
    Approach = approach_union(SECTIONS)
