"""composite: a reward built without training (issue 27), from verifiable rules, LLM judges and trained
models combined by weights, gates and routes.

It trains nothing, so its spec is a document of its own (rmspec.spec.composite_spec: no model,
training or hardware sections) and the training-side facts of the declaration (trainer, head,
sequences per example, final metrics) do not apply: `trains = False`, and `validate`, `plan`,
`run` and `init` go through `document`, `planner`, `runner` below. What it computes lives in
rmspec.composite; `rmspec score`/`serve` load the run's RUN/reward.yaml through `load_scorer`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rmspec.approaches.base import Approach
from rmspec.spec.composite import Composite
from rmspec.spec.composite_spec import CompositeSpec, LoadedComposite, check_composite_document, load_composite_spec
from rmspec.spec.scorer_kind import ScorerKind


class CompositeApproach(Approach):
    name = "composite"
    # Its section is checked inside its own document (CompositeSpec.approach), not in the training
    # spec's `approach:` union (rmspec.spec.approach.SECTIONS).
    section = Composite  # type: ignore[assignment]
    scorer = ScorerKind.COMPOSITE
    description = "rules, judges and trained models combined; trains nothing"

    trains = False
    document = CompositeSpec
    planner = "rmspec.composite.plan:composite_plan"
    plan_view = "rmspec.composite.plan:render_composite_plan"
    runner = "rmspec.evaluate.composite_run:run_composite"
    evaluator = "rmspec.evaluate.composite_run:evaluate_composite_run"
    run_file = "reward.yaml"  # the resolved composite the run writes (rmspec.composite.reward_file.REWARD_FILE)

    # results.json validation.metrics (rmspec.evaluate.composite_run.validate); per component figures,
    # correlations and failure counts sit beside them in the validation entry.
    validation_metrics = ("reward_mean", "reward_std", "rows_scored", "rows_failed")

    # `rmspec export RUN --to verl|openrlhf -o FILE.py`: the thin client of `rmspec serve RUN` each trainer imports
    exporter = "rmspec.composite.export:export_composite"
    export_targets = ("verl", "openrlhf")
    export_writes = "file"

    template = "composite.yaml"
    demo_data = ""  # its rows are named in the document's data.train / data.validation, not by `init --data`
    init_preset = None

    @property
    def rows(self) -> str:
        """It trains on no rows: no filter or preset, no annotation export, applies."""
        return ""

    def load_document(self, path: Any, sets: Any = ()) -> LoadedComposite:
        return load_composite_spec(path, sets)

    def check_document(self, doc: dict[str, Any], locations: Any, file: Any) -> LoadedComposite:
        return check_composite_document(doc, locations, Path(file))

    def summary(self, loaded: LoadedComposite) -> str:
        parts = ", ".join(f"{c.name}: {c.kind}" for c in loaded.spec.approach.components)
        return f"composite: {parts}"

    def reward_weights(self, section: Any) -> list[float] | None:
        return []


APPROACH = CompositeApproach()
