"""composite: a reward built without training (issue 27), from verifiable rules, LLM judges and trained
models combined by weights, gates and routes.

It trains nothing, so its spec is a document of its own (rmspec.spec.composite_spec: no model,
training or hardware sections; its file says `approach: {kind: composite, ...}`): `validate`,
`plan`, `run`, `eval`, `export` and `init` go through the hooks below instead of the training spec,
the planner and the launcher. What it computes lives in rmspec.composite; `rmspec score`/`serve`
load the run's RUN/reward.yaml through `load_scorer`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rmspec.documents.base import DocumentKind
from rmspec.spec.composite_spec import CompositeSpec, LoadedComposite, check_composite_document, load_composite_spec
from rmspec.spec.scorer_kind import ScorerKind


class CompositeDocument(DocumentKind):
    name = "composite"
    description = "rules, judges and trained models combined; trains nothing"
    document = CompositeSpec
    trains = False
    run_file = "reward.yaml"  # the resolved composite the run writes (rmspec.composite.reward_file.REWARD_FILE)
    scorer = ScorerKind.COMPOSITE

    planner = "rmspec.composite.plan:composite_plan"
    plan_view = "rmspec.composite.plan:render_composite_plan"
    runner = "rmspec.composite.run:run_composite"
    evaluator = "rmspec.composite.run:evaluate_composite_run"

    # results.json validation.metrics (rmspec.composite.run.validate); per component figures,
    # correlations and failure counts sit beside them in the validation entry.
    validation_metrics = ("reward_mean", "reward_std", "rows_scored", "rows_failed")

    # `rmspec export RUN --to verl|openrlhf -o FILE.py`: the thin client of `rmspec serve RUN` each trainer imports
    exporter = "rmspec.composite.export:export_composite"
    export_targets = ("verl", "openrlhf")
    export_writes = "file"

    template = "composite.yaml"  # `rmspec init --approach composite`: its rows are named inside, not by --data

    def load(self, path: str | Path, sets: Any = ()) -> LoadedComposite:
        return load_composite_spec(path, sets)

    def check(self, doc: dict[str, Any], locations: Any, file: str | Path) -> LoadedComposite:
        return check_composite_document(doc, locations, Path(file))

    def summary(self, loaded: LoadedComposite) -> str:
        parts = ", ".join(f"{c.name}: {c.kind}" for c in loaded.spec.approach.components)
        return f"composite: {parts}"


KIND = CompositeDocument()
