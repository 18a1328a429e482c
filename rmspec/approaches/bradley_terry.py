"""Bradley-Terry: one reward per response, trained on preference pairs (-log sigmoid(r_chosen - r_rejected)).

Its section (BradleyTerry, below, with its rules and ODIN's and the ensemble's options): a margin, ties (Davidson), the SFT
term, ODIN's length head and an ensemble of heads. Trained by rmspec.train.bradley_terry
(rmspec.train.heads for ODIN and ensembles); its validation split is scored pair by pair with
the saved model (rmspec.evaluate.approach_validation.pairs).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, PositiveFloat, field_validator, model_validator

from rmspec.approaches.base import LM_HEAD, SCORE_HEAD, Approach
from rmspec.spec import presets
from rmspec.spec.approach import ApproachSection
from rmspec.spec.approach_rules import looks_encoder, mappings
from rmspec.spec.base import Problem, Section
from rmspec.spec.row_kinds import RowKind
from rmspec.spec.scorer_kind import ScorerKind

if TYPE_CHECKING:
    from rmspec.spec.root import Spec

MarginMode = Literal["none", "subtract", "scale"]


# ---------------------------------------------------------------- options: the extra heads


class LengthDebias(Section):
    """ODIN (Chen et al. 2024): a quality head and a length head on the same features; only the quality
    head is saved as the reward. "Length" is the response's own token count."""

    kind: Literal["odin"]
    lambda_length: PositiveFloat = Field(1.0, description="Weight of 1 - rho(length head, response length).")
    lambda_quality: PositiveFloat = Field(1.0, description="Weight of |rho(quality head, response length)|.")
    lambda_ortho: float = Field(
        1.0, ge=0, description="Weight of |cos(w_quality, w_length)|, the heads' orthogonality."
    )


class Ensemble(Section):
    """N score heads on one shared backbone (heads, not LoRA adapters), each trained on its own seeded
    resample of the training pairs; the reward is their mean."""

    members: int = Field(ge=2, le=64, description="Number of heads (members), 2 to 64.")
    bootstrap: bool = Field(
        True,
        description="Each member trains on a bootstrap resample of the pairs (seeded by training.seed); "
        "false: every member sees every pair and the members differ only by their initialisation.",
    )


def head_option_conflicts(approach: Any) -> list[str]:
    """What a Bradley-Terry section with length_debias or ensemble cannot combine (not built: say so)."""
    problems = []
    if approach.length_debias is not None and approach.ensemble is not None:
        problems.append("length_debias and ensemble together are not supported; choose one")
    which = "length_debias" if approach.length_debias is not None else "ensemble"
    if approach.ties != "reject":
        problems.append(f"{which} trains the plain Bradley-Terry loss; ties: {approach.ties} is not combined with it")
    if approach.margin_mode == "scale":
        problems.append(f"{which} takes margin: subtract (or none); margin: scale is not combined with it")
    if approach.sft_weight:
        problems.append(f"{which} is not combined with sft_weight")
    return problems


def head_outputs(approach: Any) -> int:
    """Outputs of the head a Bradley-Terry model (its section: the only one with these options) trains
    with: 2 for ODIN (quality, length), N for an ensemble, else 1. The saved model always has 1
    (rmspec.train.heads.finalize_heads). Other approaches: ApproachSection.trained_heads."""
    if approach.length_debias is not None:
        return 2
    if approach.ensemble is not None:
        return int(approach.ensemble.members)
    return 1


def head_labels(approach: Any) -> list[str]:
    """config.id2label while training (checkpoints): what each output of the widened head is."""
    if approach.length_debias is not None:
        return ["reward", "length"]
    n = head_outputs(approach)
    return ["reward"] if n == 1 else [f"member_{i}" for i in range(n)]


# ---------------------------------------------------------------- the section


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
        "regularizer), read in the prompt-once row where the pair is packed; the LM head is kept for training "
        "only, the saved model is a plain classifier.",
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

    def problems(self, spec: Spec) -> Iterator[Problem]:
        yield from pairs_need_pairs(spec)
        yield from sft_needs_decoder(spec, self.sft_weight)
        yield from margin_needs_a_column(spec, self)


# ---------------------------------------------------------------- its rules


def pairs_need_pairs(spec: Spec) -> Iterator[Problem]:
    preset = presets.get(spec.data.mapping.preset)
    rankers = [p.name for p in presets.TABLE if p.ranked_from]
    if preset is not None and preset.ranked_from is not None and spec.data.mapping.binarize == "ranked":
        yield (
            ("data", "mapping", "binarize"),
            "binarize: ranked keeps every rated completion in one row, for listwise",
            "set approach: {kind: listwise}, or binarize: best_vs_worst (or all_pairs) for pairs",
        )
    if preset is not None and preset.rows == RowKind.LIST:
        yield (
            ("data", "mapping", "preset"),
            f"the {preset.name} preset gives {preset.rows.description}, for listwise",
            f"set approach: {{kind: listwise}}, or use preset: {' or '.join(rankers)} with a binarize rule for pairs",
        )
    for path, mapping in mappings(spec):
        yield from _pairs(path, mapping)


def _pairs(path: tuple, mapping: Any) -> Iterator[Problem]:
    preset = presets.get(mapping.preset)
    if preset is None:
        return
    if preset.pairs_by_attribute and mapping.pair_by is None:
        yield (
            (*path, "pair_by"),
            f"the {preset.name} preset gives {preset.rows} rows; bradley_terry needs pairs",
            f"set pair_by: {preset.attributes[0]} (pairs by an attribute) or use approach kind: {preset.rows}",
        )
    if preset.rows == RowKind.MESSAGES:
        yield ((*path, "preset"), f"the {preset.name} preset is for the {preset.rows} approach", None)


def sft_needs_decoder(spec: Spec, sft_weight: float) -> Iterator[Problem]:
    """The SFT regularizer is a next-token loss: an encoder has no causal LM head to keep."""
    if sft_weight > 0 and looks_encoder(spec):
        yield (
            ("approach", "sft_weight"),
            f"sft_weight adds a next-token (language-model) loss, but {spec.model.name_or_path!r} is an encoder",
            "remove approach.sft_weight, or pick a decoder model (e.g. Qwen/Qwen2.5-0.5B-Instruct)",
        )


def margin_needs_a_column(spec: Spec, approach: Any) -> Iterator[Problem]:
    # shp, ultrafeedback and helpsteer2's pair_by derive the margin from their scores; other data
    # needs a margin column.
    if approach.margin_mode == "none":
        return
    for _, mapping in mappings(spec):
        preset = presets.get(mapping.preset)
        if not mapping.columns.margin and not (preset and (preset.margin_from_scores or preset.pairs_by_attribute)):
            field = "margin" if approach.margin else "use_margin"
            yield (
                ("approach", field),
                f"the loss uses a margin ({approach.margin_mode}), but no margin column is mapped",
                f"map data.mapping.columns.margin, or remove approach.{field}",
            )


# ---------------------------------------------------------------- the declaration


class BradleyTerryApproach(Approach):
    name = "bradley_terry"
    section = BradleyTerry
    scorer = ScorerKind.REWARD
    description = "pairwise preferences, Bradley-Terry loss"
    head = SCORE_HEAD
    sequences_per_example = 2
    shared_prefix = True
    # rmspec.train.context_parallel_run, every option: tests/test_context_parallel_run.py, and ODIN, ensembles and
    # a learned tie test_context_parallel_heads.py, the SFT term test_packing_sft.py
    trains_split = True
    packed_row = "Bradley-Terry: each prompt computed once per pair, one row [prompt | chosen | rejected]"
    trainer = "rmspec.train.factory:bradley_terry"
    evaluation = "rmspec.evaluate.approach_validation:evaluate_pairs"
    validation_metrics = ("accuracy",)
    finalize = "rmspec.train.heads:finalize_for_spec"  # ODIN / an ensemble: one output saved
    template = "bradley_terry.yaml"
    demo_data = "demo"

    def init_document(self, doc: dict[str, Any], mapping: dict[str, Any]) -> None:
        preset = presets.get(mapping.get("preset"))
        if preset is not None and preset.pairs_by_attribute:  # scored responses: pairs by one attribute
            doc["data"]["mapping"]["pair_by"] = preset.attributes[0]

    def num_outputs(self, section: Any) -> int:
        return head_outputs(section)  # ODIN: 2 heads, an ensemble: N, while training

    def output_labels(self, section: Any) -> list[str]:
        return head_labels(section)

    def uses_lm_head(self, section: Any) -> bool:
        return self.head == LM_HEAD or section.sft_weight > 0

    def plan_notes(self, spec: Any, n_list: int | None, list_how: str | None) -> list[str]:
        section = spec.approach
        if not section.sft_weight:
            return []
        return [
            f"sft_weight {section.sft_weight}: the LM head is kept during training (sized here: its "
            "weights, and its logits over the chosen sequence); the saved model is the score head only"
        ]

    def image_refusal(self, section: Any) -> str | None:
        # Margins, ties, ODIN and ensembles train with images (their forwards carry the image inputs:
        # rmspec.train.bradley_terry, rmspec.train.heads). The SFT term does not: it needs the VLM's
        # language-model head and a forward with the image inputs and the model's own M-RoPE
        # positions, and rmspec keeps an LM head for text decoders only.
        if section.sft_weight:
            return (
                "approach.sft_weight does not train on images: its language-model term needs the "
                "vision-language model's LM head, which rmspec keeps for text decoders only "
                "(remove sft_weight to train on this data)"
            )
        return None

    def config_extra(self, spec: Any) -> dict[str, Any]:
        section = spec.approach
        option = "length_debias" if section.length_debias else "ensemble" if section.ensemble else None
        return {option: getattr(section, option).model_dump()} if option else {}


APPROACH = BradleyTerryApproach()
