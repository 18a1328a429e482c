"""What an approach declares: the one type every module under rmspec/approaches/ instantiates.

Light (no torch, no datasets): `rmspec validate`, `plan` and `init` read these declarations. The
heavy parts (the trainer, the end-of-run evaluation) are named by dotted path, "module:function",
and imported only when a run calls them (`Approach.hook`), as the benchmark catalogue names each
kind's module (rmspec.spec.benchmarks).

Facts a spec check needs (the row shape it trains on, its own cross-field rules, the metrics its
periodic validation logs) live on the spec section class (rmspec.spec.approach), because
validation runs in rmspec.spec, below this package; the declaration reads them from there.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from rmspec.spec import presets
from rmspec.spec.approach import ApproachSection
from rmspec.spec.scorer_kind import ScorerKind

# What the planner sizes as the model's output layer (rmspec.plan.model_shape): a score head, the LM
# head (a generative judge) or a per-token head (a process reward model).
SCORE_HEAD, LM_HEAD, TOKEN_HEAD = "score", "lm", "token"


class Approach:
    """One approach. A module under rmspec/approaches/ subclasses this and sets `APPROACH = Its()`.

    Class attributes are the static declaration; the methods are the parts that depend on the
    spec's section (override them where the default does not hold)."""

    name: str  # approach.kind in the spec
    section: type[ApproachSection]  # the spec's `approach:` model for this kind
    scorer: ScorerKind  # how the saved model scores (rmspec score / serve / eval read it)
    description: str = ""

    # ---- plan sizing (rmspec.plan.compile)
    head: str = SCORE_HEAD  # the output layer the planner sizes
    sequences_per_example: int | None = 1  # sequences one example puts through the model; None: N, the data's lists
    shared_prefix: bool = False  # training.packing: shared_prefix can put the prompt once per example
    packed_row: str = ""  # with shared_prefix: the packed row, as the plan's reason says it
    causal_lm: bool = False  # needs a decoder (an encoder is refused by validate and plan)
    trains_split: bool = False  # hardware.context_parallel: `rmspec run` splits its rows (else sized, refused at run)
    # hardware.context_parallel above 1 packs its rows though shared_prefix is False: one response per group of
    # prefix_mask's layout, which the split forward reads; one process keeps its padded sequences (nothing shared)
    packs_when_split: bool = False

    # ---- training (rmspec.train)
    trainer: str  # "module:function(spec, model, tokenizer, common, packed, validation) -> Trainer"
    metric_family: str = "rm"  # metrics.jsonl prefix: eval/<family>/<metric>
    auto_model: str = "sequence_classification"  # or token_classification, causal_lm (rmspec.train.modeling)
    lora_task: str = "SEQ_CLS"  # peft TaskType name
    # "module:function(trainer, validation, spec, tokenizer, main) -> (metrics, reward statistics)": the
    # final evaluation at the end of training (metrics.jsonl, status.json, the model card).
    final_metrics: str = "rmspec.train.finish:predicted_metrics"
    # "module:function(spec) -> (model -> model) | None": turns the trained model into the saved one
    # (e.g. ODIN keeps only the quality head); None: saved as trained.
    finalize: str | None = None

    # ---- evaluation (rmspec.evaluate.run_level)
    evaluation: str  # "module:function(rd, loaded, results, **kw)": validation section + benchmarks
    validation_metrics: tuple[str, ...] = ()  # the keys of results.json's validation.metrics

    # ---- export (rmspec.cli.export_cmd): "module:function(run or spec, target, out) -> path", the
    # trainers it writes for (`--to`) and what `-o` names: "file" (a Python file) or "dir". None: none.
    exporter: str | None = None
    export_targets: tuple[str, ...] = ()
    export_writes: str = "file"

    # ---- init (rmspec.scaffold)
    template: str  # file under rmspec/templates/
    demo_data: str  # `rmspec init --data` default (a name rmspec.scaffold.data_choice knows)

    def split_refusal(self, section: Any) -> str | None:
        """With trains_split: why `rmspec run` cannot split this section's rows (an option the split forward
        does not compute yet), or None."""
        return None

    def image_refusal(self, section: Any) -> str | None:
        """Why this approach (with these options) cannot train on rows with images; None where it can
        (a VLM collator reads them: rmspec.vision.collate). The data stage refuses image data with it."""
        return f"approach {self.name} does not train on images (bradley_terry, pointwise and generative with method: sft do)"

    @property
    def rows(self) -> str:
        """The record kind the data stage writes for it (rmspec.data.records)."""
        return self.section.rows

    @property
    def init_preset(self) -> str | None:
        """The mapping preset `init --data FILE` writes: the preset table's for the rows it trains on
        (rmspec.spec.presets; None: plain columns)."""
        return presets.init_default(self.section.rows)

    def hook(self, which: str) -> Callable[..., Any]:
        """The heavy function a dotted "module:function" attribute names, imported now."""
        module, _, function = getattr(self, which).partition(":")
        return getattr(importlib.import_module(module), function)

    # ---- per-spec parts
    def validation_metric_names(self, section: Any) -> tuple[str, ...]:
        """The keys of results.json's validation.metrics for this spec's section."""
        return self.validation_metrics

    def reward_weights(self, section: Any) -> list[float] | None:
        """How the head's outputs make the one reward whose statistics are saved: [] one output,
        [w_1, ...] a weighted sum of per-attribute outputs, None no single reward (a PRM)."""
        return []

    def num_outputs(self, section: Any) -> int:
        """Outputs of the score head (rmspec.train.modeling); 1: one reward."""
        return 1

    def output_labels(self, section: Any) -> list[str]:
        """Names of the head's outputs, saved in config.id2label."""
        return ["reward"]

    def uses_lm_head(self, section: Any) -> bool:
        """The LM head is kept while training (planned and sized)."""
        return self.head == LM_HEAD

    def config_extra(self, spec: Any) -> dict[str, Any]:
        """What RUN/model/config.json records beyond the approach's name, so a bare model folder
        scores as training did."""
        return {}

    def init_document(self, doc: dict[str, Any], mapping: dict[str, Any]) -> None:
        """Adjust the template's document to the data `init --data` chose (its mapping), in place."""

    def plan_notes(self, spec: Any, n_list: int | None, list_how: str | None) -> list[str]:
        """Plan warnings for this approach's options."""
        return []
